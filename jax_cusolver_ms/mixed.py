"""Mixed-precision solves: float64 (complex128) accuracy from a factorization in float32
(complex64).

A x = b is factored once in the lower precision (LU for a general A, Cholesky for a Hermitian
positive definite one, each through this project's primitives and so its strategies), then
refined in float64: r = b - A x in float64, a correction from the low-precision factor, until the
normwise backward error ||r|| / (||A|| ||x|| + ||b||) reaches float64's rounding or stops
improving (classical iterative refinement, as LAPACK's ?sgesv / ?sposv). A matrix whose error
is then still above sqrt(n) eps64 (LAPACK's test; cond(A) near 1 / eps32 or beyond, or a
factor that failed in the lower precision) is solved again in float64, so the result is always
a float64 solve's. The factorization is where the time goes (2/3 n^3 against 2 n^2 a step), so
mixed pays where the lower precision factors faster: see docs/mixed_precision.md.

Least squares (mixed_lstsq, lstsq(precision="mixed")) the same way from a float32 QR, refined on
the augmented system (_AugmentedRefiner), falling back to lstsq's float64 method.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import strategy as _strategy
from ._common import batch_sharding, matmul, mh, nan_where, nonfinite_matrices, resolve_params
from .cholesky import potrf, potrs
from .lu import _solve_matrix, getrf, getrs, solve_operands
from .qr import qr as _qr
from .svd import _lstsq, svdvals

# LAPACK's ITERMAX (?sgesv): refinement gains about -log10(cond(A) eps32) digits a step, so a
# matrix that needs more steps than this is better solved in float64 outright.
MAX_ITERATIONS = 30

_LOWER = {jnp.dtype(jnp.float64): jnp.float32, jnp.dtype(jnp.complex128): jnp.complex64}
ASSUME_A = ("gen", "pos")


class MixedSolveResult(NamedTuple):
    """x: the solution, float64 (complex128). Per matrix of the batch: iterations, the
    refinement steps taken after the first low-precision solve; backward_error, x's normwise
    backward error max_j ||b_j - A x_j||_inf / (||A||_inf ||x_j||_inf + ||b_j||_inf); fell_back,
    True where refinement did not converge and x is a float64 solve's."""
    x: jax.Array
    iterations: jax.Array
    backward_error: jax.Array
    fell_back: jax.Array


def _exponent(x, axes):
    """Per matrix floor(log2(max |x|)) over `axes` (0 where x is zero or not finite), a float:
    scaling by 2^-e is exact and brings the largest entry into [1, 2), inside float32's range."""
    top = jnp.max(jnp.abs(x), axis=axes, keepdims=True, initial=0.0)
    ok = jnp.isfinite(top) & (top > 0)
    return jnp.where(ok, jnp.floor(jnp.log2(jnp.where(ok, top, 1))), 0)


def _scaled_low(a):
    """(e, A 2^-e in float32 / complex64): one exact scaling per matrix into float32's range."""
    e = _exponent(a, (-2, -1))
    return e, (a * jnp.exp2(-e)).astype(_LOWER[a.dtype])


def _require_double(op, dtype):
    """The TypeError of a mixed-precision call on anything but float64 / complex128."""
    if jnp.dtype(dtype) not in _LOWER:
        raise TypeError(f"{op}: mixed precision takes float64 or complex128 (the precision it "
                        f"refines to), got {dtype}")


def _top(v):
    """Per column, the largest magnitude: the inf-norm of each right-hand side's vector."""
    return jnp.max(jnp.abs(v), axis=-2, initial=0.0)


def _normwise(residual, scale):
    """residual / scale per column (0 / 0 is 0, r / 0 is Inf), the worst column per matrix.
    NaN stays NaN: a matrix or x that is not finite is never taken as converged."""
    err = jnp.where(scale == 0, jnp.where(residual == 0, 0, jnp.inf),
                    residual / jnp.where(scale == 0, 1, scale))
    return jnp.max(err, axis=-1, initial=0.0)


