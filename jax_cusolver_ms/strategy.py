"""How `auto` picks a strategy and lane count for a call shape, and `explain()` to say why.

The choice is made when the op is lowered (the batch is then complete, vmap included) and is a
static attribute of the FFI call: it never measures anything during a user's jitted call, and it
is the same for equal shapes. `auto` reads the measured tables (tables.py: the user's tuned
table laid over the one shipped for the GPU model) by one rule: it leaves JAX's own lowering
only where the measurements on both sides of the call agree that another strategy beats JAX by
a margin, and takes JAX's lowering wherever they do not or nothing was measured around the
call. The hand-written rules below (the "heuristic") answer only where JAX has no lowering of
its own (LDL^T) or a lane count is given with `auto`, and no table covers the call.

What the extension can run is not decided here: the strategies, which of them each routine has
and on which shapes (each kernel's largest n, square-only and one-right-hand-side APIs, the
lower-triangle-only LDL^T kernels) are defined once in C++ (ffi/core/limits.h) and read through
`_jcm_limits` (`limits()`, `infeasible()`, `small_kernel()` below). A strategy asked for
explicitly (keyword, `config` or environment) that cannot run a call is a ValueError at
lowering; `auto` only considers the ones that can.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import warnings

import numpy as np

from . import _ffi
from . import settings as _config
from . import tables as _tables

# --- the measured policy of `auto` (the heuristic rules) ------------------------------------------
#
# Measurements cited here are the H100's (benchmarks/results/H100/, the H100 report, where the
# grid has the cell), float32 unless said.

# From this n on the blocked algorithm is the heuristic's choice (any batch, single matrices
# included). ldl_factor 64x1024: the ?sytf2 kernel 122 ms (it streams the trailing matrix through
# one SM per column), 8 lanes of cuSOLVER sytrf 639 ms, JAX's LU 82 ms. The blocked solve: its
# steps run on a block's rows in shared memory, the unblocked kernel's over the whole of B; the
# solve alone, unblocked / blocked ms: 1x2048 11.7 / 4.60, 4x2048 21.1 / 5.20, 64x1024 6.63 /
# 3.04, 256x512 2.22 / 1.62, but 64x256 0.43 / 0.53, 1x256 0.40 / 0.44 (float64 alike): from
# n = 512 on. ldl_factor, blocked / the ?sytf2 kernel, with the panel in shared memory: 1x128
# 0.219 / 0.263 ms, 256x128 0.270 / 0.349, float64 256x128 0.332 / 0.686: sytrf's from n = 128.
# `auto` takes potrf's and getrf's blocked algorithms where a measured table says they win.
BLOCKED_MIN_N = {"sytrf": 128, "sytrs": 512}
# Up to this many matrices the blocked solve is LAPACK ?sytrs2's route (the factor converted
# once, cuBLAS TRSMs), which beats the unblocked kernel from n = 128 (the solve alone,
# unblocked / TRSM route: 1x128 121 / 75 us, 1x256 565 / 110, 4x256 570 / 240).
BLOCKED_SMALL_BATCH = {"sytrs": (4, 128)}  # routine -> (most matrices, from n)
# Routines JAX has no lowering of its own for: "xla" is never a candidate (a benchmark times
# JAX's LU next to them, which a table must not take for theirs).
NO_XLA = {"sytrf", "sytrs"}
# `auto` may also answer "xla": JAX's own lowering is the fastest for that call (e.g. getrs with
# many right-hand sides, where XLA's batched cuBLAS triangular solves beat cuSOLVER getrs).
XLA = "xla"

# Largest n at which the batched strategy still beats lanes, per routine, for batch >= 2; a
# routine with a batched path and no entry takes it at every n it can (core/limits.h).
BATCHED_MAX_N = {
    # cublasSgetrfBatched 64x512 9.15 ms vs 23.3 ms on 8 lanes, 64x1024 71.5 ms vs 42.4 ms.
    "getrf": 512,
    "getrs": 512,
    # potrfBatched (what JAX uses) beats 8 lanes up to n~1024: 64x1024 3.61 ms vs 5.54 ms,
    # 16x2048 7.63 ms vs 6.08 ms.
    "potrf": 1024,
    "potrs": 1024,   # potrsBatched takes one right-hand side only; more go to lanes / XLA
    # The batched strategy for geqrf / orgqr / ormqr is this project's ?geqr2 / ?org2r / ?orm2r
    # kernels, the matrix in shared memory where it fits. qr (geqrf + orgqr), kernels / JAX / 8
    # lanes: 64x64 0.30 / 1.57 / 3.4 ms, 64x128 1.15 / 9.79 / 11.0, 256x64 0.33 / 1.85 / 12.4,
    # 64x256 6.99 / 49.3 / 9.28 (global memory from here), 16x512 63.3 / 259 / 5.59. In shared
    # memory (n <= 128 here) a launch takes about the same time for any batch up to the SM
    # count; in global memory it loses to lanes on small batches: the measured table decides.
    "geqrf": 128,
    "orgqr": 128,
    "ormqr": 128,
    # cusolverDnXsyevBatched (what JAX 0.11 uses above n = 32) beat Xsyevd on 8 lanes at every
    # size measured (64x128 vs 29.4 ms looped, 64x512 28.6 vs 198 ms, 16x1024 59.2 ms); at batch
    # 4 the hybrid (XsyevBatched on 4 lanes) wins 2.3-3.3x from n = 256 (float64) and 512
    # (float32), at 16x2048 and 64x2048 float64 JAX's own does (303 / 776 ms vs 333 / 750 ms
    # hybrid, within the table's XLA margin). 4x4096: not measured.
    "syevd": 2048,
    # The batched LDL^T kernels (cuSOLVER has none) win at every n they take: cuSOLVER's sytrf /
    # Xsytrs host-synchronise. ldl_factor, kernel / 8 lanes: 64x64 0.14 / 31.5 ms, 64x128 0.34 /
    # 79.1, 64x256 1.04 / 148; 16x512 kernel 8.6. The Jacobi kernels (syevj, gesvdj: one block
    # per matrix) replace syevjBatched / gesvdjBatched, JAX's own choice for batches there.
}
# Double precision (float64, complex128) overrides, where the crossover moves: float64
# getrfBatched 64x1024 33.9 ms vs 49.9 ms on 8 lanes; 16x2048 JAX 181 ms vs 28.5 ms on lanes.
BATCHED_MAX_N_DOUBLE = {
    "getrf": 1024,
    "getrs": 1024,
}
# Batched paths that are this project's own kernels and win even for a single matrix (cuSOLVER's
# sytrf / Xsytrs / syevj / gesvdj host-synchronise; a single QR goes to cuSOLVER on XLA's
# stream, as JAX's own).
SINGLE_MATRIX_KERNEL = {"sytrf", "sytrs", "syevj", "gesvdj"}

# eigh with implementation=None takes the Jacobi solver (syevj / our kernel) up to this n and
# divide and conquer (Xsyevd / XsyevBatched) above: JAX's own rule on CUDA, so `auto` meets JAX
# on its own algorithm at every size. To be measured: XsyevBatched at n <= 32.
EIGH_JACOBI_MAX_N = 32

# Public op names -> the routine whose strategy they follow.
ROUTINE_OF = {"lu": "getrf", "lu_factor": "getrf", "det": "getrf", "slogdet": "getrf",
              "lu_solve": "getrs", "solve": "getrs", "inv": "getrs",
              "cholesky": "potrf", "cho_factor": "potrf", "cho_solve": "potrs",
              "qr": "geqrf", "householder_product": "orgqr", "qr_multiply": "ormqr",
              "ldl_factor": "sytrf", "ldl_solve": "sytrs",
              "eigh": "syevd", "eigvalsh": "syevd", "lax_eigh": "syevd",
              "eig": "geev", "eigvals": "geev", "lax_eig": "geev",
              "solve_triangular": "trsm", "triangular_solve": "trsm",
              "generalized_eigh": "sygvd"}
# Public ops built on the SVD: their routine depends on the shape (see svd_routine).
SVD_OPS = {"svd", "svdvals", "pinv", "matrix_rank", "lstsq", "norm", "cond"}
EIGH_OPS = {"eigh", "eigvalsh", "lax_eigh"}

# SVD algorithms (jax.lax.linalg.SvdAlgorithm's names, lower case) and the routine each runs.
SVD_ALGORITHMS = ("default", "qr", "jacobi")
# "default" runs Jacobi (gesvdj) up to this max(m, n) and QR iteration (gesvd) above, as JAX does
# on CUDA (NVIDIA GTC 2019 s9226, slide 5). Sgesvdj 16x512 on 8 lane threads 48.8 ms vs Xgesvd
# 239 ms. The crossover above 1024 is still to be measured.
SVD_JACOBI_MAX_N = 1024

# det up to this n under `auto` is the closed form (JAX's own det at n 2 and 3): one elementwise
# pass over the batch, where any factorization is several launches and a guard around them.
DET_CLOSED_FORM_MAX_N = 3

# inv up to this n under `auto` is JAX's own end to end: 64x128 JAX 0.49 ms vs 0.60 ms for our
# getrf + XLA's triangular solves (64x256 and up: equal or faster here).
INV_XLA_MAX_N = 128


# --- the extension's limits (ffi/core/limits.h, through _jcm_limits) ------------------------------

def _require_limits(what: str):
    if _ffi.limits is None:
        raise RuntimeError(f"{what} needs the extension's limits (the compiled module "
                           "jax_cusolver_ms._jcm_limits); this is a source checkout without a "
                           "build: every op runs JAX's own implementation")
    return _ffi.limits


@functools.lru_cache(maxsize=None)
def limits() -> dict:
    """{routine: {"strategies": (...), "batched": what it runs, "batched_max_n", ...}}: each
    routine's strategies and limits as the extension defines them (_jcm_limits.routines())."""
    return dict(_require_limits("strategy.limits()").routines())


