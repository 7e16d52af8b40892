"""QR family: geqrf / orgqr / ormqr primitives and qr, householder_product, ormqr, qr_multiply.

Semantics follow jax.numpy.linalg.qr, jax.lax.linalg.householder_product / ormqr and
scipy.linalg.qr_multiply, so imports can be swapped.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from . import _compat, strategy as _strategy
from ._compat import NOT_MAPPED, ad, zeros_like_tangent
from ._primitive import SolverPrimitive, ffi_solver_call
from ._common import (as_matrix, batch_size, batched_eye, broadcast_batch, eye_like, info_result,
                      matmul, mh, nan_where_failed, promote, resolve_params, triu)
from .lu import lu_factor, lu_solve

_MODES = ("reduced", "complete", "r", "raw", "full")  # "full": jnp's alias of "reduced"


def _reflect(a, taus, c, left, transpose):
    """op(Q) c or c op(Q) for Q = H_1 ... H_k, H_i = I - tau_i v_i v_i^H, in plain JAX ops (the
    differentiable twin of ormqr, used for the tangents in a and taus)."""
    m, k = a.shape[-2], taus.shape[-1]
    v = jnp.tril(a[..., :, :k], -1) + batched_eye(m, a.dtype, a.ndim, k)
    taus = jnp.conj(taus) if transpose else taus
    reverse = left != transpose  # Q c and c Q^H apply H_k first

    def step(j, c):
        i = k - 1 - j if reverse else j
        vi, tau = v[..., :, i], taus[..., i, None, None]
        if left:  # c - tau v (v^H c)
            return c - tau * vi[..., :, None] * matmul(jnp.conj(vi)[..., None, :], c)
        return c - tau * matmul(c, vi[..., :, None]) * jnp.conj(vi)[..., None, :]

    return lax.fori_loop(0, k, step, c)


# --- geqrf ------------------------------------------------------------------------------------

def _geqrf_shapes(a, *, strategy, lanes):
    m, n = a.shape
    return [((m, n), a.dtype), ((min(m, n),), a.dtype)]


def _geqrf_jax(a, *, strategy, lanes):
    return _compat.geqrf(a)


def _geqrf_cuda(a, *, strategy, lanes):
    m, n = a.shape[-2:]
    choice = _strategy.choose("geqrf", batch_size(a, 2), (m, n), a.dtype, strategy, lanes)
    if not choice.uses_ffi:
        return _geqrf_jax(a, strategy=strategy, lanes=lanes)
    h, taus, info = ffi_solver_call(
        "jcm_geqrf", [a],
        [jax.ShapeDtypeStruct(a.shape, a.dtype),
         jax.ShapeDtypeStruct(a.shape[:-2] + (min(m, n),), a.dtype), info_result(a, 2)],
        matrix_operands={0}, matrix_results={0}, aliases={0: 0},
        choice=choice)
    return nan_where_failed(h, info), nan_where_failed(taus, info)


# No JVP, as JAX's geqrf: qr differentiates through its own rule below.
geqrf = SolverPrimitive("jcm_geqrf", core_ranks=(2,), shape_rule=_geqrf_shapes,
                        jax_impl=_geqrf_jax, cuda_impl=_geqrf_cuda)


# --- orgqr (householder_product) ------------------------------------------------------------

def _orgqr_shapes(a, taus, *, strategy, lanes):
    m, n = a.shape
    if not m >= n >= taus.shape[0]:
        raise ValueError(f"orgqr: needs a (m, n) and taus (k,) with m >= n >= k, got a "
                         f"{a.shape}, taus {taus.shape}")
    return [(a.shape, a.dtype)]


def _orgqr_jax(a, taus, *, strategy, lanes):
    return [lax.linalg.householder_product(a, taus)]


def _orgqr_cuda(a, taus, *, strategy, lanes):
    choice = _strategy.choose("orgqr", batch_size(a, 2), a.shape[-2:], a.dtype, strategy, lanes)
    if not choice.uses_ffi:
        return _orgqr_jax(a, taus, strategy=strategy, lanes=lanes)
    q, info = ffi_solver_call(
        "jcm_orgqr", [a, taus], [jax.ShapeDtypeStruct(a.shape, a.dtype), info_result(a, 2)],
        matrix_operands={0}, matrix_results={0}, aliases={0: 0},
        choice=choice)
    return [nan_where_failed(q, info)]


orgqr = SolverPrimitive("jcm_orgqr", core_ranks=(2, 1), shape_rule=_orgqr_shapes,
                        jax_impl=_orgqr_jax, cuda_impl=_orgqr_cuda)


def _orgqr_jvp(primals, tangents, *, strategy, lanes):
    # Q = H_1 ... H_k I[:, :n]: the tangent of the reflector loop (O(k m n), like orgqr itself).
    a, taus = primals
    q, = orgqr.bind(a, taus, strategy=strategy, lanes=lanes)
    eye = eye_like(a)
    _, q_dot = jax.jvp(lambda a, t: _reflect(a, t, eye, True, False), primals,
                       tuple(ad.instantiate_zeros(t) for t in tangents))
    return [q], [q_dot]


orgqr.defjvp(_orgqr_jvp)


# --- ormqr ------------------------------------------------------------------------------------

def _ormqr_shapes(a, taus, c, *, left, transpose, strategy, lanes):
    order = c.shape[0] if left else c.shape[1]
    if a.shape != (order, taus.shape[0]) or taus.shape[0] > order:
        raise ValueError(f"ormqr: a {a.shape}, taus {taus.shape} and c {c.shape} do not fit: "
                         f"need a ({order}, k), taus (k,) with k <= {order}")
    return [(c.shape, c.dtype)]


def _ormqr_jax(a, taus, c, *, left, transpose, strategy, lanes):
    return [lax.linalg.ormqr(a, taus, c, left=left, transpose=transpose)]


def _ormqr_cuda(a, taus, c, *, left, transpose, strategy, lanes):
    choice = _strategy.choose("ormqr", batch_size(c, 2), c.shape[-2:], c.dtype, strategy, lanes,
                              left=left)
    if not choice.uses_ffi:
        return _ormqr_jax(a, taus, c, left=left, transpose=transpose, strategy=strategy,
                          lanes=lanes)
    out, info = ffi_solver_call(
        "jcm_ormqr", [a, taus, c], [jax.ShapeDtypeStruct(c.shape, c.dtype), info_result(c, 2)],
        matrix_operands={0, 2}, matrix_results={0}, aliases={2: 0},
        left=left, transpose=transpose, choice=choice)
    return [nan_where_failed(out, info)]


def _ormqr_batch_rule(args, dims, *, left, transpose, strategy, lanes):
    """When only c is mapped, the mapped axis becomes more columns (left) or rows (right) of c:
    one call with the reflectors as they are, no copies of them."""
    (a, taus, c), (a_dim, taus_dim, c_dim) = args, dims
    if a_dim is not NOT_MAPPED or taus_dim is not NOT_MAPPED:
        return None
    axis = -1 if left else -3
    c = jnp.moveaxis(c, c_dim, axis)
    shape = c.shape
    flat = (shape[:-2] + (shape[-2] * shape[-1],) if left
            else shape[:-3] + (shape[-3] * shape[-2], shape[-1]))
    out, = ormqr_p.bind(a, taus, c.reshape(flat), left=left, transpose=transpose,
                        strategy=strategy, lanes=lanes)
    return [out.reshape(shape)], [len(shape) + axis]


ormqr_p = SolverPrimitive("jcm_ormqr", core_ranks=(2, 1, 2), shape_rule=_ormqr_shapes,
                          jax_impl=_ormqr_jax, cuda_impl=_ormqr_cuda,
                          batch_rule=_ormqr_batch_rule)


def _ormqr_jvp(primals, tangents, *, left, transpose, strategy, lanes):
    a, taus, c = primals
    a_dot, taus_dot, c_dot = tangents
    params = dict(left=left, transpose=transpose, strategy=strategy, lanes=lanes)
    out, = ormqr_p.bind(a, taus, c, **params)
    out_dot = None
    if type(c_dot) is not ad.Zero:  # linear in c: the same product
        out_dot = ormqr_p.bind(a, taus, c_dot, **params)[0]
    if type(a_dot) is not ad.Zero or type(taus_dot) is not ad.Zero:
        _, term = jax.jvp(lambda a, t: _reflect(a, t, c, left, transpose), (a, taus),
                          (ad.instantiate_zeros(a_dot), ad.instantiate_zeros(taus_dot)))
        out_dot = term if out_dot is None else out_dot + term
    return [out], [zeros_like_tangent(out) if out_dot is None else out_dot]


def _ormqr_transpose(cts, a, taus, c, *, left, transpose, strategy, lanes):
    # out = M c (or c M) with M = op(Q): c_bar = M^T ct = conj(M^H conj(ct)) (or ct M^T).
    assert ad.is_undefined_primal(c) and not ad.is_undefined_primal(a)
    ct, = cts
    if type(ct) is ad.Zero:
        return [None, None, ad.Zero(c.aval)]
    c_bar, = ormqr_p.bind(a, taus, jnp.conj(ct), left=left, transpose=not transpose,
                          strategy=strategy, lanes=lanes)
    return [None, None, jnp.conj(c_bar)]


ormqr_p.defjvp(_ormqr_jvp)
ormqr_p.deftranspose(_ormqr_transpose)


# --- qr: geqrf + orgqr, with JAX's JVP ---------------------------------------------------------

def _factor(a, full_matrices, params, want_q=True):
    """(Q, R) as jax.lax.linalg.qr (Q None unless want_q); complete Q of a tall matrix from the
    reflectors padded to (m, m), as JAX's own lowering."""
    m, n = a.shape[-2:]
    h, taus = geqrf.bind(a, **params)
    r = triu(h if full_matrices or m <= n else h[..., :n, :])
    if not want_q:
        return None, r
    if m < n:
        h = h[..., :, :m]
    elif full_matrices and m > n:
        h = jnp.pad(h, [(0, 0)] * (a.ndim - 1) + [(0, m - n)])
    q, = orgqr.bind(h, taus, **params)
    return q, r


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3))
def _qr(a, mode, strategy, lanes):
    q, r = _factor(a, mode == "complete", dict(strategy=strategy, lanes=lanes), mode != "r")
    return r if mode == "r" else (q, r)


