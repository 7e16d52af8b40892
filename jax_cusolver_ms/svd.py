"""SVD family: one svd primitive (cuSOLVER gesvdj or gesvd on the lanes, or this project's Jacobi
kernel for matrices up to 128 x 128) and svd, svdvals, pinv, matrix_rank, lstsq, norm, cond built
on it.

Semantics follow jax.numpy.linalg (and jax.lax.linalg.svd's `algorithm` and JVP), so imports can
be swapped. Singular values come back in descending order, as JAX's; the vectors of a
non-repeated singular value are unique up to a sign (real) or a phase (complex) only, so two
correct answers may differ there.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import settings as _config, strategy as _strategy
from ._compat import ad
from ._common import (as_arrays, as_matrix, batch_size, batched_eye, eye_like, info_result, matmul,
                      mh, nan_for_nonfinite_input, nan_unless_ok, promote, resolve_params)
from ._primitive import SolverPrimitive, ffi_solver_call
from .lu import inv
from .qr import qr as _qr

_SvdAlgorithm = lax.linalg.SvdAlgorithm


def _real_dtype(dtype):
    return np.finfo(np.dtype(dtype)).dtype


# --- the svd primitive ------------------------------------------------------------------------
# Outputs (s,) or (s, u, vh) as jax.lax.linalg's svd_p: s (..., k) real, u (..., m, m or k),
# vh (..., n or k, n), k = min(m, n); NaN in every item whose cuSOLVER info is nonzero.
# `algorithm` is one of strategy.SVD_ALGORITHMS.

def _svd_shapes(a, *, full_matrices, compute_uv, algorithm, strategy, lanes):
    m, n = a.shape
    k = min(m, n)
    s = ((k,), _real_dtype(a.dtype))
    if not compute_uv:
        return [s]
    return [s, ((m, m if full_matrices else k), a.dtype),
            ((n if full_matrices else k, n), a.dtype)]


def _svd_jax(a, *, full_matrices, compute_uv, algorithm, strategy, lanes):
    # JAX's Jacobi SVD is CUDA-only: elsewhere "jacobi" runs JAX's default (LAPACK gesdd on CPU),
    # which gives the same decomposition.
    out = lax.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                         algorithm=_SvdAlgorithm.QR if algorithm == "qr" else None)
    if not compute_uv:
        return [out]
    u, s, vh = out
    return [s, u, vh]


def _gesvdj(a, full_matrices, compute_uv, choice):
    """Jacobi SVD of any m x n. Returns the outputs and cuSOLVER's info."""
    *batch, m, n = a.shape
    batch, k = tuple(batch), min(m, n)
    econ = not full_matrices
    results = [jax.ShapeDtypeStruct(a.shape, a.dtype),
               jax.ShapeDtypeStruct(batch + (k,), _real_dtype(a.dtype)), info_result(a, 2)]
    if compute_uv:
        results += [jax.ShapeDtypeStruct(batch + (m, k if econ else m), a.dtype),
                    jax.ShapeDtypeStruct(batch + (n, k if econ else n), a.dtype)]
    _, s, info, *vectors = ffi_solver_call(
        "jcm_gesvdj", [a], results, matrix_operands={0}, matrix_results={0, 3, 4},
        aliases={0: 0}, econ=econ, compute_uv=compute_uv, choice=choice)
    if not compute_uv:
        return [s], info
    u, v = vectors  # gesvdj returns V itself
    return [s, u, mh(v)], info


def _gesvd(a, full_matrices, compute_uv, choice):
    """QR-iteration SVD. cuSOLVER's gesvd needs m >= n: a wide matrix goes in as A^T by layout
    alone (row-major buffers are A^T's column-major ones), and the handler swaps U and V^H (see
    ffi/svd/svd_handlers.cc), as JAX's own lowering does. Returns the outputs and cuSOLVER's
    info."""
    *batch, m, n = a.shape
    batch, k = tuple(batch), min(m, n)
    transposed = m < n
    column_major = set() if transposed else {0, 3, 4}
    results = [jax.ShapeDtypeStruct(a.shape, a.dtype),
               jax.ShapeDtypeStruct(batch + (k,), _real_dtype(a.dtype)), info_result(a, 2)]
    if compute_uv:
        results += [jax.ShapeDtypeStruct(batch + (m, m if full_matrices else k), a.dtype),
                    jax.ShapeDtypeStruct(batch + (n if full_matrices else k, n), a.dtype)]
    _, s, info, *vectors = ffi_solver_call(
        "jcm_gesvd", [a], results, matrix_operands=column_major & {0},
        matrix_results=column_major, aliases={0: 0}, full_matrices=full_matrices,
        compute_uv=compute_uv, transposed=transposed, choice=choice)
    return [s, *vectors], info


