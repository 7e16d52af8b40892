"""Measure the strategies on this GPU and write the table `auto` reads (tables.py).

    import jax_cusolver_ms as jcm
    jcm.tune()                                   # every op, float32 and float64, the full grid
    jcm.tune(ops=["lu_factor"], dtypes=["float32"], sizes=[256, 1024], budget_s=120)

    python -m jax_cusolver_ms.tune --help          (the command line is main() below)

For every cell (op x dtype x batch x n) it times each candidate: JAX's own function ("xla"),
"sequential", "looped:L" and "batched:L" for the lane counts asked for (never more lanes than
matrices), each on the device (CUDA events around the call, jax_cusolver_ms.timing), after
warm-up, as the median of repeats. The table goes to a per-user cache file, one per GPU model,
keyed by the GPU and the cuSOLVER / cuBLAS / jax versions and written atomically; it is merged
with an earlier one of the same key, and `auto` reads it from the next lowering on.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import _ffi, _progress, strategy as _strategy, tables as _tables, timing as _timing

SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048)
BATCHES = (1, 4, 16, 64, 256)
DTYPES = ("float32", "float64")
LANES = (1, 2, 4, 8, 16)
REPEATS = 7
WARMUP = 2
MIN_REPEATS = 3
MAX_INPUT_GB = 4.0
# A candidate whose one call takes longer than this is not measured at larger cells of the same
# op and dtype (it would eat the budget of many others); above a quarter of it, fewer repeats.
MAX_CALL_S = 20.0


# --- workloads: the public op timed for each routine, its inputs and JAX's own function ----------

def _general(key, batch, n, dtype):
    return (jax.random.normal(key, (batch, n, n), dtype),)


def _spd(key, batch, n, dtype):
    (a,) = _general(key, batch, n, dtype)
    return (jnp.matmul(a, jnp.swapaxes(a, -1, -2)) / n + jnp.eye(n, dtype=dtype),)


def _symmetric(key, batch, n, dtype):
    (a,) = _general(key, batch, n, dtype)
    return ((a + jnp.swapaxes(a, -1, -2)) / 2,)


def _rhs(key, batch, n, dtype):
    return jax.random.normal(key, (batch, n, 1), dtype)


def _lu_and_rhs(key, batch, n, dtype):
    ka, kb = jax.random.split(key)
    lu, piv = jax.scipy.linalg.lu_factor(_general(ka, batch, n, dtype)[0])
    return lu, piv, _rhs(kb, batch, n, dtype)


def _cholesky_and_rhs(key, batch, n, dtype):
    ka, kb = jax.random.split(key)
    return jnp.linalg.cholesky(_spd(ka, batch, n, dtype)[0]), _rhs(kb, batch, n, dtype)


def _ldl_and_rhs(key, batch, n, dtype):
    ka, kb = jax.random.split(key)
    ld, piv = _jcm().ldl_factor(_symmetric(ka, batch, n, dtype)[0])
    return ld, piv, _rhs(kb, batch, n, dtype)


def _reflectors(key, batch, n, dtype):
    h, taus = jnp.linalg.qr(_general(key, batch, n, dtype)[0], mode="raw")
    return jnp.swapaxes(h, -1, -2), taus


def _jcm():
    import jax_cusolver_ms

    return jax_cusolver_ms


@dataclasses.dataclass(frozen=True)
class Workload:
    """One public op: `ours(*inputs, strategy=, lanes=)`, JAX's `reference(*inputs)` (None
    where JAX has none: no "xla" candidate then) and `build(key, batch, n, dtype)`. The routine
    it tunes is strategy.routine_of(op, n, n) (eigh and svd change routine with n)."""
    op: str
    ours: Callable[..., Any]
    reference: Callable[..., Any] | None
    build: Callable[..., tuple]


WORKLOADS = {w.op: w for w in [
    Workload("lu_factor", lambda a, **kw: _jcm().lu_factor(a, **kw),
             jax.scipy.linalg.lu_factor, _general),
    Workload("lu_solve", lambda lu, piv, b, **kw: _jcm().lu_solve((lu, piv), b, **kw),
             lambda lu, piv, b: jax.scipy.linalg.lu_solve((lu, piv), b), _lu_and_rhs),
    Workload("cholesky", lambda a, **kw: _jcm().cholesky(a, **kw), jnp.linalg.cholesky, _spd),
    Workload("cho_solve", lambda c, b, **kw: _jcm().cho_solve((c, True), b, **kw),
             lambda c, b: jax.scipy.linalg.cho_solve((c, True), b), _cholesky_and_rhs),
    Workload("qr", lambda a, **kw: _jcm().qr(a, mode="r", **kw),
             lambda a: jnp.linalg.qr(a, mode="r"), _general),
    Workload("householder_product",
             lambda a, taus, **kw: _jcm().householder_product(a, taus, **kw),
             jax.lax.linalg.householder_product, _reflectors),
    Workload("ldl_factor", lambda a, **kw: _jcm().ldl_factor(a, **kw), None, _symmetric),
    Workload("ldl_solve", lambda ld, piv, b, **kw: _jcm().ldl_solve(ld, piv, b, **kw), None,
             _ldl_and_rhs),
    Workload("eigh", lambda a, **kw: _jcm().eigh(a, **kw), jnp.linalg.eigh, _symmetric),
    Workload("svd", lambda a, **kw: _jcm().svd(a, **kw), jnp.linalg.svd, _general),
    Workload("eig", lambda a, **kw: _jcm().eig(a, **kw), jnp.linalg.eig, _general),
]}


def candidates(op: str, batch: int, n: int, dtype: str, lanes: Sequence[int],
               with_xla: bool = True) -> dict[str, tuple[str, int]]:
    """{candidate name: (strategy, lanes) to request} for one cell: the strategies that can run
    it (strategy.feasible: the extension's limits), each resolved by strategy.choose, so a name
    says what really runs (e.g. the one-launch kernels take no lanes) and lanes never exceed
    the batch."""
    routine = _strategy.routine_of(op, n, n)
    possible = _strategy.feasible(routine, n, n)
    found = {_tables.XLA: (_tables.XLA, 1)} if with_xla else {}
    requests = [("sequential", 1)]
    # Our own kernels (LDL^T) also take single matrices: cuSOLVER's sytrf host-synchronises.
    single = routine in _strategy.SINGLE_MATRIX_KERNEL
    if (batch >= 2 or single) and "blocked" in possible:
        requests.append(("blocked", 1))
    if batch >= 2:
        requests += [(s, count) for s in ("looped", "batched") for count in lanes
                     if count <= batch and not (s == "looped" and count == 1)]
    elif single or _strategy.small_kernel(routine, n, n):  # the one-launch kernels too
        requests.append(("batched", 1))
    for strategy, count in requests:
        if strategy not in possible:
            continue
        choice = _strategy.choose(routine, batch, (n, n), dtype, strategy, count)
        found.setdefault(_tables.candidate_name(choice.strategy, choice.lanes), (strategy, count))
    return found


# --- measuring ----------------------------------------------------------------------------------

def _median_ms(fn, inputs, repeats: int, warmup: int) -> tuple[float, float]:
    """(median device ms, seconds of one call on the wall clock), repeats cut down for calls
    so slow that the full count would eat the budget of many cells."""
    compiled = _timing.compiled_for_timing(fn, *inputs)  # the one compile device_time_ms runs
    jax.block_until_ready(compiled(*inputs))  # a first run
    probe = time.perf_counter()
    jax.block_until_ready(compiled(*inputs))
    call_s = time.perf_counter() - probe
    if call_s > MAX_CALL_S / 4:
        repeats, warmup = MIN_REPEATS, 0
    times = _timing.device_time_ms(fn, *inputs, repeats=repeats, warmup=warmup)
    return statistics.median(times), call_s


def _input_bytes(build, batch, n, dtype) -> int:
    shapes = jax.eval_shape(lambda: build(jax.random.key(0), batch, n, dtype))
    return int(sum(s.size * s.dtype.itemsize for s in jax.tree_util.tree_leaves(shapes)))


@dataclasses.dataclass
class TuneResult:
    table: _tables.Table
    path: Path | None
    skipped: list  # "op dtype BxN[ candidate]: why"
    seconds: float


def tune(ops: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
         sizes: Sequence[int] | None = None, batches: Sequence[int] | None = None,
         budget_s: float = 1800.0, lanes: Sequence[int] = LANES, path=None,
         repeats: int = REPEATS, warmup: int = WARMUP, remeasure: bool = False,
         resume_from=None, progress: bool = True, _allow_cpu: bool = False) -> TuneResult:
    """Measures every candidate strategy on this GPU and writes the table `auto` reads.

    ops: names from WORKLOADS (default all); dtypes: "float32" / "float64"; sizes: matrix
    orders n; batches: batch sizes; budget_s: wall-clock budget, cells left when it runs out
    are reported as skipped (small n first, so a short budget still covers every op); lanes:
    lane counts to try; path: the file to write (default tables.cache_path(gpu), where `auto`
    looks). The file is rewritten (atomically) after every cell and merged with what it held
    for the same key; cells it already holds are not measured again unless `remeasure`, so an
    interrupted run goes on where it stopped (`resume_from`: another file of the same key to go
    on from, written to `path`). A candidate whose single call took more than
    MAX_CALL_S at a cell is not measured at larger cells of the same op and dtype. Returns the
    table, the path and the cells (or candidates) skipped with the reason.

    `_allow_cpu` (tests only) runs on a machine without a GPU, timing JAX's CPU fallback.
    """
    gpu = _tables.gpu_name()
    if gpu is None:
        if not _allow_cpu:
            raise RuntimeError(
                "jax_cusolver_ms.tune measures the strategies on a GPU, and none is usable here "
                f"(JAX backend {jax.default_backend()!r}, CUDA extension loaded: "
                f"{_ffi.extension_loaded()}); `auto` uses its heuristic rules without one")
        gpu = "cpu"
    ops = list(ops or WORKLOADS)
    unknown = [op for op in ops if op not in WORKLOADS]
    if unknown:
        raise ValueError(f"tune: unknown ops {unknown}; known: {sorted(WORKLOADS)}")
    dtypes = [np.dtype(d).name for d in (dtypes or DTYPES)]
    sizes = sorted(int(n) for n in (sizes or SIZES))
    batches = sorted(int(b) for b in (batches or BATCHES))
    lanes = sorted({int(count) for count in lanes})
    if not sizes or not batches or not lanes or min(sizes + batches + lanes) < 1:
        raise ValueError("tune: sizes, batches and lanes must be non-empty and >= 1")
    if any(d == "float64" for d in dtypes) and not jax.config.jax_enable_x64:
        raise ValueError("tune: float64 needs jax.config.update('jax_enable_x64', True)")

    key = _tables.current_key(gpu)
    path = Path(path) if path is not None else _tables.cache_path(gpu)
    earlier = Path(resume_from) if resume_from is not None else path
    table = _tables.read_tuned(earlier, key) or _tables.Table(gpu, f"tuned {path}", {}, key)
    measured_before = {(k, p.batch, p.n) for k, points in table.entries.items() for p in points}
    # Small matrices first: a budget that runs out leaves the large cells, of every op.
    grid = [(n, b, op, d) for n in sizes for b in batches for op in ops for d in dtypes]
    skipped, slow = [], {}
    started = time.perf_counter()
    bar = _progress.progress(len(grid), f"tune {gpu}") if progress else None
    try:
        for index, (n, batch, op, dtype) in enumerate(grid):
            where = f"{op} {dtype} {batch}x{n}"
            routine = _strategy.routine_of(op, n, n)
            if bar:
                bar.set_postfix_str(where)
                bar.update(1)
            if time.perf_counter() - started > budget_s:
                skipped += [f"{o} {d} {b}x{m}: budget of {budget_s:g} s spent"
                            for m, b, o, d in grid[index:]]
                break
            if not remeasure and ((routine, dtype), batch, n) in measured_before:
                continue
            times = _measure_cell(WORKLOADS[op], batch, n, dtype, lanes, repeats, warmup,
                                  index, slow, skipped)
            if times:
                point = _tables.Point(batch, n, times)
                table = table.merged(_tables.Table(gpu, f"tuned {path}",
                                                   {(routine, dtype): [point]}, key))
                # After every cell: a run cut short keeps every cell it finished.
                _tables.write_atomic(path, table.to_json())
    finally:
        if bar:
            bar.close()
    if not path.exists() or earlier != path:
        _tables.write_atomic(path, table.to_json())
    _tables.reload()
    return TuneResult(table, path, skipped, time.perf_counter() - started)


def _measure_cell(workload: Workload, batch: int, n: int, dtype: str, lanes, repeats: int,
                  warmup: int, seed: int, slow: dict, skipped: list) -> dict[str, float]:
    """{candidate: median ms} for one cell. `slow` maps (op, dtype, candidate) to the cells
    where one call took over MAX_CALL_S: such a candidate is not measured at larger ones."""
    where = f"{workload.op} {dtype} {batch}x{n}"
    size = _input_bytes(workload.build, batch, n, dtype)
    if size > MAX_INPUT_GB * 1e9:
        skipped.append(f"{where}: inputs {size / 1e9:.3g} GB > {MAX_INPUT_GB:g} GB")
        return {}
    inputs = jax.block_until_ready(workload.build(jax.random.key(seed), batch, n, dtype))
    times = {}
    for name, (strategy, count) in candidates(workload.op, batch, n, dtype, lanes,
                                              with_xla=workload.reference is not None).items():
        too_slow = [(b, m) for b, m in slow.get((workload.op, dtype, name), ())
                    if batch >= b and n >= m]
        if too_slow:
            skipped.append(f"{where} {name}: one call took over {MAX_CALL_S:g} s at "
                           f"{too_slow[0][0]}x{too_slow[0][1]}")
            continue
        fn = (workload.reference if name == _tables.XLA else
              lambda *a, s=strategy, c=count: workload.ours(*a, strategy=s, lanes=c))
        try:
            times[name], call_s = _median_ms(fn, inputs, repeats, warmup)
        except Exception as exc:  # noqa: BLE001  (one candidate failing leaves the others)
            skipped.append(f"{where} {name}: failed: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if call_s > MAX_CALL_S:
            slow.setdefault((workload.op, dtype, name), []).append((batch, n))
    return times


# --- command line -------------------------------------------------------------------------------

def _ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def _names(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m jax_cusolver_ms.tune",
        description="Measure jax_cusolver_ms's strategies (and JAX's own lowering) on this GPU "
                    "and write the table `auto` reads (device-side timing, median of repeats).")
    p.add_argument("--ops", type=_names, default=None,
                   help=f"comma-separated, from {','.join(WORKLOADS)} (default: all)")
    p.add_argument("--dtypes", type=_names, default=None, help="default: float32,float64")
    p.add_argument("--sizes", type=_ints, default=None,
                   help="matrix orders n (default: " + ",".join(map(str, SIZES)) + ")")
    p.add_argument("--batches", type=_ints, default=None,
                   help="batch sizes (default: " + ",".join(map(str, BATCHES)) + ")")
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
                        "moves the folder). To ship a table: "
                        "--out jax_cusolver_ms/tables/<gpu>.json")
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    try:
        result = tune(ops=args.ops, dtypes=args.dtypes, sizes=args.sizes, batches=args.batches,
                      budget_s=args.budget_s, lanes=args.lanes, path=args.out,
                      repeats=args.repeats, remeasure=args.remeasure,
                      resume_from=args.resume_from)
    except (RuntimeError, ValueError) as exc:
        print(f"tune: {exc}", file=sys.stderr)
        return 2
    points = sum(len(v) for v in result.table.entries.values())
    print(f"wrote {result.path}: {points} measured points ({result.seconds:.0f} s)")
    for line in result.skipped:
        print(f"  skipped {line}")
    return 0
