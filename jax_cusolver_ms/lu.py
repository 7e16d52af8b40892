"""LU family: getrf / getrs primitives and lu, lu_factor, lu_solve, solve, inv, det, slogdet.

Semantics follow jax.lax.linalg.lu, jax.scipy.linalg.lu_factor / lu_solve and
jax.numpy.linalg.solve / inv / det / slogdet, so imports can be swapped.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.scipy.linalg
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import settings as _config
from . import strategy as _strategy
from ._compat import NOT_MAPPED, ad, zeros_like_tangent
from ._common import (ELEMENTWISE_CHECK_MAX_ENTRIES, as_matrix, batch_size, batched_eye,
                      broadcast_batch, eye_like, factor_rhs, matmul, nan_for_nonfinite_input,
                      nan_where, nonfinite_matrices, promote, resolve_params, tril, triu)
from ._primitive import SolverPrimitive, ffi_solver_call
from .triangular import solve_triangular

_TRANS = {0: "N", 1: "T", 2: "C"}


# --- getrf ------------------------------------------------------------------------------------

def _getrf_shapes(a, *, strategy, lanes):
    m, n = a.shape
    return [((m, n), a.dtype), ((min(m, n),), np.int32), ((m,), np.int32)]


def _getrf_jax(a, *, strategy, lanes):
    return jax.lax.linalg.lu(a)


def _getrf_cuda(a, *, strategy, lanes):
    m, n = a.shape[-2:]
    choice = _strategy.choose("getrf", batch_size(a, 2), (m, n), a.dtype, strategy, lanes)
    if choice.runs_small_kernel:
        # One launch: JAX's pivots and permutation, and NaN for a non-finite matrix, written by
        # the kernel itself (neither guard nor conversions around it).
        batch = a.shape[:-2]
        lu, pivots, permutation = ffi_solver_call(
            "jcm_getrf_small", [a],
            [jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(batch + (n,), np.int32),
             jax.ShapeDtypeStruct(batch + (n,), np.int32)],
            matrix_operands={0}, matrix_results={0})
        return lu, pivots, permutation
    return nan_for_nonfinite_input(_getrf_guarded, substitute=False)(a, choice)


def _getrf_guarded(a, choice):
    if not choice.uses_ffi:  # JAX's own lowering: as fast or faster here
        return _getrf_jax(a, strategy=None, lanes=None)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    lu, ipiv, info = ffi_solver_call(
        "jcm_getrf", [a],
        [jax.ShapeDtypeStruct(a.shape, a.dtype),
         jax.ShapeDtypeStruct(batch + (min(m, n),), np.int32),
         jax.ShapeDtypeStruct(batch, np.int32)],
        matrix_operands={0}, matrix_results={0}, aliases={0: 0},
        choice=choice)
    pivots = ipiv - 1  # LAPACK's 1-based pivots -> JAX's 0-based
    permutation = jax.lax.linalg.lu_pivots_to_permutation(pivots, m)
    # As JAX: only an illegal-argument info (< 0) poisons the result; singular U is returned.
    lu = jnp.where((info < 0)[..., None, None], jnp.array(np.nan, a.dtype), lu)
    return lu, pivots, permutation


getrf = SolverPrimitive("jcm_getrf", core_ranks=(2,), shape_rule=_getrf_shapes,
                        jax_impl=_getrf_jax, cuda_impl=_getrf_cuda)


def _getrf_jvp(primals, tangents, *, strategy, lanes):
    # De Hoog, Anderssen & Lukas: with L U = P A,
    #   L' = L tril(L^-1 P A' U^-1, -1),  U' = triu(L^-1 P A' U^-1) U   (as jax.lax.linalg.lu).
    (a,), (a_dot,) = primals, tangents
    lu, pivots, permutation = getrf.bind(a, strategy=strategy, lanes=lanes)
    m, n = a.shape[-2:]
    k = min(m, n)
    dtype = a.dtype
    a_dot = ad.instantiate_zeros(a_dot)
    x = jnp.take_along_axis(a_dot, permutation[..., :, None], axis=-2)
    eye_m = batched_eye(m, dtype, a.ndim)
    l = jnp.pad(tril(lu[..., :, :k], -1), [(0, 0)] * (a.ndim - 1) + [(0, m - k)]) + eye_m
    u_eye = jnp.pad(batched_eye(n - k, dtype, a.ndim), [(0, 0)] * (a.ndim - 2) + [(k, 0), (k, 0)])
    u = jnp.pad(triu(lu[..., :k, :]), [(0, 0)] * (a.ndim - 2) + [(0, n - k), (0, 0)]) + u_eye
    la = lax.linalg.triangular_solve(l, x, left_side=True, lower=True, unit_diagonal=True)
    lau = lax.linalg.triangular_solve(u, la, left_side=False, lower=False)
    lu_dot = matmul(l, tril(lau, -1)) + matmul(triu(lau), u)
    return (lu, pivots, permutation), (lu_dot, zeros_like_tangent(pivots),
                                       zeros_like_tangent(permutation))


getrf.defjvp(_getrf_jvp)


# --- getrs ------------------------------------------------------------------------------------

def _getrs_shapes(lu, pivots, b, *, trans, strategy, lanes):
    n = lu.shape[-1]
    if lu.shape != (n, n) or pivots.shape != (n,) or b.shape[0] != n:
        raise ValueError(f"getrs: shapes lu {lu.shape}, pivots {pivots.shape}, b {b.shape} "
                         "do not fit lu (n, n), pivots (n,), b (n, k)")
    return [(b.shape, b.dtype)]


def _getrs_jax(lu, pivots, b, *, trans, strategy, lanes):
    return [jax.scipy.linalg.lu_solve((lu, pivots), b, trans=trans)]


def _lu_solve_in_pieces(lu, permutation, b, trans):
    """JAX's lu_solve (jax._src.lax.linalg._lu_solve_core), its two triangular solves through
    solve_triangular's own measured choice (the one-launch kernel where that beat XLA's
    trsmBatched, as under enable()): where `auto` hands the solve to JAX."""
    solve = functools.partial(solve_triangular, lu, strategy="auto")
    permutation = permutation[..., :, None]
    if trans == 0:
        x = solve(jnp.take_along_axis(b, permutation, axis=-2), lower=True, unit_diagonal=True)
        return solve(x, lower=False)
    op = _TRANS[trans]
    x = solve(solve(b, op, lower=False), op, lower=True, unit_diagonal=True)
    return jnp.take_along_axis(x, jnp.argsort(permutation, axis=-2), axis=-2)


def _jax_solve_in_pieces(a, b):
    """jnp.linalg.solve as JAX writes it (its LU, a custom_linear_solve over lu_solve), the
    triangular solves in pieces (_lu_solve_in_pieces)."""
    lu_, _, permutation = lax.linalg.lu(lax.stop_gradient(a))
    solve = lambda _, x: _lu_solve_in_pieces(lu_, permutation, x, 0)
    transpose_solve = lambda _, x: _lu_solve_in_pieces(lu_, permutation, x, 1)
    return lax.custom_linear_solve(lambda x: matmul(a, x), b, solve, transpose_solve)


def _getrs_cuda(lu, pivots, b, *, trans, strategy, lanes):
    n = lu.shape[-1]
    choice = _strategy.choose("getrs", batch_size(lu, 2), (n, n), lu.dtype, strategy, lanes,
                              nrhs=b.shape[-1])
    if not choice.uses_ffi:
        permutation = lax.linalg.lu_pivots_to_permutation(pivots, n)
        return [_lu_solve_in_pieces(lu, permutation, b, trans)]
    if choice.runs_small_kernel:  # one launch, JAX's 0-based pivots as they are
        return [ffi_solver_call("jcm_getrs_small", [lu, pivots, b],
                                [jax.ShapeDtypeStruct(b.shape, b.dtype)],
                                matrix_operands={0, 2}, matrix_results={0}, trans=trans)[0]]
    x, _info = ffi_solver_call(
        "jcm_getrs", [lu, pivots + 1, b],
        [jax.ShapeDtypeStruct(b.shape, b.dtype), jax.ShapeDtypeStruct(lu.shape[:-2], np.int32)],
        matrix_operands={0, 2}, matrix_results={0}, aliases={2: 0},
        trans=trans, choice=choice)
    return [x]


def _getrs_batch_rule(args, dims, *, trans, strategy, lanes):
    """When only b is mapped, the mapped axis becomes more right-hand sides (no copies of lu)."""
    (lu, pivots, b), (lu_dim, piv_dim, b_dim) = args, dims
    if lu_dim is not NOT_MAPPED or piv_dim is not NOT_MAPPED:
        return None
    b = jnp.moveaxis(b, b_dim, -1)
    shape = b.shape
    x, = getrs.bind(lu, pivots, b.reshape(shape[:-2] + (shape[-2] * shape[-1],)),
                    trans=trans, strategy=strategy, lanes=lanes)
    return [x.reshape(shape)], [len(shape) - 1]


getrs = SolverPrimitive("jcm_getrs", core_ranks=(2, 1, 2), shape_rule=_getrs_shapes,
                        jax_impl=_getrs_jax, cuda_impl=_getrs_cuda, batch_rule=_getrs_batch_rule)


def _unpack_lu(lu):
    n = lu.shape[-1]
    return tril(lu, -1) + batched_eye(n, lu.dtype, lu.ndim), triu(lu)


def _apply_a_dot(lu, perm, lu_dot, x, trans):
    """op(A') x for A = P^T L U, where L' = tril(lu', -1) and U' = triu(lu')."""
    l, u = _unpack_lu(lu)
    dl, du = tril(lu_dot, -1), triu(lu_dot)
    if trans == 0:
        v = matmul(dl, matmul(u, x)) + matmul(l, matmul(du, x))
        inverse = jnp.argsort(perm, axis=-1)
        return jnp.take_along_axis(v, inverse[..., :, None], axis=-2)
    h = (lambda m: jnp.conj(jnp.swapaxes(m, -1, -2))) if trans == 2 else \
        (lambda m: jnp.swapaxes(m, -1, -2))
    px = jnp.take_along_axis(x, perm[..., :, None], axis=-2)
    return matmul(h(u), matmul(h(dl), px)) + matmul(h(du), matmul(h(l), px))


def _getrs_jvp(primals, tangents, *, trans, strategy, lanes):
    lu, pivots, b = primals
    lu_dot, _, b_dot = tangents
    params = dict(trans=trans, strategy=strategy, lanes=lanes)
    x, = getrs.bind(lu, pivots, b, **params)
    rhs = None
    if type(b_dot) is not ad.Zero:
        rhs = b_dot
    if type(lu_dot) is not ad.Zero:
        perm = jax.lax.linalg.lu_pivots_to_permutation(pivots, lu.shape[-1])
        term = -_apply_a_dot(lu, perm, lu_dot, x, trans)
        rhs = term if rhs is None else rhs + term
    if rhs is None:
        return [x], [zeros_like_tangent(x)]
    x_dot, = getrs.bind(lu, pivots, rhs, **params)
    return [x], [x_dot]


def _getrs_transpose(cts, lu, pivots, b, *, trans, strategy, lanes):
    # x = op(A)^-1 b is linear in b; its transpose is b_bar = op(A)^-T x_bar (no conjugation).
    assert ad.is_undefined_primal(b) and not ad.is_undefined_primal(lu)
    ct, = cts
    if type(ct) is ad.Zero:
        return [None, None, ad.Zero(b.aval)]
    params = dict(strategy=strategy, lanes=lanes)
    if trans == 2:
        b_bar = jnp.conj(getrs.bind(lu, pivots, jnp.conj(ct), trans=0, **params)[0])
    else:
        b_bar = getrs.bind(lu, pivots, ct, trans=1 - trans, **params)[0]
    return [None, None, b_bar]


getrs.defjvp(_getrs_jvp)
getrs.deftranspose(_getrs_transpose)


# --- public API -------------------------------------------------------------------------------

def lu(a, *, strategy=None, lanes=None):
    """LU with partial pivoting, like jax.lax.linalg.lu: (lu, pivots, permutation).

    pivots are 0-based int32 of shape (..., min(m, n)); permutation int32 of shape (..., m).
    """
    a = as_matrix("lu", a)
    return tuple(getrf.bind(a, **resolve_params(strategy, lanes)))


def lu_factor(a, *, strategy=None, lanes=None):
    """Like jax.scipy.linalg.lu_factor: (lu, piv) with 0-based int32 pivots."""
    lu_, pivots, _ = lu(as_matrix("lu_factor", a), strategy=strategy, lanes=lanes)
    return lu_, pivots


def lu_solve(lu_and_piv, b, trans=0, *, strategy=None, lanes=None):
    """Like jax.scipy.linalg.lu_solve: solves op(A) x = b from lu_factor's output.

    trans: 0 for A x = b, 1 for A^T x = b, 2 for A^H x = b. b is a vector (n,) or matrices
    (..., n, k) whose batch dims broadcast with lu's; as in JAX, b of shape lu.shape[:-1] (a
    batch of vectors) is still accepted, with a FutureWarning.

    A matrix whose pivots are not all in [0, n) gets NaN in all of its x (on every backend);
    the other matrices of the batch are unaffected. jax.scipy.linalg.lu_solve instead clamps
    such pivots into range and returns finite, wrong numbers.
    """
    lu_, pivots = lu_and_piv
    lu_, b = promote("lu_solve", lu_, b)
    lu_ = as_matrix("lu_solve", lu_, square=True, name="lu")
    pivots = jnp.asarray(pivots)
    if trans not in _TRANS:
        raise ValueError(f"lu_solve: trans must be 0, 1 or 2, got {trans!r}")
    if not jnp.issubdtype(pivots.dtype, jnp.integer):
        raise TypeError(f"lu_solve: pivots must be integers, got {pivots.dtype}")
    if pivots.shape[-1:] != lu_.shape[-1:]:
        raise ValueError(f"lu_solve: pivots of shape {pivots.shape} do not fit lu of shape "
                         f"{lu_.shape}")
    b, vector = factor_rhs("lu_solve", lu_, b, "lu")
    lu_, pivots, b = broadcast_batch([lu_, pivots.astype(np.int32), b], [2, 1, 2])
    x = _getrs_checked(lu_, pivots, b, trans=trans, **resolve_params(strategy, lanes))
    return x[..., 0] if vector else x


# One jitted body: eager calls compile the check and the solve once per shape.
@functools.partial(jax.jit, static_argnames=("trans", "strategy", "lanes"))
def _getrs_checked(lu_, pivots, b, *, trans, strategy, lanes):
    """getrs on pivots from the caller. Neither cuSOLVER, cuBLAS nor the small kernel checks
    them (an index out of [0, n) reads and writes out of bounds, or is clamped into a finite,
    wrong x), so they reach the solve clamped and a matrix that had one comes out NaN."""
    n = lu_.shape[-1]
    bad = jnp.any((pivots < 0) | (pivots >= n), axis=-1)
    x, = getrs.bind(lu_, jnp.clip(pivots, 0, n - 1), b, trans=trans, strategy=strategy,
                    lanes=lanes)
    return nan_where(bad, x)


def _solve_matrix(a, b, params):
    """a (..., n, n), b (..., n, k) with equal batch dims. Differentiable in a and b, reusing
    one factorization for the forward solve and the transposed solve of the backward pass."""
    lu_, pivots, _ = getrf.bind(lax.stop_gradient(a), **params)
    params = _strategy.for_part("getrs", params)  # "blocked" is the factorization's only
    solve = lambda _, x: getrs.bind(lu_, pivots, x, trans=0, **params)[0]
    transpose_solve = lambda _, x: getrs.bind(lu_, pivots, x, trans=1, **params)[0]
    return lax.custom_linear_solve(lambda x: matmul(a, x), b, solve, transpose_solve)


def solve_operands(op, a, b):
    """a and b of jax.numpy.linalg.solve's shapes as (a (..., n, n), b (..., n, k), whether b
    was a vector), promoted and with their batch dims broadcast; a clear error naming `op`."""
    a, b = promote(op, a, b)
    a = as_matrix(op, a, square=True)
    n = a.shape[-1]
    if b.ndim == 0:
        raise ValueError(f"{op}: b must have rank >= 1")
    if (b.ndim > 1 and a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1]
            and a.shape[-1] != b.shape[-2]):
        raise ValueError(f"{op}: invalid shapes {a.shape}, {b.shape}; for a batched vector "
                         f"right-hand side use {op}(a, b[..., None])[..., 0]")
    vector = b.ndim == 1
    bm = b[:, None] if vector else b
    if bm.shape[-2] != n:
        raise ValueError(f"{op}: b of shape {b.shape} does not fit a of shape {a.shape}")
    a, bm = broadcast_batch([a, bm], [2, 2])
    return a, bm, vector


def solve(a, b, *, precision=None, strategy=None, lanes=None):
    """Like jax.numpy.linalg.solve: b of shape (n,) or (..., n, k); batch dims broadcast.

    precision="mixed" (float64 / complex128): factor in float32 / complex64 and refine to
    float64 accuracy, falling back to a float64 solve per matrix where that does not converge
    (mixed.mixed_solve, which also gives the iteration counts)."""
    if precision == "mixed":
        from .mixed import MAX_ITERATIONS, _mixed_solve  # mixed.py builds on this module
        return _mixed_solve("solve", a, b, "gen", MAX_ITERATIONS,
                            resolve_params(strategy, lanes)).x
    if precision is not None:
        raise ValueError(f"solve: precision must be None or 'mixed', got {precision!r}")
    a, bm, vector = solve_operands("solve", a, b)
    if _jax_end_to_end("solve", a, strategy, lanes, nrhs=bm.shape[-1]):
        x = nan_for_nonfinite_input(lambda a_, b_: [_jax_solve_in_pieces(a_, b_)],
                                    substitute=False)(a, bm)[0]
    else:
        x = _solve_matrix(a, bm, resolve_params(strategy, lanes))
    return x[..., 0] if vector else x


def inv(a, *, strategy=None, lanes=None):
    """Like jax.numpy.linalg.inv."""
    a = as_matrix("inv", a, square=True)
    n = a.shape[-1]
    resolved, given_lanes = _config.resolve(strategy, lanes)
    if resolved == "auto":
        factor = _strategy.choose("getrf", batch_size(a, 2), (n, n), a.dtype, resolved,
                                  given_lanes)
        # JAX's own inv (its solve of the identity, the triangular solves in pieces) where
        # auto hands the factorization to JAX, and up to INV_XLA_MAX_N unless our getrf is the
        # one-launch kernel (measured, strategy.py) or lanes are asked for. JAX's GPU getrf
        # gives finite numbers for NaN input: the guard every GPU path of this package has.
        if not factor.uses_ffi or (n <= _strategy.INV_XLA_MAX_N and not given_lanes
                                   and not factor.runs_small_kernel):
            return nan_for_nonfinite_input(lambda x: [_jax_solve_in_pieces(x, eye_like(x))],
                                           substitute=False)(a)[0]
    return solve(a, eye_like(a), strategy=strategy, lanes=lanes)


def _row_swaps(pivots):
    """How many rows the LU's pivots swapped, per matrix (its parity is det(P)'s sign)."""
    rows = lax.broadcasted_iota(pivots.dtype, pivots.shape, pivots.ndim - 1)
    return jnp.count_nonzero(pivots != rows, axis=-1)


def _slogdet_from_lu(lu_, pivots):
    n = lu_.shape[-1]
    dtype = lu_.dtype
    if 0 < n * n <= ELEMENTWISE_CHECK_MAX_ENTRIES:
        # Written out over the diagonal, like the NaN check at this size: one elementwise pass
        # XLA fuses with the check, where the reductions below are kernels of their own.
        diag = [lu_[..., i, i] for i in range(n)]
        total = functools.partial(functools.reduce, jnp.add)
        is_zero = functools.reduce(jnp.logical_or, [d == 0 for d in diag])
        parity = total([(pivots[..., i] != i).astype(np.int32) for i in range(n)])
        if jnp.iscomplexobj(lu_):
            sign = functools.reduce(jnp.multiply, [d / jnp.abs(d).astype(dtype) for d in diag])
        else:
            sign = jnp.array(1, dtype)
            parity = parity + total([(d < 0).astype(np.int32) for d in diag])
        log_abs = total([jnp.log(jnp.abs(d)).astype(dtype) for d in diag])
    else:
        diag = jnp.diagonal(lu_, axis1=-2, axis2=-1)
        is_zero = jnp.any(diag == jnp.array(0, dtype), axis=-1)
        parity = _row_swaps(pivots)
        if jnp.iscomplexobj(lu_):
            sign = jnp.prod(diag / jnp.abs(diag).astype(dtype), axis=-1)
        else:
            sign = jnp.array(1, dtype)
            parity = parity + jnp.count_nonzero(diag < 0, axis=-1)
        log_abs = jnp.sum(jnp.log(jnp.abs(diag)).astype(dtype), axis=-1)
    sign = jnp.where(is_zero, jnp.array(0, dtype), sign * (1 - 2 * (parity % 2)).astype(dtype))
    logdet = jnp.where(is_zero, jnp.array(-jnp.inf, dtype), log_abs)
    return sign, jnp.real(logdet)


def _slogdet_from_qr(r, taus):
    """sign and log|det| from a real QR: R's diagonal, and -1 per Householder reflector that
    reflects (tau != 0; the last is the identity), as JAX's method='qr'."""
    n = r.shape[-1]
    diag = jnp.diagonal(r, axis1=-2, axis2=-1)
    reflections = jnp.count_nonzero(taus[..., :n - 1] != 0, axis=-1)
    sign = jnp.prod(jnp.sign(diag), axis=-1) * (1 - 2 * (reflections % 2)).astype(r.dtype)
    return sign, jnp.sum(jnp.log(jnp.abs(diag)), axis=-1)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3))
