"""Measure the strategies on this GPU and write the table `auto` reads (tables.py).

    import jax_cusolver_ms as jcm
    jcm.tune()                                   # every op and dtype over the whole space
    jcm.tune(ops=["lu_factor"], dtypes=["float32"], sizes=[256, 1024], budget_s=120)

    python -m jax_cusolver_ms.tune --help          (the command line is main() below)

`auto` leaves JAX's own lowering only between measured points (tables.py), so the space measured
is the space users call, per op:
  - dtypes float32, float64, complex64 and complex128;
  - n (the larger dimension) over SIZES, a geometric ladder from 2 to 4096;
  - batches BATCHES (1 to 1024), and for n <= SMALL_N_MAX also SMALL_N_BATCHES (up to 10^5);
  - for the ops whose routines take rectangular matrices (qr and ormqr: geqrf, ormqr; svd:
    gesvdj / gesvd; householder_product: orgqr, tall ones only) the aspects rows / cols of
    ASPECTS besides square;
  - for the solves (lu_solve: getrs, cho_solve: potrs, ldl_solve: sytrs, solve_triangular:
    trsm) the right-hand-side counts of NRHS;
  - less the cells whose inputs exceed MAX_INPUT_GB.
Cells are measured small first (n, then the batch), so a budget that runs out still covers every
op. Then the refinement: wherever two neighbouring points (along n or along the batch, the rest
equal) decide differently (tables.point_decision: JAX's own, or which strategy beats it), the
cell halfway between them in log scale is measured, and so on to REFINE_DEPTH levels.

For every cell it times each candidate: JAX's own function ("xla"), "sequential", "blocked",
"looped:L" and "batched:L" for the lane counts asked for (never more lanes than matrices), each
on the device (CUDA events around the call, jax_cusolver_ms.timing), after warm-up, as the median
of repeats; a candidate DOMINATED_FACTOR times behind the cell's fastest so far is timed once,
and a per-matrix one (sequential, looped) that far behind the best at one batch is not timed at
larger batches of that shape. The table goes to a per-user cache file, one per GPU model, keyed
by the GPU and the cuSOLVER / cuBLAS / jax versions and written atomically after every cell; it
is merged with an earlier one of the same key (whose cells are not measured again), and `auto`
reads it from the next lowering on.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import fractions
import functools
import importlib
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import _ffi, _jax_lowering, _primitive, _progress, strategy as _strategy
from . import tables as _tables
from . import timing as _timing
from ._common import batched_eye

# From 2: below the smallest n measured `auto` runs JAX's lowering, and 2 x 2 and 3 x 3 systems
# are common calls.
SIZES = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
BATCHES = (1, 4, 16, 64, 256, 1024)
# Many tiny systems in one call (one per pixel, particle or element) are common and cheap to
# measure; for larger n such batches exceed the input cap or take minutes per candidate.
SMALL_N_BATCHES = (4096, 16384, 100000)
SMALL_N_MAX = 32
DTYPES = ("float32", "float64", "complex64", "complex128")
# rows / cols, besides square, where the op takes them. 2 is where the QR-first SVD starts
# (strategy "blocked" for m >= 2n), 64 the data-fitting problems of many more rows than columns:
# `auto` takes JAX's lowering beyond the aspects measured and decides between them only where
# the points on both sides agree.
ASPECTS = (1 / 64, 1 / 16, 1 / 4, 1 / 2, 2, 4, 16, 64)
NRHS = (1, 8, 64)  # right-hand sides, for the solves
# A rectangular cell's smaller side is at least this. One column is a call users make (least
# squares on one regressor, a vector's norm), and the points of one column bracket the calls near
# that edge: 1000 matrices of 60 x 3 (aspect 20) lie between aspect 16 and 32, and at 32 between
# n 32 (32 x 1) and 64 (64 x 2).
MIN_SIDE = 1
REFINE_DEPTH = 2
LANES = (1, 2, 4, 8, 16)
REPEATS = 7
WARMUP = 2
MIN_REPEATS = 3
MAX_INPUT_GB = 4.0
# A candidate whose one call takes longer than this is not measured at larger cells of the same
# op and dtype (it would eat the budget of many others); above a quarter of it, fewer repeats.
MAX_CALL_S = 20.0
# A candidate that makes one library call per matrix (sequential, looped) and took this many
# times the best candidate's time is not measured at larger batches of the same shape: its time
# grows with the batch at least as fast as any other's (tiny matrices in batches of 10^5: a
# second a call, where a batched kernel takes a millisecond).
DOMINATED_FACTOR = 10.0
# ... and within a cell, a candidate whose first call takes DOMINATED_FACTOR times the fastest
# timed so far, and at least this long, is timed once: it cannot be chosen there, and one call
# of that length gives its size (JAX's per-matrix SVD of 300 900 x 100 matrices, H200 report:
# 1.2 s a call, eleven calls at the full count).
HOPELESS_MIN_S = 0.05
COMPILE_THREADS = 8  # candidates of a cell compiled at once


# --- workloads: the public op timed for each routine, its inputs and JAX's own function ----------

def _general(key, batch, rows, cols, nrhs, dtype):
    return (jax.random.normal(key, (batch, rows, cols), dtype),)


def _hpd(key, batch, rows, cols, nrhs, dtype):
    """Hermitian positive definite (symmetric for real dtypes)."""
    (a,) = _general(key, batch, rows, cols, nrhs, dtype)
    return (jnp.matmul(a, jnp.conj(jnp.swapaxes(a, -1, -2))) / rows
            + batched_eye(rows, dtype, a.ndim),)


def _hermitian(key, batch, rows, cols, nrhs, dtype):
    (a,) = _general(key, batch, rows, cols, nrhs, dtype)
    return ((a + jnp.conj(jnp.swapaxes(a, -1, -2))) / 2,)


def _definite_pair(key, batch, rows, cols, nrhs, dtype):
    """A Hermitian A and a Hermitian positive definite B: a generalized eigenproblem."""
    ka, kb = jax.random.split(key)
    return _hermitian(ka, batch, rows, cols, nrhs, dtype) + _hpd(kb, batch, rows, cols, nrhs,
                                                                  dtype)


def _symmetric(key, batch, rows, cols, nrhs, dtype):
    """Symmetric, also for complex dtypes: what ldl_factor factors (hermitian=False)."""
    (a,) = _general(key, batch, rows, cols, nrhs, dtype)
    return ((a + jnp.swapaxes(a, -1, -2)) / 2,)


def _rhs(key, batch, n, nrhs, dtype):
    return jax.random.normal(key, (batch, n, nrhs), dtype)


def _lu_and_rhs(key, batch, rows, cols, nrhs, dtype):
    ka, kb = jax.random.split(key)
    lu, piv = jax.scipy.linalg.lu_factor(_general(ka, batch, rows, cols, nrhs, dtype)[0])
    return lu, piv, _rhs(kb, batch, rows, nrhs, dtype)


def _cholesky_and_rhs(key, batch, rows, cols, nrhs, dtype):
    ka, kb = jax.random.split(key)
    c = jnp.linalg.cholesky(_hpd(ka, batch, rows, cols, nrhs, dtype)[0])
    return c, _rhs(kb, batch, rows, nrhs, dtype)


def _ldl_and_rhs(key, batch, rows, cols, nrhs, dtype):
    ka, kb = jax.random.split(key)
    ld, piv = _jcm().ldl_factor(_symmetric(ka, batch, rows, cols, nrhs, dtype)[0])
    return ld, piv, _rhs(kb, batch, rows, nrhs, dtype)


def _reflectors(key, batch, rows, cols, nrhs, dtype):
    """geqrf's reflectors (rows x cols, below the diagonal) and their min(rows, cols) taus."""
    h, taus = jnp.linalg.qr(_general(key, batch, rows, cols, nrhs, dtype)[0], mode="raw")
    return jnp.swapaxes(h, -1, -2), taus


