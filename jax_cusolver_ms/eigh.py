"""Symmetric / Hermitian eigendecomposition: the syevd primitive and eigh, eigvalsh, lax_eigh.

Semantics follow jax.numpy.linalg.eigh / eigvalsh (and jax.lax.linalg.eigh for lax_eigh), so
imports can be swapped: eigenvalues ascending, NaN in every matrix whose solver failed.

Two algorithms, one switch (`implementation`, as jax.lax.linalg.eigh's): divide and conquer
("qr": Xsyevd per matrix, cusolverDnXsyevBatched for the batched strategy) and Jacobi
("jacobi": syevj per matrix; for n <= 32 the batched strategy is this project's Jacobi kernel,
ffi/eigh/eigh_kernels.cu, one launch for the batch). None picks as JAX does on CUDA: Jacobi up to
n = strategy.EIGH_JACOBI_MAX_N, divide and conquer above. The strategy (lanes, XLA's stream, the
batched path) is chosen independently of the algorithm.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import strategy as _strategy
from ._compat import ad
from ._primitive import SolverPrimitive, ffi_solver_call
from .cholesky import _hermitian_from_lower, cholesky
from ._common import (as_matrix, batch_size, batched_eye, broadcast_batch, info_result, matmul,
                      mh, nan_for_nonfinite_input, nan_unless_ok, promote, resolve_params)
from .triangular import solve_triangular


def _real_dtype(dtype):
    return np.finfo(np.dtype(dtype)).dtype


def _symmetrize(x):
    return (x + mh(x)) / 2


# --- syevd ------------------------------------------------------------------------------------
# Reads the triangle named by `lower`; returns (eigenvectors, eigenvalues) as jax.lax.linalg.eigh.

def _syevd_shapes(a, *, lower, jacobi, strategy, lanes):
    n = a.shape[-1]
    if a.shape != (n, n):
        raise ValueError(f"syevd: a must be square, got shape {a.shape}")
    return [(a.shape, a.dtype), ((n,), _real_dtype(a.dtype))]


def _syevd_jax(a, *, lower, jacobi, strategy, lanes):
    # JAX's own (LAPACK syevd on CPU); the Jacobi choice is a GPU matter.
    v, w = lax.linalg.eigh(a, lower=lower, symmetrize_input=False)
    return [v, w]


def _syevd_cuda(a, *, lower, jacobi, strategy, lanes):
    n = a.shape[-1]
    choice = _strategy.choose("syevj" if jacobi else "syevd", batch_size(a, 2), (n, n), a.dtype,
                              strategy, lanes)
    if choice.runs_small_kernel:
        # The Jacobi kernel writes NaN itself for a matrix holding NaN / Inf or not converged,
        # and touches no other: neither guard nor mask, one launch in all.
        return _syevd_ffi(a, choice, lower=lower, jacobi=jacobi, mask=False)
    return nan_for_nonfinite_input(_syevd_guarded)(a, choice, lower=lower, jacobi=jacobi)


def _syevd_guarded(a, choice, *, lower, jacobi):
    if not choice.uses_ffi:
        return _syevd_jax(a, lower=lower, jacobi=jacobi, strategy=None, lanes=None)
    return _syevd_ffi(a, choice, lower=lower, jacobi=jacobi)


def _syevd_ffi(a, choice, *, lower, jacobi, mask=True):
    """The FFI call; `mask`: NaN where info says the solver failed (as JAX's lowerings)."""
    v, w, info = ffi_solver_call(
        "jcm_syevd", [a],
        [jax.ShapeDtypeStruct(a.shape, a.dtype),
         jax.ShapeDtypeStruct(a.shape[:-1], _real_dtype(a.dtype)), info_result(a, 2)],
        matrix_operands={0}, matrix_results={0}, aliases={0: 0},
        lower=lower, jacobi=jacobi, choice=choice)
    return [nan_unless_ok(v, info), nan_unless_ok(w, info)] if mask else [v, w]


def _inverse_gaps(w):
    """1 / (w_j - w_i) at (i, j) off the diagonal, 0 on it (without dividing by zero there):
    the perturbation theory of distinct eigenvalues w (..., n)."""
    eye = batched_eye(w.shape[-1], w.dtype, w.ndim + 1)
    return 1 / (eye + w[..., None, :] - w[..., :, None]) - eye


syevd = SolverPrimitive("jcm_syevd", core_ranks=(2,), shape_rule=_syevd_shapes,
                        jax_impl=_syevd_jax, cuda_impl=_syevd_cuda)


def _syevd_jvp(primals, tangents, *, lower, jacobi, strategy, lanes):
    # jax.lax.linalg's rule (non-degenerate perturbation theory; Giles, NA-08-01 sec. 3.1),
    # including its primal on the symmetrized input.
    (a,), (a_dot,) = primals, tangents
    v, w_real = syevd.bind(_symmetrize(a), lower=lower, jacobi=jacobi, strategy=strategy,
                           lanes=lanes)
    a_dot = ad.instantiate_zeros(a_dot)
    w = w_real.astype(a.dtype)
    f = _inverse_gaps(w)
    vh_a_dot_v = matmul(matmul(mh(v), a_dot), v)
    v_dot = matmul(v, f * vh_a_dot_v)
    w_dot = jnp.real(jnp.diagonal(vh_a_dot_v, axis1=-2, axis2=-1))
    return [v, w_real], [v_dot, w_dot]


syevd.defjvp(_syevd_jvp)


# --- public API -------------------------------------------------------------------------------

class EighResult(NamedTuple):
    """As jnp.linalg.eigh's result."""
    eigenvalues: jax.Array
    eigenvectors: jax.Array


def _lower_from_uplo(op, uplo):
    if uplo is None or uplo == "L":
        return True
    if uplo == "U":
        return False
    raise ValueError(f"{op}: UPLO must be one of None, 'L', or 'U', got {uplo!r}")


def _use_jacobi(op, implementation, n):
    if implementation is None:
        return n <= _strategy.EIGH_JACOBI_MAX_N
    name = getattr(implementation, "value", implementation)  # lax.linalg.EighImplementation
    if name in ("qr", "jacobi"):
        return name == "jacobi"
    raise ValueError(f"{op}: implementation must be None, 'qr' or 'jacobi' (or "
                     f"jax.lax.linalg.EighImplementation.QR / JACOBI), got {implementation!r}")


def _eigh(op, x, lower, symmetrize_input, implementation, strategy, lanes):
    """(v, w) as jax.lax.linalg.eigh; errors name `op`, the function the user called."""
    x = as_matrix(op, x, square=True)
    jacobi = _use_jacobi(op, implementation, x.shape[-1])
    if symmetrize_input:
        x = _symmetrize(x)
    v, w = syevd.bind(x, lower=bool(lower), jacobi=jacobi, **resolve_params(strategy, lanes))
    return v, w


def lax_eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True,
             implementation=None, strategy=None, lanes=None):
    """Like jax.lax.linalg.eigh: (v, w) with x = v diag(w) v^H, w ascending (real), NaN where
    the solver failed. Without symmetrize_input only the triangle named by `lower` is read.
    sort_eigenvalues is accepted for compatibility: every cuSOLVER path sorts, as JAX's GPU
    and CPU lowerings do. implementation: None, "qr" or "jacobi" (see the module docstring)."""
    del sort_eigenvalues
    return _eigh("lax_eigh", x, lower, symmetrize_input, implementation, strategy, lanes)


