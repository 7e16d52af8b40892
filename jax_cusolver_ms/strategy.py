"""How `auto` picks a strategy and lane count for a call shape, and `explain()` to say why.

The choice is made when the op is lowered (the batch is then complete, vmap included) and is a
static attribute of the FFI call: it never measures anything during a user's jitted call, and it
is the same for equal shapes. `auto` takes the fastest candidate of a measured table
(tables.py: the user's tuned table, then the one shipped for the GPU model) and falls back to the
hand-written rules below (the "heuristic") where no table covers the call.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from . import _compat
from . import settings as _config
from . import tables as _tables

STRATEGY_CODES = {"looped": 0, "sequential": 1, "batched": 2, "blocked": 3}
# Routines with a blocked algorithm over the whole batch (ffi: Strategy::kBlocked): potrf as
# potrfBatched diagonal blocks, trsmBatched panels and strided-batched GEMM trailing updates;
# sytrf as this project's ?lasyf panel kernel (one launch per panel for the whole batch) and
# strided-batched GEMM trailing updates (ffi/ldl_ops.cc sytrf_blocked); getrf (square only) as
# this project's ?getf2 panel and ?laswp kernels, trsmBatched and strided-batched GEMM trailing
# updates (ffi/lu_ops.cc getrf_blocked); sytrs as ?sytrs in blocks of columns, the block's steps
# in a kernel and strided-batched GEMMs for the rows below (ffi/ldl_ops.cc sytrs_blocked), or for
# a few matrices as ?sytrs2 (the factor converted once, cuBLAS TRSMs). `auto` takes potrf's and
# getrf's where a measured table says they win, sytrf's and sytrs's from BLOCKED_MIN_N on (and
# sytrs's from BLOCKED_SMALL_BATCH's n for a few matrices).
BLOCKED_OPS = {"potrf", "sytrf", "getrf", "sytrs"}
SQUARE_ONLY_BLOCKED = {"getrf"}
# From this n on the blocked algorithm is the heuristic's choice (any batch, single matrices
# included). H100 float32 ldl_factor 64x1024: the ?sytf2 kernel 122 ms (it streams the trailing
# matrix through one SM per column), 8 lanes of cuSOLVER sytrf 639 ms, JAX's LU 82 ms.
# The blocked solve: its steps run on a block's rows in shared memory, the unblocked kernel's
# over the whole of B. H100, the solve alone, unblocked / blocked ms (benchmarks/diag/
# ldl_solve_probe.py, results/s10-ldl-solve-probe.md): float32 1x2048 11.7 / 4.60, 4x2048 21.1 /
# 5.20, 64x1024 6.63 / 3.04, 256x512 2.22 / 1.62, but 64x256 0.43 / 0.53, 1x256 0.40 / 0.44
# (float64 alike); from n = 512 on. Session 19 (ldl_factor, blocked / the ?sytf2 kernel, with the
# panel in shared memory: float32 1x128 0.219 / 0.263 ms, 256x128 0.270 / 0.349, float64 256x128
# 0.332 / 0.686; s19-ldl-factor-a): sytrf's from n = 128.
BLOCKED_MIN_N = {"sytrf": 128, "sytrs": 512}
# Up to this many matrices the blocked solve is LAPACK ?sytrs2's route (the factor converted
# once, cuBLAS TRSMs: ffi/ldl_ops.cc sytrs_trsm), which beats the unblocked kernel from n = 128
# (H100, the solve alone, ncu, unblocked / TRSM route: float32 1x128 121 / 75 us, 1x256 565 /
# 110, 4x256 570 / 240; gpu-tests/session19-c4).
BLOCKED_SMALL_BATCH = {"sytrs": (4, 128)}  # routine -> (most matrices, from n)
# Routines JAX has no lowering of its own for: "xla" is never a candidate (a benchmark times
# JAX's LU next to them, which a table must not take for theirs).
NO_XLA = {"sytrf", "sytrs"}
# `auto` may also answer "xla": JAX's own lowering is the fastest for that call (e.g. getrs with
# many right-hand sides, where XLA's batched cuBLAS triangular solves beat cuSOLVER getrs).
XLA = "xla"

# Largest n at which the native batched API still beats lanes, per op, for batch >= 2.
# Seeded from ../shared/ANCHORS.md (H100, float32): cublasSgetrfBatched 64x512 9.15 ms vs 23.3 ms
# on 8 lanes, 64x1024 71.5 ms vs 42.4 ms; re-measured with benchmarks/bench.py on the H100.
BATCHED_MAX_N = {
    "getrf": 512,
    "getrs": 512,
    # potrfBatched (what JAX uses) beats 8 lanes up to n~1024: 64x1024 3.61 ms vs 5.54 ms,
    # 16x2048 7.63 ms vs 6.08 ms.
    "potrf": 1024,
    "potrs": 1024,   # potrsBatched takes one right-hand side only; more go to lanes / XLA
    # The batched strategy for geqrf / orgqr / ormqr is this project's ?geqr2 / ?org2r / ?orm2r
    # kernels (ffi/qr_kernels.cu, n <= 1024, the matrix in shared memory where it fits). H100
    # float32 qr (geqrf + orgqr), kernels / JAX / 8 lanes: 64x64 0.30 / 1.57 / 3.4 ms, 64x128
    # 1.15 / 9.79 / 11.0, 256x64 0.33 / 1.85 / 12.4, 64x256 6.99 / 49.3 / 9.28 (global memory
    # from here), 16x512 63.3 / 259 / 5.59 (benchmarks/diag/kernel_probe.py, session 5). In
    # shared memory (n <= 128 here) a launch takes about the same time for any batch up to the
    # SM count; in global memory it loses to lanes on small batches: the measured table decides.
    "geqrf": 128,
    "orgqr": 128,
    "ormqr": 128,
    # This project's batched LDL^T kernels (ffi/ldl_kernels.cu; cuSOLVER has none), at every n
    # they take: cuSOLVER's sytrf / Xsytrs host-synchronise. H100 float32 ldl_factor, kernel /
    # 8 lanes: 64x64 0.14 / 31.5 ms, 64x128 0.34 / 79.1, 64x256 1.04 / 148; 16x512 kernel 8.6.
    "sytrf": 1024,
    "sytrs": 1 << 30,  # the solve kernel takes any n (no n-sized shared memory)
    # cusolverDnXsyevBatched (what JAX 0.11 uses above n = 32) beat Xsyevd on 8 lanes at every
    # size measured (ANCHORS.md: 64x128 vs 29.4 ms looped, 64x512 28.6 vs 198 ms, 16x1024 59.2
    # ms); at batch 4 the hybrid (XsyevBatched on 4 lanes) wins 2.3-3.3x from n = 256 (float64)
    # and 512 (float32), at 16x2048 and 64x2048 float64 JAX's own does (H100, session 11 tune:
    # 303 / 776 ms vs 333 / 750 ms hybrid, within the table's XLA margin). 4x4096: not measured.
    "syevd": 2048,
    # The batched Jacobi path is this project's kernel (ffi/eigh_kernels.cu, n <= 32: one block
    # per matrix, the matrix in shared memory), in place of syevjBatched (JAX's own choice for
    # batches there; a single matrix JAX gives to syevj / syevd).
    "syevj": 32,
    "geev": 0,       # no batched API: lanes (geev blocks the host: one thread per lane)
    # The batched Jacobi SVD path is this project's kernel (ffi/svd_kernels.cu, m, n <= 32: one
    # block per matrix), in place of gesvdjBatched (JAX's own choice for batches there; a single
    # matrix JAX gives to gesvdj). gesvd (QR iteration) has no batched API.
    "gesvdj": 32,
    "gesvd": 0,
}
# Batched APIs that take no larger matrices than this, whatever the strategy says.
BATCHED_API_MAX_N = {"syevj": 32, "gesvdj": 32, "sytrf": 1024, "geqrf": 1024, "orgqr": 1024,
                     "ormqr": 1024}
# Batched paths that are this project's own kernels.
OWN_KERNEL_BATCHED = {"sytrf", "sytrs", "geqrf", "orgqr", "ormqr", "syevj", "gesvdj"}
# ... of which these win even for a single matrix (cuSOLVER's sytrf / Xsytrs / syevj / gesvdj
# host-synchronise; a single QR goes to cuSOLVER on XLA's stream, as JAX's own).
SINGLE_MATRIX_KERNEL = {"sytrf", "sytrs", "syevj", "gesvdj"}
# Batched paths that are, up to this n (square matrices), this project's one-launch kernel on
# XLA's stream, the matrix in shared memory, no lanes: syevj ffi/eigh_kernels.cu (in place of
# syevjBatched); gesvdj ffi/svd_kernels.cu (in place of gesvdjBatched; it takes non-square
# matrices too, under the guard); getrf ffi/lu_kernels.cu getrf_small_batched (in place of
# cuBLAS getrfBatched, which takes 4 launches with JAX's pivot conversions around it: H100
# float32 lu_factor 256x16 JAX 0.048 ms); getrs getrs_small_batched (JAX's lu_solve: a
# permutation and two batched triangular solves); potrf / potrs ffi/cholesky_kernels.cu (in place
# of potrfBatched and JAX's two batched triangular solves). syevj's, gesvdj's and getrf's write
# NaN for a non-finite matrix themselves: no guard around them (tables.UNGUARDED_KERNELS); getrs,
# potrf and potrs have none on any path (potrf's NaN for a failed factorization is the kernel's
# own).
SMALL_KERNEL_MAX_N = {**_tables.UNGUARDED_KERNELS, "getrs": 64, "potrf": 64, "potrs": 64}
# ... and, for the solves, up to this many right-hand sides (inv's n included).
SMALL_KERNEL_MAX_NRHS = {"getrs": 64, "potrs": 64}


def small_kernel(op: str, rows: int, cols: int, nrhs: int = 0) -> bool:
    """Whether `op`'s batched strategy runs this project's one-launch kernel for this shape."""
    return (rows == cols and rows <= SMALL_KERNEL_MAX_N.get(op, -1)
            and nrhs <= SMALL_KERNEL_MAX_NRHS.get(op, nrhs))


# eigh with implementation=None takes the Jacobi solver (syevj / our kernel) up to this n and
# divide and conquer (Xsyevd / XsyevBatched) above: JAX's own rule on CUDA, so `auto` meets JAX
# on its own algorithm at every size. To be measured: XsyevBatched at n <= 32.
EIGH_JACOBI_MAX_N = 32
# Double precision (float64, complex128) overrides, where the crossover moves. H100 float64:
# getrfBatched 64x1024 33.9 ms vs 49.9 ms on 8 lanes; 16x2048 JAX 181 ms vs 28.5 ms on lanes.
BATCHED_MAX_N_DOUBLE = {
    "getrf": 1024,
    "getrs": 1024,
}

# Public op names -> the routine whose strategy they follow.
ROUTINE_OF = {"lu": "getrf", "lu_factor": "getrf", "det": "getrf", "slogdet": "getrf",
              "lu_solve": "getrs", "solve": "getrs", "inv": "getrs",
              "cholesky": "potrf", "cho_factor": "potrf", "cho_solve": "potrs",
              "qr": "geqrf", "householder_product": "orgqr", "qr_multiply": "ormqr",
              "ldl_factor": "sytrf", "ldl_solve": "sytrs",
              "eigh": "syevd", "eigvalsh": "syevd", "lax_eigh": "syevd",
              "eig": "geev", "eigvals": "geev", "lax_eig": "geev"}
# Ops whose batched path needs square matrices (getrfBatched); others fall back to lanes.
SQUARE_ONLY_BATCHED = {"getrf"}
# Batched APIs with one right-hand side only.
ONE_RHS_BATCHED = {"potrs"}

# Public ops built on the SVD: their routine depends on the shape (see svd_routine).
SVD_OPS = {"svd", "svdvals", "pinv", "matrix_rank", "lstsq", "norm", "cond"}

# SVD algorithms (jax.lax.linalg.SvdAlgorithm's names, lower case) and the routine each runs.
SVD_ALGORITHMS = ("default", "qr", "jacobi")
# "default" runs Jacobi (gesvdj) up to this max(m, n) and QR iteration (gesvd) above, as JAX does
# on CUDA (NVIDIA GTC 2019 s9226, slide 5). H100 anchors, float32 on 8 lane threads: Sgesvdj
# 16x512 48.8 ms vs Xgesvd 239 ms. The crossover above 1024 is still to be measured.
SVD_JACOBI_MAX_N = 1024


def svd_routine(algorithm: str, rows: int, cols: int) -> str:
    """The cuSOLVER routine ("gesvdj" or "gesvd") that `algorithm` runs for a rows x cols matrix."""
    if algorithm not in SVD_ALGORITHMS:
        raise ValueError(f"svd: unknown algorithm {algorithm!r}; expected one of {SVD_ALGORITHMS}")
    if algorithm == "default":
        return "gesvdj" if max(rows, cols) <= SVD_JACOBI_MAX_N else "gesvd"
    return "gesvdj" if algorithm == "jacobi" else "gesvd"


@dataclasses.dataclass(frozen=True)
class Choice:
    op: str
    batch: int
    shape: tuple
    dtype: str
    strategy: str
    lanes: int
    reason: str
    # "user" (keyword / config), "shipped table <gpu> (<file>)", "tuned <path>" or "heuristic"
    source: str
    # The estimated times behind a table's choice, fastest first: ((candidate, ms), ...), where
    # a candidate is "xla", "sequential", "blocked", "looped:L" or "batched:L".
    times_ms: tuple = ()
    nrhs: int = 0  # right-hand sides, for the solves

    @property
    def code(self) -> int:
        return STRATEGY_CODES[self.strategy]

    @property
    def uses_ffi(self) -> bool:
        return self.strategy != XLA

    @property
    def runs_small_kernel(self) -> bool:
        """The one-launch kernel of SMALL_KERNEL_MAX_N (no guard, no lanes)."""
        return self.strategy == "batched" and small_kernel(self.op, *self.shape, self.nrhs)

    def __str__(self):
        text = (f"{self.op} {self.dtype} batch={self.batch} matrix={self.shape}: "
                f"{self.strategy} on {self.lanes} lane(s) [{self.source}] - {self.reason}")
        if self.times_ms:
            text += "; ms: " + ", ".join(f"{c} {t:.3g}" for c, t in self.times_ms)
        return text


# Solves: from this many right-hand sides on, two batched trsm (what JAX emits) beat the
# cuSOLVER solve. H100 float32: inv 64x128 (128 rhs) getrsBatched 2.0 ms vs JAX 0.50 ms.
XLA_MIN_NRHS = {"getrs": 8, "potrs": 8}
# inv up to this n under `auto` is JAX's own end to end: H100 float32 64x128 JAX 0.49 ms vs
# 0.60 ms for our getrf + XLA's triangular solves (64x256 and up: equal or faster here).
INV_XLA_MAX_N = 128
# Batches (>= 2) of matrices up to this n go to JAX's own lowering under `auto`: measured where
# our paths lose. H100 float32 cho_solve (one rhs) 64x512 JAX's two trsm 1.61 ms vs
# potrsBatched 2.58 ms, 64x1024 4.88 vs 8.82 (16x2048: lanes 1.38x faster).
XLA_MAX_N = {"potrs": 1024}
# Where `auto` would pick the native batched API on one lane and JAX's own lowering already calls
# that same API, JAX's lowering is used: same kernels, none of our call overhead (H100 float32
# lu_factor 64x128: JAX 0.305 ms, our getrfBatched call 0.331 ms, the same cuBLAS routine).
# H100 float32 eigh (both XsyevBatched): 8x256 2.78 / 2.78 ms, 64x256 3.65 / 3.65; 16x1024 is
# bimodal for every caller alike (benchmarks/diag/eigh_probe.py: jnp.linalg.eigh, lax.linalg.eigh
# and ours each 59-61 or 68-74 ms from round to round on the same inputs).
JAX_USES_SAME_BATCHED_API = {"getrf": "cuBLAS getrfBatched", "potrf": "cusolverDn potrfBatched",
                             "syevd": "cusolverDn XsyevBatched"}


# Routines whose single-matrix lowering in JAX runs another implementation than ours: JAX 0.10
# lowers eig to its hybrid host kernel, 0.11 to cuSOLVER's geev as ours.
JAX_SINGLE_IS_OTHER = {"geev"} if _compat.JAX_VERSION < (0, 11) else set()

EIGH_OPS = {"eigh", "eigvalsh", "lax_eigh"}


def routine_of(op: str, rows: int, cols: int) -> str:
    """The cuSOLVER routine a public op (or a routine name) runs for a rows x cols matrix."""
    if op in SVD_OPS:
        return svd_routine("default", rows, cols)
    if op in EIGH_OPS:
        return "syevj" if max(rows, cols) <= EIGH_JACOBI_MAX_N else "syevd"
    return ROUTINE_OF.get(op, op)


def choose(op: str, batch: int, shape, dtype, strategy: str | None = None,
           lanes: int | None = None, nrhs: int = 0) -> Choice:
    """The strategy and lane count for `op` on `batch` matrices of `shape` (rows, cols);
    `nrhs` is the number of right-hand sides for the solve ops."""
    strategy, lanes = _config.resolve(strategy, lanes)
    shape = tuple(int(d) for d in shape)
    rows, cols = shape
    op = routine_of(op, rows, cols)
    if op not in BATCHED_MAX_N:
        known = sorted(set(BATCHED_MAX_N) | set(ROUTINE_OF) | SVD_OPS)
        raise ValueError(f"unknown op {op!r}; known: {known}")
    dtype = np.dtype(dtype).name
    n = max(rows, cols)
    kernel = small_kernel(op, rows, cols, nrhs)
    batched_ok = (not (op in SQUARE_ONLY_BATCHED and rows != cols)
                  and not (op in ONE_RHS_BATCHED and nrhs > 1 and not kernel)
                  and BATCHED_MAX_N[op] > 0 and n <= BATCHED_API_MAX_N.get(op, n))
    cap = max(1, batch)
    make = lambda s, l, why, src, times=(): Choice(op, batch, shape, dtype, s,
                                                    max(1, min(l, cap)), why, src, times, nrhs)

    if strategy != "auto":
        if strategy == "sequential":
            return make("sequential", 1, "requested: every item on XLA's stream", "user")
        if strategy == "blocked":
            if op in BLOCKED_OPS and not (op in SQUARE_ONLY_BLOCKED and rows != cols):
                return make("blocked", 1, "requested: the blocked algorithm over the whole "
                            "batch on XLA's stream (panels, batched GEMM updates)", "user")
            # E.g. ldl_solve after a blocked ldl_factor, or every op under a global "blocked":
            # the op runs as `auto` would run it.
            fallback = choose(op, batch, shape, dtype, "auto", lanes, nrhs)
            what = ("no blocked algorithm for non-square matrices" if op in BLOCKED_OPS
                    else "no blocked algorithm")
            return dataclasses.replace(fallback, reason=f"requested blocked, but {op} has "
                                       f"{what}: auto's choice ({fallback.reason})")
        if strategy == "batched" and not batched_ok:
            return make("looped", lanes or _config.DEFAULT_LANES,
                        "requested batched, but no batched API fits this call: lanes", "user")
        if strategy == "batched" and kernel:
            return make("batched", 1, "requested: this project's one-launch kernel (n <= "
                        f"{SMALL_KERNEL_MAX_N[op]}; lanes do not apply)", "user")
        if strategy == "batched":
            return make("batched", lanes or 1,
                        "requested: the native batched API" +
                        (f", the batch split over {lanes} lanes" if lanes and lanes > 1 else ""),
                        "user")
        return make("looped", lanes or _config.DEFAULT_LANES,
                    "requested: one call per item on concurrent lanes", "user")

    if op in XLA_MIN_NRHS and nrhs >= XLA_MIN_NRHS[op] and not kernel:
        # Tables are measured with one right-hand side: this rule comes first.
        return make(XLA, 1, f"{nrhs} right-hand sides >= {XLA_MIN_NRHS[op]}: XLA's batched "
                    f"triangular solves (cuBLAS trsm) beat {op} here", "heuristic")

    def allowed(candidate: str) -> bool:
        kind, count = _tables.parse_candidate(candidate)
        if (kind == "batched" and not batched_ok) or (kind == XLA and op in NO_XLA):
            return False
        if kind == "batched" and count > 1 and kernel:
            return False  # the kernel takes no lanes (older tables: the batched API on lanes)
        if kind == "blocked" and op in SQUARE_ONLY_BLOCKED and rows != cols:
            return False  # a table measures square matrices; the C++ would take one lane
        if lanes is not None:
            # A lane count given with auto asks for our FFI path on those lanes: the strategy
            # is chosen for them, and JAX's own lowering is no candidate.
            return kind == "sequential" or (kind != XLA and count == lanes)
        return count <= _config.MAX_LANES

    found = _tables.lookup(op, dtype, batch, n, allowed)
    if found is not None:
        estimate, table = found
        best_strategy, best_lanes = _tables.parse_candidate(estimate.best)
        times = dict(estimate.times_ms)
        why = f"fastest {estimate.basis}: {estimate.best} {times[estimate.best]:.3g} ms"
        if _tables.XLA in times and estimate.best != _tables.XLA:
            why += f" vs JAX's own {times[_tables.XLA]:.3g} ms"
        return make(best_strategy, best_lanes, why, table.source, estimate.times_ms)

    # A lane count given with auto asks for our FFI path: the rules that defer to JAX step aside,
    # and where that path is the one-launch kernel, the lanes do not apply.
    if kernel and batched_ok:
        return make("batched", 1, f"n={n} <= {SMALL_KERNEL_MAX_N[op]}: this project's one-launch "
                    "kernel (the matrix in shared memory) beats the library calls here" +
                    ("; lanes do not apply" if lanes else ""), "heuristic")
    if op in XLA_MAX_N and batch >= 2 and max(shape) <= XLA_MAX_N[op] and not lanes:
        return make(XLA, 1, f"n={max(shape)} <= {XLA_MAX_N[op]}: JAX's own lowering is as fast "
                    "or faster here (measured)", "heuristic")
    if op in BLOCKED_MIN_N and n >= BLOCKED_MIN_N[op] and not lanes:
        return make("blocked", 1, f"n={n} >= {BLOCKED_MIN_N[op]}: the blocked algorithm (panel "
                    "kernels and batched GEMM updates) beats the unblocked kernel and lanes here",
                    "heuristic")
    if op in BLOCKED_SMALL_BATCH and not lanes:
        most, from_n = BLOCKED_SMALL_BATCH[op]
        if batch <= most and n >= from_n:
            return make("blocked", 1, f"{batch} matrices <= {most}, n={n} >= {from_n}: the "
                        "blocked algorithm (here the factor converted once and cuBLAS TRSMs) "
                        "beats the unblocked kernel", "heuristic")
    # (A routine with a one-launch kernel counts as a single-matrix kernel where that runs.)
    single_kernel = op in SINGLE_MATRIX_KERNEL and (kernel or op not in SMALL_KERNEL_MAX_N)
    if batch <= 1 and not single_kernel:
        # JAX's own lowering of a single matrix is that one cuSOLVER call on XLA's stream
        # already: ours would add a handler's overhead (H100 float32, JAX / ours sequential:
        # cholesky 1x64 0.049 / 0.067 ms, eigh 1x64 0.80 / 0.93, svd 1x64 1.19 / 1.58).
        if op not in NO_XLA and op not in JAX_SINGLE_IS_OTHER and not lanes:
            return make(XLA, 1, "a single matrix: JAX's own lowering is one call on XLA's "
                        "stream already (at parity by construction)", "heuristic")
        return make("sequential", 1,
                    "a single matrix goes straight to one call on XLA's stream", "heuristic")
    double = np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128))
    limit = (BATCHED_MAX_N_DOUBLE if double else BATCHED_MAX_N).get(op, BATCHED_MAX_N[op])
    if batched_ok and n <= limit and not lanes and op in JAX_USES_SAME_BATCHED_API:
        return make(XLA, 1, f"n={n} <= {limit}: the native batched API "
                    f"({JAX_USES_SAME_BATCHED_API[op]}) wins here, and JAX's own lowering calls "
                    "it: JAX's lowering, at parity by construction", "heuristic")
    if batched_ok and n <= limit:
        what = ("this project's batched kernel (one launch for the batch)"
                if op in OWN_KERNEL_BATCHED else "the native batched API")
        return make("batched", lanes or 1,
                    f"n={n} <= {limit}: {what} beats per-matrix calls here", "heuristic")
    want = lanes or _config.DEFAULT_LANES
    why = (f"n={n} > {limit}: per-matrix calls on {min(want, batch)} concurrent lanes"
           if batched_ok else "no batched API for this shape: per-matrix calls on lanes")
    return make("looped", want, why, "heuristic")


def explain(op: str, shape, dtype, strategy: str | None = None, lanes: int | None = None,
            nrhs: int = 1, gpu: str | None = None) -> Choice:
    """What `auto` (or the given strategy) does for `op` on an operand of `shape` and `dtype`:
    the strategy, the lane count, why, the times behind the choice (`times_ms`, when a table made
    it) and where they came from (`source`: the shipped table, the user's tuned table, or the
    heuristic rules).

    `shape` is the full operand shape, leading batch dims included, e.g. (64, 512, 512);
    `nrhs` the number of right-hand sides for "getrs". `gpu` (a JAX device_kind, e.g.
    "NVIDIA H100 80GB HBM3") answers from the table shipped for that GPU model instead of the
    tables of this machine's GPU: what `auto` would do there, also on a machine without one.
    """
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(f"explain: shape must have rank >= 2, got {shape}")
    args = (op, math.prod(shape[:-2]), shape[-2:], dtype, strategy, lanes, nrhs)
    if gpu is None:
        return choose(*args)
    shipped = _tables.read_shipped(gpu)
    with _tables.using(*([shipped] if shipped is not None else [])):
        return choose(*args)