def _svd_cuda(a, *, full_matrices, compute_uv, algorithm, strategy, lanes):
    params = dict(full_matrices=full_matrices, compute_uv=compute_uv, algorithm=algorithm,
                  strategy=strategy, lanes=lanes)
    m, n = a.shape[-2:]
    if m == 0 or n == 0:  # nothing to factor: JAX's empty results (identity U / V^H)
        return _svd_jax(a, **params)
    routine = _strategy.svd_routine(algorithm, m, n)
    choice = _strategy.choose(routine, batch_size(a, 2), (m, n), a.dtype, strategy, lanes)
    if choice.strategy == "blocked":
        return nan_for_nonfinite_input(_svd_qr_first)(a, full_matrices, compute_uv, algorithm)
    if choice.runs_small_kernel:
        # The Jacobi kernel (ffi/svd/svd_kernels.cu) writes NaN itself for a matrix holding NaN /
        # Inf or not converged, and touches no other: neither guard nor mask, one launch in all.
        return _gesvdj(a, full_matrices, compute_uv, choice)[0]
    return nan_for_nonfinite_input(_svd_guarded)(a, choice, **params)


def _svd_qr_first(a, full_matrices, compute_uv, algorithm):
    """The SVD of a tall (or, through A^H, wide) matrix from its Householder QR: A = Q R, then
    R = U_R S V^H (k x k, k = min(m, n)), so U = Q U_R, where the full U is Q (complete) times
    diag(U_R, I). Each step under `auto`."""
    m, n = a.shape[-2:]
    wide = m < n
    if wide:
        a = mh(a)
    complete = compute_uv and full_matrices
    k = min(m, n)
    if not compute_uv:  # the singular values are R's: no Q to form (orgqr's cost saved)
        r = _qr(a, mode="r", strategy="auto")
        return svd_p.bind(r[..., :k, :], full_matrices=False, compute_uv=False,
                          algorithm=algorithm, strategy="auto", lanes=None)
    q, r = _qr(a, mode="complete" if complete else "reduced", strategy="auto")
    s, u_r, vh = svd_p.bind(r[..., :k, :], full_matrices=False, compute_uv=True,
                            algorithm=algorithm, strategy="auto", lanes=None)
    u = matmul(q[..., :, :k], u_r)
    if complete:
        u = jnp.concatenate([u, q[..., :, k:]], axis=-1)
    return [s, mh(vh), mh(u)] if wide else [s, u, vh]


def _svd_guarded(a, choice, **params):
    if not choice.uses_ffi:
        return _svd_jax(a, **params)
    run = _gesvdj if choice.op == "gesvdj" else _gesvd
    outs, info = run(a, params["full_matrices"], params["compute_uv"], choice)
    return [nan_unless_ok(x, info) for x in outs]