def eigh(a, UPLO=None, symmetrize_input=True, *, sort_eigenvalues=True, implementation=None,
         strategy=None, lanes=None):
    """Like jax.numpy.linalg.eigh: (eigenvalues, eigenvectors), eigenvalues ascending, column
    v[..., :, i] the eigenvector of w[..., i]; UPLO "L" (default) or "U" names the triangle read
    when symmetrize_input is False. sort_eigenvalues and implementation as lax_eigh."""
    del sort_eigenvalues
    v, w = _eigh("eigh", a, _lower_from_uplo("eigh", UPLO), symmetrize_input, implementation,
                 strategy, lanes)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True, implementation=None, strategy=None,
             lanes=None):
    """Like jax.numpy.linalg.eigvalsh: the eigenvalues, ascending."""
    return _eigh("eigvalsh", a, _lower_from_uplo("eigvalsh", UPLO), symmetrize_input,
                 implementation, strategy, lanes)[1]


# --- the generalized problem: sygvd -------------------------------------------------------------
# Type 1 A x = w B x, type 2 A B x = w x, type 3 B A x = w x, B positive definite, on Hermitian
# a and b with both triangles set (generalized_eigh makes them so); returns (eigenvectors,
# eigenvalues), the eigenvalues ascending, the eigenvectors v^H B v = I (type 3: v^H B^-1 v = I).