@functools.lru_cache(maxsize=None)
def strategy_values() -> dict:
    """{strategy name: the value of the FFI attribute `strategy`}: the one mapping of names to the
    C++ enum (ffi/core/limits.h Strategy)."""
    strategies = _require_limits("strategy.strategy_values()").strategies()
    return {name: info["value"] for name, info in strategies.items()}


def small_kernel(op: str, rows: int, cols: int, nrhs: int = 0, batch: int = 1) -> bool:
    """Whether `op`'s batched strategy runs this project's one-launch small-matrix kernel here."""
    return _ffi.limits is not None and op in limits() and bool(
        _ffi.limits.small_kernel(op, int(rows), int(cols), int(nrhs), int(batch)))


def infeasible(routine: str, strategy: str, rows: int, cols: int, nrhs: int = 0,
               lower: bool = True, left: bool = True, batch: int = 1) -> str | None:
    """Why `strategy` cannot run `routine` on `batch` rows x cols matrices (the extension's own
    answer, ffi/core/limits.h: the paths each strategy has, and the sizes its int (32-bit) APIs
    and grids take), or None where it can; the batched strategy can wherever its one-launch
    small-matrix kernel takes the call."""
    if strategy == "batched" and small_kernel(routine, rows, cols, nrhs, batch):
        return None
    why = _require_limits("strategy.infeasible()").infeasible(
        routine, strategy, int(rows), int(cols), int(nrhs), bool(lower), bool(left), int(batch))
    if why is None:
        return None
    limit = limits()[routine]
    if strategy == "batched" and limit["batched"]:
        why += f" ({limit['batched']}"
        why += f", n <= {limit['batched_max_n']})" if limit["batched_max_n"] else ")"
    elif strategy == "blocked" and limit["blocked"]:
        why += f" ({limit['blocked']})"
    return why