svd_p = SolverPrimitive("jcm_svd", core_ranks=(2,), shape_rule=_svd_shapes,
                        jax_impl=_svd_jax, cuda_impl=_svd_cuda)


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv, algorithm, strategy, lanes):
    # jax.lax.linalg's svd JVP rule, on this primitive: dS = U^H dA V gives ds (its real
    # diagonal) and, through F_ij = 1 / (s_j^2 - s_i^2), dU and dV; a non-square A adds the
    # parts of dA V (tall) or dA^H U (wide) outside the computed singular subspace.
    (a,), (a_dot,) = primals, tangents
    m, n = a.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            "svd: the derivative of full_matrices=True for a non-square matrix is not "
            "implemented (as in JAX); use full_matrices=False")
    s, u, vh = svd_p.bind(a, full_matrices=False, compute_uv=True, algorithm=algorithm,
                          strategy=strategy, lanes=lanes)
    a_dot = ad.instantiate_zeros(a_dot)
    v = mh(vh)
    ds_mat = matmul(matmul(mh(u), a_dot), v)  # U^H dA V
    ds = jnp.real(jnp.diagonal(ds_mat, axis1=-2, axis2=-1))
    if not compute_uv:
        return [s], [ds]

    dtype = a.dtype
    s_row = s[..., None, :]
    s_col = s[..., :, None]
    eye = batched_eye(s.shape[-1], s.dtype, s.ndim + 1)
    # F_ij = 1 / (s_j^2 - s_i^2) off the diagonal, 0 on it.
    f = (1 / ((s_row + s_col) * (s_row - s_col) + eye) - eye).astype(dtype)
    ds_s = s_row.astype(dtype) * ds_mat   # dS diag(s)
    s_ds = s_col.astype(dtype) * ds_mat   # diag(s) dS
    s_inv = jnp.where(s == 0, 0, 1 / jnp.where(s == 0, 1, s))
    imaginary_diag = 0.5 * (ds_mat - mh(ds_mat)) * (eye * s_inv[..., None, :]).astype(dtype)
    u_dot = matmul(u, f * (ds_s + mh(ds_s)) + imaginary_diag)
    v_dot = matmul(v, f * (s_ds + mh(s_ds)))
    if m > n:  # the part of dA V outside U's column space
        da_v = matmul(a_dot, v)
        u_dot = u_dot + (da_v - matmul(u, matmul(mh(u), da_v))) / s_row.astype(dtype)
    if n > m:
        dah_u = matmul(mh(a_dot), u)
        v_dot = v_dot + (dah_u - matmul(v, matmul(vh, dah_u))) / s_row.astype(dtype)
    return [s, u, vh], [ds, u_dot, mh(v_dot)]


svd_p.defjvp(_svd_jvp)


# --- public API -------------------------------------------------------------------------------

class SVDResult(NamedTuple):
    """As jnp.linalg.svd's result."""
    U: jax.Array
    S: jax.Array
    Vh: jax.Array


def _algorithm_name(op, algorithm) -> str:
    """None, a jax.lax.linalg.SvdAlgorithm or its value as a string -> one of SVD_ALGORITHMS."""
    if algorithm is None:
        return "default"
    if isinstance(algorithm, _SvdAlgorithm):
        algorithm = algorithm.value
    name = algorithm.lower() if isinstance(algorithm, str) else None
    if name not in _strategy.SVD_ALGORITHMS:
        raise ValueError(f"{op}: unsupported algorithm {algorithm!r}; expected None, "
                         f"SvdAlgorithm.DEFAULT / QR / JACOBI or one of "
                         f"{_strategy.SVD_ALGORITHMS}")
    return name


def _hermitian_svd(a, compute_uv):
    """As jnp.linalg.svd(hermitian=True): from A = W diag(w) W^H (JAX's eigh), s = |w| in
    descending order, U = W reordered alike and V^H = (U sign(w))^H."""
    vectors, w = lax.linalg.eigh(a)
    s = jnp.abs(w)
    if not compute_uv:
        return lax.rev(lax.sort(s, dimension=s.ndim - 1), (s.ndim - 1,))
    index = lax.broadcasted_iota(np.int32, s.shape, s.ndim - 1)
    s, index, sign = lax.sort((s, index, jnp.sign(w)), dimension=s.ndim - 1, num_keys=1)
    s, index, sign = (lax.rev(x, (s.ndim - 1,)) for x in (s, index, sign))
    u = jnp.take_along_axis(vectors, index[..., None, :], axis=-1)
    return SVDResult(u, s, mh(u * sign[..., None, :].astype(u.dtype)))


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, *, algorithm=None,
        strategy=None, lanes=None):
    """Like jax.numpy.linalg.svd: SVDResult(U, S, Vh) with A = U diag(S) Vh, S descending;
    U (..., m, m) and Vh (..., n, n), or (..., m, k) and (..., k, n) with k = min(m, n) when
    full_matrices=False; only S when compute_uv=False. NaN in a matrix whose SVD did not
    converge (or that holds NaN), as JAX.

    algorithm as jax.lax.linalg.svd's: None / SvdAlgorithm.DEFAULT / "default" (Jacobi up to
    n = 1024, QR iteration above, as JAX on CUDA), SvdAlgorithm.QR / "qr" (cuSOLVER gesvd) or
    SvdAlgorithm.JACOBI / "jacobi" (gesvdj; for matrices up to 128 x 128 under strategy
    "batched", this project's one-launch Jacobi kernel). Without a GPU every algorithm runs JAX's
    own SVD.

    hermitian=True uses JAX's own eigh, as jnp does (algorithm, strategy and lanes do not apply).
    Differentiable as jax.lax.linalg.svd (not for full_matrices=True with m != n).
    """
    return _svd("svd", a, full_matrices, compute_uv, hermitian, algorithm, strategy, lanes)