def _thin_qr_jvp(q, r, dx):
    """Tangents of A = Q R for m >= n (j-towns.github.io/papers/qr-derivative.pdf), as JAX."""
    dx_rinv = lax.linalg.triangular_solve(r, dx)  # dx R^-1
    qt_dx_rinv = matmul(mh(q), dx_rinv)
    lower = jnp.tril(qt_dx_rinv, -1)
    eye = batched_eye(r.shape[-1], r.dtype, r.ndim)
    do = lower - mh(lower) + eye * (qt_dx_rinv - jnp.real(qt_dx_rinv).astype(r.dtype))
    return matmul(q, do - qt_dx_rinv) + dx_rinv, matmul(qt_dx_rinv - do, r)


@_qr.defjvp
def _qr_jvp(mode, strategy, lanes, primals, tangents):
    # jax.lax.linalg.qr_jvp_rule, on our primitives (its LU solve too).
    (x,), (dx,) = primals, tangents
    full = mode == "complete"
    q, r = _qr(x, "complete" if full else "reduced", strategy, lanes)
    m, n = x.shape[-2:]
    if m < n:  # X = [X1 X2] = Q [R1 R2]: thin rule on X1, R2 = Q^H X2
        dq, dr1 = _thin_qr_jvp(q, r[..., :, :m], dx[..., :, :m])
        dr = jnp.concatenate(
            [dr1, matmul(mh(dq), x[..., :, m:]) + matmul(mh(q), dx[..., :, m:])], axis=-1)
    else:
        q_mn = q[..., :, :n]
        dq, dr = _thin_qr_jvp(q_mn, r[..., :n, :], dx)
        if full and m > n:  # the other m - n columns: arxiv.org/pdf/2409.13374 eqs. 32-33
            q_nn, q_pn, q_mp = q_mn[..., :n, :], q_mn[..., n:, :], q[..., :, n:]
            kw = dict(strategy=strategy, lanes=lanes)
            z_pn_h = lu_solve(lu_factor(q_nn - batched_eye(n, x.dtype, x.ndim), **kw), mh(q_pn),
                              trans=2, **kw)
            z_pn = mh(z_pn_h)
            dq_mp = matmul(dq, z_pn_h) - matmul(
                q_mn + matmul(q_mp, z_pn), mh(dq[..., n:, :] - matmul(z_pn, dq[..., :n, :])))
            dq = jnp.concatenate([dq, dq_mp], axis=-1)
            dr = jnp.pad(dr, [(0, 0)] * (x.ndim - 2) + [(0, m - n), (0, 0)])
    if mode == "r":
        return r, dr
    return (q, r), (dq, dr)


