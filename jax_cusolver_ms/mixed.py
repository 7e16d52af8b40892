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
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import strategy as _strategy
from ._common import batch_size, mh, nan_where, nonfinite_matrices, resolve_params
from ._primitive import SolverPrimitive, ffi_solver_call
from .cholesky import potrf, potrs
from .lu import _solve_matrix, getrf, getrs, solve_operands

# LAPACK's ITERMAX (?sgesv): refinement gains about -log10(cond(A) eps32) digits a step, so a
# matrix that needs more steps than this is better solved in float64 outright.
MAX_ITERATIONS = 30

_LOWER = {jnp.dtype(jnp.float64): jnp.float32, jnp.dtype(jnp.complex128): jnp.complex64}
ASSUME_A = ("gen", "pos")
# "float32": this package's LU / Cholesky in float32 (complex64), refined here; "tf32":
# cuSOLVER's iterative-refinement solve (cusolverDnDXgesv, ZYgesv: LU on the tensor cores in
# TF32, refined and, where that fails, solved in float64 by cuSOLVER itself; LU only).
FACTOR_PRECISIONS = ("float32", "tf32")


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


class _Solver:
    """A in float64 and its norm: the residuals and backward errors of both paths."""

    def __init__(self, a):
        self.a = a
        self.a_norm = jnp.max(jnp.sum(jnp.abs(a), axis=-1), axis=-1, initial=0.0)  # ||A||_inf

    def matrix(self, trans):
        """A, or A^T for custom_linear_solve's transpose."""
        return jnp.swapaxes(self.a, -1, -2) if trans else self.a

    def matvec(self, x, trans):
        return jnp.matmul(self.matrix(trans), x, precision=lax.Precision.HIGHEST)

    def backward_error(self, x, r, b):
        top = lambda v: jnp.max(jnp.abs(v), axis=-2, initial=0.0)
        residual, scale = top(r), self.a_norm[..., None] * top(x) + top(b)
        # NaN stays NaN (a matrix or x that is not finite is never taken as converged).
        err = jnp.where(scale == 0, jnp.where(residual == 0, 0, jnp.inf),
                        residual / jnp.where(scale == 0, 1, scale))
        return jnp.max(err, axis=-1, initial=0.0)

    @staticmethod
    def accept(b):
        """The backward error a refined solution must reach: LAPACK ?sgesv's test."""
        return max(1.0, b.shape[-2] ** 0.5) * jnp.finfo(b.real.dtype).eps

    def fall_back(self, x, err, b, trans):
        """(x, err, fell back): a matrix whose refinement did not reach accept() is solved in
        float64, in one solve of the batch, only when one needs it."""
        fell_back = ~(err <= self.accept(b))

        def with_fallback():
            x64 = self.full_solve(b, trans)
            err64 = self.backward_error(x64, b - self.matvec(x64, trans), b)
            return (jnp.where(fell_back[..., None, None], x64, x),
                    jnp.where(fell_back, err64, err))

        x, err = lax.cond(jnp.any(fell_back), with_fallback, lambda: (x, err))
        return x, err, fell_back

    def full_solve(self, b, trans):
        """The float64 solve that a matrix whose refinement did not converge falls back to."""
        return _solve_matrix(self.matrix(trans), b, self.params)