def feasible(routine: str, rows: int, cols: int, nrhs: int = 0, lower: bool = True,
             left: bool = True, batch: int = 1) -> tuple:
    """The strategies that can run `routine` on this shape, in the extension's order."""
    return tuple(s for s in strategy_values()
                 if infeasible(routine, s, rows, cols, nrhs, lower, left, batch) is None)


def svd_routine(algorithm: str, rows: int, cols: int) -> str:
    """The cuSOLVER routine ("gesvdj" or "gesvd") that `algorithm` runs for a rows x cols matrix."""
    if algorithm not in SVD_ALGORITHMS:
        raise ValueError(f"svd: unknown algorithm {algorithm!r}; expected one of {SVD_ALGORITHMS}")
    if algorithm == "default":
        return "gesvdj" if max(rows, cols) <= SVD_JACOBI_MAX_N else "gesvd"
    return "gesvdj" if algorithm == "jacobi" else "gesvd"


def routine_of(op: str, rows: int, cols: int) -> str:
    """The cuSOLVER routine a public op (or a routine name) runs for a rows x cols matrix."""
    if op in SVD_OPS:
        return svd_routine("default", rows, cols)
    if op in EIGH_OPS:
        return "syevj" if max(rows, cols) <= EIGH_JACOBI_MAX_N else "syevd"
    return ROUTINE_OF.get(op, op)


