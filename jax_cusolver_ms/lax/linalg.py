"""The mirror of jax.lax.linalg: ``import jax_cusolver_ms.lax.linalg as lla`` in place of
``import jax.lax.linalg as lla``, and nothing else in a program changes.

Every name of jax.lax.linalg is here. The functions this package implements (cholesky, eig,
eigh, householder_product, lu, ormqr, qr, svd) are defined with JAX's own signatures, return
what JAX's return (lu and eig a list, as JAX's) and run this package's implementation under its
`auto` strategy. A call this package does not serve the same way is JAX's own call, which
answers or raises as JAX does: operands that are not arrays of one float32, float64, complex64
or complex128 dtype (lax.linalg promotes none) or not shaped as JAX's primitives take them,
left eigenvectors, `subset_by_index`, column pivoting, implementations and algorithms other than
the package's. Every other name (triangular_solve, tridiagonal, schur, the primitives, the
enums EighImplementation, SvdAlgorithm, EigImplementation, ...) is JAX's own object, looked up
on use.
"""
import jax as _jax
import jax.lax.linalg as _jax_linalg
import numpy as _np

from .._compat import backend_has_gpu as _backend_has_gpu
from .._common import forwarding_to as _forwarding_to
from .._primitive import SOLVER_DTYPES as _SOLVER_DTYPES
from ..cholesky import cholesky as _jcm_cholesky
from ..eig import lax_eig as _jcm_lax_eig
from ..eigh import lax_eigh as _jcm_lax_eigh
from ..lu import lu as _jcm_lu
from ..qr import (householder_product as _jcm_householder_product, ormqr as _jcm_ormqr,
                  qr as _jcm_qr)
from ..svd import svd as _jcm_svd

__all__ = sorted(name for name in dir(_jax_linalg) if not name.startswith("_"))

_EighImplementation = _jax_linalg.EighImplementation
_SvdAlgorithm = _jax_linalg.SvdAlgorithm
_EigImplementation = _jax_linalg.EigImplementation


# The names this module does not define are jax.lax.linalg's own objects.
__getattr__, __dir__ = _forwarding_to(_jax_linalg, __name__, globals())


def _served(*operands) -> bool:
    """Whether this package computes a call on `operands`: arrays (JAX refuses lists) of one
    dtype its solvers take, as given (lax.linalg converts none: JAX refuses an integer operand,
    or computes on it where a step before its primitive makes it floating)."""
    if not all(isinstance(x, (_jax.Array, _np.ndarray)) for x in operands):
        return False
    dtypes = {_np.dtype(x.dtype) for x in operands}
    return len(dtypes) == 1 and dtypes.pop() in _SOLVER_DTYPES


def _is_square_stack(x) -> bool:
    return x.ndim >= 2 and x.shape[-1] == x.shape[-2]


def _gpu_only_choices(*choices):
    """`choices` where JAX implements them (a GPU), none elsewhere: there JAX refuses them (Jacobi
    eigh and SVD, cuSOLVER eig are GPU algorithms), so such a call stays JAX's, to refuse."""
    return choices if _backend_has_gpu() else ()


def cholesky(x, *, symmetrize_input=True):
    """jax.lax.linalg.cholesky on this package's Cholesky factorization: L (lower)."""
    if not _served(x) or not _is_square_stack(x):
        return _jax_linalg.cholesky(x, symmetrize_input=symmetrize_input)
    return _jcm_cholesky(x, symmetrize_input=symmetrize_input)


def eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
        enable_eigvec_derivs=False, implementation=None, use_magma=None):
    """jax.lax.linalg.eig on this package's eigendecomposition: [w] + [vr if
    compute_right_eigenvectors]. Left eigenvectors (the default), `use_magma` and an explicit
    implementation (but cuSOLVER's, on a GPU) are JAX's own call."""
    served_implementations = (None,) + _gpu_only_choices(_EigImplementation.CUSOLVER)
    if (compute_left_eigenvectors or use_magma is not None
            or implementation not in served_implementations
            or not _served(x) or not _is_square_stack(x)):
        return _jax_linalg.eig(x, compute_left_eigenvectors=compute_left_eigenvectors,
                               compute_right_eigenvectors=compute_right_eigenvectors,
                               enable_eigvec_derivs=enable_eigvec_derivs,
                               implementation=implementation, use_magma=use_magma)
    return list(_jcm_lax_eig(x, compute_left_eigenvectors=False,
                             compute_right_eigenvectors=compute_right_eigenvectors,
                             enable_eigvec_derivs=enable_eigvec_derivs))


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True, subset_by_index=None,
         implementation=None):
    """jax.lax.linalg.eigh on this package's Hermitian eigendecomposition: (v, w), w ascending.
    `subset_by_index` and implementations other than QR (and Jacobi, on a GPU) are JAX's own
    call."""
    served_implementations = ((None, _EighImplementation.QR)
                              + _gpu_only_choices(_EighImplementation.JACOBI))
    if (subset_by_index is not None or implementation not in served_implementations
            or not _served(x) or not _is_square_stack(x)):
        return _jax_linalg.eigh(x, lower=lower, symmetrize_input=symmetrize_input,
                                sort_eigenvalues=sort_eigenvalues,
                                subset_by_index=subset_by_index, implementation=implementation)
    # Unsorted is "an implementation-defined order": the package's, ascending.
    v, w = _jcm_lax_eigh(x, lower=lower, symmetrize_input=symmetrize_input,
                         implementation=implementation)
    return v, w


def householder_product(a, taus):
    """jax.lax.linalg.householder_product on this package's orgqr: the first n columns of
    H_1 ... H_k, a (..., m, n) with m >= n >= k, taus (..., k)."""
    well_formed = (_served(a, taus) and a.ndim >= 2 and taus.ndim == a.ndim - 1
                   and a.shape[:-2] == taus.shape[:-1]
                   and a.shape[-2] >= a.shape[-1] >= taus.shape[-1])
    if not well_formed:
        return _jax_linalg.householder_product(a, taus)
    return _jcm_householder_product(a, taus)


def lu(x):
    """jax.lax.linalg.lu on this package's LU factorization: [lu, pivots, permutation]."""
    if not _served(x) or x.ndim < 2:
        return _jax_linalg.lu(x)
    return list(_jcm_lu(x))


def ormqr(a, taus, c, *, left=True, transpose=False):
    """jax.lax.linalg.ormqr on this package's ormqr: Q c or c Q (Q^H with transpose), Q the
    reflectors of a and taus, no Q formed."""
    well_formed = (_served(a, taus, c) and a.ndim >= 2 and c.ndim == a.ndim
                   and taus.ndim == a.ndim - 1
                   and a.shape[:-2] == c.shape[:-2] == taus.shape[:-1])
    if well_formed:
        order = c.shape[-2] if left else c.shape[-1]
        well_formed = a.shape[-2] == order and taus.shape[-1] <= min(a.shape[-1], order)
    if not well_formed:
        return _jax_linalg.ormqr(a, taus, c, left=left, transpose=transpose)
    return _jcm_ormqr(a, taus, c, left=left, transpose=transpose)


def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    """jax.lax.linalg.qr on this package's QR factorization: (q, r). Column pivoting (the one
    step `use_magma` concerns) is JAX's own call."""
    if pivoting or not _served(x) or x.ndim < 2:
        return _jax_linalg.qr(x, pivoting=pivoting, full_matrices=full_matrices,
                              use_magma=use_magma)
    q, r = _jcm_qr(x, "complete" if full_matrices else "reduced")
    return q, r


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """jax.lax.linalg.svd on this package's SVD: (u, s, vh), or s without compute_uv.
    `subset_by_index` and algorithms other than DEFAULT and QR (and Jacobi, on a GPU) are
    JAX's own call."""
    served_algorithms = ((None, _SvdAlgorithm.DEFAULT, _SvdAlgorithm.QR)
                         + _gpu_only_choices(_SvdAlgorithm.JACOBI))
    if (subset_by_index is not None or algorithm not in served_algorithms
            or not _served(x) or x.ndim < 2):
        return _jax_linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv,
                               subset_by_index=subset_by_index, algorithm=algorithm)
    out = _jcm_svd(x, full_matrices, compute_uv, algorithm=algorithm)
    return tuple(out) if compute_uv else out