def _slogdet(a, strategy, lanes, method="lu"):
    if method == "qr":
        from .qr import geqrf  # qr.py builds on this module
        return _slogdet_from_qr(*geqrf.bind(a, strategy=strategy, lanes=lanes))
    lu_, pivots, _ = getrf.bind(a, strategy=strategy, lanes=lanes)
    return _slogdet_from_lu(lu_, pivots)


@_slogdet.defjvp
def _slogdet_jvp(strategy, lanes, method, primals, tangents):
    # d log|det A| = tr(A^-1 A'), as JAX's rule (for either method).
    (a,), (g,) = primals, tangents
    sign, logdet = _slogdet(a, strategy, lanes, method)
    params = dict(strategy=strategy, lanes=lanes)
    ans_dot = jnp.trace(_solve_matrix(a, g, params), axis1=-1, axis2=-2)
    if jnp.iscomplexobj(a):
        sign_dot = (ans_dot - jnp.real(ans_dot).astype(ans_dot.dtype)) * sign
        ans_dot = jnp.real(ans_dot)
    else:
        sign_dot = jnp.zeros_like(sign)
    return (sign, logdet), (sign_dot, ans_dot)


SLOGDET_METHODS = ("lu", "qr")


def slogdet(a, *, method=None, strategy=None, lanes=None):
    """Like jax.numpy.linalg.slogdet: (sign, logabsdet); sign 0 and -inf for singular a.
    `method`: "lu" (None) or "qr" (real input only, as JAX)."""
    a = as_matrix("slogdet", a, square=True)
    method = "lu" if method is None else method
    if method not in SLOGDET_METHODS:
        raise ValueError(f"slogdet: unknown method {method!r}; supported methods are 'lu' "
                         "(None) and 'qr'")
    if method == "qr" and jnp.iscomplexobj(a):
        raise NotImplementedError("slogdet: method='qr' is not implemented for complex input "
                                  f"({a.dtype.name}), as in JAX")
    p = resolve_params(strategy, lanes)
    return SlogdetResult(*_slogdet(a, p["strategy"], p["lanes"], method))