_SOLVES = {"getrs", "potrs", "sytrs", "trsm"}  # the routines that take right-hand sides (nrhs)


def _op_name(op: str, routine: str) -> str:
    """How messages name a call: the public op as called, else the routine and its public ops."""
    if op != routine:
        return op
    public = sorted(o for o, r in ROUTINE_OF.items() if r == routine)
    if routine in ("syevd", "syevj"):
        public = sorted(EIGH_OPS)
    elif routine in ("gesvd", "gesvdj"):
        public = sorted(SVD_OPS)
    return f"{routine} ({', '.join(public)})" if public else routine


def for_part(routine: str, params: dict) -> dict:
    """The strategy parameters of `routine` as a later part of a composite op (getrs in solve and
    inv): the op's strategy where the routine has that strategy at all, else `auto` (the
    strategy then applies to the op's factorization only)."""
    strategy, lanes = _config.resolve(params.get("strategy"), params.get("lanes"))
    if strategy != "auto" and _ffi.limits is not None and \
            strategy not in limits()[routine]["strategies"]:
        strategy = "auto"
    return dict(params, strategy=strategy, lanes=lanes)


# --- the choice -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Choice:
    op: str
    batch: int
    shape: tuple
    dtype: str
    strategy: str
    lanes: int
    reason: str
    # "user" (keyword / config), "shipped table <gpu> (<file>)", "tuned <path>", "heuristic" or
    # "limits" (no strategy takes the call's sizes)
    source: str
    # The estimated times behind a table's choice, fastest first: ((candidate, ms), ...), where
    # a candidate is "xla", "sequential", "blocked", "looped:L" or "batched:L".
    times_ms: tuple = ()
    nrhs: int = 0  # right-hand sides, for the solves
    # Where this process would not run the choice (explain() without `gpu`): what runs instead,
    # e.g. JAX's own CPU implementation on a machine without a GPU.
    fallback: str = ""
    # Which rule decided: "measured win" (the points around the call agree a candidate beats
    # JAX by the margin), "no agreement" (they do not: JAX's lowering), "outside measured"
    # (nothing measured around the call: JAX's lowering), "fastest measured" (JAX's lowering
    # is no candidate), "carried to a larger batch" (a win measured at a smaller batch that
    # holds by bounds on the times at the call's), "heuristic" (routines JAX has no
    # lowering of, or lanes given, where no table answers), "closed form" (det of n <= 3),
    # "limits", "user" or "no extension".
    rule: str = ""

    @property
    def uses_ffi(self) -> bool:
        return self.strategy != XLA

    @property
    def runs_small_kernel(self) -> bool:
        """The batched strategy's one-launch kernel (no guard, no lanes)."""
        return self.strategy == "batched" and small_kernel(self.op, *self.shape, self.nrhs,
                                                           self.batch)

    def ffi_attributes(self) -> dict:
        """The FFI call's `strategy` (the C++ enum's value of the name) and `lanes` attributes."""
        return {"strategy": strategy_values()[self.strategy], "lanes": self.lanes}

    def __str__(self):
        text = (f"{self.op} {self.dtype} batch={self.batch} matrix={self.shape}: "
                f"{self.strategy} on {self.lanes} lane(s) [{self.rule}; {self.source}] - "
                f"{self.reason}")
        if self.times_ms:
            text += "; ms: " + ", ".join(f"{c} {t:.3g}" for c, t in self.times_ms)
        if self.fallback:
            text += f"; here: {self.fallback}"
        return text


