"""How JAX's own GPU lowering runs a batch of a square cell: one batched library call (or kernel)
for the whole batch, or a loop over the matrices, one cuSOLVER call each. The report's summary
gives the speed-up over the cells where JAX loops apart from the whole grid's.

The rules are jaxlib's CUDA FFI handlers (jaxlib/gpu/solver_kernels_ffi.cc) and the lowering
rules that pick them (jax/_src/lax/linalg.py), read in jax 0.10.2 (the Python rules in its
wheel, the handlers in jax-ml/jax's source as mirrored in ROCm/jax at 27d5c6bf, whose routines
and call expressions the jax-cuda13-plugin 0.10.2 binary carries). The GPU machine runs jax
0.11.2; its source was not at hand to compare. Pure Python: nothing here imports JAX.
"""
from __future__ import annotations

import numpy as np

# cuBLAS getrfBatched / geqrfBatched: GetrfDispatch and GeqrfDispatch take them for a batch of
# more than one matrix while (rows and) columns over the batch size, in integer division, are at
# most this; above it a cuSOLVER getrf / geqrf per matrix. getrfBatched takes square only.
_BATCHED_MAX_N_PER_MATRIX = 128
# SyevdDispatch's default algorithm: syevj (syevjBatched for a batch) up to this n; above it
# Syevd64Impl, which calls cusolverDnXsyevBatched (cuSOLVER 11.7.1 of CUDA 12.6.2 and newer; the
# H100 report's is 12.0) on chunks of at most 32768 matrices and of at most INT_MAX bytes, and
# Xsyevd per matrix where a chunk would hold one matrix only (or on an older cuSOLVER).
_SYEVJ_MAX_N = 32
_INT_MAX = 2**31 - 1
# _svd_gpu_sub_lowering (linalg.py): the default algorithm is gesvdj for m, n <= 1024, gesvd
# (cusolverDnXgesvd per matrix, Gesvd64Impl) above; GesvdjImpl calls gesvdjBatched only for a
# batch of 2 .. INT_MAX matrices of m, n <= 32 without the economy mode (which the lowering asks
# for above 32 only), gesvdj per matrix otherwise. jnp.linalg's svd, svdvals, lstsq and pinv all
# take this path.
_GESVDJ_BATCHED_MAX_N = 32


def _getrf_loops(batch: int, n: int, itemsize: int) -> bool:
    return n // batch > _BATCHED_MAX_N_PER_MATRIX


def _householder_loops(batch: int, n: int, itemsize: int) -> bool:
    # OrgqrImpl, OrmqrImpl: jaxlib's one-launch batched Householder kernel for m, n <= 128,
    # cuSOLVER orgqr / ormqr per matrix above.
    return n > _BATCHED_MAX_N_PER_MATRIX


def _potrf_loops(batch: int, n: int, itemsize: int) -> bool:
    # PotrfDispatch: cuSOLVER potrfBatched for any batch of more than one matrix.
    return False


def _syevd_loops(batch: int, n: int, itemsize: int) -> bool:
    if n <= _SYEVJ_MAX_N:
        return False
    return _INT_MAX // (n * n * itemsize) < 2


def _gesvdj_loops(batch: int, n: int, itemsize: int) -> bool:
    return n > _GESVDJ_BATCHED_MAX_N or batch > _INT_MAX


def _per_matrix(batch: int, n: int, itemsize: int) -> bool:
    # GeevImpl (cusolverDnXgeev; the hybrid host kernel before cuSOLVER 11.7.1 or for left
    # eigenvectors, also per matrix) and GesvdDispatch (the QR-iteration SVD) have no batched
    # path.
    return True


# The library routines of each op of benchmarks.bench.OPS: JAX loops where any of them does.
# What else runs there is batched:
# - the triangular solves of solve, inv (a solve against I), cho_solve and lu_solve are XLA's
#   triangular-solve thunk (openxla/xla xla/backends/gpu/runtime/triangular_solve_thunk.cc:
#   cuBLAS trsmBatched for a batch of more than one); JAX has no getrs or potrs call on GPU, and
#   the pivots become a permutation in one batched kernel;
# - det is an LU (slogdet's default); the JAX column of ldl_factor and ldl_solve is its LU.
_RULES = {"getrf": _getrf_loops, "geqrf": _getrf_loops, "orgqr": _householder_loops,
          "ormqr": _householder_loops, "potrf": _potrf_loops, "syevd": _syevd_loops,
          "gesvdj": _gesvdj_loops, "gesvd": _per_matrix, "geev": _per_matrix}
ROUTINES = {"lu_factor": ("getrf",), "solve": ("getrf",), "inv": ("getrf",),
            "det": ("getrf",), "ldl_factor": ("getrf",), "ldl_solve": ("getrf",),
            "cholesky": ("potrf",), "cho_solve": ("potrf",),
            "qr": ("geqrf", "orgqr"), "qr_r": ("geqrf",), "qr_multiply": ("geqrf", "ormqr"),
            "eigh": ("syevd",), "eigvalsh": ("syevd",), "generalized_eigh": ("potrf", "syevd"),
            "eig": ("geev",), "eigvals": ("geev",),
            "svd": ("gesvdj",), "svdvals": ("gesvdj",), "lstsq": ("gesvdj",),
            "lstsq_auto": ("gesvdj",), "lstsq_mixed": ("gesvdj",), "pinv": ("gesvdj",),
            "svd_qr": ("gesvd",),
            # The JAX column of the mixed-precision ops is JAX's float64 solve.
            "solve_mixed": ("getrf",), "solve_mixed_pos": ("potrf",),
            **{f"solve_mixed_cond1e{e}": ("getrf",) for e in (2, 4, 6, 8, 10, 12)}}

# The rules above in words, for the report.
RULE = ("JAX's GPU lowering makes one cuSOLVER call per matrix for eig and eigvals (Xgeev) and "
        "the QR-iteration SVD (Xgesvd) at any batch, for svd, svdvals, lstsq and pinv (gesvdj) "
        "above n = 32, for qr and qr_multiply (orgqr, ormqr) above n = 128, and for the LU ops "
        "(lu_factor, solve, inv, det; LDL^T's JAX column) and the QR ops (geqrf) where "
        "n // batch > 128; never for cholesky and cho_solve "
        "(potrfBatched), eigh and eigvalsh (syevjBatched, XsyevBatched), nor for a batch of one "
        "(benchmarks/jax_lowering.py).")


def jax_loops(op: str, dtype: str, batch: int, n: int) -> bool:
    """Whether JAX's own GPU lowering of `batch` n x n matrices of op `op` (a name of
    benchmarks.bench.OPS) loops over the matrices, one library call each, rather than running
    the batch in one batched call. A batch of one is never looping."""
    if batch <= 1:
        return False
    itemsize = np.dtype(dtype).itemsize
    return any(_RULES[routine](batch, n, itemsize) for routine in ROUTINES[op])
