"""Where JAX's own GPU lowering runs a batch as a loop over its matrices, one cuSOLVER call
each, rather than as one batched call: there JAX's time grows in proportion to the batch.
`auto` relies on that to carry a measured decision to larger batches (tables.Table.estimate);
the benchmark report to single out those cells (benchmarks/jax_lowering.py).

The rules are jaxlib's CUDA FFI handlers (jaxlib/gpu/solver_kernels_ffi.cc) and the lowering
rules that pick them (jax/_src/lax/linalg.py), read in jax 0.10.2 (the Python rules in its
wheel, the handlers in jax-ml/jax's source as mirrored in ROCm/jax at 27d5c6bf, whose routines
and call expressions the jax-cuda13-plugin 0.10.2 binary carries). The GPU machine runs jax
0.11.2; its source was not at hand to compare. Pure Python: nothing here imports JAX.
"""
from __future__ import annotations

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


def _never(batch: int, n: int, itemsize: int) -> bool:
    # PotrfDispatch: cuSOLVER potrfBatched for any batch of more than one matrix; syevj's n is
    # syevjBatched's.
    return False


def _syevd_loops(batch: int, n: int, itemsize: int) -> bool:
    if n <= _SYEVJ_MAX_N:
        return False
    return _INT_MAX // (n * n * itemsize) < 2


def _gesvdj_loops(batch: int, n: int, itemsize: int) -> bool:
    return n > _GESVDJ_BATCHED_MAX_N or batch > _INT_MAX


def _always(batch: int, n: int, itemsize: int) -> bool:
    # GeevImpl (cusolverDnXgeev; the hybrid host kernel before cuSOLVER 11.7.1 or for left
    # eigenvectors, also per matrix) and GesvdDispatch (the QR-iteration SVD) have no batched
    # path.
    return True


# Per routine of this package's tables (strategy.ROUTINE_OF), the rule of the JAX lowering that
# the routine's "xla" candidate times. The triangular solves after an LU or a Cholesky are XLA's
# triangular-solve thunk (cuBLAS trsmBatched for a batch of more than one): a solve loops where
# its factorization does, and a triangular solve alone (trsm) never. LDL^T has no JAX lowering;
# its JAX column in the report is an LU. JAX has no generalized eigh: sygvd's "xla" candidate
# is the reduction, whose eigh loops where JAX's own eigh does.
RULES = {"getrf": _getrf_loops, "getrs": _getrf_loops, "geqrf": _getrf_loops,
         "sytrf": _getrf_loops, "sytrs": _getrf_loops,
         "orgqr": _householder_loops, "ormqr": _householder_loops,
         "potrf": _never, "potrs": _never, "syevj": _never, "syevd": _syevd_loops,
         "gesvdj": _gesvdj_loops, "gesvd": _always, "geev": _always, "trsm": _never,
         "sygvd": _syevd_loops}


# Routines whose batched call is far faster than the loop JAX switches to: gesvdjBatched runs a
# whole batch of m, n <= 32 in one launch, above it one gesvdj call per matrix (the H200 report:
# svd float32 at batch 256, 0.321 ms at n = 32 and 276 ms at n = 64). Not getrf, whose cuBLAS
# getrfBatched for large n is slower than cuSOLVER's getrf per matrix.
BATCHED_BEATS_LOOP = frozenset({"gesvdj"})


def loops_per_matrix(routine: str, batch: int, n: int, itemsize: int) -> bool:
    """Whether JAX's own GPU lowering of `routine` (a name of RULES) on `batch` matrices whose
    larger dimension is n (of `itemsize` bytes an element) makes one library call per matrix.
    A batch of one is never looping: it is one call either way."""
    return batch > 1 and RULES[routine](batch, n, itemsize)


def same_call(routine: str, batch: int, n: int, other_batch: int, other_n: int,
              itemsize: int) -> bool:
    """Whether JAX's own lowering of `routine` runs `batch` matrices of n and `other_batch` of
    other_n alike: one library call per matrix at both, or one call for the whole batch at both,
    a batch of one (the routine's non-batched call) only like another batch of one."""
    return (batch == 1) == (other_batch == 1) and (
        loops_per_matrix(routine, batch, n, itemsize)
        == loops_per_matrix(routine, other_batch, other_n, itemsize))