def _svd(op, a, full_matrices, compute_uv, hermitian, algorithm, strategy, lanes):
    """svd's body; errors name `op`, the function the user called."""
    a = as_matrix(op, a)
    name = _algorithm_name(op, algorithm)
    params = resolve_params(strategy, lanes)
    if hermitian:
        return _hermitian_svd(a, compute_uv)
    out = svd_p.bind(a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                     algorithm=name, **params)
    if not compute_uv:
        return out[0]
    s, u, vh = out
    return SVDResult(u, s, vh)


def svdvals(x, *, algorithm=None, strategy=None, lanes=None):
    """Like jax.numpy.linalg.svdvals: the singular values (..., k), descending."""
    x = as_matrix("svdvals", x, name="x")
    return _svd("svdvals", x, False, False, False, algorithm, strategy, lanes)


def pinv(a, rtol=None, hermitian=False, *, rcond=None, strategy=None, lanes=None):
    """Like jax.numpy.linalg.pinv: the Moore-Penrose pseudo-inverse (..., n, m); singular values
    <= rtol * the largest count as zero, rtol defaulting to 10 * max(m, n) * eps (JAX's default,
    not NumPy's). rcond is an alias of rtol. Differentiable with JAX's rule (Golub & Pereyra)."""
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    a = as_matrix("pinv", a)
    params = resolve_params(strategy, lanes)
    return _pinv(a, rtol, bool(hermitian), params["strategy"], params["lanes"])


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3, 4))
def _pinv(a, rtol, hermitian, strategy, lanes):
    *batch, m, n = a.shape
    if m == 0 or n == 0:
        return jnp.empty(tuple(batch) + (n, m), a.dtype)
    conj = jnp.conj(a)
    if rtol is None:
        rtol = 10. * max(m, n) * jnp.array(jnp.finfo(a.dtype).eps)
    rtol = jnp.asarray(rtol)
    u, s, vh = svd(conj, full_matrices=False, hermitian=hermitian, strategy=strategy,
                   lanes=lanes)
    rtol = lax.expand_dims(rtol[..., None], range(s.ndim - rtol.ndim - 1))
    cutoff = rtol * s[..., 0:1]
    s = jnp.where(s > cutoff, s, np.inf).astype(u.dtype)
    return matmul(jnp.swapaxes(vh, -1, -2), jnp.swapaxes(u, -1, -2) / s[..., None]).astype(a.dtype)