def _reflectors_and_matrix(key, batch, rows, cols, nrhs, dtype):
    """What ormqr multiplies: Q of a rows x cols QR (its k = min(rows, cols) reflectors) and a
    rows x cols matrix, the shape its strategy is chosen for."""
    ka, kc = jax.random.split(key)
    h, taus = _reflectors(ka, batch, rows, cols, nrhs, dtype)
    return h[..., :, :taus.shape[-1]], taus, _general(kc, batch, rows, cols, nrhs, dtype)[0]


def _jcm():
    import jax_cusolver_ms

    return jax_cusolver_ms


def _eigh_module():
    return importlib.import_module("jax_cusolver_ms.eigh")  # the package's `eigh` is the function


def _square(rows, cols):
    return rows == cols


def _any_shape(rows, cols):
    return True


def _tall(rows, cols):
    return rows >= cols


@dataclasses.dataclass(frozen=True)
class Workload:
    """One public op: `ours(*inputs, strategy=, lanes=)`, JAX's `reference(*inputs)` (None
    where JAX has none: no "xla" candidate then) and `build(key, batch, rows, cols, nrhs,
    dtype)`; `fits(rows, cols)` says which shapes the op takes, `solve` that it takes
    right-hand sides (measured at each count of NRHS). The routine it tunes is
    strategy.routine_of(op, rows, cols) (eigh and svd change routine with n)."""
    op: str
    ours: Callable[..., Any]
    reference: Callable[..., Any] | None
    build: Callable[..., tuple]
    fits: Callable[[int, int], bool] = _square
    solve: bool = False