def _refine(low_solve, residual, backward_error, first, max_iterations, eps):
    """Classical iterative refinement of y (an array, or a tuple of arrays), per matrix of the
    batch: y = low_solve(first) (the low-precision solve of the right-hand side), then while
    some matrix is not done y += low_solve(residual(y)), the residual in float64, keeping each
    matrix's y of least backward_error(y, residual). Returns (y, its error, steps taken)."""
    keep = lambda better, new, old: jax.tree.map(
        lambda n, o: jnp.where(better[..., None, None], n, o), new, old)
    y = low_solve(first)
    res = residual(y)
    err = backward_error(y, res)
    done = ~(err > eps)  # at float64's rounding already, or NaN / Inf: nothing to refine
    steps = jnp.zeros_like(err, jnp.int32)

    def more(state):
        i, _, _, _, done, _ = state
        return (i < max_iterations) & ~jnp.all(done)

    def step(state):
        i, y, res, err, done, steps = state
        y_new = jax.tree.map(jnp.add, y, low_solve(res))
        res_new = residual(y_new)
        err_new = backward_error(y_new, res_new)
        better = ~done & (err_new < err)
        steps = steps + (~done).astype(jnp.int32)
        # Stops at float64's rounding, or where a step no longer halves the error (the rate is
        # about cond(A) eps32: beyond 1/2 it would not converge in time).
        done = done | ~(err_new > eps) | ~(err_new < err / 2)
        return (i + 1, keep(better, y_new, y), keep(better, res_new, res),
                jnp.where(better, err_new, err), done, steps)

    _, y, _, err, _, steps = lax.while_loop(more, step, (0, y, res, err, done, steps))
    return y, err, steps


class _Refiner:
    """The low-precision factor of A (scaled by a power of two) and A itself in float64, for
    solves with A (trans False) or with A^T (trans True: custom_linear_solve's transpose)."""

    def __init__(self, a, assume_a, params):
        self.a = a
        self.a_norm = jnp.max(jnp.sum(jnp.abs(a), axis=-1), axis=-1, initial=0.0)  # ||A||_inf
        self.assume_a = assume_a
        self.exponent, low = _scaled_low(a)
        self.params = params
        if assume_a == "pos":
            self.factor, = potrf.bind(low, lower=True, **params)
        else:
            self.factor, self.pivots, _ = getrf.bind(low, **params)

    def matrix(self, trans):
        """A, or A^T for custom_linear_solve's transpose."""
        return jnp.swapaxes(self.a, -1, -2) if trans else self.a

    def matvec(self, x, trans):
        return jnp.matmul(self.matrix(trans), x, precision=lax.Precision.HIGHEST)

    def backward_error(self, x, r, b):
        return _normwise(_top(r), self.a_norm[..., None] * _top(x) + _top(b))

    def low_solve(self, r, trans):
        """A^-1 r (A^-T r) from the low-precision factor, r scaled into float32's range. With
        A = 2^e A' and r = 2^t r': A^-1 r = 2^(t - e) A'^-1 r' (one exact scaling, where
        dividing by 2^e and 2^t in turn may overflow though the result does not)."""
        t = _exponent(r, (-2, -1))
        rhs = (r * jnp.exp2(-t)).astype(self.factor.dtype)
        if self.assume_a == "pos":
            # A is Hermitian: A^T = conj(A), so A^T y = r is A conj(y) = conj(r).
            flip = trans and jnp.iscomplexobj(rhs)
            rhs = rhs.conj() if flip else rhs
            y, = potrs.bind(self.factor, rhs, lower=True,
                            **_strategy.for_part("potrs", self.params))
            y = y.conj() if flip else y
        else:
            y, = getrs.bind(self.factor, self.pivots, rhs, trans=1 if trans else 0,
                            **_strategy.for_part("getrs", self.params))
        return y.astype(r.dtype) * jnp.exp2(t - self.exponent)

    def full_solve(self, b, trans):
        """The float64 solve that a matrix whose refinement did not converge falls back to."""
        a = self.matrix(trans)  # A^T = conj(A): positive definite too
        if self.assume_a != "pos":
            return _solve_matrix(a, b, self.params)
        c, = potrf.bind(a, lower=True, **self.params)
        x, = potrs.bind(c, b, lower=True, **_strategy.for_part("potrs", self.params))
        return x

    def refine(self, b, trans, max_iterations):
        """(x, (iterations, backward error, fell back)) for A x = b (A^T x = b)."""
        eps = jnp.finfo(b.real.dtype).eps
        batch = lambda m: m[..., None, None]
        x, err, steps = _refine(lambda r: self.low_solve(r, trans),
                                lambda x: b - self.matvec(x, trans),
                                lambda x, r: self.backward_error(x, r, b), b, max_iterations, eps)
        accept = max(1.0, b.shape[-2] ** 0.5) * eps  # LAPACK ?sgesv's test
        fell_back = ~(err <= accept)

        def with_fallback():  # only where a matrix needs it: a float64 solve of the batch
            x64 = self.full_solve(b, trans)
            err64 = self.backward_error(x64, b - self.matvec(x64, trans), b)
            return (jnp.where(batch(fell_back), x64, x), jnp.where(fell_back, err64, err))

        x, err = lax.cond(jnp.any(fell_back), with_fallback, lambda: (x, err))
        return x, (steps, err, fell_back)


