"""Cholesky family: potrf / potrs primitives and cholesky, cho_factor, cho_solve.

Semantics follow jax.numpy.linalg.cholesky (and jax.lax.linalg.cholesky's symmetrize_input),
jax.scipy.linalg.cho_factor and jax.scipy.linalg.cho_solve, so imports can be swapped.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import settings as _settings
from . import strategy as _strategy
from ._compat import NOT_MAPPED, ad
from ._primitive import SolverPrimitive, ffi_solver_call
from .triangular import solve_triangular
from ._common import (as_matrix, batch_size, batched_eye, broadcast_batch, factor_rhs, matmul, mh,
                      promote, resolve_params, tril, triu)


# --- potrf ------------------------------------------------------------------------------------
# One output: the factor of the triangle named by `lower` (A = L L^H, or A = U^H U reading the
# upper triangle), the other triangle zero, and NaN where A is not positive definite: what
# jax.lax.linalg.cholesky (lower) and jax.scipy.linalg.cho_factor (either) return.

def _potrf_shapes(a, *, lower, strategy, lanes):
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"potrf: a must be square, got shape {a.shape}")
    return [(a.shape, a.dtype)]


def _potrf_jax(a, *, lower, strategy, lanes):
    if lower:
        return [lax.linalg.cholesky(a, symmetrize_input=False)]
    return [mh(lax.linalg.cholesky(mh(a), symmetrize_input=False))]


def _potrf_cuda(a, *, lower, strategy, lanes):
    n = a.shape[-1]
    choice = _strategy.choose("potrf", batch_size(a, 2), (n, n), a.dtype, strategy, lanes)
    if not choice.uses_ffi:
        return _potrf_jax(a, lower=lower, strategy=strategy, lanes=lanes)
    if choice.runs_small_kernel:  # one launch: the zero triangle and the NaN written in-kernel
        return ffi_solver_call("jcm_potrf_small", [a], [jax.ShapeDtypeStruct(a.shape, a.dtype)],
                               matrix_operands={0}, matrix_results={0}, lower=lower)
    factor, info = ffi_solver_call(
        "jcm_potrf", [a],
        [jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(a.shape[:-2], np.int32)],
        matrix_operands={0}, matrix_results={0}, aliases={0: 0},
        lower=lower, choice=choice)
    # As JAX: any info != 0 makes the whole matrix NaN, then the unused triangle is zeroed
    # (cuSOLVER leaves the input there).
    factor = jnp.where((info == 0)[..., None, None], factor, jnp.array(np.nan, a.dtype))
    return [tril(factor) if lower else triu(factor)]


potrf = SolverPrimitive("jcm_potrf", core_ranks=(2,), shape_rule=_potrf_shapes,
                        jax_impl=_potrf_jax, cuda_impl=_potrf_cuda)


def _phi(x):
    """The lower triangle of x with its diagonal halved."""
    n = x.shape[-1]
    return tril(x) / (1 + batched_eye(n, x.dtype, x.ndim))


def _hermitian_from_lower(x):
    """The Hermitian matrix that x's lower triangle (the real part of its diagonal) defines."""
    strict, diag = tril(x, -1), triu(tril(x))
    return strict + mh(strict) + (diag + mh(diag)) / 2


@functools.cache
def _jax_tangent_is_whole() -> bool:
    """Whether jax.lax.linalg.cholesky (symmetrize_input=False, hence cho_factor and
    cholesky(symmetrize_input=False)) differentiates with the whole tangent, the triangle it
    never reads included: JAX 0.10 and 0.11.2 do (jax-ml/jax issue 40421 calls it a ghost
    gradient). Asked of the installed JAX once: a tangent in the strict upper triangle of a
    2 x 2 matrix moves its factor under that rule and not under one that reads the lower
    triangle only."""
    with jax.ensure_compile_time_eval():
        a = np.array([[1.0, 0.5], [0.5, 1.0]], np.float32)
        upper = np.array([[0.0, 1.0], [0.0, 0.0]], np.float32)
        _, l_dot = jax.jvp(lambda x: lax.linalg.cholesky(x, symmetrize_input=False),
                           (a,), (upper,))
        return bool(np.any(np.asarray(l_dot) != 0))


