"""The mirror of jax.scipy.linalg: ``import jax_cusolver_ms.scipy.linalg as sla`` in place of
``import jax.scipy.linalg as sla``, and nothing else in a program changes.

Every name of jax.scipy.linalg is here. The functions this package implements (cho_factor,
cho_solve, cholesky, det, eigh, inv, lu, lu_factor, lu_solve, qr, qr_multiply, solve,
solve_triangular, svd) are defined with JAX's own signatures (the SciPy-only arguments JAX
ignores, such as overwrite_a, check_finite or lapack_driver, are accepted and ignored alike),
return what JAX's return and run this package's implementation under its `auto` strategy;
eigh also serves what JAX's refuses, the generalized problem (b) and eigvals. A call this
package does not serve the same way (pivoting=True, an operand of a dtype its solvers do not
take, ...) is JAX's own call, which answers or raises as JAX does. Every other name (expm,
schur, block_diag, ...) is JAX's own object, looked up on use.
"""
import functools as _functools

import jax as _jax
import jax.numpy as _jnp
import jax.scipy.linalg as _jax_linalg
from jax import lax as _lax

from .._common import forwarding_to as _forwarding_to, matmul as _matmul, promote as _promote
from ..cholesky import cho_factor as _jcm_cho_factor, cho_solve as _jcm_cho_solve
from ..eigh import _subset, generalized_eigh as _jcm_generalized_eigh, lax_eigh as _jcm_lax_eigh
from ..lu import lu as _jcm_lu, lu_factor as _jcm_lu_factor, lu_solve as _jcm_lu_solve
from ..numpy import linalg as _numpy_linalg
from ..qr import qr as _jcm_qr, qr_multiply as _jcm_qr_multiply
from ..svd import svd as _jcm_svd
from ..triangular import TRANS as _TRANS, solve_triangular as _jcm_solve_triangular

__all__ = sorted(name for name in dir(_jax_linalg) if not name.startswith("_"))

_served = _numpy_linalg._served
_is_square_stack = _numpy_linalg._is_square_stack
_rank_promotion_forbidden = _numpy_linalg._rank_promotion_forbidden


# The names this module does not define are jax.scipy.linalg's own objects.
__getattr__, __dir__ = _forwarding_to(_jax_linalg, __name__, globals())


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """jax.scipy.linalg.cho_factor on this package's Cholesky factorization."""
    a = _jnp.asarray(a)
    if not _served(a):
        return _jax_linalg.cho_factor(a, lower, overwrite_a, check_finite)
    return _jcm_cho_factor(a, lower)


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """jax.scipy.linalg.cholesky (the upper factor unless lower=True; the input is not
    symmetrized) on this package's Cholesky factorization."""
    a = _jnp.asarray(a)
    if not _served(a):
        return _jax_linalg.cholesky(a, lower, overwrite_a, check_finite)
    return _jcm_cho_factor(a, lower)[0]


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """jax.scipy.linalg.cho_solve on this package's Cholesky solve."""
    c, lower = c_and_lower
    c, b = _jnp.asarray(c), _jnp.asarray(b)
    if not _served(c, b) or _rank_promotion_forbidden(c, b, _solves_vectors(c, b)):
        return _jax_linalg.cho_solve((c, lower), b, overwrite_b, check_finite)
    return _jcm_cho_solve((c, lower), b)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """jax.scipy.linalg.solve_triangular on this package's triangular solve."""
    a, b = _jnp.asarray(a), _jnp.asarray(b)
    if (not _served(a, b) or trans not in _TRANS
            or _rank_promotion_forbidden(a, b, _solves_vectors(a, b))):
        return _jax_linalg.solve_triangular(a, b, trans, lower, unit_diagonal, overwrite_b,
                                            debug, check_finite)
    return _jcm_solve_triangular(a, b, trans, lower, unit_diagonal)


def _solves_vectors(factor, b) -> bool:
    """Whether lu_solve / cho_solve take b as vectors: (n,), or (deprecated, with a
    FutureWarning) a batch of vectors of shape factor.shape[:-1]."""
    return b.ndim == 1 or (factor.ndim == b.ndim + 1 and factor.shape[-1:] == b.shape[-1:])


def det(a, overwrite_a=False, check_finite=True):
    """jax.scipy.linalg.det: jax.numpy.linalg.det, as in JAX (this package's LU)."""
    return _numpy_linalg.det(a)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True):
    """jax.scipy.linalg.eigh on this package's Hermitian eigendecomposition (the input
    symmetrized, as JAX's); with b, SciPy's generalized problem of `type` 1, 2 or 3, which JAX
    does not implement (generalized_eigh: batched, B-orthonormal vectors). `eigvals` (lo, hi),
    which JAX does not implement either: the eigenvalues lo .. hi, both included (SciPy's
    subset_by_index), and their vectors."""
    if b is not None and _served(a, b):
        if eigvals is not None:
            _subset("eigh", eigvals, _jnp.shape(a)[-1], "eigvals")
        return _jcm_generalized_eigh(a, b, lower=lower, eigvals_only=eigvals_only, type=type,
                                     subset_by_index=eigvals)
    if b is None and type == 1:
        a = _jnp.asarray(a)
        if _served(a) and _is_square_stack(a):
            v, w = _jcm_lax_eigh(a, lower=lower)
            if eigvals is not None:
                lo, hi = _subset("eigh", eigvals, a.shape[-1], "eigvals")
                w, v = w[..., lo:hi + 1], v[..., :, lo:hi + 1]
            return w if eigvals_only else (w, v)
    return _jax_linalg.eigh(a, b, lower, eigvals_only, overwrite_a, overwrite_b, turbo, eigvals,
                            type, check_finite)