class SlogdetResult(NamedTuple):
    """As jnp.linalg.slogdet's result."""
    sign: jax.Array
    logabsdet: jax.Array


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _det(a, strategy, lanes):
    sign, logdet = _slogdet(a, strategy, lanes)
    return sign * jnp.exp(logdet).astype(sign.dtype)


@_det.defjvp
def _det_jvp(strategy, lanes, primals, tangents):
    # d det(A) = tr(adj(A) A'), JAX's rule: defined at singular A too (adjugate_product).
    (a,), (g,) = primals, tangents
    y, z = _adjugate_product(a, g, strategy, lanes)
    return y, jnp.trace(z, axis1=-1, axis2=-2)


def _adjugate_product(a, b, strategy, lanes):
    """det(a) and adj(a) @ b, from this package's LU: det(a) solve(a, b) where a is invertible,
    and still defined where it is not (JAX's cofactor solve, jnp.linalg.det's derivative).

    With P A = L U, adj(A) b = det(A) U^-1 L^-1 P b. At corank 1 only U's last pivot u_nn is 0:
    det(A) U^-1 divides by it in the last row alone, where u_nn det(A) / u_nn = the product of
    the other pivots (times the sign); so u_nn is replaced by 1 / that partial product, the rows
    above are scaled by det(A) (0 there), and the result is exact. At corank 2 and more the
    adjugate is 0: such matrices (U with the replaced corner still singular) give 0."""
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, 0], b
    lu_, pivots, permutation = getrf.bind(a, strategy=strategy, lanes=lanes)
    sign = (1 - 2 * (_row_swaps(pivots) % 2)).astype(a.dtype)
    # partial[..., k]: the signed product of the first k + 1 pivots; [..., -1] is det(A).
    partial = jnp.cumprod(jnp.diagonal(lu_, axis1=-2, axis2=-1), axis=-1) * sign[..., None]
    u = lu_.at[..., -1, -1].set(1 / partial[..., -2])
    probe = lax.linalg.triangular_solve(u, jnp.ones(a.shape[:-1] + (1,), a.dtype),
                                        left_side=True, lower=False)
    corank_2 = ~jnp.all(jnp.isfinite(probe), axis=(-2, -1))[..., None, None]
    x = jnp.where(corank_2, jnp.zeros_like(b), b)
    x = jnp.take_along_axis(x, permutation[..., :, None], axis=-2)  # P b
    x = lax.linalg.triangular_solve(u, x, left_side=True, lower=True, unit_diagonal=True)
    x = jnp.concatenate([x[..., :-1, :] * partial[..., -1:, None], x[..., -1:, :]], axis=-2)
    x = lax.linalg.triangular_solve(u, x, left_side=True, lower=False)
    return partial[..., -1], jnp.where(corank_2, jnp.zeros_like(x), x)