def choose(op: str, batch: int, shape, dtype, strategy: str | None = None,
           lanes: int | None = None, nrhs: int = 0, *, left: bool = True,
           lower: bool = True) -> Choice:
    """The strategy and lane count for `op` on `batch` matrices of `shape` (rows, cols);
    `nrhs` is the number of right-hand sides for the solve ops, `left` ormqr's side, `lower`
    the triangle sytrf / sytrs read (their batched and blocked paths read the lower one). A strategy
    asked for that cannot run the call is a ValueError naming the op and why."""
    shape = tuple(int(d) for d in shape)
    rows, cols = shape
    if op == "det" and 1 <= rows == cols <= DET_CLOSED_FORM_MAX_N:
        # Pure JAX: the same with or without the extension.
        strategy, lanes = _config.resolve(strategy, lanes, op)
        if strategy == "auto" and not lanes:
            return Choice(op, batch, shape, np.dtype(dtype).name, XLA, 1,
                          f"n <= {DET_CLOSED_FORM_MAX_N}: the closed-form determinant, one "
                          "elementwise pass (JAX's own at n 2 and 3)", "closed form",
                          nrhs=nrhs, rule="closed form")
    if _ffi.limits is None:  # a source checkout without a build: nothing but JAX's own
        return Choice(op, batch, shape, np.dtype(dtype).name, XLA, 1, "the extension is not "
                      "built: JAX's own implementation", "no extension", nrhs=nrhs,
                      rule="no extension")
    routine = routine_of(op, rows, cols)
    if routine not in limits():
        known = sorted(set(limits()) | set(ROUTINE_OF) | SVD_OPS)
        raise ValueError(f"unknown op {op!r}; known: {known}")
    name = _op_name(op, routine)
    strategy, lanes = _config.resolve(strategy, lanes, name)
    op = routine
    dtype = np.dtype(dtype).name
    n = max(rows, cols)
    kernel = small_kernel(op, rows, cols, nrhs, batch)
    possible = feasible(op, rows, cols, nrhs, lower=lower, left=left, batch=batch)
    cap = max(1, batch)
    def make(s, l, why, src, times=(), rule="heuristic"):
        return Choice(op, batch, shape, dtype, s, max(1, min(l, cap)), why, src, times, nrhs,
                      rule=rule if src != "user" else "user")

    if strategy != "auto":
        if strategy not in possible:
            why = infeasible(op, strategy, rows, cols, nrhs, lower=lower, left=left, batch=batch)
            rhs = f" with {nrhs} right-hand side(s)" if nrhs and op in _SOLVES else ""
            raise ValueError(f"{name}: strategy {strategy!r} cannot run a {rows} x {cols} "
                             f"matrix{rhs}: {why}; possible here: {', '.join(possible) or 'none'} "
                             "(or 'auto')")
        if strategy == "sequential":
            return make("sequential", 1, "requested: every item on XLA's stream", "user")
        if strategy == "blocked":
            return make("blocked", 1, "requested: the blocked algorithm over the whole batch on "
                        f"XLA's stream ({limits()[op]['blocked']})", "user")
        if strategy == "batched" and kernel:
            return make("batched", 1, "requested: this project's one-launch kernel (n <= "
                        f"{limits()[op]['small_max_n']}; lanes do not apply)", "user")
        if strategy == "batched":
            return make("batched", lanes or 1,
                        f"requested: {limits()[op]['batched']}" +
                        (f", the batch split over {lanes} lanes" if lanes and lanes > 1 else ""),
                        "user")
        return make("looped", lanes or _config.DEFAULT_LANES,
                    "requested: one call per item on concurrent lanes", "user")

    if not possible:
        return make(XLA, 1, "no strategy of the extension takes this size (its APIs count in "
                    "int): JAX's own implementation", "limits", rule="limits")

    batched_ok = "batched" in possible

    def allowed(candidate: str) -> bool:
        kind, count = _tables.parse_candidate(candidate)
        if kind == XLA:
            if op in NO_XLA:
                return False
        elif kind not in possible:
            return False  # e.g. a square-only batched API for a rectangular call
        if kind == "batched" and count > 1 and kernel:
            return False  # the kernel takes no lanes (older tables: the batched API on lanes)
        if lanes is not None:
            # A lane count given with auto asks for our FFI path on those lanes: the strategy
            # is chosen for them, and JAX's own lowering is no candidate (nor lanes for the
            # one-launch kernel, which takes none).
            return kind == "sequential" or (kind != XLA and count == lanes) or (
                kind == "batched" and kernel)
        return count <= _config.MAX_LANES

    aspect = rows / cols if rows and cols else 1.0
    found = _tables.lookup(op, dtype, batch, n, allowed, aspect,
                           max(nrhs, 1) if op in _SOLVES else 1)
    if found is not None and found[0].best is not None:
        estimate, table = found
        best_strategy, best_lanes = _tables.parse_candidate(estimate.best)
        times = dict(estimate.times_ms)
        why = f"{estimate.basis}: {estimate.best}"
        if estimate.best in times:
            why += f" {times[estimate.best]:.3g} ms"
        if _tables.XLA in times and estimate.best != _tables.XLA:
            why += f" vs JAX's own {times[_tables.XLA]:.3g} ms"
        return make(best_strategy, best_lanes, why, table.source, estimate.times_ms,
                    rule=estimate.rule)
    unmeasured = (found[0].basis if found is not None else
                  f"no table has {op} {dtype} points")
    if op not in NO_XLA and not lanes:
        # The rule of tables.py: off the measured space, JAX's own lowering (inside the NaN
        # guard), so that `auto` cannot lose there by more than the guard.
        return make(XLA, 1, f"{unmeasured}; JAX's own lowering", "unmeasured",
                    rule=_tables.OUTSIDE)

    # The hand-written rules: for the routines JAX has no lowering of (LDL^T), and for a lane
    # count given with auto (the user asks for our FFI path), where no table answers.
    if kernel and batched_ok:
        return make("batched", 1, f"n={n} <= {limits()[op]['small_max_n']}: this project's "
                    "one-launch kernel (the matrix in shared memory) beats the library calls "
                    "here" + ("; lanes do not apply" if lanes else ""), "heuristic")
    if op in BLOCKED_MIN_N and n >= BLOCKED_MIN_N[op] and not lanes and "blocked" in possible:
        return make("blocked", 1, f"n={n} >= {BLOCKED_MIN_N[op]}: the blocked algorithm (panel "
                    "kernels and batched GEMM updates) beats the unblocked kernel and lanes here",
                    "heuristic")
    if op in BLOCKED_SMALL_BATCH and not lanes and "blocked" in possible:
        most, from_n = BLOCKED_SMALL_BATCH[op]
        if batch <= most and n >= from_n:
            return make("blocked", 1, f"{batch} matrices <= {most}, n={n} >= {from_n}: the "
                        "blocked algorithm (here the factor converted once and cuBLAS TRSMs) "
                        "beats the unblocked kernel", "heuristic")
    # (A routine with a one-launch kernel counts as a single-matrix kernel where that runs.)
    single_kernel = op in SINGLE_MATRIX_KERNEL and batched_ok and (
        kernel or not limits()[op]["small_max_n"])
    if batch <= 1 and not single_kernel:
        return make("sequential", 1,
                    "a single matrix goes straight to one call on XLA's stream", "heuristic")
    double = np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128))
    limit = (BATCHED_MAX_N_DOUBLE if double else BATCHED_MAX_N).get(
        op, BATCHED_MAX_N.get(op, math.inf))
    what = limits()[op]["batched"]
    wins = f"n={n} <= {limit}: " if limit < math.inf else ""
    if batched_ok and n <= limit:
        return make("batched", lanes or 1, f"{wins}{what} beats per-matrix calls here",
                    "heuristic")
    want = lanes or _config.DEFAULT_LANES
    why = (f"n={n} > {limit}: per-matrix calls on {min(want, batch)} concurrent lanes"
           if batched_ok else "no batched API for this shape: per-matrix calls on lanes")
    return make("looped", want, why, "heuristic")