@_pinv.defjvp
def _pinv_jvp(rtol, hermitian, strategy, lanes, primals, tangents):
    # As jnp.linalg.pinv's JVP (Golub & Pereyra 1973).
    (a,), (a_dot,) = primals, tangents
    p = _pinv(a, rtol, hermitian, strategy, lanes)
    if hermitian:  # the eigh path symmetrizes its input: so must the tangent
        a, a_dot = (a + mh(a)) / 2, (a_dot + mh(a_dot)) / 2
    m, n = a.shape[-2:]
    if m >= n:
        s = matmul(matmul(p, mh(p)), mh(a_dot))
        t = matmul(matmul(mh(a_dot), mh(p)), p)
        p_dot = (-matmul(matmul(p, a_dot), p) + s - matmul(matmul(s, a), p) + t
                 - matmul(matmul(p, a), t))
    else:
        s = matmul(p, matmul(mh(p), mh(a_dot)))
        t = matmul(mh(a_dot), matmul(mh(p), p))
        p_dot = (-matmul(p, matmul(a_dot, p)) + s - matmul(s, matmul(a, p)) + t
                 - matmul(p, matmul(a, t)))
    return p, p_dot


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None, strategy=None, lanes=None):
    """Like jax.numpy.linalg.matrix_rank: the number of singular values > rtol * the largest,
    rtol defaulting to max(m, n) * eps; tol is an alias of rtol. Leading batch dims allowed."""
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    M, = as_arrays("matrix_rank", M)
    if M.ndim < 2:  # as jnp: a vector or scalar has rank 1 unless it is all zero
        return (M != 0).any().astype(np.int32)
    M = as_matrix("matrix_rank", M)
    s = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian, strategy=strategy,
            lanes=lanes)
    if rtol is None:
        rtol = s.max(-1) * np.max(M.shape[-2:]).astype(s.dtype) * jnp.finfo(s.dtype).eps
    rtol = jnp.broadcast_to(jnp.asarray(rtol)[..., None], s.shape[:-1] + (1,))
    return jnp.sum(s > rtol, axis=-1)


LSTSQ_METHODS = ("svd", "qr", "auto")


def lstsq(a, b, rcond=None, *, method="svd", numpy_resid=False, precision=None, strategy=None,
          lanes=None):
    """Least squares on any batch: (x, residuals, rank, s) minimizing ||a x - b|| for each
    matrix, with jax.numpy.linalg.lstsq's conventions, which takes a 2-D a only. a (..., m, n);
    b (m,) or (..., m) (one fewer dim than a): vectors, or (..., m, k); batch dims broadcast.
    x (..., n) or (..., n, k); residuals ||b - a x||^2 (..., k), k = 1 for vectors as JAX's;
    rank (...,); s the singular values of a (..., min(m, n)), descending. Singular values
    below rcond * the largest (default eps * max(m, n); a negative rcond: eps) count as zero,
    and x is then the minimum-norm solution.

    method: "svd" (default; the SVD of a, as JAX; where a is tall and its SVD runs QR first,
    x = V S^+ U_R^H Q^H b from the SVD of R, with Q^H b from the R of [a b] and neither Q nor U
    formed), "qr" (full-rank problems: the Householder
    QR of a, or of a^H for a wide a, and a triangular solve; s from the SVD of R, equal to a's;
    on a rank-deficient a x is not the minimum-norm solution), or "auto": "qr" where every
    matrix of the call is shown to have full rank without the SVD (||R||_F ||R^-1||_F <=
    1 / (2 rcond)), else the SVD of R (a = Q R: the same minimum-norm solution, from a k x k
    SVD); s and rank still come from the SVD of R, which XLA drops where they are not used.
    Differentiable (by composition).
    numpy_resid=True (2-D a only, not under jit): NumPy's empty residuals where it has them.

    precision="mixed" (float64 / complex128): x from a float32 / complex64 QR refined to float64
    accuracy (mixed.mixed_lstsq, which also gives the iteration counts); a matrix whose
    refinement does not converge (rank deficient, or too ill-conditioned for float32) is solved
    by `method` in float64. s and rank come from the float32 R for the others: s to float32's
    accuracy."""
    return _lstsq("lstsq", a, b, rcond, method, numpy_resid, precision, params=dict(
        strategy=strategy, lanes=lanes))[:4]


