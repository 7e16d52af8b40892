"""Measured strategy tables: the times `auto` chooses from before it falls back to rules.

A table holds, per (routine, dtype), measured points (batch, n) with the median time of every
candidate there: "xla" (JAX's own lowering), "sequential", "looped:L", "batched:L" (the
native batched API, its batch split over L lanes when L > 1) and "blocked" (potrf's blocked
algorithm over the whole batch). `auto` estimates each candidate's
time at the call's (batch, n) by interpolating log-times bilinearly in (log2 batch, log2 n)
between the four measured points around it (clamped at the edges of what was measured; the
nearest measured point where the four are not all there) and takes the fastest.

Where tables come from, in the order they are consulted:
  1. the user's tuned table (`jax_cusolver_ms.tune`), one file per GPU in the cache folder,
     used only while its key (GPU, cuSOLVER, cuBLAS, jax versions) matches this process;
  2. the table shipped for this GPU model (jax_cusolver_ms/tables/*.json, matched by the JAX
     device's `device_kind`);
then strategy.py's hand-written rules. Nothing is read before the first GPU lowering asks, and
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
# getrf). There `auto`'s "xla" runs JAX's lowering inside the guard, one more kernel (5-12 us)
# that the "xla" time (JAX's own function) leaves out, as large as XLA_MARGIN at these sizes:
# only MARGIN applies then. H100 float32 eigh 64x32: the kernel 0.128 ms, JAX 0.136, and JAX
# inside the guard 0.92x of JAX in the grid (0.89x at 256x16 before the kernel won there).
def unguarded_max_n(routine: str) -> int:
    """Up to this n the batched path of `routine` is a kernel that needs no guard (0: none)."""
    from . import _ffi

    if _ffi.limits is None:
        return 0
    limit = _ffi.limits.routines().get(routine, {})
    return limit["small_max_n"] if limit.get("small_writes_nan") else 0


# How far beyond its measured n (and batch) range a table answers, clamping to its edge; further
# out the heuristic rules do.
EXTRAPOLATE_N = 2
EXTRAPOLATE_BATCH = 4
N_WEIGHT = 2.0  # how much more a step in log2 n counts than one in log2 batch (nearest point)


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

@dataclasses.dataclass(frozen=True)
class Point:
    batch: int
    n: int
    times_ms: Mapping[str, float]

    def time(self, candidate: str) -> float | None:
        """The candidate's time here; lanes beyond the batch are capped at it, as `choose` does
        (looped:16 on 4 matrices runs looped:4)."""
        if candidate in self.times_ms:
            return self.times_ms[candidate]
        strategy, lanes = parse_candidate(candidate)
        if lanes > self.batch >= 1 and strategy in _laned():
            return self.times_ms.get(candidate_name(strategy, self.batch))
        return None


@dataclasses.dataclass(frozen=True)
class Estimate:
    best: str
    times_ms: tuple  # ((candidate, estimated ms), ...) fastest first
    basis: str       # which measured points the times come from


_KIND_ORDER = {XLA: 0, "sequential": 1, "batched": 2, "blocked": 3, "looped": 4}


def _simplicity(candidate: str) -> tuple:
    strategy, lanes = parse_candidate(candidate)
    return lanes, _KIND_ORDER[strategy]


def _bracket(values: list[int], x: int) -> tuple[int, int]:
    lower = [v for v in values if v <= x]
    upper = [v for v in values if v >= x]
    lo = lower[-1] if lower else values[0]
    hi = upper[0] if upper else values[-1]
    return lo, hi


def _fraction(lo: int, hi: int, x: int) -> float:
    if lo == hi:
        return 0.0
    x = min(max(x, lo), hi)
    return (math.log2(x) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))


class Table:
    """Measured times of one GPU: {(routine, dtype): [Point, ...]}."""

    def __init__(self, gpu: str, source: str, entries: Mapping[tuple, Iterable[Point]],
                 key: Mapping | None = None):
        self.gpu = gpu
        self.source = source
        self.key = dict(key or {})
        self.entries = {k: tuple(sorted(v, key=lambda p: (p.batch, p.n)))
                        for k, v in entries.items()}

    # JSON: {"format": 1, "gpu": ..., "key": {...}, "entries": {"getrf": {"float32": [
    #   {"batch": 64, "n": 512, "times_ms": {"xla": 10.6, "batched:1": 10.6, ...}}, ...]}}}
    @classmethod
    def from_json(cls, doc, source: str) -> "Table":
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a format-{FORMAT} strategy table")
        entries = {}
        for routine, per_dtype in doc["entries"].items():
            for dtype, points in per_dtype.items():
                parsed = []
                for p in points:
                    times = {str(c): float(t) for c, t in p["times_ms"].items()}
                    for c, t in times.items():
                        parse_candidate(c)
                        if not (math.isfinite(t) and t > 0):
                            raise ValueError(f"{routine} {dtype}: bad time {t!r} for {c}")
                    if int(p["batch"]) < 1 or int(p["n"]) < 1:
                        raise ValueError(f"{routine} {dtype}: bad point {p!r}")
                    parsed.append(Point(int(p["batch"]), int(p["n"]), times))
                entries[(str(routine), str(dtype))] = parsed
        return cls(str(doc["gpu"]), source, entries, doc.get("key"))

    def to_json(self) -> dict:
        entries: dict = {}
        for (routine, dtype), points in sorted(self.entries.items()):
            entries.setdefault(routine, {})[dtype] = [
                {"batch": p.batch, "n": p.n, "times_ms": dict(sorted(p.times_ms.items()))}
                for p in points]
        return {"format": FORMAT, "gpu": self.gpu, "key": self.key, "entries": entries}

    def merged(self, other: "Table") -> "Table":
        """This table with `other`'s points added (other's times win at the same point)."""
        entries = {k: {(p.batch, p.n): p for p in v} for k, v in self.entries.items()}
        for k, points in other.entries.items():
            for p in points:
                old = entries.setdefault(k, {}).get((p.batch, p.n))
                times = {**(old.times_ms if old else {}), **p.times_ms}
                entries[k][(p.batch, p.n)] = Point(p.batch, p.n, times)
        return Table(other.gpu, other.source, {k: list(v.values()) for k, v in entries.items()},
                     other.key)

    def estimate(self, routine: str, dtype: str, batch: int, n: int,
                 allowed: Callable[[str], bool] = lambda c: True) -> Estimate | None:
        """Estimated times of the allowed candidates for `batch` matrices of order `n`, or None
        when this table has nothing for them. A single matrix is its own regime (no lanes, no
        batch to split): it is read from batch-1 points only, and a batch never from them."""
        single = batch <= 1
        points = [p for p in self.entries.get((routine, dtype), ()) if (p.batch <= 1) == single]
        if not points or not _within_reach(points, max(batch, 1), n):
            return None
        at = {(p.batch, p.n): p for p in points}
        b_lo, b_hi = _bracket(sorted({p.batch for p in points}), max(batch, 1))
        n_lo, n_hi = _bracket(sorted({p.n for p in points}), n)
        corners = {(b, m) for b in (b_lo, b_hi) for m in (n_lo, n_hi)}
        names = [c for c in sorted({c for p in points for c in p.times_ms}) if allowed(c)]
        if all(c in at for c in corners):
            fb, fn = _fraction(b_lo, b_hi, max(batch, 1)), _fraction(n_lo, n_hi, n)
            weights = dict.fromkeys(corners, 0.0)  # corners coincide on an exact b or n
            for b, wb in ((b_lo, 1 - fb), (b_hi, fb)):
                for m, wn in ((n_lo, 1 - fn), (n_hi, fn)):
                    weights[(b, m)] += wb * wn
            times = {}
            for c in names:
                ts = {k: at[k].time(c) for k in corners}
                if all(t is not None for t in ts.values()):
                    times[c] = math.exp(sum(weights[k] * math.log(ts[k]) for k in corners))
            basis = ("measured at " + _cell(b_lo, n_lo) if len(corners) == 1 else
                     "interpolated between " + ", ".join(_cell(*k) for k in sorted(corners)))
        else:
            # Scattered measurements: the nearest point in (log2 batch, log2 n), n counting
            # twice as much (crossovers move with n far more than with the batch); ties go to
            # the larger n, then the larger batch, so the answer never depends on order.
            def distance(p):
                d = (N_WEIGHT * (math.log2(p.n) - math.log2(n))) ** 2
                d += (math.log2(p.batch) - math.log2(max(batch, 1))) ** 2
                return (d, -p.n, -p.batch)
            nearest = min(points, key=distance)
            times = {c: t for c in names if (t := nearest.time(c)) is not None}
            basis = "nearest measured point " + _cell(nearest.batch, nearest.n)
        if not times:
            return None
        ranked = tuple(sorted(times.items(), key=lambda item: (item[1], item[0])))
        fastest = ranked[0][1]
        xla = times.get(XLA, math.inf)
        unguarded = (n <= unguarded_max_n(routine)
                     and parse_candidate(ranked[0][0])[0] == "batched")
        margin = MARGIN if unguarded else XLA_MARGIN_TINY if xla < TINY_MS else XLA_MARGIN
        if xla <= fastest * (1 + margin):
            best = XLA
        else:
            best = min((c for c, t in ranked if t <= fastest * (1 + MARGIN)), key=_simplicity)
        return Estimate(best, ranked, basis)


def _within_reach(points, batch: int, n: int) -> bool:
    """Whether a call lies within EXTRAPOLATE of the measured range: beyond it the edge's winner
    says little (H100 float32 getrf: lanes win 1.9x at 64x1024 and lose 0.79x at 256x1024;
    syevd's hybrid wins 2.9x at 4x512, where at 4x64 JAX's XsyevBatched is the same call)."""
    n_lo, n_hi = min(p.n for p in points), max(p.n for p in points)
    b_lo, b_hi = min(p.batch for p in points), max(p.batch for p in points)
    return (n_lo / EXTRAPOLATE_N <= n <= n_hi * EXTRAPOLATE_N
            and b_lo / EXTRAPOLATE_BATCH <= batch <= b_hi * EXTRAPOLATE_BATCH)


def _cell(batch: int, n: int) -> str:
    return f"{batch}x{n}"


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


def read_shipped(gpu: str, folder=None) -> Table | None:
    """The table shipped for the GPU model `gpu` (a file whose "gpu" is that device_kind)."""
    for path in sorted(Path(folder or SHIPPED_DIR).glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            if doc.get("gpu") == gpu:
                return Table.from_json(doc, f"shipped table {gpu} ({path.name})")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            warnings.warn(f"jax_cusolver_ms: skipping the shipped table {path}: {exc}",
                          RuntimeWarning, stacklevel=2)
    return None


# --- the tables in force ----------------------------------------------------------------------

def gpu_name() -> str | None:
    """The first GPU's device_kind, or None without a GPU (asks JAX nothing more then)."""
    from . import _ffi

    if not _ffi.gpu_available():
        return None
    import jax

    return next(d.device_kind for d in jax.devices() if d.platform == "gpu")


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
    merged = shipped.merged(tuned)
    return (Table(merged.gpu, f"{tuned.source} over {shipped.source}", merged.entries,
                  tuned.key),)


@functools.lru_cache(maxsize=None)
def _loaded(gpu: str) -> tuple:
    return overlay(read_tuned(cache_path(gpu), current_key(gpu)), read_shipped(gpu))


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


def lookup(routine: str, dtype: str, batch: int, n: int,
           allowed: Callable[[str], bool]) -> tuple[Estimate, Table] | None:
    for table in active():
        estimate = table.estimate(routine, dtype, batch, n, allowed)
        if estimate is not None:
            return estimate, table
    return None