class _Refiner(_Solver):
    """The low-precision factor of A (scaled by a power of two) and A itself in float64, for
    solves with A (trans False) or with A^T (trans True: custom_linear_solve's transpose)."""

    def __init__(self, a, assume_a, params):
        super().__init__(a)
        self.assume_a = assume_a
        self.exponent = _exponent(a, (-2, -1))
        low = (a * jnp.exp2(-self.exponent)).astype(_LOWER[a.dtype])
        self.params = params
        if assume_a == "pos":
            self.factor, = potrf.bind(low, lower=True, **params)
        else:
            self.factor, self.pivots, _ = getrf.bind(low, **params)

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
        if self.assume_a != "pos":
            return super().full_solve(b, trans)
        c, = potrf.bind(self.matrix(trans), lower=True, **self.params)  # A^T = conj(A): HPD too
        x, = potrs.bind(c, b, lower=True, **_strategy.for_part("potrs", self.params))
        return x

    def refine(self, b, trans, max_iterations):
        """(x, (iterations, backward error, fell back)) for A x = b (A^T x = b)."""
        eps = jnp.finfo(b.real.dtype).eps
        batch = lambda m: m[..., None, None]

        x = self.low_solve(b, trans)
        r = b - self.matvec(x, trans)
        err = self.backward_error(x, r, b)
        done = ~(err > eps)  # at float64's rounding already, or NaN / Inf: nothing to refine
        steps = jnp.zeros(err.shape, jnp.int32)

        def more(state):
            i, _, _, _, done, _ = state
            return (i < max_iterations) & ~jnp.all(done)

        def step(state):
            i, x, r, err, done, steps = state
            x_new = x + self.low_solve(r, trans)
            r_new = b - self.matvec(x_new, trans)
            err_new = self.backward_error(x_new, r_new, b)
            better = ~done & (err_new < err)
            x, r = jnp.where(batch(better), x_new, x), jnp.where(batch(better), r_new, r)
            steps = steps + (~done).astype(jnp.int32)
            # Stops at float64's rounding, or where a step no longer halves the error (the
            # rate is about cond(A) eps32: beyond 1/2 it would not converge in time).
            done = done | ~(err_new > eps) | ~(err_new < err / 2)
            return i + 1, x, r, jnp.where(better, err_new, err), done, steps

        _, x, r, err, _, steps = lax.while_loop(more, step, (0, x, r, err, done, steps))
        x, err, fell_back = self.fall_back(x, err, b, trans)
        return x, (steps, err, fell_back)


# --- irs_gesv: cuSOLVER's iterative-refinement LU solve (factor_precision="tf32") ------------

def _irs_gesv_shapes(a, b, *, strategy, lanes):
    n = a.shape[-1]
    if a.shape != (n, n) or b.shape[0] != n:
        raise ValueError(f"irs_gesv: shapes a {a.shape}, b {b.shape} do not fit a (n, n), "
                         "b (n, k)")
    return [(b.shape, a.dtype), ((), np.int32)]


def _irs_gesv_jax(a, b, *, strategy, lanes):
    """Where cuSOLVER's TF32 solve does not run (no GPU, no extension): the float32 path,
    with cuSOLVER's convention of a negative count for a matrix solved in float64."""
    x, (steps, _, fell_back) = _Refiner(a, "gen", resolve_params(None, None)).refine(
        b, False, MAX_ITERATIONS)
    return [x, jnp.where(fell_back, -1, steps)]


def _irs_gesv_cuda(a, b, *, strategy, lanes):
    n, nrhs = b.shape[-2:]
    choice = _strategy.choose("irs_gesv", batch_size(a, 2), (n, n), a.dtype, strategy, lanes,
                              nrhs=nrhs)
    if not choice.uses_ffi or n == 0 or nrhs == 0:  # (an empty call writes no iterations)
        return _irs_gesv_jax(a, b, strategy=strategy, lanes=lanes)
    batch = a.shape[:-2]
    _, x, iterations, info = ffi_solver_call(
        "jcm_irs_gesv", [a, b],
        [jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(b.shape, b.dtype),
         jax.ShapeDtypeStruct(batch, np.int32), jax.ShapeDtypeStruct(batch, np.int32)],
        matrix_operands={0, 1}, matrix_results={0, 1}, choice=choice)
    failed = info != 0  # singular in float64 too: no solution, NaN as JAX's convention
    return [nan_where(failed, x), jnp.where(failed, -1, iterations)]


irs_gesv = SolverPrimitive("jcm_irs_gesv", core_ranks=(2, 2), shape_rule=_irs_gesv_shapes,
                           jax_impl=_irs_gesv_jax, cuda_impl=_irs_gesv_cuda)