def _lstsq(op, a, b, rcond, method, numpy_resid, precision, params, max_iterations=None):
    """lstsq's work: (x, residuals, rank, s, iterations, fell back), the last two None unless
    precision is "mixed"; errors name `op`, the function the user called."""
    if precision not in (None, "mixed"):
        raise ValueError(f"{op}: precision must be None or 'mixed', got {precision!r}")
    if method not in LSTSQ_METHODS:
        raise ValueError(f"{op}: method must be one of {LSTSQ_METHODS}, got {method!r}")
    a, b = promote(op, a, b)
    if a.ndim < 2:  # jnp.linalg.lstsq: a TypeError (for a scalar a, an IndexError of its own)
        raise TypeError(f"{op}: {a.ndim}-dimensional a given; it must be at least "
                        "two-dimensional")
    vector = b.ndim == 1 or b.ndim == a.ndim - 1
    if b.ndim < 1 or not (vector or b.ndim == a.ndim):
        raise TypeError(f"{op}: b of shape {b.shape} for a of shape {a.shape}: b must be "
                        f"1- or {a.ndim - 1}-dimensional (vectors) or {a.ndim}-dimensional")
    if vector:
        b = b[..., None]
    m, n = a.shape[-2:]
    if b.shape[-2] != m:
        raise ValueError(f"{op}: leading dimensions of a and b must match, got "
                         f"a {a.shape}, b {b.shape}")
    if numpy_resid and a.ndim != 2:
        raise ValueError(f"{op}: numpy_resid=True takes a 2-D a only (NumPy's lstsq)")
    try:
        batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: the batch dims of a {a.shape} and b {b.shape} do not "
                         "broadcast") from None
    a = jnp.broadcast_to(a, batch + (m, n))
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    k = min(m, n)
    dtype = a.dtype
    eps = jnp.finfo(dtype).eps
    iterations = fell_back = None
    if precision == "mixed":
        # (Here, not at the top: mixed.py builds on this module.)
        from .mixed import MAX_ITERATIONS, _mixed_lstsq, _require_double
        _require_double(op, dtype)
        iterations, fell_back = jnp.zeros(batch, np.int32), jnp.zeros(batch, bool)
    if k == 0:
        s = jnp.zeros(batch + (0,), dtype=_real_dtype(dtype))
        rank = jnp.zeros(batch, dtype=jnp.sum(jnp.zeros(1, bool)).dtype)
        x = jnp.zeros(batch + (n, b.shape[-1]), dtype=dtype)
    else:
        rcond = float(eps) * max(m, n) if rcond is None else jnp.where(rcond < 0, eps, rcond)

        def kept(s):  # the singular values that count, and 1 / them (0 for the others)
            mask = (s > 0) & (s >= jnp.asarray(rcond, dtype=s.dtype) * s[..., :1])
            return mask, jnp.where(mask, 1 / jnp.where(mask, s, 1), 0).astype(dtype)[..., None]

        def float64_lstsq(a, b):  # (x, mask, s) by `method`
            if method == "svd" and m >= n and _svd_runs_qr_first(a, **params):
                # a = Q U_R S V^H: U^H b is U_R^H Q^H b, with no Q (nor U) formed.
                r, c = _r_and_qhb(a, b, "auto", None)
                u_r, s, vh = svd(r, full_matrices=False, strategy="auto")
                return *_svd_solve(u_r, s, vh, c, kept), s
            if method == "svd":
                u, s, vh = svd(a, full_matrices=False, **params)
                return *_svd_solve(u, s, vh, b, kept), s
            mask, s, x = _lstsq_qr(a, b, kept, rcond if method == "auto" else None, params)
            return x, mask, s

        if precision == "mixed":
            x, mask, s, iterations, fell_back = _mixed_lstsq(
                a, b, kept, float64_lstsq,
                MAX_ITERATIONS if max_iterations is None else max_iterations, params)
        else:
            x, mask, s = float64_lstsq(a, b)
        rank = mask.sum(-1)
    if numpy_resid and (rank < n or m <= n):
        resid = jnp.asarray([])
    else:
        resid = jnp.sum(jnp.abs(b - matmul(a, x)) ** 2, axis=-2)
    if vector:
        x = x[..., 0]  # (residuals keep their k = 1, as JAX's)
    return x, resid, rank, s, iterations, fell_back


