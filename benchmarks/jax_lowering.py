"""How JAX's own GPU lowering runs a batch of a square cell: one batched library call (or kernel)
for the whole batch, or a loop over the matrices, one cuSOLVER call each. The report's summary
gives the speed-up over the cells where JAX loops apart from the whole grid's. The rules per
library routine are the package's (jax_cusolver_ms/_jax_lowering.py); here, which routines each
benchmarked op runs.
"""
from __future__ import annotations

import numpy as np

# The library routines of each op of benchmarks.bench.OPS: JAX loops where any of them does.
# What else runs there is batched:
# - the triangular solves of solve, inv (a solve against I), cho_solve and lu_solve are XLA's
#   triangular-solve thunk (openxla/xla xla/backends/gpu/runtime/triangular_solve_thunk.cc:
#   cuBLAS trsmBatched for a batch of more than one); JAX has no getrs or potrs call on GPU, and
#   the pivots become a permutation in one batched kernel;
# - det is an LU (slogdet's default); the JAX column of ldl_factor and ldl_solve is its LU.
ROUTINES = {"lu_factor": ("getrf",), "solve": ("getrf",), "inv": ("getrf",),
            "det": ("getrf",), "ldl_factor": ("getrf",), "ldl_solve": ("getrf",),
            "cholesky": ("potrf",), "cho_solve": ("potrf",), "solve_triangular": ("trsm",),
            "qr": ("geqrf", "orgqr"), "qr_r": ("geqrf",), "qr_multiply": ("geqrf", "ormqr"),
            "eigh": ("syevd",), "eigvalsh": ("syevd",), "generalized_eigh": ("potrf", "syevd"),
            "eig": ("geev",), "eigvals": ("geev",),
            "svd": ("gesvdj",), "svdvals": ("gesvdj",), "lstsq": ("gesvdj",),
            "lstsq_auto": ("gesvdj",), "lstsq_auto_x": ("gesvdj",),
            "lstsq_mixed": ("gesvdj",), "pinv": ("gesvdj",),
            "svd_qr": ("gesvd",),
            # The JAX column of the mixed-precision ops is JAX's float64 solve.
            "solve_mixed": ("getrf",), "solve_mixed_pos": ("potrf",),
            **{f"solve_mixed_cond1e{e}": ("getrf",) for e in (2, 4, 6, 8, 10, 12)}}

# The rules above in words, for the report.
RULE = ("JAX's GPU lowering makes one cuSOLVER call per matrix for eig and eigvals (Xgeev) and "
        "the QR-iteration SVD (Xgesvd) at any batch, for svd, svdvals, lstsq and pinv (gesvdj) "
        "above n = 32, for qr and qr_multiply (orgqr, ormqr) above n = 128, and for the LU ops "
        "(lu_factor, solve, inv, det) and the QR ops (geqrf) where "
        "n // batch > 128; never for cholesky and cho_solve "
        "(potrfBatched), solve_triangular (trsmBatched), eigh and eigvalsh (syevjBatched, "
        "XsyevBatched), nor for a batch of one (jax_cusolver_ms/_jax_lowering.py).")


def jax_loops(op: str, dtype: str, batch: int, n: int) -> bool:
    """Whether JAX's own GPU lowering of `batch` n x n matrices of op `op` (a name of
    benchmarks.bench.OPS) loops over the matrices, one library call each, rather than running
    the batch in one batched call. A batch of one is never looping."""
    # Imported here, not at the top: benchmarks.bench imports the installed package (the one with
    # the compiled extension) before anything else may import the source folder's.
    from jax_cusolver_ms._jax_lowering import loops_per_matrix

    itemsize = np.dtype(dtype).itemsize
    return any(loops_per_matrix(routine, batch, n, itemsize) for routine in ROUTINES[op])
