"""jax-cusolver-ms: batched dense linear algebra for JAX, with the per-matrix cuSOLVER calls of
a batch running concurrently on a pool of lanes (stream + handles + host thread each).

Every op is a JAX primitive (jit, vmap, grad work) with the semantics of its jax.numpy.linalg /
jax.scipy.linalg counterpart; on a machine without a GPU it runs JAX's own implementation.
"""
from ._ffi import gpu_available, lane_count, library_versions
from .cholesky import cho_factor, cho_solve, cholesky
from .dropin import disable, enable, enabled
from .eig import EigResult, eig, eigvals, lax_eig
from .eigh import EighResult, eigh, eigvalsh, generalized_eigh, lax_eigh
from .ldl import ldl_factor, ldl_solve
from .lu import det, inv, lu, lu_factor, lu_solve, slogdet, solve
from .matmul import matmul
from .mixed import MixedLstsqResult, MixedSolveResult, mixed_lstsq, mixed_solve
from .qr import QRResult, householder_product, ormqr, qr, qr_multiply
from .settings import STRATEGIES, config
from .strategy import explain
from ._tune import tune
from .svd import SVDResult, cond, lstsq, matrix_rank, norm, pinv, svd, svdvals
from .triangular import solve_triangular

__version__ = "0.1.0"

__all__ = [
    "EigResult", "EighResult", "MixedLstsqResult", "MixedSolveResult", "QRResult", "STRATEGIES",
    "SVDResult", "cho_factor", "cho_solve", "cholesky", "cond", "config", "det", "disable",
    "eig", "eigh", "eigvals", "eigvalsh", "enable", "enabled", "explain", "generalized_eigh",
    "gpu_available", "householder_product", "inv", "lane_count", "lax_eig", "lax_eigh",
    "ldl_factor", "ldl_solve", "library_versions", "lstsq", "lu", "lu_factor", "lu_solve",
    "matmul", "matrix_rank", "mixed_lstsq", "mixed_solve", "norm", "ormqr", "pinv", "qr",
    "qr_multiply", "slogdet", "solve", "solve_triangular", "svd", "svdvals", "tune",
]