class _IrsSolver(_Solver):
    """cuSOLVER's solve in place of _Refiner, with refine()'s outputs (max_iterations is
    cuSOLVER's own there)."""

    def __init__(self, a, params):
        super().__init__(a)
        self.params = params

    def refine(self, b, trans, max_iterations):
        x, iterations = irs_gesv.bind(self.matrix(trans), b, **self.params)
        err = self.backward_error(x, b - self.matvec(x, trans), b)
        # cuSOLVER's own test of convergence is not ours: what it passes and we do not is
        # solved again in float64 (a matrix it solved in float64, iterations < 0, passes).
        x, err, fell_back = self.fall_back(x, err, b, trans)
        return x, (jnp.maximum(iterations, 0), err, fell_back | (iterations < 0))


def mixed_solve(a, b, *, assume_a="gen", factor_precision="float32",
                max_iterations=MAX_ITERATIONS, strategy=None,
                lanes=None) -> MixedSolveResult:
    """Solves A x = b for float64 / complex128 A from a float32 / complex64 factorization,
    refined to float64 accuracy (module docstring); a matrix it does not converge for is solved
    in float64. Shapes as jax.numpy.linalg.solve: b (n,) or (..., n, k), batch dims broadcast.

    assume_a: "gen" (LU with partial pivoting) or "pos" (Cholesky; A Hermitian positive
    definite, read as (A + A^H) / 2). factor_precision: "float32" (this package's factorization
    in float32, refined here; strategy / lanes choose its strategy, as for lu_factor /
    cholesky) or "tf32" (cuSOLVER's iterative-refinement solve, LU on the tensor cores; "gen"
    only; per matrix on the lanes; where it does not run, no GPU, the float32 path). Differentiable
    in a and b (the tangents are solved the same way).
    """
    if assume_a not in ASSUME_A:
        raise ValueError(f"mixed_solve: assume_a must be one of {ASSUME_A}, got {assume_a!r}")
    if factor_precision not in FACTOR_PRECISIONS:
        raise ValueError(f"mixed_solve: factor_precision must be one of {FACTOR_PRECISIONS}, "
                         f"got {factor_precision!r}")
    if factor_precision == "tf32" and assume_a != "gen":
        raise ValueError("mixed_solve: factor_precision='tf32' (cuSOLVER's iterative-refinement "
                         "solve) is an LU solve: assume_a must be 'gen'")
    if not isinstance(max_iterations, int) or max_iterations < 0:
        raise ValueError(f"mixed_solve: max_iterations must be an int >= 0, got "
                         f"{max_iterations!r}")
    return _mixed_solve("mixed_solve", a, b, assume_a, factor_precision, max_iterations,
                        resolve_params(strategy, lanes))


def _mixed_solve(op, a, b, assume_a, factor_precision, max_iterations, params):
    """mixed_solve's work; errors name `op`, the function the user called (solve too)."""
    a, bm, vector = solve_operands(op, a, b)
    if a.dtype not in _LOWER:
        raise TypeError(f"{op}: mixed precision takes float64 or complex128 (the precision it "
                        f"refines to), got {a.dtype}")
    if assume_a == "pos":
        a = (a + mh(a)) / 2
    refiner = (_IrsSolver(lax.stop_gradient(a), params) if factor_precision == "tf32" else
               _Refiner(lax.stop_gradient(a), assume_a, params))
    x, (steps, err, fell_back) = lax.custom_linear_solve(
        lambda x: jnp.matmul(a, x, precision=lax.Precision.HIGHEST), bm,
        lambda _, r: refiner.refine(r, False, max_iterations),
        lambda _, r: refiner.refine(r, True, max_iterations), has_aux=True)
    x = nan_where(nonfinite_matrices(a), x)  # NaN for a matrix that is not finite, as solve
    return MixedSolveResult(x[..., 0] if vector else x, steps, err, fell_back)