def _lstsq_qr(a, b, kept, fall_back_rcond, params):
    """lstsq's "qr" and "auto" methods: (mask of the singular values kept, s, x). A tall a
    (m >= n) is Q R and x = R^-1 Q^H b; a wide one is R^H Q^H (the QR of a^H) and x = Q R^-H b,
    the minimum-norm solution. With `fall_back_rcond` ("auto"), unless every matrix of the call
    is shown to have full rank by it (_full_rank_shown), x is V S^+ U_R^H Q^H b (tall) or
    Q U_R S^+ V_R^H b (wide) from R = U_R S V_R^H for all: the minimum-norm solution, which
    for a matrix of full rank after all is x's QR solution up to rounding."""
    m, n = a.shape[-2:]
    wide = m < n
    if wide:
        q, r = _qr(mh(a), mode="reduced", **params)
    else:
        r, c = _r_and_qhb(a, b, params["strategy"], params["lanes"])
    s = svdvals(r, **params)
    mask, s_inv = kept(s)
    if wide:
        triangular = jax.scipy.linalg.solve_triangular(r, b, trans="C", lower=False)
        x_qr = matmul(q, triangular)
    else:
        x_qr = jax.scipy.linalg.solve_triangular(r, c, lower=False)
    if fall_back_rcond is None:
        return mask, s, x_qr

    def minimum_norm():
        u_r, s_r, vh_r = svd(r, full_matrices=False, **params)
        if wide:
            return matmul(q, matmul(u_r, kept(s_r)[1] * matmul(vh_r, b)))
        return _svd_solve(u_r, s_r, vh_r, c, kept)[0]

    # Decided without s, so that a caller who keeps x alone (lstsq(...)[0]) has no SVD but in
    # the fallback: XLA drops the singular values nothing uses.
    x = lax.cond(jnp.all(_full_rank_shown(r, fall_back_rcond)), lambda: x_qr, minimum_norm)
    return mask, s, x


def _full_rank_shown(r, rcond):
    """Per matrix, whether every singular value of the triangular r is at least rcond times the
    largest, shown without the singular values: ||R||_F ||R^-1||_F >= sigma_max / sigma_min,
    so ||R||_F ||R^-1||_F <= 1 / rcond is enough; asked with a factor of 2 to spare for the
    rounding of R^-1 near that bound (in all, up to 2n times more than the singular values
    ask). False where R^-1 is not finite (a zero pivot, NaN or Inf in r): those take the SVD.
    r is scaled by its largest entry first, so that R^-1 of a tiny r does not overflow."""
    n = r.shape[-1]
    largest = jnp.max(jnp.abs(r), axis=(-2, -1), keepdims=True)
    scaled = r / jnp.where(largest > 0, largest, 1).astype(r.dtype)
    eye = eye_like(r)
    inverse = lax.linalg.triangular_solve(scaled, eye, left_side=True, lower=False)
    bound = jnp.linalg.norm(scaled, axis=(-2, -1)) * jnp.linalg.norm(inverse, axis=(-2, -1))
    return 2 * bound * jnp.asarray(rcond, bound.dtype) <= 1


def _svd_solve(u, s, vh, c, kept):
    """(V S^+ U^H c, the mask of the singular values kept) from an SVD U S V^H."""
    mask, s_inv = kept(s)
    return matmul(mh(vh), s_inv * matmul(mh(u), c)), mask


def _svd_runs_qr_first(a, strategy, lanes):
    """Whether svd(a, strategy=strategy, lanes=lanes) would take the QR-first path (the
    table's choice under `auto`, made here as in the lowering). A strategy the shape cannot
    take is left to svd, whose CUDA lowering names it (on the CPU, JAX's SVD runs)."""
    m, n = a.shape[-2:]
    resolved, given_lanes = _config.resolve(strategy, lanes, "lstsq")
    if resolved not in ("auto", "blocked"):
        return False
    try:
        choice = _strategy.choose(_strategy.routine_of("svd", m, n), batch_size(a, 2), (m, n),
                                  a.dtype, resolved, given_lanes)
    except ValueError:
        return False
    return choice.strategy == "blocked"


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _r_and_qhb(a, b, strategy, lanes):
    """(R, Q^H b) of a tall or square a = Q R, without forming Q: the R factor of [a b], whose
    first n rows are [R Q^H b] (Householder QR factors the columns in order, so a's reflectors
    are those of a alone). Forming Q (orgqr, m x n) costs more than the QR itself; applying
    its reflectors to b is what LAPACK's gels does."""
    n = a.shape[-1]
    r = _qr(jnp.concatenate([a, b], axis=-1), mode="r", strategy=strategy, lanes=lanes)
    return r[..., :n, :n], r[..., :n, n:]