@jax.custom_jvp
def _det_of_jax_lu(a):
    """jnp.linalg.det's own computation (JAX's LU, then sign and log of the diagonal), its
    derivative JAX's too; only the step after the LU is ours, so that it fuses with the NaN
    check (written out for small matrices, _slogdet_from_lu), where jnp.linalg.det inside the
    check leaves the check a kernel of its own: a launch as long as a small det's whole call."""
    lu_, pivots, _ = lax.linalg.lu(a)
    sign, logdet = _slogdet_from_lu(lu_, pivots)
    return sign * jnp.exp(logdet).astype(sign.dtype)


@_det_of_jax_lu.defjvp
def _det_of_jax_lu_jvp(primals, tangents):
    return jax.jvp(jnp.linalg.det, primals, tangents)


def _det_closed_form(a):
    """The determinant of n <= 3 matrices written out (JAX's formulas at n 2 and 3), NaN for a
    matrix holding NaN or Inf: one elementwise pass, the check included."""
    n = a.shape[-1]
    e = [[a[..., i, j] for j in range(n)] for i in range(n)]
    if n == 1:
        d = e[0][0]
    elif n == 2:
        d = e[0][0] * e[1][1] - e[0][1] * e[1][0]
    else:
        d = (e[0][0] * e[1][1] * e[2][2] + e[0][1] * e[1][2] * e[2][0] +
             e[0][2] * e[1][0] * e[2][1] - e[0][2] * e[1][1] * e[2][0] -
             e[0][0] * e[1][2] * e[2][1] - e[0][1] * e[1][0] * e[2][2])
    return nan_where(nonfinite_matrices(a), d)


