"""General (non-symmetric) eigendecomposition: the geev primitive and eig, eigvals, lax_eig.

Semantics follow jax.numpy.linalg.eig / eigvals and jax.lax.linalg.eig: complex outputs for
real input too, eigenvectors normalised as LAPACK's geev (unit 2-norm, largest-magnitude
component real), NaN in every matrix whose solver failed. On CUDA the right eigenvectors come
from cusolverDnXgeev on the lanes (JAX runs the same routine one matrix after another on one
stream), or for n <= 4 from this project's kernel, a thread per matrix (strategy "batched").
cuSOLVER computes no left eigenvectors: asking for them runs JAX's own implementation (LAPACK
on the host), as jax.lax.linalg.eig does on GPU.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import strategy as _strategy
from ._compat import ad
from ._primitive import SolverPrimitive, ffi_solver_call
from ._common import (as_matrix, batch_size, batched_eye, info_result, matmul, mh,
                      nan_for_nonfinite_input, nan_unless_ok, resolve_params)
from .lu import solve


def _complex_dtype(dtype):
    return np.result_type(np.dtype(dtype), np.complex64)


def _complex_eigenvectors(w, vr):
    """LAPACK's packed real eigenvectors (real input) as complex ones. A conjugate pair of
    eigenvalues sits in adjacent places j, j+1 and shares columns j, j+1 of vr:
    v_j = vr_j + i vr_{j+1}, v_{j+1} = vr_j - i vr_{j+1}. Which member of a pair a place holds
    follows from the parity of the count of non-real eigenvalues up to it."""
    not_real = jnp.imag(w) != 0
    first = not_real & (jnp.cumsum(not_real, axis=-1) % 2 == 1)
    second = not_real & ~first
    first, second = first[..., None, :], second[..., None, :]
    next_column = jnp.roll(vr, -1, axis=-1)
    previous_column = jnp.roll(vr, 1, axis=-1)
    re = jnp.where(second, previous_column, vr)
    im = jnp.where(first, next_column, jnp.where(second, -vr, jnp.zeros_like(vr)))
    return lax.complex(re, im)


# --- geev -------------------------------------------------------------------------------------
# Outputs as jax.lax.linalg.eig: [w] + [vl if left] + [vr if right], all complex.

def _geev_shapes(a, *, compute_left_eigenvectors, compute_right_eigenvectors,
                 enable_eigvec_derivs, strategy, lanes):
    n = a.shape[-1]
    if a.shape != (n, n):
        raise ValueError(f"geev: a must be square, got shape {a.shape}")
    c = _complex_dtype(a.dtype)
    count = int(compute_left_eigenvectors) + int(compute_right_eigenvectors)
    return [((n,), c)] + [((n, n), c)] * count


def _geev_jax(a, *, compute_left_eigenvectors, compute_right_eigenvectors,
              enable_eigvec_derivs, strategy, lanes):
    return list(lax.linalg.eig(a, compute_left_eigenvectors=compute_left_eigenvectors,
                               compute_right_eigenvectors=compute_right_eigenvectors))


def _geev_cuda(a, **params):
    n = a.shape[-1]
    choice = _strategy.choose("geev", batch_size(a, 2), (n, n), a.dtype, params["strategy"],
                              params["lanes"])
    if choice.runs_small_kernel and not params["compute_left_eigenvectors"]:
        # The tiny kernel writes NaN itself for a matrix holding NaN / Inf or not converged,
        # and touches no other: neither guard nor mask, one launch in all.
        return _geev_ffi(a, choice, params["compute_right_eigenvectors"], mask=False)
    return nan_for_nonfinite_input(_geev_guarded)(a, choice, **params)


def _geev_guarded(a, choice, **params):
    if params["compute_left_eigenvectors"] or not choice.uses_ffi:
        return _geev_jax(a, **params)
    return _geev_ffi(a, choice, params["compute_right_eigenvectors"])


def _geev_ffi(a, choice, right, mask=True):
    """The FFI call: [w] + [vr if right], complex; `mask`: NaN where info says geev failed."""
    right = bool(right)
    # Without right eigenvectors the vr result is an empty placeholder.
    vr_shape = a.shape if right else a.shape[:-2] + (0, 0)
    _, w, vr, info = ffi_solver_call(
        "jcm_geev", [a],
        [jax.ShapeDtypeStruct(a.shape, a.dtype),
         jax.ShapeDtypeStruct(a.shape[:-1], _complex_dtype(a.dtype)),
         jax.ShapeDtypeStruct(vr_shape, a.dtype), info_result(a, 2)],
        matrix_operands={0}, matrix_results={0, 2}, aliases={0: 0},
        compute_right_eigenvectors=right, choice=choice)
    outs = [nan_unless_ok(w, info) if mask else w]
    if right:
        if not jnp.iscomplexobj(vr):
            vr = _complex_eigenvectors(w, vr)
        outs.append(nan_unless_ok(vr, info) if mask else vr)
    return outs


geev = SolverPrimitive("jcm_geev", core_ranks=(2,), shape_rule=_geev_shapes,
                       jax_impl=_geev_jax, cuda_impl=_geev_cuda)


def _eigenvector_jvp(w, v, a_dot, solve_kw):
    """Tangents of (w, v) under geev's normalisation, as jax.lax.linalg: non-degenerate
    perturbation theory (Giles, NA-08-01 sec. 3.1) gives v_j' = u_j + c_j v_j with c_j free;
    unit 2-norm and a real largest-magnitude component fix c_j (jax-ml/jax issue 2748)."""
    n = w.shape[-1]
    eye = batched_eye(n, w.dtype, w.ndim + 1)
    f = 1 / (eye + w[..., None, :] - w[..., :, None]) - eye
    p = matmul(solve(v, a_dot, **solve_kw), v)
    w_dot = jnp.diagonal(p, axis1=-2, axis2=-1)
    u = matmul(v, f * p)
    largest = jnp.argmax(jnp.abs(v), axis=-2)
    rows = lax.broadcasted_iota(largest.dtype, v.shape, v.ndim - 2)
    mask = (rows == largest[..., None, :]).astype(v.dtype)
    c = lax.complex(-jnp.real(jnp.sum(jnp.conj(v) * u, axis=-2)),
                    -jnp.imag(jnp.sum(mask * u, axis=-2)) / jnp.real(jnp.sum(mask * v, axis=-2)))
    return w_dot, u + v * c[..., None, :]


def _geev_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors,
              enable_eigvec_derivs, strategy, lanes):
    left, right = compute_left_eigenvectors, compute_right_eigenvectors
    if (left or right) and not enable_eigvec_derivs:
        raise NotImplementedError(
            "Derivatives of non-symmetric eigenvectors are only valid under assumptions on the "
            "input that cannot be checked (distinct eigenvalues; no two components of an "
            "eigenvector tied for the largest magnitude): pass enable_eigvec_derivs=True to "
            "jax_cusolver_ms.lax_eig to opt in, as with jax.lax.linalg.eig. See "
            "https://github.com/jax-ml/jax/issues/2748.")
    (a,), (a_dot,) = primals, tangents
    outs = geev.bind(a, compute_left_eigenvectors=left, compute_right_eigenvectors=True,
                     enable_eigvec_derivs=enable_eigvec_derivs, strategy=strategy, lanes=lanes)
    w, vr = outs[0], outs[-1]
    a_dot = ad.instantiate_zeros(a_dot).astype(vr.dtype)
    solve_kw = dict(strategy=strategy, lanes=lanes)
    if not (left or right):
        # w_j' = (V^-1 A' V)_jj
        return [w], [jnp.sum(solve(vr, a_dot, **solve_kw) * jnp.swapaxes(vr, -1, -2), axis=-1)]
    w_dot, vr_dot = _eigenvector_jvp(w, vr, a_dot, solve_kw)
    primal_out, tangent_out = [w], [w_dot]
    if left:  # left eigenvectors are the right ones of A^H, with conjugate eigenvalues
        _, vl_dot = _eigenvector_jvp(jnp.conj(w), outs[1], mh(a_dot), solve_kw)
        primal_out.append(outs[1])
        tangent_out.append(vl_dot)
    if right:
        primal_out.append(vr)
        tangent_out.append(vr_dot)
    return primal_out, tangent_out


geev.defjvp(_geev_jvp)


# --- public API -------------------------------------------------------------------------------

class EigResult(NamedTuple):
    """As jnp.linalg.eig's result."""
    eigenvalues: jax.Array
    eigenvectors: jax.Array


