"""Measured strategy tables: the times `auto` chooses from, and the rule it reads them by.

A table holds, per (routine, dtype), measured points with the median time of every candidate
there: "xla" (JAX's own lowering), "sequential", "looped:L", "batched:L" (the native batched
API or this project's kernel, its batch split over L lanes when L > 1) and "blocked". A point's
coordinates (AXES) are the batch, n (the larger dimension), aspect (rows / cols) and nrhs (the
right-hand sides of a solve).

The rule (Table.estimate): `auto` leaves JAX's own lowering only where the measurements on both
sides of the call, along every axis, agree that another candidate beats JAX by a margin; where
they do not agree it takes JAX's lowering, and a call outside the measured range along any axis
gets no answer from the table (strategy.choose then takes JAX's lowering too). Nothing is
extrapolated, with one exception that follows from how JAX runs the call: beyond the largest
measured batch, where JAX's lowering runs the call's batch as it runs a measured one
(_jax_lowering.py), the times there bound those at the call. Where it makes one library call
per matrix its time grows in proportion to the batch and no candidate's grows faster; where it
makes one batched call its time does not shrink with the batch (and grows at least at the pace
it grew between the two largest measured batches, PACE_MIN), and a candidate's grows at most
by the number of measured batches the call holds. A win by those bounds stands (rule CARRIED).
Where the points around a call straddle JAX's switch from a batched call to a far slower loop
(svd between n = 32 and 64), a candidate must beat JAX only at the points where JAX loops as at
the call. Elsewhere off the measured space `auto` cannot lose by more than its guard around
JAX's call.

Where tables come from, in the order they are consulted:
  1. the user's tuned table (`jax_cusolver_ms.tune`), one file per GPU in the cache folder,
     used only while its key (GPU, cuSOLVER, cuBLAS, jax versions) matches this process;
  2. the table shipped for this GPU model (jax_cusolver_ms/tables/*.json, matched by the JAX
     device's `device_kind`);
then strategy.py's rules (JAX's lowering, or for routines JAX has none of, hand-written
rules). Nothing is read before the first GPU lowering asks, and
nothing at all on a machine without a GPU.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import re
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Callable, Iterable, Mapping

import numpy as np

from . import _jax_lowering

FORMAT = 1
XLA = "xla"
SHIPPED_DIR = Path(__file__).with_name("tables")
CACHE_ENV = "JAX_CUSOLVER_MS_TUNE_CACHE"  # a folder; overrides the per-user cache folder
# Candidates within this fraction of the fastest are the same up to run-to-run noise: of those,
# the simplest is taken (JAX's own lowering first, then fewer lanes), so that `auto` moves away
# from JAX only where something is measurably faster.
MARGIN = 0.02
# ... and JAX's own lowering is left only for a candidate this much faster: a point is one
# measurement of each, and near parity a table's winner can lose in a user's run (H100 float32
# getrf 4x128, one tune run: looped:4 0.292 vs JAX's 0.303 ms; tiny cells vary by +-30%).
XLA_MARGIN = 0.10
# ... and where JAX's own takes under TINY_MS, launch gaps on the host are most of the time and
# one measurement of each says little: then only a win of XLA_MARGIN_TINY counts (H100 float32
# potrf 16x32: tune measured blocked 0.100 vs JAX 0.120 ms, the report 0.076 vs 0.060 ms).
TINY_MS = 0.25
XLA_MARGIN_TINY = 0.35
# ... except where the alternative is this project's one-launch kernel that writes NaN for a
# non-finite matrix itself and so needs no guard (the batched path of the routines whose
# small-matrix kernel does, up to its n: ffi/core/limits.h small_writes_nan; syevj, gesvdj,
# getrf). There `auto`'s "xla" runs JAX's lowering inside the guard, one more kernel (5-12 us,
# a pass over the input) that the "xla" time (JAX's own function) leaves out: the kernel is
# taken unless it is slower than JAX's own plus GUARD_FLOOR_MS by more than MARGIN. H100 float32
# eigh 64x32: the kernel 0.128 ms, JAX 0.136, and JAX inside the guard 0.92x of JAX in the grid;
# H200 float64 getrf 10^6 x 4 x 4 (docs/benchmarks.md, tiny matrices): the kernel 0.308 ms, JAX
# 0.308, JAX inside the guard 0.409.
# The guard's least cost, a launch with no bytes to speak of: what it always adds to JAX's time
# (H200 report, random shapes under JAX's lowering: det float32 8463x8x8 0.0304 ms, inside the
# guard 0.0344; lstsq float32 19x30x6 minimum 0.126 ms, inside the guard 0.133).
GUARD_FLOOR_MS = 0.004


def unguarded_max_n(routine: str) -> int:
    """Up to this n the batched path of `routine` is a kernel that needs no guard (0: none)."""
    from . import _ffi

    if _ffi.limits is None:
        return 0
    limit = _ffi.limits.routines().get(routine, {})
    return limit["small_max_n"] if limit.get("small_writes_nan") else 0


# --- candidates -------------------------------------------------------------------------------

def _laned() -> set:
    """The strategies whose candidates carry a lane count ("looped:8"): the extension's that run
    on lanes (ffi/core/limits.h strategy_uses_lanes); the others, and "xla", carry none."""
    from . import _ffi

    if _ffi.limits is None:
        raise RuntimeError("strategy tables need the extension's limits (the compiled module "
                           "jax_cusolver_ms._jcm_limits)")
    return {name for name, info in _ffi.limits.strategies().items() if info["lanes"]}


def candidate_name(strategy: str, lanes: int = 1) -> str:
    """"xla", "sequential", "looped:8", "batched:1", ..."""
    return f"{strategy}:{int(lanes)}" if strategy in _laned() else strategy


def parse_candidate(name: str) -> tuple[str, int]:
    from . import _ffi

    strategy, _, lanes = name.partition(":")
    laned = _laned()
    if not lanes and (strategy == XLA or strategy in _ffi.limits.strategies()) and \
            strategy not in laned:
        return strategy, 1
    if strategy in laned and lanes.isdigit() and int(lanes) >= 1:
        return strategy, int(lanes)
    raise ValueError(f"not a candidate name: {name!r} (xla, sequential, blocked, looped:L, "
                     "batched:L)")


# --- one table --------------------------------------------------------------------------------

# The coordinates of a measured point, outermost first: a call is bracketed along each in turn
# (estimate()). aspect is rows / cols (1 for square matrices), nrhs the right-hand sides of a
# solve (1 for every other routine), n the larger dimension.
AXES = ("nrhs", "aspect", "batch", "n")


@dataclasses.dataclass(frozen=True)
class Point:
    batch: int
    n: int
    times_ms: Mapping[str, float]
    aspect: float = 1.0
    nrhs: int = 1

    @property
    def key(self) -> tuple:
        return tuple(self.coord(axis) for axis in AXES)

    def coord(self, axis: str):
        return getattr(self, axis)

    def time(self, candidate: str) -> float | None:
        """The candidate's time here; lanes beyond the batch are capped at it, as `choose` does
        (looped:16 on 4 matrices runs looped:4)."""
        if candidate in self.times_ms:
            return self.times_ms[candidate]
        strategy, lanes = parse_candidate(candidate)
        if lanes > self.batch >= 1 and strategy in _laned():
            return self.times_ms.get(candidate_name(strategy, self.batch))
        return None


# Which rule an estimate's answer comes from (Estimate.rule; explain() names it).
AGREED = "measured win"        # a candidate beats JAX by the margin at every point around the call
DISAGREED = "no agreement"     # the points around the call do not all say so: JAX's lowering
OUTSIDE = "outside measured"   # the call is not bracketed by measurements: no answer here
FASTEST = "fastest measured"   # JAX's lowering is no candidate: the fastest interpolated
CARRIED = "carried to a larger batch"  # a win at a smaller batch, by bounds (_carried_batch)


@dataclasses.dataclass(frozen=True)
class Estimate:
    best: str | None  # None: OUTSIDE (the caller decides)
    times_ms: tuple   # ((candidate, estimated ms), ...) fastest first
    basis: str        # which measured points the times come from, and why this answer
    rule: str = AGREED


_KIND_ORDER = {XLA: 0, "sequential": 1, "batched": 2, "blocked": 3, "looped": 4}


def _simplicity(candidate: str) -> tuple:
    strategy, lanes = parse_candidate(candidate)
    return lanes, _KIND_ORDER[strategy]


def _fraction(lo, hi, x) -> float:
    if lo == hi:
        return 0.0
    return (math.log2(x) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))


def _format(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def bracket(points, coords: Mapping, axes=AXES):
    """The measured points around a call and their weights: along each axis in turn (outermost
    first) the nearest measured value at or below the call's and the nearest at or above it
    whose slice brackets the call in the remaining axes, weighted by the call's place between
    the two in log2. Returns ([(point, weight), ...], "") or (None, why not) where a side is
    missing along some axis: the call lies outside what was measured. Why not names the nearest
    measured value on the missing side whose slice fell short, and the axis it fell short on."""
    if not axes:
        return [(points[0], 1.0)], ""  # every coordinate fixed: one point (keys are unique)
    axis, rest = axes[0], axes[1:]
    x = coords[axis]
    values = sorted({p.coord(axis) for p in points})
    sides = []
    for side, limit in (([v for v in values if v <= x][::-1], f"smallest {_format(values[0])}"),
                        ([v for v in values if v >= x], f"largest {_format(values[-1])}")):
        found, why = None, None
        for v in side:
            inner, inner_why = bracket([p for p in points if p.coord(axis) == v], coords, rest)
            if inner is not None:
                found = (v, inner)
                break
            if why is None:  # the nearest slice's reason
                why = inner_why if v == x else f"at {axis} {_format(v)}: {inner_why}"
        if found is None:
            return None, why or f"{axis} {_format(x)} beyond the measured ({limit})"
        sides.append(found)
    (lo, below), (hi, above) = sides
    if lo == hi:
        return below, ""
    f = _fraction(lo, hi, x)
    return [(p, w * (1 - f)) for p, w in below] + [(p, w * f) for p, w in above], ""


def _carried_batch(routine: str, dtype: str, points, coords: Mapping, allowed):
    """Where bracket() finds no points for a call because none of its batch or larger brackets
    the other coordinates: the largest smaller measured batch whose points do and where JAX's
    lowering runs the batch as at the call, with the factors that bound the times at the call
    from the times there. Where JAX loops per matrix at both, its time is the per-matrix time
    times the batch, and no candidate's grows faster (a batch run in two halves takes no longer
    than the halves): every time scales with the batch. Where it makes one batched call at both
    (from a batch of two up), its time at the smaller batch is a lower bound (more matrices are
    no less work), and a candidate's at most its time there times the number of such batches the
    call holds, rounded up. Either way a win over JAX by those bounds holds at the call: returns
    (points and weights at that batch, the batch, the candidates' factor, JAX's factor), else
    None; None too where JAX's lowering is not a candidate, or not measured at each of those
    points (the argument compares with it)."""
    if routine not in _jax_lowering.RULES or not allowed(XLA):
        return None
    batch, n, itemsize = coords["batch"], coords["n"], np.dtype(dtype).itemsize
    loops = _jax_lowering.loops_per_matrix(routine, batch, n, itemsize)
    for smaller in sorted({p.batch for p in points if p.batch < batch}, reverse=True):
        if not _jax_lowering.same_call(routine, batch, n, smaller, n, itemsize):
            continue
        around, _ = bracket(points, dict(coords, batch=smaller))
        if around is None:
            continue
        if not all(XLA in p.times_ms for p, _ in around):
            return None
        if loops:
            return around, smaller, batch / smaller, batch / smaller, (
                f"makes one {routine} call per matrix: the times at batch {smaller}, "
                f"x{batch / smaller:.3g}")
        # JAX's time bounds the call's only where it is the same batched call (getrf at batch
        # 16 loops from n = 2064 up).
        if all(_jax_lowering.same_call(routine, batch, n, p.batch, p.n, itemsize)
               for p, _ in around):
            ours = float(math.ceil(batch / smaller))
            pace = _jax_pace(routine, points, coords, smaller, around, itemsize)
            if pace is not None:
                exponent, below = pace
                return around, smaller, ours, (batch / smaller) ** exponent, (
                    f"makes one batched {routine} call whose time grew as the batch^"
                    f"{exponent:.2f} from batch {below} to {smaller}: JAX's at {smaller} "
                    f"x{(batch / smaller) ** exponent:.3g} at that pace, the others' "
                    f"x{ours:.3g} (an upper bound)")
            return around, smaller, ours, 1.0, (
                f"makes one batched {routine} call: the times at batch {smaller}, JAX's as they "
                f"are (a lower bound), the others' x{ours:.3g} (an upper bound)")
    return None


# Beyond the largest measured batch, JAX's one batched call is taken to cost a fixed time plus
# a time per matrix (t = a + c B): the slope of log t over log B then only rises with the batch,
# so the slope measured between the two largest measured batches bounds the one beyond from
# below, and JAX's time at the call is at least its time there x (B / b)^slope. Used where that
# slope is at least PACE_MIN, where the call's time is mostly its work: below it (a batch
# nowhere near filling the GPU) only the time at the largest batch bounds JAX's. H200 table:
# potrf n 4 grew as batch^0.93 from 32768 to 10^6 matrices, getrs n 4 as ^0.77, getrf n 4 as
# ^0.49; from 10^6 to 10^7 (the report's tiny cells) JAX's getrs grew as ^1.06.
PACE_MIN = 0.5


def _jax_pace(routine: str, points, coords: Mapping, smaller: int, around, itemsize: int):
    """(exponent, batch) where JAX's time at the largest measured batch `smaller` (the points
    `around`) grew from the next smaller measured batch at which JAX's lowering makes the same
    batched call as the batch^exponent, exponent >= PACE_MIN (capped at 1); else None."""
    n = coords["n"]
    for below in sorted({p.batch for p in points if p.batch < smaller}, reverse=True):
        lower, _ = bracket(points, dict(coords, batch=below))
        if lower is None:
            continue
        if not all(XLA in p.times_ms and _jax_lowering.same_call(
                routine, smaller, n, p.batch, p.n, itemsize) for p, _ in lower):
            return None
        growth = _log_mean([(w, p.time(XLA)) for p, w in around]) / _log_mean(
            [(w, p.time(XLA)) for p, w in lower])
        exponent = math.log(max(growth, 1e-300)) / math.log(smaller / below)
        return (min(exponent, 1.0), below) if exponent >= PACE_MIN else None
    return None


def _across_jax_switch(routine: str, dtype: str, coords: Mapping, around) -> set:
    """The keys of the points around a call where JAX's lowering runs one batched call of a
    routine of _jax_lowering.BATCHED_BEATS_LOOP while at the call it loops per matrix (svd
    between n = 32 and 64). JAX's time there is that of the fast batched call, not of the loop
    the call makes: a candidate need not beat it there, only at the points where JAX loops as
    at the call (there is at least one, or nothing is set apart). Empty elsewhere."""
    if routine not in _jax_lowering.BATCHED_BEATS_LOOP:
        return set()
    itemsize = np.dtype(dtype).itemsize
    if not _jax_lowering.loops_per_matrix(routine, coords["batch"], coords["n"], itemsize):
        return set()
    # A batch of one is one call either way, the loop's per-matrix call: no switch there.
    switched = {p.key for p, _ in around if p.batch > 1
                and not _jax_lowering.loops_per_matrix(routine, p.batch, p.n, itemsize)}
    return switched if len(switched) < len({p.key for p, _ in around}) else set()


def _log_mean(weighted) -> float:
    """The time at a call from its points' (weight, ms): the weighted mean in log space, the
    weights normalized (all of bracket()'s sum to one; a subset of them need not)."""
    total = sum(w for w, _ in weighted)
    return math.exp(sum(w * math.log(t) for w, t in weighted) / total)


def _speedup_needed(routine: str, candidate: str, n: int, xla_ms: float) -> float:
    """How many times faster than JAX's own (xla_ms) a candidate must measure at a point for
    a win there: 1 + the margin; for an unguarded kernel, no slower by the margin than JAX's
    own inside the guard (at least GUARD_FLOOR_MS more), which `auto` runs in its place."""
    if n <= unguarded_max_n(routine) and parse_candidate(candidate)[0] == "batched":
        return xla_ms / ((xla_ms + GUARD_FLOOR_MS) * (1 + MARGIN))
    return 1 + (XLA_MARGIN_TINY if xla_ms < TINY_MS else XLA_MARGIN)


def _beats_xla(routine: str, candidate: str, n: int, ms: float, xla_ms: float) -> bool:
    """Whether `candidate`, measured at `ms` where JAX's own took `xla_ms`, wins by the margin."""
    return xla_ms / ms > _speedup_needed(routine, candidate, n, xla_ms)


def _simplest(times: Mapping[str, float], among: Iterable[str]) -> str:
    """Of the candidates `among`, the simplest within MARGIN of the fastest of them."""
    among = list(among)
    fastest = min(times[c] for c in among)
    return min((c for c in among if times[c] <= fastest * (1 + MARGIN)), key=_simplicity)


def point_decision(routine: str, point: Point) -> str:
    """What `point` alone says `auto` runs there, as a strategy kind ("xla", "looped", ...), by
    estimate()'s rule: JAX's own lowering unless a candidate beats it by the margin; where JAX's
    own is no candidate (a routine it has none of), the fastest. tune() measures more points
    between neighbours whose decisions differ: that is where the table's answers change."""
    times = point.times_ms
    among = list(times)
    if XLA in times:
        among = [c for c in times if c != XLA
                 and _beats_xla(routine, c, point.n, times[c], times[XLA])]
        if not among:
            return XLA
    return parse_candidate(_simplest(times, among))[0]


class Table:
    """Measured times of one GPU: {(routine, dtype): [Point, ...]}."""

    def __init__(self, gpu: str, source: str, entries: Mapping[tuple, Iterable[Point]],
                 key: Mapping | None = None, arch: Mapping | None = None):
        self.gpu = gpu
        self.source = source
        self.key = dict(key or {})
        self.arch = dict(arch or {})  # the processor it was measured on (read_shipped)
        self.entries = {k: tuple(sorted(v, key=lambda p: p.key)) for k, v in entries.items()}

    # JSON: {"format": 1, "gpu": ..., "key": {...}, "entries": {"getrf": {"float32": [
    #   {"batch": 64, "n": 512, "times_ms": {"xla": 10.6, "batched:1": 10.6, ...}}, ...]}}};
    # a point's "aspect" (rows / cols) and "nrhs" are written where they are not 1.
    @classmethod
    def from_json(cls, doc, source: str) -> "Table":
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a format-{FORMAT} strategy table")
        entries = {}
        for routine, per_dtype in doc["entries"].items():
            for dtype, points in per_dtype.items():
                parsed = {}
                for p in points:
                    times = {str(c): float(t) for c, t in p["times_ms"].items()}
                    for c, t in times.items():
                        parse_candidate(c)
                        if not (math.isfinite(t) and t > 0):
                            raise ValueError(f"{routine} {dtype}: bad time {t!r} for {c}")
                    point = Point(int(p["batch"]), int(p["n"]), times,
                                  float(p.get("aspect", 1.0)), int(p.get("nrhs", 1)))
                    if min(point.batch, point.n, point.nrhs) < 1 or not (
                            math.isfinite(point.aspect) and point.aspect > 0):
                        raise ValueError(f"{routine} {dtype}: bad point {p!r}")
                    if point.key in parsed:
                        raise ValueError(f"{routine} {dtype}: point {p!r} given twice")
                    parsed[point.key] = point
                entries[(str(routine), str(dtype))] = list(parsed.values())
        return cls(str(doc["gpu"]), source, entries, doc.get("key"), doc.get("arch"))

    def to_json(self) -> dict:
        entries: dict = {}
        for (routine, dtype), points in sorted(self.entries.items()):
            rows = entries.setdefault(routine, {}).setdefault(dtype, [])
            for p in points:
                row = {"batch": p.batch, "n": p.n}
                if p.aspect != 1:
                    row["aspect"] = p.aspect
                if p.nrhs != 1:
                    row["nrhs"] = p.nrhs
                rows.append(dict(row, times_ms=dict(sorted(p.times_ms.items()))))
        doc = {"format": FORMAT, "gpu": self.gpu, "key": self.key}
        if self.arch:
            doc["arch"] = self.arch
        return dict(doc, entries=entries)

    def merged(self, other: "Table", source: str | None = None) -> "Table":
        """This table with `other`'s points added (other's times win at the same point), named
        `source` (default: other's)."""
        entries = {k: {p.key: p for p in v} for k, v in self.entries.items()}
        for k, points in other.entries.items():
            for p in points:
                old = entries.setdefault(k, {}).get(p.key)
                times = {**(old.times_ms if old else {}), **p.times_ms}
                entries[k][p.key] = dataclasses.replace(p, times_ms=times)
        return Table(other.gpu, source or other.source,
                     {k: list(v.values()) for k, v in entries.items()}, other.key,
                     other.arch or self.arch)

    def under(self, other: "Table") -> "Table":
        """This table as a stand-in laid under `other` (another GPU model's): less its points
        within the batch range `other` measured in the same column (routine, dtype, n, aspect,
        nrhs: a line along the batch), its own points included. Within that range a point of
        the stand-in would be the nearest to a call, and decide it with another GPU's
        candidates (the H100's svd 64x64x64, measured before the Jacobi kernel took n = 64,
        put looped:8 at 12.1 ms between the H200's batched:1 at 0.636 ms for 16 matrices and
        1.21 ms for 256); beyond it the stand-in still says what the model's own cannot."""
        ranges = {}
        for k, points in other.entries.items():
            for p in points:
                low, high = ranges.get((k, p.n, p.aspect, p.nrhs), (p.batch, p.batch))
                ranges[(k, p.n, p.aspect, p.nrhs)] = min(low, p.batch), max(high, p.batch)

        def covered(k, p):
            low, high = ranges.get((k, p.n, p.aspect, p.nrhs), (1, 0))
            return low <= p.batch <= high

        entries = {k: [p for p in points if not covered(k, p)]
                   for k, points in self.entries.items()}
        return Table(self.gpu, self.source, {k: v for k, v in entries.items() if v}, self.key,
                     self.arch)

    def estimate(self, routine: str, dtype: str, batch: int, n: int,
                 allowed: Callable[[str], bool] = lambda c: True, aspect: float = 1.0,
                 nrhs: int = 1) -> Estimate | None:
        """What the measurements say for `batch` matrices of `n` (the larger dimension; `aspect`
        rows / cols) with `nrhs` right-hand sides, among the allowed candidates; None where this
        table has nothing for (routine, dtype).

        The rule, so that `auto` cannot lose by much where nothing was measured: the call is
        bracketed along every axis by measured points (bracket()); a candidate is taken over
        JAX's own lowering only where it beats JAX's time by the margin at every one of those
        points, and of those the fastest (times interpolated in log space; within MARGIN the
        simplest). Otherwise JAX's lowering (rule DISAGREED); a call outside the measured range
        along any axis gets no answer (best None, rule OUTSIDE), except a batch beyond the
        measured that JAX's lowering runs as a measured smaller one: there that batch's points
        decide by bounds on the times (_carried_batch; rule CARRIED where a candidate wins).
        At a call where JAX's lowering loops per matrix, points where it makes one far faster
        batched call instead (_across_jax_switch) need not be beaten, and JAX's time is the
        looping points'. Where JAX's lowering is not a candidate (no lowering of its own, or
        lanes asked for), the fastest interpolated, within the measured range only."""
        points = self.entries.get((routine, dtype))
        if not points:
            return None
        coords = {"nrhs": max(int(nrhs), 1), "aspect": float(aspect), "batch": max(batch, 1),
                  "n": max(n, 1)}
        around, why = bracket(points, coords)
        carried, scale, xla_scale = "", 1.0, 1.0
        if around is None:
            found = _carried_batch(routine, dtype, points, coords, allowed)
            if found is None:
                return Estimate(None, (), f"{why}: nothing measured on that side of the call",
                                OUTSIDE)
            around, smaller, scale, xla_scale, how = found
            carried = f"batch {coords['batch']} beyond the measured, where JAX's lowering {how}; "
        names = [c for c in sorted({c for p, _ in around for c in p.times_ms}) if allowed(c)]
        times, at = {}, {}
        for c in names:
            ts = [(p, w, p.time(c)) for p, w in around]
            if all(t is not None for _, _, t in ts):
                factor = xla_scale if c == XLA else scale
                at[c] = [(p, factor * t) for p, _, t in ts]
                times[c] = factor * _log_mean([(w, t) for _, w, t in ts])
        if not times:
            return None
        cells = sorted({p.key for p, _ in around})
        basis = carried + ("measured at " if len(cells) == 1 else "interpolated between ") + \
            ", ".join(_point_name(k) for k in cells)
        switched = _across_jax_switch(routine, dtype, coords, around) if XLA in at else set()
        if switched:
            # JAX's time at the call: the points' where it loops as there (their weights > 0).
            times[XLA] = xla_scale * _log_mean([(w, p.time(XLA)) for p, w in around
                                                if p.key not in switched])
            basis += (f"; JAX's own is one batched {routine} call at "
                      + ", ".join(_point_name(k) for k in sorted(switched))
                      + " and one call per matrix at the call: compared where it loops")
        ranked = tuple(sorted(times.items(), key=lambda item: (item[1], item[0])))
        if XLA not in names:
            return Estimate(_simplest(times, times), ranked, basis, FASTEST)
        if XLA not in times:
            return Estimate(XLA, ranked, basis + "; JAX's own not measured at each of them",
                            DISAGREED)
        xla_at = dict((p.key, t) for p, t in at[XLA])
        winners, closest = [], None
        for c, _ in ranked:
            if c == XLA:
                continue
            speedups = [(p.key, xla_at[p.key] / t,
                         _speedup_needed(routine, c, n, xla_at[p.key]))
                        for p, t in at[c] if p.key not in switched]
            losses = [loss for loss in speedups if loss[1] <= loss[2]]
            if not losses:
                winners.append(c)
            elif closest is None:
                closest = (c, losses[0])
        if not winners:
            why = "no candidate measured"
            if closest is not None:
                c, (key, speedup, need) = closest
                why = (f"{c} is {speedup:.3f}x JAX's at {_point_name(key)}, short of the "
                       f"{need:.2f}x it must be")
            return Estimate(XLA, ranked, f"{basis}; {why}", DISAGREED)
        return Estimate(_simplest(times, winners), ranked, basis + "; wins by the margin at each",
                        CARRIED if carried else AGREED)


def _point_name(key: tuple) -> str:
    """A point's coordinates as "64x512" (batch x n), with the aspect and nrhs where not 1."""
    coords = dict(zip(AXES, key))
    text = f"{coords['batch']}x{coords['n']}"
    if coords["aspect"] != 1:
        text += f" rows/cols {_format(coords['aspect'])}"
    if coords["nrhs"] != 1:
        text += f" nrhs {coords['nrhs']}"
    return text


# --- files ------------------------------------------------------------------------------------

def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", str(text)).strip("-") or "unknown"


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jax_cusolver_ms"


def cache_path(gpu: str) -> Path:
    """The tuned table's file for `gpu` (one file per GPU model)."""
    return cache_dir() / f"tuned_{slug(gpu)}.json"


def write_atomic(path, doc) -> Path:
    """Writes JSON to a temporary file beside `path`, then renames it over `path`: a reader
    sees the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def read_tuned(path, key: Mapping) -> Table | None:
    """The tuned table at `path` if it is readable and was measured under `key`; a corrupt or
    stale file is ignored with a warning (tune again to replace it)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        table = Table.from_json(json.loads(path.read_text()), f"tuned {path}")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        warnings.warn(f"jax_cusolver_ms: ignoring the unreadable tuned table {path} "
                      f"({type(exc).__name__}: {exc}); run jax_cusolver_ms.tune() again",
                      RuntimeWarning, stacklevel=2)
        return None
    if table.key != dict(key):
        changed = sorted(k for k in set(table.key) | set(key) if table.key.get(k) != key.get(k))
        warnings.warn(f"jax_cusolver_ms: ignoring the stale tuned table {path}: measured under "
                      f"{ {k: table.key.get(k) for k in changed} }, now "
                      f"{ {k: key.get(k) for k in changed} }; run jax_cusolver_ms.tune() again",
                      RuntimeWarning, stacklevel=2)
        return None
    return table


def read_shipped(gpu: str, folder=None, arch: Mapping | None = None) -> Table | None:
    """The table shipped for the GPU model `gpu` (a file whose "gpu" is that device_kind), laid
    over the table of another model of the same processor (equal compute capability and
    multiprocessor count: `arch`, {"compute_capability": "9.0", "sm_count": 132}, or else the
    model's own file's "arch"), which stands in for it where the model's own has no point, or
    altogether where it has none: an H200 is an H100's processor with faster memory, so the two
    rank the strategies alike as a rule; `auto`'s margin and its hand-off to JAX off the
    measured space hold there too. The model's own points win, as a tuned table's over a
    shipped one (overlay())."""
    own, others = None, []
    for path in sorted(Path(folder or SHIPPED_DIR).glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            if doc.get("gpu") == gpu:
                own = Table.from_json(doc, f"shipped table {gpu} ({path.name})")
            else:
                others.append((path, doc))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            warnings.warn(f"jax_cusolver_ms: skipping the shipped table {path}: {exc}",
                          RuntimeWarning, stacklevel=2)
    arch = arch or (own.arch if own is not None else None)
    stand_in = None
    for path, doc in others if arch else ():
        theirs = doc.get("arch") if isinstance(doc, dict) else None
        if isinstance(theirs, dict) and all(
                arch.get(k) is not None and str(theirs.get(k)) == str(arch[k])
                for k in ("compute_capability", "sm_count")):
            try:
                stand_in = Table.from_json(
                    doc, f"shipped table {doc['gpu']} ({path.name}) standing in for {gpu}: the "
                         f"same processor (compute capability {arch['compute_capability']}, "
                         f"{arch['sm_count']} multiprocessors)")
                break
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                warnings.warn(f"jax_cusolver_ms: skipping the shipped table {path}: {exc}",
                              RuntimeWarning, stacklevel=2)
    if own is None or stand_in is None:
        return own or stand_in
    return stand_in.under(own).merged(own, f"{own.source} over {stand_in.source}")


# --- the tables in force ----------------------------------------------------------------------

def gpu_name() -> str | None:
    """The first GPU's device_kind, or None without a GPU (asks JAX nothing more then)."""
    from . import _ffi

    if not _ffi.gpu_available():
        return None
    import jax

    return next(d.device_kind for d in jax.devices() if d.platform == "gpu")


def gpu_arch() -> dict:
    """The first GPU's processor, as the shipped tables' "arch" records it: compute capability
    and multiprocessor count ({} without a GPU, or where JAX does not say)."""
    from . import _ffi

    if not _ffi.gpu_available():
        return {}
    import jax

    device = next(d for d in jax.devices() if d.platform == "gpu")
    arch = {"compute_capability": getattr(device, "compute_capability", None),
            "sm_count": getattr(device, "core_count", None)}
    return arch if None not in arch.values() else {}


def current_key(gpu: str) -> dict:
    """What a tuned table is valid for: the GPU model and the library versions that ran it."""
    import jax

    from . import _ffi

    versions = _ffi.library_versions()
    return {"format": FORMAT, "gpu": gpu, "cusolver": versions.get("cusolver"),
            "cublas": versions.get("cublas"), "jax": jax.__version__}


class _Overrides(threading.local):
    """Per thread, as settings.config: one thread's `using` (explain(gpu=...) included) must not
    change what `auto` picks in another. A new thread starts with none."""

    def __init__(self):
        self.stack = []  # set by `using` / `using_machine`: tables, or None for this machine's


_overrides = _Overrides()


def overlay(tuned: Table | None, shipped: Table | None) -> tuple:
    """The tables `auto` reads for one GPU: the tuned points laid over the shipped ones (the
    tuned time wins for a candidate both measured at a point). One table, not two consulted in
    turn: a tuned table of a few sizes would otherwise answer for every size by clamping to its
    edge (H100: a tune of n <= 64 sent lu_factor 16x2048 to JAX's 693 ms instead of
    the shipped table's lanes at 23 ms)."""
    if tuned is None or shipped is None:
        return tuple(t for t in (tuned, shipped) if t is not None)
    return (shipped.merged(tuned, f"{tuned.source} over {shipped.source}"),)


@functools.lru_cache(maxsize=None)
def _loaded(gpu: str) -> tuple:
    return overlay(read_tuned(cache_path(gpu), current_key(gpu)),
                   read_shipped(gpu, arch=gpu_arch()))


def active() -> tuple:
    """The tables `auto` consults, first match wins: this machine's is one (overlay())."""
    stack = _overrides.stack
    if stack and stack[-1] is not None:
        return stack[-1]
    gpu = gpu_name()
    return _loaded(gpu) if gpu is not None else ()


def reload() -> None:
    """Forget the loaded tables (after tuning): the next lowering reads them again. Functions
    already compiled keep the choice they were lowered with."""
    _loaded.cache_clear()


@contextlib.contextmanager
def _pushed(entry):
    stack = _overrides.stack
    stack.append(entry)
    try:
        yield
    finally:
        stack.pop()


def using(*tables: Table):
    """Makes `auto` consult exactly these tables inside the block (none: the heuristic only), in
    this thread."""
    return _pushed(tuple(tables))


def using_machine():
    """Undoes an enclosing `using` inside the block: the tuned and shipped tables of this
    machine's GPU again (tests of the loading itself)."""
    return _pushed(None)


def lookup(routine: str, dtype: str, batch: int, n: int, allowed: Callable[[str], bool],
           aspect: float = 1.0, nrhs: int = 1) -> tuple[Estimate, Table] | None:
    """The first active table's estimate for the call (see Table.estimate), or None where no
    table has points for (routine, dtype)."""
    for table in active():
        estimate = table.estimate(routine, dtype, batch, n, allowed, aspect, nrhs)
        if estimate is not None:
            return estimate, table
    return None