def _here() -> str:
    """What runs in this process instead of the extension, or "" where the extension runs."""
    if not _ffi.extension_loaded():
        return (f"the CUDA extension is not loaded ({_ffi.import_error}): JAX's own "
                "implementation runs (on the CPU without a GPU)")
    if not _ffi.gpu_available():
        return "no GPU here: JAX's own CPU implementation runs"
    return ""


def explain(op: str, shape, dtype, strategy: str | None = None, lanes: int | None = None,
            nrhs: int = 1, gpu: str | None = None) -> Choice:
    """What `auto` (or the given strategy) does for `op` on an operand of `shape` and `dtype`:
    the strategy, the lane count, why, the times behind the choice (`times_ms`, when a table made
    it) and where they came from (`source`: the shipped table, the user's tuned table, or the
    heuristic rules). `fallback` says when this process runs JAX's own implementation instead
    (no GPU, or no extension).

    `op` is a public function's name ("lu_factor", "cho_solve", "matmul", ...) or a routine's;
    `shape` the full operand shape, leading batch dims included, e.g. (64, 512, 512); `nrhs` the
    number of right-hand sides for the solves. `gpu` (a JAX device_kind, e.g.
    "NVIDIA H100 80GB HBM3") answers from the table shipped for that GPU model instead of the
    tables of this machine's GPU: what `auto` would do there, also on a machine without one (a
    warning where no table is shipped for it: the heuristic rules answer).

    A dtype the op does not take is a TypeError, and a strategy that cannot run the call a
    ValueError, each naming the op.
    """
    from . import _primitive

    shape = tuple(int(d) for d in shape)
    if len(shape) < 2:
        raise ValueError(f"{op}: shape must have rank >= 2, got {shape}")
    if op == "matmul":
        return _explain_matmul(shape, dtype, strategy, lanes)
    dtype = _primitive.check_dtype(op, dtype)
    if _ffi.limits is None:
        return Choice(op, math.prod(shape[:-2]), shape[-2:], dtype.name, XLA, 1,
                      "the extension is not built: JAX's own implementation", "no extension",
                      nrhs=nrhs, fallback="JAX's own implementation runs", rule="no extension")
    args = (op, math.prod(shape[:-2]), shape[-2:], dtype, strategy, lanes, nrhs)
    if gpu is None:
        return dataclasses.replace(choose(*args), fallback=_here())
    shipped = _tables.read_shipped(gpu)
    if shipped is None:
        warnings.warn(f"{op}: no strategy table is shipped for the GPU model {gpu!r}: `auto` "
                      "there follows the heuristic rules (jax_cusolver_ms.tune() measures one)",
                      UserWarning, stacklevel=2)
    with _tables.using(*([shipped] if shipped is not None else [])):
        return choose(*args)


def _explain_matmul(shape, dtype, strategy, lanes) -> Choice:
    from .matmul import MATMUL_DTYPES

    dtype = np.dtype(dtype)
    if dtype not in MATMUL_DTYPES:
        raise TypeError(f"matmul: unsupported dtype {dtype.name}; expected one of "
                        f"{', '.join(d.name for d in MATMUL_DTYPES)}")
    if strategy is not None or lanes is not None:
        raise ValueError("matmul: takes no strategy or lanes (one cuBLASLt call on XLA's "
                         "stream); its `algorithm` keyword pins a cuBLASLt algorithm")
    return Choice("matmul", math.prod(shape[:-2]), shape[-2:], dtype.name, "batched", 1,
                  "one cuBLASLt (strided-batched) matmul for the whole batch on XLA's stream, "
                  "bias and activation fused; its plan is cached per call shape and its "
                  "algorithm autotuned on the first call unless `algorithm` pins one",
                  "fixed", rule="fixed", fallback=_here() if _ffi.limits is not None else
                  "the extension is not built: XLA's own dot runs")