GENERALIZED_TYPES = (1, 2, 3)


def _sygvd_shapes(a, b, *, itype, strategy, lanes):
    n = a.shape[-1]
    if a.shape != (n, n) or b.shape != (n, n) or a.dtype != b.dtype:
        raise ValueError(f"sygvd: a {a.shape} {a.dtype} and b {b.shape} {b.dtype} must be "
                         "square matrices of one order and dtype")
    return [(a.shape, a.dtype), ((n,), _real_dtype(a.dtype))]


def _sygvd_reduction(a, b, *, itype, strategy=None, lanes=None):
    """The reduction to a standard problem: B = L L^H (this package's Cholesky), C = L^-1 A L^-H
    (type 1) or L^H A L (types 2 and 3), C = Y diag(w) Y^H (this package's eigh), v = L^-H Y
    (types 1 and 2) or L Y (type 3), each part by its own choice of strategy. A B that is not
    positive definite gives NaN from the Cholesky on."""
    del strategy, lanes  # JAX's own parts on the CPU; on CUDA `auto` hands the call here
    l = cholesky(b, symmetrize_input=False)
    solve = functools.partial(solve_triangular, lower=True)
    c = solve(l, mh(solve(l, a))) if itype == 1 else matmul(mh(l), matmul(a, l))
    y, w = _eigh("generalized_eigh", c, True, True, None, None, None)
    return [matmul(l, y) if itype == 3 else solve(l, y, trans="C"), w]


def _sygvd_cuda(a, b, *, itype, strategy, lanes):
    n = a.shape[-1]
    choice = _strategy.choose("sygvd", batch_size(a, 2), (n, n), a.dtype, strategy, lanes)
    if not choice.uses_ffi:
        return _sygvd_reduction(a, b, itype=itype)
    # A pair holding NaN or Inf goes in as the identities (neither routine is asked to iterate
    # on it) and comes out NaN, as one whose B is not positive definite (info > n) does.
    return nan_for_nonfinite_input(_sygvd_ffi, matrices=2)(a, b, choice, itype=itype)


def _sygvd_ffi(a, b, choice, *, itype):
    v, _factor, w, info = ffi_solver_call(
        "jcm_sygvd", [a, b],
        [jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(b.shape, b.dtype),
         jax.ShapeDtypeStruct(a.shape[:-1], _real_dtype(a.dtype)), info_result(a, 2)],
        matrix_operands={0, 1}, matrix_results={0, 1}, aliases={0: 0, 1: 1},
        itype=itype, lower=True, choice=choice)
    return [nan_unless_ok(v, info), nan_unless_ok(w, info)]


sygvd = SolverPrimitive("jcm_sygvd", core_ranks=(2, 2), shape_rule=_sygvd_shapes,
                        jax_impl=_sygvd_reduction, cuda_impl=_sygvd_cuda)