# --- public API -------------------------------------------------------------------------------

class QRResult(NamedTuple):
    """As jnp.linalg.qr's result."""
    Q: jax.Array
    R: jax.Array


def qr(a, mode="reduced", *, strategy=None, lanes=None):
    """Like jax.numpy.linalg.qr: mode "reduced" (Q (..., m, k), R (..., k, n), k = min(m, n)),
    "complete" (Q (..., m, m), R (..., m, n)), "r" (R of "reduced" only) or "raw"
    ((h, taus): geqrf's packed output transposed, as NumPy's / jnp's raw). Differentiable in
    every mode but "raw", as JAX."""
    a = as_matrix("qr", a)
    if mode not in _MODES:
        raise ValueError(f"qr: unsupported mode {mode!r}; expected one of {_MODES[:4]}")
    p = resolve_params(strategy, lanes)
    if mode == "raw":
        h, taus = geqrf.bind(a, **p)
        return QRResult(jnp.swapaxes(h, -1, -2), taus)
    out = _qr(a, "reduced" if mode == "full" else mode, p["strategy"], p["lanes"])
    return out if mode == "r" else QRResult(*out)


def _as_taus(op, taus):
    if taus.ndim < 1:
        raise ValueError(f"{op}: taus must have rank >= 1, got shape {taus.shape}")
    return taus