def _potrf_jvp(primals, tangents, *, lower, strategy, lanes):
    # Murray (arXiv:1602.07527), as jax.lax.linalg: L' = L phi(L^-1 A' L^-H), with A' the
    # tangent as JAX takes it: whole (see _jax_tangent_is_whole), else made Hermitian from the
    # triangle potrf reads. For the upper factor U = L^H of the matrix whose lower triangle is
    # A^H's, as jax.scipy.linalg.cho_factor(lower=False).
    (a,), (a_dot,) = primals, tangents
    factor, = potrf.bind(a, lower=lower, strategy=strategy, lanes=lanes)
    a_dot = ad.instantiate_zeros(a_dot)
    l, sigma = (factor, a_dot) if lower else (mh(factor), mh(a_dot))
    if not _jax_tangent_is_whole():
        sigma = _hermitian_from_lower(sigma)
    tmp = lax.linalg.triangular_solve(l, sigma, left_side=False, transpose_a=True,
                                      conjugate_a=True, lower=True)
    l_dot = matmul(l, _phi(lax.linalg.triangular_solve(l, tmp, left_side=True, lower=True)))
    return [factor], [l_dot if lower else mh(l_dot)]


potrf.defjvp(_potrf_jvp)


# --- potrs ------------------------------------------------------------------------------------

def _potrs_shapes(c, b, *, lower, strategy, lanes):
    n = c.shape[-1]
    if c.shape != (n, n) or b.shape[0] != n or c.dtype != b.dtype:
        raise ValueError(f"potrs: c {c.shape} {c.dtype}, b {b.shape} {b.dtype} do not fit "
                         "c (n, n), b (n, k) of one dtype")
    return [(b.shape, b.dtype)]


def _potrs_jax(c, b, *, lower, strategy, lanes):
    # As jax.scipy.linalg.cho_solve: two triangular solves reading c's `lower` triangle.
    solve = lambda x, adjoint: lax.linalg.triangular_solve(
        c, x, left_side=True, lower=lower, transpose_a=adjoint, conjugate_a=adjoint)
    return [solve(solve(b, not lower), lower)]


def _potrs_cuda(c, b, *, lower, strategy, lanes):
    n = c.shape[-1]
    choice = _strategy.choose("potrs", batch_size(c, 2), (n, n), c.dtype, strategy, lanes,
                              nrhs=b.shape[-1])
    if not choice.uses_ffi:  # JAX's two triangular solves, each by solve_triangular's choice
        solve = lambda x, adjoint: solve_triangular(c, x, "C" if adjoint else 0, lower,
                                                    strategy="auto")
        return [solve(solve(b, not lower), lower)]
    if choice.runs_small_kernel:  # one launch, any right-hand sides up to its limit
        return ffi_solver_call("jcm_potrs_small", [c, b], [jax.ShapeDtypeStruct(b.shape, b.dtype)],
                               matrix_operands={0, 1}, matrix_results={0}, aliases={1: 0},
                               lower=lower)
    x, _info = ffi_solver_call(
        "jcm_potrs", [c, b],
        [jax.ShapeDtypeStruct(b.shape, b.dtype), jax.ShapeDtypeStruct(c.shape[:-2], np.int32)],
        matrix_operands={0, 1}, matrix_results={0}, aliases={1: 0},
        lower=lower, choice=choice)
    return [x]


def _potrs_batch_rule(args, dims, *, lower, strategy, lanes):
    """When only b is mapped, the mapped axis becomes more right-hand sides (no copies of c),
    unless the strategy in force is the batched one, which takes one right-hand side."""
    (c, b), (c_dim, b_dim) = args, dims
    if c_dim is not NOT_MAPPED or _settings.resolve(strategy, lanes, "cho_solve")[0] == "batched":
        return None
    b = jnp.moveaxis(b, b_dim, -1)
    shape = b.shape
    x, = potrs.bind(c, b.reshape(shape[:-2] + (shape[-2] * shape[-1],)),
                    lower=lower, strategy=strategy, lanes=lanes)
    return [x.reshape(shape)], [len(shape) - 1]