def _jax_end_to_end(op, a, strategy, lanes, nrhs=0):
    """Whether `auto` hands this call to JAX whole: JAX's own lowering for the factorization
    and (nrhs > 0) for the solve. The op then runs as JAX writes it inside the NaN guard, its
    triangular solves by trsm's own choice (_jax_solve_in_pieces), with no step of ours between
    JAX's LU and its solve (ours would convert pivots to a permutation JAX already has)."""
    resolved, given_lanes = _config.resolve(strategy, lanes, op)
    if resolved != "auto":
        return False
    n, batch = a.shape[-1], batch_size(a, 2)
    if _strategy.choose("getrf", batch, (n, n), a.dtype, resolved, given_lanes).uses_ffi:
        return False
    return not nrhs or not _strategy.choose("getrs", batch, (n, n), a.dtype, resolved,
                                            given_lanes, nrhs).uses_ffi


def det(a, *, strategy=None, lanes=None):
    """Like jax.numpy.linalg.det."""
    a = as_matrix("det", a, square=True)
    strategy, lanes = _config.resolve(strategy, lanes, "det")
    return _det_compiled(a, strategy, lanes)


# One program, as jnp.linalg.det is: called eagerly, det then rounds as it does inside a jit
# (op by op, the sign and the product of the pivots fused otherwise: float32 n = 25 differed by
# 4e-6, JAX's own suite asks 1e-6). The strategy and lanes in force are resolved before it, so
# they key its cache.
@functools.partial(jax.jit, static_argnums=(1, 2))
def _det_compiled(a, strategy, lanes):
    n = a.shape[-1]
    # det follows getrf's choice (strategy.ROUTINE_OF), less the closed form of n <= 3.
    choice = _strategy.choose("det", batch_size(a, 2), (n, n), a.dtype, strategy, lanes)
    if choice.rule == "closed form":
        return _det_closed_form(a)
    if not choice.uses_ffi:  # JAX's own factorization: see _det_of_jax_lu
        return nan_for_nonfinite_input(lambda x: [_det_of_jax_lu(x)], substitute=False)(a)[0]
    return _det(a, strategy, lanes)