def householder_product(a, taus, *, strategy=None, lanes=None):
    """Like jax.lax.linalg.householder_product: the first n columns of H_1 ... H_k, from
    reflectors in the lower triangle of a (..., m, n) (m >= n) and taus (..., k) (k <= n).
    Batch dims broadcast."""
    a, taus = promote("householder_product", a, taus)
    a, taus = as_matrix("householder_product", a), _as_taus("householder_product", taus)
    m, n = a.shape[-2:]
    if not m >= n >= taus.shape[-1]:
        raise ValueError(f"householder_product: needs a (..., m, n) and taus (..., k) with "
                         f"m >= n >= k, got a {a.shape}, taus {taus.shape}")
    a, taus = broadcast_batch([a, taus], [2, 1])
    return orgqr.bind(a, taus, **resolve_params(strategy, lanes))[0]


def ormqr(a, taus, c, *, left=True, transpose=False, strategy=None, lanes=None):
    """Like jax.lax.linalg.ormqr: Q c (left) or c Q, with Q^H for transpose=True (Q^T if real),
    Q = H_1 ... H_k given by the reflectors in a (..., r, >= k) and taus (..., k), r the rows
    (left) or columns of c; no explicit Q. Batch dims broadcast."""
    a, taus, c = promote("ormqr", a, taus, c)
    a, c = as_matrix("ormqr", a), as_matrix("ormqr", c, name="c")
    taus = _as_taus("ormqr", taus)
    order, k = c.shape[-2] if left else c.shape[-1], taus.shape[-1]
    if a.shape[-2] != order:
        raise ValueError(f"ormqr: with left={left}, a must have as many rows as c has "
                         f"{'rows' if left else 'columns'}; got a {a.shape}, c {c.shape}")
    if k > min(a.shape[-1], order):
        raise ValueError(f"ormqr: taus {taus.shape} has more reflectors than a {a.shape} holds")
    a, taus, c = broadcast_batch([a[..., :, :k], taus, c], [2, 1, 2])
    return ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose),
                        **resolve_params(strategy, lanes))[0]


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False, *, strategy=None, lanes=None):
    """Like scipy.linalg.qr_multiply (and jax.scipy.linalg's): (c Q, R) for mode "right",
    c (..., p, m) or (m,); (Q c, R) for "left", c (..., k, p) or (k,); conj(Q) if conjugate.
    Q is the reduced factor (m, k), R (..., k, n); k = min(m, n). geqrf + ormqr, no explicit Q.

    pivoting=True raises NotImplementedError (there is no pivoted QR here; use
    jax.scipy.linalg.qr_multiply). overwrite_a / overwrite_c are ignored, as in JAX. Not
    differentiable in a (geqrf has no JVP), as JAX's; leading batch dims of a and c broadcast.
    """
    del overwrite_a, overwrite_c
    if mode not in ("right", "left"):
        raise ValueError(f"qr_multiply: mode must be 'right' or 'left', got {mode!r}")
    if pivoting:
        raise NotImplementedError("qr_multiply: pivoting=True (column-pivoted QR) is not "
                                  "implemented here; use jax.scipy.linalg.qr_multiply")
    a, c = promote("qr_multiply", a, c)
    a = as_matrix("qr_multiply", a)
    if c.ndim == 0:
        raise ValueError("qr_multiply: c must have rank >= 1")
    vector = c.ndim == 1
    if vector:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(f"qr_multiply: shapes not compatible for Q @ c: a {a.shape} gives Q "
                         f"with {k} columns, c has {c.shape[-2]} rows")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(f"qr_multiply: shapes not compatible for c @ Q: a {a.shape} gives Q "
                         f"with {m} rows, c has {c.shape[-1]} columns")
    a, c = broadcast_batch([a, c], [2, 2])
    p = resolve_params(strategy, lanes)
    h, taus = geqrf.bind(a, **p)
    if mode == "left" and m > n:  # Q (m, k) c = Q_full [c; 0]
        c = jnp.pad(c, [(0, 0)] * (c.ndim - 2) + [(0, m - k), (0, 0)])
    if conjugate:  # conj(Q) c = (c^T Q^H)^T: the sides swap
        c = jnp.swapaxes(c, -1, -2)
    out, = ormqr_p.bind(h[..., :, :k], taus, c, left=(mode == "left") != conjugate,
                        transpose=bool(conjugate), **p)
    if conjugate:
        out = jnp.swapaxes(out, -1, -2)
    if mode == "right":
        out = out[..., :k]
    if vector:
        out = out[..., :, 0] if mode == "left" else out[..., 0, :]
    return out, triu(h[..., :k, :])