potrs = SolverPrimitive("jcm_potrs", core_ranks=(2, 2), shape_rule=_potrs_shapes,
                        jax_impl=_potrs_jax, cuda_impl=_potrs_cuda, batch_rule=_potrs_batch_rule)


def _potrs_jvp(primals, tangents, *, lower, strategy, lanes):
    # x = A^-1 b: x' = A^-1 (b' - A' x), with A = F F^H (lower) or F^H F (upper) and F' the
    # used triangle of c' (the other one is never read, as in JAX's triangular solves).
    (c, b), (c_dot, b_dot) = primals, tangents
    params = dict(lower=lower, strategy=strategy, lanes=lanes)
    x, = potrs.bind(c, b, **params)
    rhs = []
    if type(b_dot) is not ad.Zero:
        rhs.append(b_dot)
    if type(c_dot) is not ad.Zero:
        triangle = tril if lower else triu
        f, f_dot = triangle(c), triangle(c_dot)
        if lower:
            a_dot_x = matmul(f_dot, matmul(mh(f), x)) + matmul(f, matmul(mh(f_dot), x))
        else:
            a_dot_x = matmul(mh(f_dot), matmul(f, x)) + matmul(mh(f), matmul(f_dot, x))
        rhs.append(-a_dot_x)
    x_dot, = potrs.bind(c, sum(rhs[1:], rhs[0]), **params)
    return [x], [x_dot]


def _potrs_transpose(cts, c, b, *, lower, strategy, lanes):
    # x = A^-1 b is linear in b; with A Hermitian, A^-T = conj(A^-1): b_bar = conj(A^-1 conj(ct)).
    assert ad.is_undefined_primal(b) and not ad.is_undefined_primal(c)
    ct, = cts
    if type(ct) is ad.Zero:
        return [None, ad.Zero(b.aval)]
    x, = potrs.bind(c, jnp.conj(ct), lower=lower, strategy=strategy, lanes=lanes)
    return [None, jnp.conj(x)]


potrs.defjvp(_potrs_jvp)
potrs.deftranspose(_potrs_transpose)


# --- public API -------------------------------------------------------------------------------

def cholesky(a, upper=False, *, symmetrize_input=True, strategy=None, lanes=None):
    """Like jax.numpy.linalg.cholesky: L with A = L L^H (or U = L^H if upper), NaN where A is
    not positive definite. symmetrize_input as jax.lax.linalg.cholesky: factor (A + A^H) / 2,
    else read only the lower triangle."""
    a = as_matrix("cholesky", a, square=True)
    if symmetrize_input:
        a = (a + mh(a)) / 2
    l, = potrf.bind(a, lower=True, **resolve_params(strategy, lanes))
    return mh(l) if upper else l


def cho_factor(a, lower=False, *, strategy=None, lanes=None):
    """Like jax.scipy.linalg.cho_factor: (c, lower), c the factor of a's `lower` (else upper)
    triangle with the other triangle zero; NaN where a is not positive definite."""
    a = as_matrix("cho_factor", a, square=True)
    c, = potrf.bind(a, lower=bool(lower), **resolve_params(strategy, lanes))
    return c, lower


def cho_solve(c_and_lower, b, *, strategy=None, lanes=None):
    """Like jax.scipy.linalg.cho_solve: solves A x = b from cho_factor's (c, lower).

    b is a vector (n,) or matrices (..., n, k) whose batch dims broadcast with c's; as in JAX,
    b of shape c.shape[:-1] (a batch of vectors) is still accepted, with a FutureWarning."""
    c, lower = c_and_lower
    c, b = promote("cho_solve", c, b)
    c = as_matrix("cho_solve", c, square=True, name="c")
    b, vector = factor_rhs("cho_solve", c, b, "c")
    c, b = broadcast_batch([c, b], [2, 2])
    x, = potrs.bind(c, b, lower=bool(lower), **resolve_params(strategy, lanes))
    return x[..., 0] if vector else x