def mixed_solve(a, b, *, assume_a="gen", max_iterations=MAX_ITERATIONS, strategy=None,
                lanes=None) -> MixedSolveResult:
    """Solves A x = b for float64 / complex128 A from a float32 / complex64 factorization,
    refined to float64 accuracy (module docstring); a matrix it does not converge for is solved
    in float64. Shapes as jax.numpy.linalg.solve: b (n,) or (..., n, k), batch dims broadcast.

    assume_a: "gen" (LU with partial pivoting) or "pos" (Cholesky; A Hermitian positive
    definite, read as (A + A^H) / 2). strategy / lanes choose the float32 factorization's
    strategy, as for lu_factor / cholesky. Differentiable in a and b (the tangents are solved
    the same way).
    """
    if assume_a not in ASSUME_A:
        raise ValueError(f"mixed_solve: assume_a must be one of {ASSUME_A}, got {assume_a!r}")
    if not isinstance(max_iterations, int) or max_iterations < 0:
        raise ValueError(f"mixed_solve: max_iterations must be an int >= 0, got "
                         f"{max_iterations!r}")
    return _mixed_solve("mixed_solve", a, b, assume_a, max_iterations,
                        resolve_params(strategy, lanes))


def _mixed_solve(op, a, b, assume_a, max_iterations, params):
    """mixed_solve's work; errors name `op`, the function the user called (solve too)."""
    a, bm, vector = solve_operands(op, a, b)
    _require_double(op, a.dtype)
    if assume_a == "pos":
        a = (a + mh(a)) / 2
    refiner = _Refiner(lax.stop_gradient(a), assume_a, params)
    x, (steps, err, fell_back) = lax.custom_linear_solve(
        lambda x: jnp.matmul(a, x, precision=lax.Precision.HIGHEST), bm,
        lambda _, r: refiner.refine(r, False, max_iterations),
        lambda _, r: refiner.refine(r, True, max_iterations), has_aux=True)
    x = nan_where(nonfinite_matrices(a), x)  # NaN for a matrix that is not finite, as solve
    return MixedSolveResult(x[..., 0] if vector else x, steps, err, fell_back)


# --- least squares ------------------------------------------------------------------------------

class MixedLstsqResult(NamedTuple):
    """lstsq's (x, residuals, rank, s), and per matrix of the batch: iterations, the refinement
    steps after the first low-precision solve; fell_back, True where refinement did not
    converge and x, rank and s are the float64 method's."""
    x: jax.Array
    residuals: jax.Array
    rank: jax.Array
    s: jax.Array
    iterations: jax.Array
    fell_back: jax.Array


def mixed_lstsq(a, b, rcond=None, *, method="svd", max_iterations=MAX_ITERATIONS,
                strategy=None, lanes=None) -> MixedLstsqResult:
    """Least squares for float64 / complex128 from a float32 / complex64 QR, refined to float64
    accuracy: lstsq(a, b, rcond, method=method, precision="mixed") with the iteration counts.
    Shapes and conventions as lstsq (tall: the least-squares solution; wide: the minimum-norm
    one). A matrix the refinement does not converge for (rank deficient, or too ill-conditioned
    for float32) is solved by `method` in float64; s and rank of the others come from the
    float32 R (s to float32's accuracy). Differentiable in a and b."""
    if not isinstance(max_iterations, int) or max_iterations < 0:
        raise ValueError(f"mixed_lstsq: max_iterations must be an int >= 0, got "
                         f"{max_iterations!r}")
    return MixedLstsqResult(*_lstsq("mixed_lstsq", a, b, rcond, method, False, "mixed",
                                    dict(strategy=strategy, lanes=lanes), max_iterations))


def _augmented_matvec(ap, rz):
    """[I A'; A'^H 0] [r; z], in float64."""
    r, z = rz
    hi = lax.Precision.HIGHEST
    return r + jnp.matmul(ap, z, precision=hi), jnp.matmul(mh(ap), r, precision=hi)