def _eig(op, x, left, right, enable_eigvec_derivs, strategy, lanes):
    """geev's outputs as jax.lax.linalg.eig; errors name `op`, the function the user called."""
    x = as_matrix(op, x, square=True)
    return geev.bind(x, compute_left_eigenvectors=bool(left),
                     compute_right_eigenvectors=bool(right),
                     enable_eigvec_derivs=bool(enable_eigvec_derivs),
                     **resolve_params(strategy, lanes))


def lax_eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
            enable_eigvec_derivs=False, strategy=None, lanes=None):
    """Like jax.lax.linalg.eig: [w] + [vl if compute_left_eigenvectors] + [vr if
    compute_right_eigenvectors], complex. Eigenvector derivatives need enable_eigvec_derivs=True
    (valid for distinct eigenvalues only), as in JAX; eigenvalue derivatives always work.
    Left eigenvectors run JAX's own implementation (cuSOLVER has none)."""
    return _eig("lax_eig", x, compute_left_eigenvectors, compute_right_eigenvectors,
                enable_eigvec_derivs, strategy, lanes)


def eig(a, *, strategy=None, lanes=None):
    """Like jax.numpy.linalg.eig: (eigenvalues, eigenvectors), complex64 for 32-bit input and
    complex128 for 64-bit; column v[..., :, i] is the unit-norm right eigenvector of w[..., i]
    with its largest-magnitude component real. Not differentiable in the eigenvectors (as
    JAX's); use lax_eig(..., enable_eigvec_derivs=True) for that."""
    w, v = _eig("eig", a, False, True, False, strategy, lanes)
    return EigResult(w, v)


def eigvals(a, *, strategy=None, lanes=None):
    """Like jax.numpy.linalg.eigvals: the eigenvalues, complex, in geev's order."""
    return _eig("eigvals", a, False, False, False, strategy, lanes)[0]
