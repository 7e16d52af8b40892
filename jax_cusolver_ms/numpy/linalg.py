"""The mirror of jax.numpy.linalg: ``import jax_cusolver_ms.numpy.linalg as la`` in place of
``import jax.numpy.linalg as la``, and nothing else in a program changes.

Every name of jax.numpy.linalg is here. The functions this package implements (cholesky, cond,
det, eig, eigh, eigvals, eigvalsh, inv, lstsq, matrix_rank, norm, pinv, qr, slogdet, solve, svd,
svdvals) are defined with JAX's own signatures, return what JAX's return (its NamedTuple types
included) and run this package's implementation under its `auto` strategy. A call this package
does not serve the same way (an operand of a dtype its solvers do not take, or one that is not
an array, an option it does not implement such as svd's `subset_by_index`, a norm other than
the spectral ones) is JAX's own call, which answers or raises as JAX does. Every other name
(cross, matmul, tensordot, vector_norm, ...) is JAX's own object, looked up on use.
"""
import functools as _functools
import numbers as _numbers

import jax as _jax
import jax.numpy as _jnp
import jax.numpy.linalg as _jax_linalg
import numpy as _np

from .._common import forwarding_to as _forwarding_to, inexact_dtype as _inexact_dtype
from .._primitive import SOLVER_DTYPES as _SOLVER_DTYPES
from ..cholesky import cholesky as _jcm_cholesky
from ..eig import eig as _jcm_eig, eigvals as _jcm_eigvals
from ..eigh import eigh as _jcm_eigh, eigvalsh as _jcm_eigvalsh
from ..lu import det as _jcm_det, inv as _jcm_inv, slogdet as _jcm_slogdet, solve as _jcm_solve
from ..qr import qr as _jcm_qr
from ..svd import (cond as _jcm_cond, lstsq as _jcm_lstsq, matrix_rank as _jcm_matrix_rank,
                   norm as _jcm_norm, pinv as _jcm_pinv, svd as _jcm_svd,
                   svdvals as _jcm_svdvals)

__all__ = sorted(name for name in dir(_jax_linalg) if not name.startswith("_"))


# The names this module does not define are jax.numpy.linalg's own objects.
__getattr__, __dir__ = _forwarding_to(_jax_linalg, __name__, globals())


def _served(*operands) -> bool:
    """Whether this package computes a call on `operands`: arrays or scalars (jnp.linalg refuses
    lists, in its own words) whose common dtype, made inexact as jnp.linalg makes it, is one the
    package's solvers take (float16 and bfloat16 are JAX's to compute or refuse)."""
    try:
        dtype = _jnp.result_type(*operands)
    except TypeError:
        return False
    return _inexact_dtype(dtype) in _SOLVER_DTYPES


def _is_square_stack(a) -> bool:
    """Whether `a` is a stack of square matrices: JAX's own call has its words (and exception
    types) for anything else."""
    shape = _np.shape(a)
    return len(shape) >= 2 and shape[-1] == shape[-2]


def _rank_promotion_forbidden(matrices, rhs, rhs_is_vector) -> bool:
    """Whether JAX's call would broadcast `matrices` (..., n, n) against right-hand sides whose
    batch dimensions differ in number (a rank promotion), and the jax_numpy_rank_promotion
    option makes JAX refuse or warn about that. The package broadcasts silently: such a call
    is JAX's own."""
    rhs_batch_ndim = _np.ndim(rhs) - (1 if rhs_is_vector else 2)
    return (_np.ndim(matrices) - 2 != rhs_batch_ndim
            and _jax.config.jax_numpy_rank_promotion != "allow")


@_functools.cache
def _jax_result_type(name):
    """The NamedTuple class jax.numpy.linalg.<name> returns. JAX defines these classes in a
    private module that differs across releases, so the class is read off an abstract
    evaluation of JAX's own function."""
    matrix = _jax.ShapeDtypeStruct((1, 1), _np.float32)
    return type(_jax.eval_shape(getattr(_jax_linalg, name), matrix))


@_functools.cache
def _jax_cond_maps_nan_to_inf() -> bool:
    """Whether JAX's cond with p None or 2 turns a NaN ratio into inf where the matrix holds no
    NaN, as it does for every other p (and as NumPy and this package do for all): JAX 0.10
    returns s_max / s_min as it is, NaN (0 / 0) for a zero matrix. Asked of the installed JAX."""
    with _jax.ensure_compile_time_eval():
        return bool(_jnp.isinf(_jax_linalg.cond(_np.zeros((1, 1), _np.float32))))


def cholesky(a, *, upper=False, symmetrize_input=True):
    """jax.numpy.linalg.cholesky on this package's Cholesky factorization."""
    if not _served(a) or not _is_square_stack(a):
        return _jax_linalg.cholesky(a, upper=upper, symmetrize_input=symmetrize_input)
    return _jcm_cholesky(a, upper, symmetrize_input=symmetrize_input)


def cond(x, p=None):
    """jax.numpy.linalg.cond on this package's SVD (p None, 2, -2) or inverse (other p)."""
    shape = _np.shape(x)
    if not _served(x) or len(shape) < 2 or 0 in shape[-2:]:
        return _jax_linalg.cond(x, p)
    if (p is None or p == 2) and not _jax_cond_maps_nan_to_inf():
        s = _jcm_svdvals(x)
        return s[..., 0] / s[..., -1]
    return _jcm_cond(x, p)


def det(a):
    """jax.numpy.linalg.det on this package's LU factorization."""
    if not _served(a) or not _is_square_stack(a):
        return _jax_linalg.det(a)
    return _jcm_det(a)