class _AugmentedRefiner:
    """Least squares from a float32 QR, refined in float64 on the augmented system (Bjorck's
    refinement, which keeps the QR solution's accuracy where refining x alone, the corrected
    semi-normal equations, would square the condition number):

        [ I    A' ] [r]   [f0]
        [ A'^H  0 ] [z] = [g0],   A' = A, (f0, g0) = (b, 0) for a tall A: z = x, r = b - A x;
                                  A' = A^H, (f0, g0) = (0, b) for a wide A: r = x, the minimum-
                                  norm solution of A x = b.

    With A' = 2^e Q R (the float32 QR of A' scaled by a power of two), the correction of the
    residuals (f, g) is z1 = R'^-H g, d = Q^H f, dr = f + Q (z1 - d), dz = R'^-1 (d - z1)."""

    def __init__(self, ap, params):
        self.ap = ap
        self.ap_norm = jnp.maximum(jnp.max(jnp.sum(jnp.abs(ap), axis=-1), axis=-1, initial=0.0),
                                   jnp.max(jnp.sum(jnp.abs(ap), axis=-2), axis=-1, initial=0.0))
        self.exponent, low = _scaled_low(ap)
        self.q, self.r = _qr(low, mode="reduced", **params)

    def low_solve(self, f, g):
        """The correction (dr, dz) for residuals (f, g), in float32 after one exact scaling of
        f by 2^-t and g by 2^-(t + e) (see low_solve of _Refiner)."""
        e = self.exponent
        t = jnp.maximum(_exponent(f, (-2, -1)), _exponent(g, (-2, -1)) - e)
        f32 = (f * jnp.exp2(-t)).astype(self.q.dtype)
        g32 = (g * jnp.exp2(-t - e)).astype(self.q.dtype)
        z1 = jax.scipy.linalg.solve_triangular(self.r, g32, trans="C", lower=False)
        d = matmul(mh(self.q), f32)
        dr = f32 + matmul(self.q, z1 - d)
        dz = jax.scipy.linalg.solve_triangular(self.r, d - z1, lower=False)
        return dr.astype(f.dtype) * jnp.exp2(t), dz.astype(f.dtype) * jnp.exp2(t - e)

    def residual(self, r, z, f0, g0):
        f, g = _augmented_matvec(self.ap, (r, z))
        return f0 - f, g0 - g

    def backward_error(self, f, g, r, z, f0, g0):
        """The augmented system's normwise backward error, per matrix (worst column)."""
        return _normwise(jnp.maximum(_top(f), _top(g)),
                         self.ap_norm[..., None] * (_top(r) + _top(z)) + _top(r) + _top(f0) +
                         _top(g0))

    def refine(self, f0, g0, max_iterations):
        """((r, z), (iterations, fell back)); a matrix that did not converge gives zeros (its
        solution comes from the float64 fall-back, and its tangents then must not be NaN)."""
        eps = jnp.finfo(f0.real.dtype).eps
        batch = lambda m: m[..., None, None]
        (r, z), err, steps = _refine(lambda fg: self.low_solve(*fg),
                                     lambda rz: self.residual(*rz, f0, g0),
                                     lambda rz, fg: self.backward_error(*fg, *rz, f0, g0),
                                     (f0, g0), max_iterations, eps)
        converged = err <= max(1.0, self.ap.shape[-2] ** 0.5) * eps
        r, z = (jnp.where(batch(converged), v, 0) for v in (r, z))
        return (r, z), (steps, ~converged)


def _mixed_lstsq(a, b, kept, float64_lstsq, max_iterations, params):
    """lstsq's precision="mixed" (svd.lstsq): a (..., m, n) and b (..., m, k) broadcast, float64
    or complex128. Returns (x, mask of the singular values kept, s, iterations, fell back):
    s from the float32 R, and for a matrix whose refinement did not converge (rank deficient,
    or too ill-conditioned for float32) x, mask and s of float64_lstsq(a, b)."""
    m, n = a.shape[-2:]
    wide = m < n
    ap = mh(a) if wide else a
    refiner = _AugmentedRefiner(lax.stop_gradient(ap), params)
    # f0 has A' rows, g0 its columns: the zeros stand for the part b is not.
    shape = b.shape[:-2] + (ap.shape[-2 if wide else -1], b.shape[-1])
    zeros = jnp.zeros(shape, b.dtype, out_sharding=batch_sharding(b, len(shape)))
    rhs = (zeros, b) if wide else (b, zeros)
    def solve(_, c):
        return refiner.refine(*c, max_iterations)

    def transpose_solve(_, c):
        # The augmented matrix is Hermitian: its transpose is its conjugate.
        if not jnp.iscomplexobj(b):
            return solve(_, c)
        (r, z), aux = solve(_, tuple(v.conj() for v in c))
        return (r.conj(), z.conj()), aux

    (r, z), (steps, fell_back) = lax.custom_linear_solve(
        functools.partial(_augmented_matvec, ap), rhs, solve, transpose_solve, has_aux=True)
    x = r if wide else z
    s = (svdvals(refiner.r, **params).astype(np.finfo(a.dtype).dtype) *
         jnp.exp2(refiner.exponent[..., 0]))  # R's of A' scaled by 2^-e: back to A's
    mask = kept(s)[0]

    def with_fallback():  # only where a matrix needs it: float64 least squares of the batch
        x64, mask64, s64 = float64_lstsq(a, b)
        pick = lambda v64, v, dims: jnp.where(fell_back.reshape(fell_back.shape + (1,) * dims),
                                              v64, v)
        return pick(x64, x, 2), pick(mask64, mask, 1), pick(s64, s, 1)

    x, mask, s = lax.cond(jnp.any(fell_back), with_fallback, lambda: (x, mask, s))
    return x, mask, s, steps, fell_back