WORKLOADS = {w.op: w for w in [
    Workload("lu_factor", lambda a, **kw: _jcm().lu_factor(a, **kw),
             jax.scipy.linalg.lu_factor, _general),
    Workload("lu_solve", lambda lu, piv, b, **kw: _jcm().lu_solve((lu, piv), b, **kw),
             lambda lu, piv, b: jax.scipy.linalg.lu_solve((lu, piv), b), _lu_and_rhs,
             solve=True),
    Workload("cholesky", lambda a, **kw: _jcm().cholesky(a, **kw), jnp.linalg.cholesky, _hpd),
    Workload("cho_solve", lambda c, b, **kw: _jcm().cho_solve((c, True), b, **kw),
             lambda c, b: jax.scipy.linalg.cho_solve((c, True), b), _cholesky_and_rhs,
             solve=True),
    Workload("qr", lambda a, **kw: _jcm().qr(a, mode="r", **kw),
             lambda a: jnp.linalg.qr(a, mode="r"), _general, _any_shape),
    Workload("householder_product",
             lambda a, taus, **kw: _jcm().householder_product(a, taus, **kw),
             jax.lax.linalg.householder_product, _reflectors, _tall),
    Workload("ormqr", lambda a, taus, c, **kw: _jcm().ormqr(a, taus, c, transpose=True, **kw),
             lambda a, taus, c: jax.lax.linalg.ormqr(a, taus, c, transpose=True),
             _reflectors_and_matrix, _any_shape),
    Workload("solve_triangular",
             lambda c, b, **kw: _jcm().solve_triangular(c, b, lower=True, **kw),
             lambda c, b: jax.scipy.linalg.solve_triangular(c, b, lower=True), _cholesky_and_rhs,
             solve=True),
    Workload("ldl_factor", lambda a, **kw: _jcm().ldl_factor(a, **kw), None, _symmetric),
    Workload("ldl_solve", lambda ld, piv, b, **kw: _jcm().ldl_solve(ld, piv, b, **kw), None,
             _ldl_and_rhs, solve=True),
    Workload("eigh", lambda a, **kw: _jcm().eigh(a, **kw), jnp.linalg.eigh, _hermitian),
    # JAX has no generalized eigh: the "xla" candidate is the reduction that `auto` runs for it
    # (its parts each by their own choice).
    Workload("generalized_eigh", lambda a, b, **kw: _jcm().generalized_eigh(a, b, **kw),
             lambda a, b: _eigh_module()._sygvd_reduction(a, b, itype=1), _definite_pair),
    Workload("svd", lambda a, **kw: _jcm().svd(a, **kw), jnp.linalg.svd, _general, _any_shape),
    Workload("eig", lambda a, **kw: _jcm().eig(a, **kw), jnp.linalg.eig, _general),
]}


# --- the space: cells, their order, and the refinement between them -----------------------------

@dataclasses.dataclass(frozen=True)
class Cell:
    """One measurement: `batch` rows x cols matrices of `dtype` for `op`, with `nrhs`
    right-hand sides (the solves; 1 for the other ops, as a point's coordinate)."""
    op: str
    dtype: str
    batch: int
    rows: int
    cols: int
    nrhs: int = 1

    @property
    def n(self) -> int:
        return max(self.rows, self.cols)

    @property
    def aspect(self) -> float:
        return self.rows / self.cols

    @property
    def routine(self) -> str:
        return _strategy.routine_of(self.op, self.rows, self.cols)

    @property
    def key(self) -> tuple:
        """The key of the point this cell writes (tables.Point.key)."""
        return tuple(getattr(self, axis) for axis in _tables.AXES)

    def __str__(self):
        rhs = f" nrhs {self.nrhs}" if WORKLOADS[self.op].solve else ""
        return f"{self.op} {self.dtype} {self.batch}x{self.rows}x{self.cols}{rhs}"


def shape_of(n: int, aspect: float) -> tuple[int, int] | None:
    """(rows, cols) with the larger dimension n and rows / cols = aspect, or None where the
    smaller side is no whole number (or under MIN_SIDE for a rectangular cell)."""
    small = n / aspect if aspect >= 1 else n * aspect
    if abs(small - round(small)) > 1e-9 or (aspect != 1 and round(small) < MIN_SIDE):
        return None
    return (n, round(small)) if aspect >= 1 else (round(small), n)


@functools.lru_cache(maxsize=None)
def _bytes_per_matrix(op: str, rows: int, cols: int, nrhs: int, dtype: str) -> int:
    """The inputs of one matrix of the cell (every input carries the batch dimension)."""
    itemsize = np.dtype(dtype).itemsize
    shapes = jax.eval_shape(lambda: WORKLOADS[op].build(jax.random.key(0), 1, rows, cols, nrhs,
                                                        dtype))
    # Every floating input has the cell's dtype: counted at its size, also where a listing
    # runs without jax_enable_x64 (which would trace float64 as float32).
    return int(sum(s.size * (itemsize if jnp.issubdtype(s.dtype, jnp.inexact)
                             else s.dtype.itemsize) for s in jax.tree_util.tree_leaves(shapes)))


def over_cap(cell: Cell) -> str | None:
    """Why the cell is not measured (its inputs exceed MAX_INPUT_GB), or None."""
    size = cell.batch * _bytes_per_matrix(cell.op, cell.rows, cell.cols, cell.nrhs, cell.dtype)
    if size > MAX_INPUT_GB * 1e9:
        return f"{cell}: inputs {size / 1e9:.3g} GB > {MAX_INPUT_GB:g} GB"
    return None