def eig(a):
    """jax.numpy.linalg.eig on this package's general eigendecomposition."""
    if not _served(a) or not _is_square_stack(a):
        return _jax_linalg.eig(a)
    return _jax_result_type("eig")(*_jcm_eig(a))


def eigh(a, UPLO=None, symmetrize_input=True):
    """jax.numpy.linalg.eigh on this package's Hermitian eigendecomposition."""
    if not _served(a) or not _is_square_stack(a):
        return _jax_linalg.eigh(a, UPLO, symmetrize_input)
    return _jax_result_type("eigh")(*_jcm_eigh(a, UPLO, symmetrize_input))


def eigvals(a):
    """jax.numpy.linalg.eigvals on this package's general eigendecomposition."""
    if not _served(a) or not _is_square_stack(a):
        return _jax_linalg.eigvals(a)
    return _jcm_eigvals(a)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """jax.numpy.linalg.eigvalsh on this package's Hermitian eigendecomposition."""
    if not _served(a) or not _is_square_stack(a):
        return _jax_linalg.eigvalsh(a, UPLO, symmetrize_input=symmetrize_input)
    return _jcm_eigvalsh(a, UPLO, symmetrize_input=symmetrize_input)


def inv(a):
    """jax.numpy.linalg.inv on this package's LU solve."""
    if not _served(a) or not _is_square_stack(a):
        return _jax_linalg.inv(a)
    return _jcm_inv(a)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """jax.numpy.linalg.lstsq on this package's SVD."""
    # JAX's checks of a and b's ranks come in an order of their own (an IndexError for a
    # scalar a): every call but the one on a matrix and a vector or matrix is JAX's. So is an
    # empty a, whose singular values JAX returns in a's dtype, complex for a complex a.
    if (not _served(a, b) or _np.ndim(a) != 2 or _np.ndim(b) not in (1, 2)
            or _np.size(a) == 0):
        return _jax_linalg.lstsq(a, b, rcond, numpy_resid=numpy_resid)
    return _jcm_lstsq(a, b, rcond, numpy_resid=numpy_resid)


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):
    """jax.numpy.linalg.matrix_rank on this package's SVD."""
    if not _served(M):
        return _jax_linalg.matrix_rank(M, rtol, hermitian=hermitian, tol=tol)
    return _jcm_matrix_rank(M, rtol, hermitian=hermitian, tol=tol)


def _is_spectral_matrix_norm(ndim, ord, axis) -> bool:
    """Whether norm(x, ord, axis) of an x of rank `ndim` is one of the matrix norms made of the
    singular values (ord 2, -2 or 'nuc' over two distinct axes in range), which this package's
    SVD computes. Every other norm, and every bad `axis`, is left to JAX's norm."""
    if isinstance(ord, str):
        spectral = ord == "nuc"
    else:
        spectral = isinstance(ord, _numbers.Number) and ord in (2, -2)
    if not spectral:
        return False
    if axis is None:
        return ndim == 2
    if not isinstance(axis, tuple) or len(axis) != 2:
        return False
    if not all(isinstance(d, _numbers.Integral) and -ndim <= d < ndim for d in axis):
        return False
    return axis[0] % ndim != axis[1] % ndim


def norm(x, ord=None, axis=None, keepdims=False):
    """jax.numpy.linalg.norm: the 2, -2 and nuclear matrix norms on this package's SVD, every
    other norm JAX's own."""
    if not _served(x) or not _is_spectral_matrix_norm(_np.ndim(x), ord, axis):
        return _jax_linalg.norm(x, ord, axis, keepdims)
    return _jcm_norm(x, ord, axis, keepdims)


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """jax.numpy.linalg.pinv on this package's SVD."""
    if not _served(a) or _np.ndim(a) < 2:
        return _jax_linalg.pinv(a, rtol, hermitian, rcond=rcond)
    return _jcm_pinv(a, rtol, hermitian, rcond=rcond)


def qr(a, mode="reduced"):
    """jax.numpy.linalg.qr on this package's QR factorization."""
    if not _served(a) or _np.ndim(a) < 2:
        return _jax_linalg.qr(a, mode)
    out = _jcm_qr(a, mode)
    return out if mode == "r" else _jax_result_type("qr")(*out)


def slogdet(a, *, method=None):
    """jax.numpy.linalg.slogdet on this package's LU (or, with method='qr', QR) factorization."""
    if not _served(a) or not _is_square_stack(a):
        return _jax_linalg.slogdet(a, method=method)
    return _jax_result_type("slogdet")(*_jcm_slogdet(a, method=method))


def solve(a, b):
    """jax.numpy.linalg.solve on this package's LU factorization and solve."""
    if (not _served(a, b) or not _is_square_stack(a)
            or _rank_promotion_forbidden(a, b, _np.ndim(b) == 1)):
        return _jax_linalg.solve(a, b)
    return _jcm_solve(a, b)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """jax.numpy.linalg.svd on this package's SVD; a subset_by_index call is JAX's own."""
    if not _served(a) or _np.ndim(a) < 2 or subset_by_index is not None:
        return _jax_linalg.svd(a, full_matrices, compute_uv, hermitian, subset_by_index)
    out = _jcm_svd(a, full_matrices, compute_uv, hermitian)
    return _jax_result_type("svd")(*out) if compute_uv else out


def svdvals(x, /):
    """jax.numpy.linalg.svdvals on this package's SVD."""
    if not _served(x) or _np.ndim(x) < 2:
        return _jax_linalg.svdvals(x)
    return _jcm_svdvals(x)