def _sygvd_jvp(primals, tangents, *, itype, strategy, lanes):
    # Type 1, A V = B V W with V^H B V = I, perturbed: with C = V^H A' V and D = V^H B' V,
    # w_i' = C_ii - w_i D_ii and V' = V X, X_ij = (C_ij - w_j D_ij) / (w_j - w_i) off the
    # diagonal, X_ii = -D_ii / 2 (distinct eigenvalues; syevd's rule where B = I). Type 2 is
    # type 1 of (B A B, B), so C = D W + (B V)^H A' (B V) + W D; type 3 is type 2 in U = B^-1 V,
    # and V' = B' U + B U'.
    (a, b), (a_dot, b_dot) = primals, tangents
    v, w_real = sygvd.bind(a, b, itype=itype, strategy=strategy, lanes=lanes)
    a_dot, b_dot = ad.instantiate_zeros(a_dot), ad.instantiate_zeros(b_dot)
    w = w_real.astype(a.dtype)
    u = jnp.linalg.solve(b, v) if itype == 3 else v
    d = matmul(matmul(mh(u), b_dot), u)
    if itype == 1:
        c = matmul(matmul(mh(v), a_dot), v)
    else:
        bu = matmul(b, u)
        c = d * w[..., None, :] + matmul(matmul(mh(bu), a_dot), bu) + w[..., :, None] * d
    eye = batched_eye(a.shape[-1], a.dtype, a.ndim)
    u_dot = matmul(u, _inverse_gaps(w) * (c - d * w[..., None, :]) - eye * d / 2)
    w_dot = jnp.real(jnp.diagonal(c, axis1=-2, axis2=-1) - w * jnp.diagonal(d, axis1=-2, axis2=-1))
    v_dot = matmul(b_dot, u) + matmul(b, u_dot) if itype == 3 else u_dot
    return [v, w_real], [v_dot, w_dot]


sygvd.defjvp(_sygvd_jvp)


def _subset(op, subset, n, name="subset_by_index"):
    """(lo, hi) of SciPy's subset_by_index (`name` as the caller calls it): the eigenvalues
    lo .. hi, both included."""
    lo, hi = (int(i) for i in subset)
    if not 0 <= lo <= hi < n:
        raise ValueError(f"{op}: {name} must be (lo, hi) with 0 <= lo <= hi < {n}, got "
                         f"{tuple(subset)}")
    return lo, hi


def generalized_eigh(a, b, *, lower=True, eigvals_only=False, type=1, subset_by_index=None,
                     strategy=None, lanes=None):
    """scipy.linalg.eigh(a, b)'s generalized Hermitian-definite eigenproblem, on any batch
    (JAX has none): type 1 A x = w B x, type 2 A B x = w x, type 3 B A x = w x, with A
    Hermitian and B Hermitian positive definite, each read from the triangle `lower` names.
    Returns (w, v), w ascending, v's columns B-orthonormal (v^H B v = I; type 3: v^H B^-1 v =
    I); only w with eigvals_only. subset_by_index (lo, hi): the eigenvalues lo .. hi, both
    included (SciPy's convention), and their vectors. Batch dims of a and b broadcast.

    On CUDA `auto` picks from the measured table: cuSOLVER's ?sygvd per matrix on lanes,
    XsygvStridedBatched (where the cuSOLVER built against has it), or the reduction to a
    standard problem (B = L L^H, C = L^-1 A L^-H or L^H A L, the eigh of C, the vectors back
    through L), its parts each by their own choice. A matrix whose B is not positive definite,
    or that holds NaN or Inf, comes out NaN, leaving the others. Differentiable where the
    eigenvalues are distinct."""
    op = "generalized_eigh"
    if type not in GENERALIZED_TYPES:
        raise ValueError(f"{op}: type must be one of {GENERALIZED_TYPES}, got {type!r}")
    a, b = promote(op, a, b)
    a = as_matrix(op, a, square=True)
    b = as_matrix(op, b, square=True, name="b")
    n = a.shape[-1]
    if b.shape[-1] != n:
        raise ValueError(f"{op}: a and b must be of the same order, got a {a.shape}, b {b.shape}")
    a, b = broadcast_batch([a, b], [2, 2])
    if subset_by_index is not None:
        lo, hi = _subset(op, subset_by_index, n)
    # The Hermitian matrices the named triangles define (as LAPACK reads them).
    a, b = (_hermitian_from_lower(x if lower else mh(x)) for x in (a, b))
    v, w = sygvd.bind(a, b, itype=type, **resolve_params(strategy, lanes))
    if subset_by_index is not None:
        w, v = w[..., lo:hi + 1], v[..., :, lo:hi + 1]
    return w if eigvals_only else (w, v)