def _r_and_qhb_formed(a, b, strategy, lanes):
    q, r = _qr(a, mode="reduced", strategy=strategy, lanes=lanes)
    return r, matmul(mh(q), b)


@_r_and_qhb.defjvp
def _r_and_qhb_jvp(strategy, lanes, primals, tangents):
    # Through Q: [a b]'s own QR rule needs [a b] of full column rank, which fails wherever b
    # lies in a's range (every consistent system).
    return jax.jvp(lambda a, b: _r_and_qhb_formed(a, b, strategy, lanes), primals, tangents)


def _is_svd_norm(ord):
    """ord is one of the matrix norms the SVD gives: 2, -2 or 'nuc'."""
    return ord == "nuc" if isinstance(ord, str) else ord is not None and ord in (2, -2)


def norm(x, ord=None, axis=None, keepdims=False, *, strategy=None, lanes=None):
    """Like jax.numpy.linalg.norm. Matrix norms ord=2 (largest singular value), -2 (smallest) and
    'nuc' (their sum) come from this package's SVD (float and complex operands); every other
    norm is jax.numpy.linalg.norm's."""
    x, = as_arrays("norm", x)
    if axis is None and ord is not None:
        axis = tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, int) else axis
    if axes is None or len(axes) != 2 or not _is_svd_norm(ord) or x.ndim < 2:
        return jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    axes = tuple(int(d) % x.ndim for d in axes)
    s = svdvals(as_matrix("norm", jnp.moveaxis(x, axes, (-2, -1)), name="x"),
                strategy=strategy, lanes=lanes)
    if ord == 2:
        y = jnp.max(s, axis=-1, initial=0)
    elif ord == -2:
        y = jnp.min(s, axis=-1)
    else:
        y = jnp.sum(s, axis=-1)
    return jnp.expand_dims(y, axes) if keepdims else y


def _matrix_norm(x, p):
    """jnp.linalg.norm(x, p) of the matrices x, with the sums that max / min pick from held in
    one buffer. Why: their JVP marks the entries equal to the max; under jit, XLA may compute
    the sums again in another fusion, with another rounding, so that no entry or a different
    one matches, and cond(x, 1)'s gradient lost the norm's term or came out inf (JAX's own,
    float32 4 x 4 on the H200)."""
    if isinstance(p, str) or p not in (1, -1, np.inf, -np.inf):  # no max / min, or an error
        return jnp.linalg.norm(x, ord=p, axis=(-2, -1))
    sums = lax.optimization_barrier(jnp.sum(jnp.abs(x), axis=-2 if abs(p) == 1 else -1))
    return jnp.max(sums, axis=-1) if p > 0 else jnp.min(sums, axis=-1)


def cond(x, p=None, *, strategy=None, lanes=None):
    """Like jax.numpy.linalg.cond: norm(x, p) * norm(inv(x), p). p = None or 2: s_max / s_min
    from the SVD; -2: s_min / s_max; other p (square x only): jnp's norms of x and of this
    package's LU inverse. NaN turns into inf where x holds no NaN, for every p: as NumPy and jax
    0.11 (jax 0.10 left p = None / 2 NaN, e.g. 0 / 0 for a zero matrix)."""
    x, = as_arrays("cond", x)
    if x.ndim < 2:
        raise ValueError(f"cond: input array must be at least 2D; got shape {x.shape}")
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise ValueError(f"cond: input array must not be empty; got shape {x.shape}")
    x = as_matrix("cond", x, name="x")
    params = dict(strategy=strategy, lanes=lanes)
    if p is None or p == 2:
        s = svdvals(x, **params)
        r = s[..., 0] / s[..., -1]
    elif p == -2:
        s = svdvals(x, **params)
        r = s[..., -1] / s[..., 0]
    else:
        if x.shape[-2] != x.shape[-1]:
            raise ValueError(f"cond: for p={p!r}, x must be square; got shape {x.shape}")
        r = _matrix_norm(x, p) * _matrix_norm(inv(x, **params), p)
    return jnp.where(jnp.isnan(r) & ~jnp.isnan(x).any(axis=(-2, -1)), np.inf, r)