def inv(a, overwrite_a=False, check_finite=True):
    """jax.scipy.linalg.inv: jax.numpy.linalg.inv, as in JAX (this package's LU)."""
    return _numpy_linalg.inv(a)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """jax.scipy.linalg.lu from this package's LU factorization: (p, l, u) with a = p @ l @ u,
    p a permutation matrix (real), l (m, k) unit lower and u (k, n) upper triangular,
    k = min(m, n); (p @ l, u) with permute_l. A single matrix, as JAX's (which refuses a
    batch)."""
    a = _jnp.asarray(a)
    if not _served(a) or a.ndim != 2:
        return _jax_linalg.lu(a, permute_l, overwrite_a, check_finite)
    lu_, _, permutation = _jcm_lu(a)
    dtype = lu_.dtype
    m, n = a.shape
    k = min(m, n)
    rows = _jnp.arange(m, dtype=permutation.dtype)
    p = (permutation[None, :] == rows[:, None]).astype(_jnp.finfo(dtype).dtype)
    l = _jnp.tril(lu_, -1)[:, :k] + _jnp.eye(m, k, dtype=dtype)
    u = _jnp.triu(lu_)[:k, :]
    if permute_l:
        return _matmul(p, l), u
    return p, l, u


def lu_factor(a, overwrite_a=False, check_finite=True):
    """jax.scipy.linalg.lu_factor on this package's LU factorization: (lu, piv)."""
    a = _jnp.asarray(a)
    if not _served(a):
        return _jax_linalg.lu_factor(a, overwrite_a, check_finite)
    return _jcm_lu_factor(a)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """jax.scipy.linalg.lu_solve on this package's LU solve. Pivots out of [0, n) (no
    lu_factor gives them) make that matrix's solution NaN, where JAX's clamps them into
    range and solves another system."""
    lu_, pivots = lu_and_piv
    lu_, b = _jnp.asarray(lu_), _jnp.asarray(b)
    if not _served(lu_, b) or _rank_promotion_forbidden(lu_, b, _solves_vectors(lu_, b)):
        return _jax_linalg.lu_solve((lu_, pivots), b, trans, overwrite_b, check_finite)
    return _jcm_lu_solve((lu_, pivots), b, trans)


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """jax.scipy.linalg.qr on this package's QR factorization: (q, r) for mode 'full' (q
    (m, m), r (m, n)) or 'economic' (q (m, k), r (k, n)), (r,) for mode 'r' (r as in 'full').
    Column pivoting is JAX's own call."""
    a = _jnp.asarray(a)
    if pivoting or mode not in ("full", "economic", "r") or not _served(a):
        return _jax_linalg.qr(a, overwrite_a, lwork, mode, pivoting, check_finite)
    if mode == "r":
        r = _jcm_qr(a, "r")
        m, k = a.shape[-2], r.shape[-2]
        # 'full' mode's r: the reduced one and, for a tall a, zero rows below it.
        return (_jnp.pad(r, [(0, 0)] * (r.ndim - 2) + [(0, m - k), (0, 0)]),)
    q, r = _jcm_qr(a, "complete" if mode == "full" else "reduced")
    return q, r


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """jax.scipy.linalg.qr_multiply on this package's QR factorization and Householder
    product. Column pivoting is JAX's own call."""
    a, c = _jnp.asarray(a), _jnp.asarray(c)
    if pivoting or not _served(a, c):
        return _jax_linalg.qr_multiply(a, c, mode, pivoting, conjugate, overwrite_a, overwrite_c)
    return _jcm_qr_multiply(a, c, mode, False, conjugate)


_ASSUME_A = ("gen", "sym", "her", "pos")


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """jax.scipy.linalg.solve: as JAX's, jax.numpy.linalg.solve (this package's LU) for
    assume_a 'gen', 'sym' and 'her', and a Cholesky solve reading the `lower` triangle for
    'pos' (this package's Cholesky factorization and solve)."""
    if assume_a not in _ASSUME_A:
        raise ValueError(f"Expected assume_a to be one of {list(_ASSUME_A)}; got {assume_a!r}")
    if assume_a != "pos":
        return _numpy_linalg.solve(a, b)
    a, b = _jnp.asarray(a), _jnp.asarray(b)
    well_formed = (a.ndim >= 2 and b.ndim in (a.ndim, a.ndim - 1)
                   and a.shape[-1] == a.shape[-2] == b.shape[a.ndim - 2])
    if not well_formed or not _served(a, b):
        return _jax_linalg.solve(a, b, lower=lower, assume_a=assume_a)
    a, b = _promote("solve", a, b)
    return _positive_definite_solve(a, b, bool(lower))


def _positive_definite_solve(a, b, lower):
    """x with a x = b for Hermitian positive definite a, b (..., n) or (..., n, k): one
    factorization serves the solve and its derivatives (custom_linear_solve), as JAX's."""
    factors = _jcm_cho_factor(_lax.stop_gradient(a), lower)
    solve_vector = _functools.partial(
        _lax.custom_linear_solve,
        lambda x: _matmul(a, x[..., None])[..., 0],
        solve=lambda _, x: _jcm_cho_solve(factors, x[..., None])[..., 0],
        symmetric=True)
    if a.ndim == b.ndim + 1:
        return solve_vector(b)
    return _jax.vmap(solve_vector, b.ndim - 1, max(a.ndim, b.ndim) - 1)(b)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """jax.scipy.linalg.svd on this package's SVD: (u, s, vh), or s without compute_uv."""
    a = _jnp.asarray(a)
    if not _served(a):
        return _jax_linalg.svd(a, full_matrices, compute_uv, overwrite_a, check_finite,
                               lapack_driver)
    out = _jcm_svd(a, full_matrices, compute_uv)
    return tuple(out) if compute_uv else out