def space(ops: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
          sizes: Sequence[int] | None = None, batches: Sequence[int] | None = None,
          aspects: Sequence[float] | None = None,
          nrhs: Sequence[int] | None = None,
          square: bool = True) -> tuple[list[Cell], list[str]]:
    """The cells of the coarse pass in the order tune() measures them, and why the others of
    the space are left out (the input cap). Defaults: the module's SIZES, BATCHES (with
    SMALL_N_BATCHES up to SMALL_N_MAX), DTYPES, ASPECTS and NRHS; batches given are taken at
    every n. Square cells come first (none with `square` False), then the aspects in the order
    given, then more right-hand sides, within each n and batch; n and the batch grow slowest."""
    ops = list(ops or WORKLOADS)
    dtypes = [np.dtype(d).name for d in (dtypes or DTYPES)]
    aspects = [1.0] * square + [float(a) for a in (ASPECTS if aspects is None else aspects)
                                if a != 1]
    counts = list(nrhs or NRHS)
    cells = []
    for n in sorted(set(sizes or SIZES)):
        at_n = batches or (BATCHES + (SMALL_N_BATCHES if n <= SMALL_N_MAX else ()))
        for batch in sorted(set(at_n)):
            for shape in filter(None, (shape_of(n, aspect) for aspect in aspects)):
                for k in counts:
                    for op in ops:
                        workload = WORKLOADS[op]
                        if workload.fits(*shape) and (workload.solve or k == counts[0]):
                            cells += [Cell(op, dtype, batch, *shape, k if workload.solve else 1)
                                      for dtype in dtypes]
    verdicts = [(cell, over_cap(cell)) for cell in cells]
    return [c for c, why in verdicts if why is None], [why for _, why in verdicts if why]


def neighbours(cells: Sequence[Cell]) -> list[tuple[Cell, Cell]]:
    """The pairs of cells next to each other along n (batch, aspect, nrhs equal) or along the
    batch (n, aspect, nrhs equal) among `cells`, of one op, dtype and routine; in the order of
    `cells`."""
    lines: dict = {}
    for c in cells:
        lines.setdefault(("n", c.op, c.dtype, c.aspect, c.nrhs, c.batch), []).append(c)
        lines.setdefault(("batch", c.op, c.dtype, c.aspect, c.nrhs, c.n), []).append(c)
    pairs = []
    for (axis, *_), line in lines.items():
        line = sorted(line, key=lambda c: getattr(c, axis))
        pairs += [(lo, hi) for lo, hi in zip(line, line[1:]) if lo.routine == hi.routine]
    order = {c: i for i, c in enumerate(cells)}
    return sorted(pairs, key=lambda pair: (order[pair[0]], order[pair[1]]))


def midpoint(lo: Cell, hi: Cell) -> Cell | None:
    """The cell halfway between two neighbours in log scale (the geometric mean, rounded; along
    n the nearest n whose shape keeps the aspect), or None where no whole value lies between."""
    if lo.batch != hi.batch:
        mid = round(math.sqrt(lo.batch * hi.batch))
        return dataclasses.replace(lo, batch=mid) if lo.batch < mid < hi.batch else None
    target = round(math.sqrt(lo.n * hi.n))
    for distance in range(hi.n - lo.n):
        for n in (target - distance, target + distance):
            shape = shape_of(n, lo.aspect) if lo.n < n < hi.n else None
            if shape:
                return dataclasses.replace(lo, rows=shape[0], cols=shape[1])
    return None


def candidates(cell: Cell, lanes: Sequence[int],
               with_xla: bool = True) -> dict[str, tuple[str, int]]:
    """{candidate name: (strategy, lanes) to request} for one cell: the strategies that can run
    it (strategy.feasible: the extension's limits), each resolved by strategy.choose, so a name
    says what really runs (e.g. the one-launch kernels take no lanes) and lanes never exceed
    the batch."""
    routine, batch, shape = cell.routine, cell.batch, (cell.rows, cell.cols)
    nrhs = cell.nrhs if WORKLOADS[cell.op].solve else 0
    possible = _strategy.feasible(routine, *shape, nrhs, batch=batch)
    found = {_tables.XLA: (_tables.XLA, 1)} if with_xla else {}
    requests = [("sequential", 1)]
    # Our own kernels (LDL^T) also take single matrices: cuSOLVER's sytrf host-synchronises.
    single = routine in _strategy.SINGLE_MATRIX_KERNEL
    if (batch >= 2 or single) and "blocked" in possible:
        requests.append(("blocked", 1))
    if batch >= 2:
        requests += [(s, count) for s in ("looped", "batched") for count in lanes
                     if count <= batch and not (s == "looped" and count == 1)]
    elif single or _strategy.small_kernel(routine, *shape, nrhs, batch):  # one-launch kernels
        requests.append(("batched", 1))
    for strategy, count in requests:
        if strategy not in possible:
            continue
        choice = _strategy.choose(routine, batch, shape, cell.dtype, strategy, count, nrhs)
        found.setdefault(_tables.candidate_name(choice.strategy, choice.lanes), (strategy, count))
    return found


# --- measuring ----------------------------------------------------------------------------------

def _median_ms(fn, inputs, repeats: int, warmup: int,
               fastest_ms: float = math.inf) -> tuple[float, float]:
    """(median device ms, seconds of one call on the wall clock), repeats cut down for calls
    so slow that the full count would eat the budget of many cells, and to one for a call
    DOMINATED_FACTOR behind `fastest_ms`, the cell's fastest so far (HOPELESS_MIN_S)."""
    compiled = _timing.compiled_for_timing(fn, *inputs)  # the one compile device_time_ms runs
    jax.block_until_ready(compiled(*inputs))  # a first run
    probe = time.perf_counter()
    jax.block_until_ready(compiled(*inputs))
    call_s = time.perf_counter() - probe
    if call_s >= HOPELESS_MIN_S and call_s * 1e3 > DOMINATED_FACTOR * fastest_ms:
        repeats, warmup = 1, 0
    elif call_s > MAX_CALL_S / 4:
        repeats, warmup = MIN_REPEATS, 0
    times = _timing.device_time_ms(fn, *inputs, repeats=repeats, warmup=warmup)
    return statistics.median(times), call_s


_TIMING_ORDER = {"batched": 0, "blocked": 1, "looped": 2, _tables.XLA: 3, "sequential": 4}


def _timing_order(candidate: str) -> tuple:
    strategy, lanes = _tables.parse_candidate(candidate)
    return _TIMING_ORDER[strategy], -lanes


def _per_matrix(candidate: str) -> bool:
    return _tables.parse_candidate(candidate)[0] in ("sequential", "looped")


def _measure_cell(workload: Workload, cell: Cell, lanes, repeats: int, warmup: int, seed: int,
                  slow: dict, skipped: list, dominated: dict | None = None) -> dict[str, float]:
    """{candidate: median ms} for one cell. `slow` maps (op, dtype, candidate) to the cells
    where one call took over MAX_CALL_S, with its time there: such a candidate is not measured
    at cells at least as large in every dimension; for JAX's own, that time stands in as a
    lower bound where its lowering runs both cells alike (_xla_lower_bound). `dominated` maps
    (op, dtype, rows, cols, nrhs, candidate) to the batch from which a per-matrix candidate is
    left out (DOMINATED_FACTOR)."""
    dominated = {} if dominated is None else dominated
    inputs = jax.block_until_ready(workload.build(jax.random.key(seed), cell.batch, cell.rows,
                                                  cell.cols, cell.nrhs, cell.dtype))
    fns, bounds = {}, {}
    for name, (strategy, count) in candidates(cell, lanes,
                                              with_xla=workload.reference is not None).items():
        too_slow = [(c, ms) for c, ms in slow.get((cell.op, cell.dtype, name), ())
                    if cell.batch >= c.batch and cell.rows >= c.rows and cell.cols >= c.cols
                    and cell.nrhs >= c.nrhs]
        if too_slow:
            at = too_slow[0][0]
            bound = _xla_lower_bound(cell, too_slow) if name == _tables.XLA else None
            kept = "" if bound is None else f"; {bound:.4g} ms kept as a lower bound"
            skipped.append(f"{cell} {name}: one call took over {MAX_CALL_S:g} s at "
                           f"{at.batch}x{at.rows}x{at.cols}{kept}")
            if bound is not None:
                bounds[name] = bound
            continue
        lost_at = dominated.get((cell.op, cell.dtype, cell.rows, cell.cols, cell.nrhs, name))
        if lost_at is not None and cell.batch >= lost_at:
            continue  # (not listed: many per cell at large batches, and never a winner there)
        fns[name] = (workload.reference if name == _tables.XLA else
                     lambda *a, s=strategy, c=count: workload.ours(*a, strategy=s, lanes=c))
    # Compiling is most of a small cell's time, and XLA compiles outside the GIL: all the
    # candidates at once, then each timed alone (the timing reuses the compilation).
    with concurrent.futures.ThreadPoolExecutor(max(1, min(len(fns), COMPILE_THREADS))) as pool:
        compiled = {name: pool.submit(_timing.compiled_for_timing, fn, *inputs)
                    for name, fn in fns.items()}
    times = {}
    # The kinds that are usually fastest first, so that the slow ones meet a fastest time.
    for name in sorted(fns, key=_timing_order):
        fn = fns[name]
        try:
            compiled[name].result()
            times[name], call_s = _median_ms(fn, inputs, repeats, warmup,
                                             min(times.values(), default=math.inf))
        except Exception as exc:  # noqa: BLE001  (one candidate failing leaves the others)
            skipped.append(f"{cell} {name}: failed: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if call_s > MAX_CALL_S:
            slow.setdefault((cell.op, cell.dtype, name), []).append((cell, times[name]))
    best = min(times.values(), default=None)
    for name, ms in times.items():
        if _per_matrix(name) and ms > DOMINATED_FACTOR * best:
            dominated.setdefault((cell.op, cell.dtype, cell.rows, cell.cols, cell.nrhs, name),
                                 cell.batch)
    return {**times, **bounds} if times else {}


def _xla_lower_bound(cell: Cell, too_slow) -> float | None:
    """JAX's time at `cell` bounded from below by its times at smaller cells (`too_slow`: (cell,
    ms), each no larger in any dimension) where one call took over MAX_CALL_S, or None. More
    matrices or larger ones are no less work for the same program, so the bound holds where
    JAX's lowering runs both alike (_jax_lowering.same_call) for the same routine. `auto` takes
    a candidate only where it beats JAX's time at every point around a call
    (tables.Table.estimate): without a time there, JAX's own would run exactly where it is
    slowest (orgqr float32 of 16 2048 x 2048 matrices, H100 table: JAX 20.3 s, 8 lanes
    37.8 ms)."""
    routine = cell.routine
    if routine not in _jax_lowering.RULES:
        return None
    itemsize = np.dtype(cell.dtype).itemsize
    same = [ms for c, ms in too_slow if c.routine == routine and _jax_lowering.same_call(
        routine, cell.batch, cell.n, c.batch, c.n, itemsize)]
    return max(same, default=None)


class _Run:
    """One tune() run: the table as measured so far, the file it is written to after every
    cell, the budget, and what was skipped."""

    def __init__(self, table, path, gpu, key, lanes, repeats, warmup, remeasure, budget_s):
        self.table, self.path, self.gpu, self.key = table, path, gpu, key
        self.lanes, self.repeats, self.warmup = lanes, repeats, warmup
        self.remeasure, self.budget_s = remeasure, budget_s
        self.points = {(r, d, p.key): p for (r, d), ps in table.entries.items() for p in ps}
        self.started = time.perf_counter()
        self.done: set = set()  # cells measured (or given up) in this run
        self.skipped: list = []
        self.slow: dict = {}
        self.dominated: dict = {}

    def point(self, cell: Cell) -> _tables.Point | None:
        return self.points.get((cell.routine, cell.dtype, cell.key))

    def decision(self, cell: Cell) -> str | None:
        point = self.point(cell)
        return _tables.point_decision(cell.routine, point) if point is not None else None

    def _dominated_before(self, cell: Cell) -> None:
        """Records in `dominated` the per-matrix candidates of this cell that the table (an
        earlier run's points too) puts DOMINATED_FACTOR behind the best, from the points of
        smaller batches of this cell's shape or its neighbours in n. A per-matrix candidate makes
        one library call per matrix, and its lanes contend: a lane's call costs at least what it
        cost where as many lanes or fewer ran (sequential: one), on a matrix of this order or a
        smaller one, so the time per call and lane there, times the calls each lane makes here,
        bounds its time here from below; the best time there on a matrix of this order or a
        larger one, times the chunks of that batch this one holds, bounds the best time here
        from above. So no lane count is timed that cannot win, measured before or not, nor at an
        order the table lacks (looped:16 at 10^7 matrices after looped:4 at 1024: 30 s a call
        on the H200, where the best takes a millisecond; n = 3 between points at 2 and 4)."""
        per_call, ceiling = {}, math.inf  # {(kind, lanes): ms per call and lane}
        for p in self.table.entries.get((cell.routine, cell.dtype), ()):
            if (p.aspect, p.nrhs) != (cell.aspect, cell.nrhs) or p.batch >= cell.batch:
                continue
            if p.n >= cell.n:
                ceiling = min(ceiling,
                              min(p.times_ms.values()) * math.ceil(cell.batch / p.batch))
            if p.n > cell.n:
                continue
            for name, ms in p.times_ms.items():
                if _per_matrix(name):
                    kind, lanes = _tables.parse_candidate(name)
                    key = (kind, lanes)
                    per_call[key] = min(per_call.get(key, math.inf), ms * lanes / p.batch)
        for name in candidates(cell, self.lanes, with_xla=False):
            if not _per_matrix(name):
                continue
            kind, lanes = _tables.parse_candidate(name)
            floor = min((ms for (k, at), ms in per_call.items()
                         if k in (kind, "sequential") and at <= lanes), default=None)
            if floor is not None and floor * cell.batch / lanes > DOMINATED_FACTOR * ceiling:
                key = (cell.op, cell.dtype, cell.rows, cell.cols, cell.nrhs, name)
                self.dominated[key] = min(self.dominated.get(key, cell.batch), cell.batch)

    def measure(self, cell: Cell) -> None:
        """Measures the cell unless the table holds it already (or this run did), the input
        cap leaves it out or the budget is spent (both listed in `skipped`)."""
        if cell in self.done or (not self.remeasure and self.point(cell) is not None):
            return
        self.done.add(cell)
        why = over_cap(cell)
        if why is None and time.perf_counter() - self.started > self.budget_s:
            why = f"{cell}: budget of {self.budget_s:g} s spent"
        if why is not None:
            self.skipped.append(why)
            return
        self._dominated_before(cell)
        times = _measure_cell(WORKLOADS[cell.op], cell, self.lanes, self.repeats, self.warmup,
                              len(self.done), self.slow, self.skipped, self.dominated)
        if times:
            point = _tables.Point(cell.batch, cell.n, times, cell.aspect, cell.nrhs)
            self.table = self.table.merged(_tables.Table(
                self.gpu, f"tuned {self.path}", {(cell.routine, cell.dtype): [point]}, self.key))
            self.points[(cell.routine, cell.dtype, cell.key)] = next(
                p for p in self.table.entries[(cell.routine, cell.dtype)] if p.key == cell.key)
            # After every cell: a run cut short keeps every cell it finished.
            _tables.write_atomic(self.path, self.table.to_json())


def _refine(run: _Run, cells: Sequence[Cell], depth: int, progress: bool) -> list[Cell]:
    """Measures the midpoints between neighbouring cells whose points decide differently, level
    by level (each level's midpoints between the points of the levels before), to `depth`
    levels; returns the midpoints the table holds (measured now or by an earlier run)."""
    intervals = neighbours(cells)
    refined = []
    for level in range(1, depth + 1):
        todo = []
        for lo, hi in intervals:
            ends = run.decision(lo), run.decision(hi)
            mid = midpoint(lo, hi) if None not in ends and ends[0] != ends[1] else None
            if mid is not None:
                todo.append((lo, mid, hi))
        bar = _progress.progress(len(todo), f"tune {run.gpu}: refine {level}") \
            if progress and todo else None
        try:
            for _, mid, _ in todo:
                if bar:
                    bar.set_postfix_str(str(mid))
                    bar.update(1)
                run.measure(mid)
                if run.point(mid) is not None:
                    refined.append(mid)
        finally:
            if bar:
                bar.close()
        intervals = [pair for lo, mid, hi in todo for pair in ((lo, mid), (mid, hi))]
    return refined


@dataclasses.dataclass
class TuneResult:
    table: _tables.Table
    path: Path | None
    skipped: list  # "op dtype BxRxC[ nrhs K][ candidate]: why"
    seconds: float
    refined: list = dataclasses.field(default_factory=list)  # the refinement's cells


def tune(ops: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
         sizes: Sequence[int] | None = None, batches: Sequence[int] | None = None,
         budget_s: float = 1800.0, lanes: Sequence[int] = LANES, path=None,
         repeats: int = REPEATS, warmup: int = WARMUP, remeasure: bool = False,
         resume_from=None, progress: bool = True, *, aspects: Sequence[float] | None = None,
         nrhs: Sequence[int] | None = None, refine: bool = True,
         refine_depth: int = REFINE_DEPTH, ship: bool = False, square: bool = True,
         _allow_cpu: bool = False) -> TuneResult:
    """Measures every candidate strategy on this GPU and writes the table `auto` reads.

    ops: names from WORKLOADS (default all); dtypes: float32, float64, complex64, complex128
    (default all); sizes: n, the larger dimension (default SIZES, 2 to 4096); batches: batch
    sizes (default BATCHES, and SMALL_N_BATCHES up to 10^5 where n <= SMALL_N_MAX; batches
    given are taken at every n); aspects: rows / cols besides square, for the ops that take
    rectangular matrices (default ASPECTS; () for square only); square: False leaves the
    square cells out (an oblong space where the square cells of its sizes would cost most of
    the budget: svd of 64 x 3072 x 3072 through JAX's per-matrix loop); nrhs: right-hand-side
    counts for the solves (default NRHS); refine: measure, after the coarse pass, the midpoints
    between neighbouring points that decide differently, to `refine_depth` levels; budget_s:
    wall-clock budget, cells left when it runs out are reported as skipped (small n first, so a
    short budget still covers every op); lanes: lane counts to try; path: the file to write (default
    tables.cache_path(gpu), where `auto` looks). The file is rewritten (atomically) after every
    cell and merged with what it held for the same key; cells it already holds are not measured
    again unless `remeasure`, so an interrupted run goes on where it stopped (`resume_from`:
    another file of the same key to go on from, written to `path`). A candidate whose single
    call took more than MAX_CALL_S at a cell is not measured at larger cells of the same op and
    dtype; JAX's own time there stays as a lower bound where its lowering runs them alike
    (_xla_lower_bound). `ship`: `path` is a table shipped with the package
    (jax_cusolver_ms/tables/<gpu>.json): its points are kept whatever versions measured them,
    and the cells it lacks are added.
    Returns the table, the path, the cells (or candidates) skipped with the reason and the
    refinement's cells.

    `_allow_cpu` (tests only) runs on a machine without a GPU, timing JAX's CPU fallback.
    """
    gpu = _tables.gpu_name()
    if gpu is None:
        if not _allow_cpu:
            raise RuntimeError(
                "jax_cusolver_ms.tune measures the strategies on a GPU, and none is usable here "
                f"(JAX backend {jax.default_backend()!r}, CUDA extension loaded: "
                f"{_ffi.extension_loaded()}); without one every op runs JAX's own "
                "implementation")
        gpu = "cpu"
    ops = list(ops or WORKLOADS)
    unknown = [op for op in ops if op not in WORKLOADS]
    if unknown:
        raise ValueError(f"tune: unknown ops {unknown}; known: {sorted(WORKLOADS)}")
    dtypes = [np.dtype(d).name for d in (dtypes or DTYPES)]
    wrong = [d for d in dtypes if np.dtype(d) not in _primitive.SOLVER_DTYPES]
    if wrong:
        raise ValueError(f"tune: unsupported dtypes {wrong}; expected some of {DTYPES}")
    lanes = sorted({int(count) for count in lanes})
    if not lanes or min(int(v) for v in [*lanes, *(sizes or ()), *(batches or ()),
                                         *(nrhs or ())]) < 1:
        raise ValueError("tune: sizes, batches, lanes and nrhs must be >= 1 (and lanes given)")
    if not all(math.isfinite(float(a)) and float(a) > 0 for a in aspects or ()):
        raise ValueError(f"tune: aspects (rows / cols) must be > 0, got {list(aspects)}")
    if refine_depth < 0:
        raise ValueError(f"tune: refine_depth must be >= 0, got {refine_depth}")
    wide = [d for d in dtypes if d in ("float64", "complex128")]
    if wide and not jax.config.jax_enable_x64:
        raise ValueError(f"tune: {', '.join(wide)} need jax.config.update('jax_enable_x64', "
                         "True)")

    key = _tables.current_key(gpu)
    if ship and path is None:
        raise ValueError("tune: ship=True needs the shipped table's path")
    path = Path(path) if path is not None else _tables.cache_path(gpu)
    earlier = Path(resume_from) if resume_from is not None else path
    if ship:
        # A shipped table answers for its GPU model under any versions (tables.read_shipped):
        # what it holds stays, measured again only with `remeasure`.
        table = (_tables.Table.from_json(json.loads(earlier.read_text()), f"shipped {path}")
                 if earlier.exists() else _tables.Table(gpu, f"shipped {path}", {}, key,
                                                        _tables.gpu_arch()))
        if table.gpu != gpu:
            raise ValueError(f"tune: {earlier} is the table of {table.gpu!r}, not of this "
                             f"GPU ({gpu!r})")
    else:
        table = _tables.read_tuned(earlier, key) or _tables.Table(gpu, f"tuned {path}", {}, key)
    run = _Run(table, path, gpu, key, lanes, repeats, warmup, remeasure, budget_s)
    cells, left_out = space(ops, dtypes, sizes, batches, aspects, nrhs, square)
    run.skipped += left_out
    bar = _progress.progress(len(cells), f"tune {gpu}") if progress else None
    try:
        for cell in cells:
            if bar:
                bar.set_postfix_str(str(cell))
                bar.update(1)
            run.measure(cell)
    finally:
        if bar:
            bar.close()
    refined = _refine(run, cells, refine_depth, progress) if refine else []
    if not path.exists() or earlier != path:
        _tables.write_atomic(path, run.table.to_json())
    _tables.reload()
    return TuneResult(run.table, path, run.skipped, time.perf_counter() - run.started, refined)


# --- command line -------------------------------------------------------------------------------

def _ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def _ratios(text: str) -> list[float]:
    """"1/16,0.25,4": fractions or decimals."""
    return [float(fractions.Fraction(s.strip())) for s in text.split(",") if s.strip()]


def _names(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def _listed(values) -> str:
    return ",".join(f"{fractions.Fraction(v).limit_denominator()}" for v in values)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m jax_cusolver_ms.tune",
        description="Measure jax_cusolver_ms's strategies (and JAX's own lowering) on this GPU "
                    "and write the table `auto` reads (device-side timing, median of repeats): "
                    "a coarse pass over the space, small cells first, then more cells where the "
                    "winner changes between neighbouring ones.")
    p.add_argument("--ops", type=_names, default=None,
                   help=f"comma-separated, from {','.join(WORKLOADS)} (default: all)")
    p.add_argument("--dtypes", type=_names, default=None,
                   help="default: " + ",".join(DTYPES))
    p.add_argument("--sizes", type=_ints, default=None,
                   help="n, the larger dimension (default: " + ",".join(map(str, SIZES)) + ")")
    p.add_argument("--batches", type=_ints, default=None,
                   help="batch sizes, taken at every n (default: " + ",".join(map(str, BATCHES))
                        + ", and " + ",".join(map(str, SMALL_N_BATCHES)) +
                        f" where n <= {SMALL_N_MAX})")
    p.add_argument("--aspects", type=_ratios, default=None,
                   help="rows/cols besides square, for qr, ormqr, householder_product (tall "
                        "only) and svd (default: " + _listed(ASPECTS) + "; 1 for square only)")
    p.add_argument("--no-square", dest="square", action="store_false",
                   help="only the --aspects given: no square cells")
    p.add_argument("--nrhs", type=_ints, default=None,
                   help="right-hand sides for lu_solve, cho_solve and ldl_solve (default: " +
                        ",".join(map(str, NRHS)) + ")")
    p.add_argument("--no-refine", dest="refine", action="store_false",
                   help="only the coarse pass: no cells between neighbours that decide "
                        "differently")
    p.add_argument("--refine-depth", type=int, default=REFINE_DEPTH,
                   help=f"levels of midpoints between such neighbours (default {REFINE_DEPTH})")
    p.add_argument("--lanes", type=_ints, default=list(LANES),
                   help="lane counts (default: " + ",".join(map(str, LANES)) + ")")
    p.add_argument("--budget-s", type=float, default=1800.0,
                   help="wall-clock budget in seconds (default 1800); cells left are listed")
    p.add_argument("--repeats", type=int, default=REPEATS)
    p.add_argument("--resume-from", default=None,
                   help="an earlier file of this GPU and versions to go on from (default: --out)")
    p.add_argument("--remeasure", action="store_true",
                   help="measure again the cells the file already holds (default: go on "
                        "where an earlier run of the same file stopped)")
    p.add_argument("--out", default=None,
                   help="file to write (default: the per-user cache file auto reads, "
                        f"{_tables.cache_dir()}/tuned_<gpu>.json; ${_tables.CACHE_ENV} "
                        "moves the folder)")
    p.add_argument("--ship", action="store_true",
                   help="--out is the table shipped for this GPU model "
                        "(jax_cusolver_ms/tables/<gpu>.json): keep its points, add the cells "
                        "it lacks")
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    try:
        result = tune(ops=args.ops, dtypes=args.dtypes, sizes=args.sizes, batches=args.batches,
                      budget_s=args.budget_s, lanes=args.lanes, path=args.out,
                      repeats=args.repeats, remeasure=args.remeasure,
                      resume_from=args.resume_from, aspects=args.aspects, nrhs=args.nrhs,
                      refine=args.refine, refine_depth=args.refine_depth, ship=args.ship,
                      square=args.square)
    except (RuntimeError, ValueError) as exc:
        print(f"tune: {exc}", file=sys.stderr)
        return 2
    points = sum(len(v) for v in result.table.entries.values())
    print(f"wrote {result.path}: {points} measured points, {len(result.refined)} of them "
          f"between neighbours that decide differently ({result.seconds:.0f} s)")
    for line in result.skipped:
        print(f"  skipped {line}")
    return 0
