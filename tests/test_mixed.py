"""Tests for the mixed-precision solves: mixed_solve and solve(precision="mixed").

A result must be a float64 solve's in accuracy: its normwise backward error within LAPACK's
sqrt(n) eps64 and close to NumPy's float64 solve's, its solution within the condition number's
bound of NumPy's; matrices beyond float32's conditioning fall back to float64 and say so.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jax_cusolver_ms as jcm
from conftest import (
    conj_t,
    random_matrix,
    random_rhs,
    rel_err,
    rotated_grid,
    rtol_for,
    strategy_grid,
    unitary,
    widened,
)

DOUBLE_DTYPES = (np.float64, np.complex128)
KINDS = {"gen": "well_conditioned", "pos": "spd"}
# (a's shape, b's shape): vectors, several right-hand sides, broadcast batch dims, n = 1, batch
# 0 and n = 0.
SHAPES = [
    ((5, 5), (5,)), ((1, 1), (1, 2)), ((3, 24, 24), (3, 24, 2)), ((2, 1, 9, 9), (4, 9, 1)),
    ((2, 40, 40), (40, 3)), ((0, 4, 4), (0, 4, 1)), ((2, 0, 0), (2, 0, 1)),
]


def backward_error(a, x, b):
    """max over the columns of ||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf), per matrix,
    in float64 NumPy."""
    a, x, b = widened(a), widened(x), widened(b)
    if b.ndim == a.ndim - 1:
        x, b = x[..., None], b[..., None]
    r = b - a @ x
    top = lambda v: np.max(np.abs(v), axis=-2, initial=0.0)
    a_norm = np.max(np.sum(np.abs(a), axis=-1), axis=-1, initial=0.0)
    scale = a_norm[..., None] * top(x) + top(b)
    return np.max(np.where(scale > 0, top(r) / np.where(scale > 0, scale, 1), 0), axis=-1,
                  initial=0.0)


def ill_conditioned(rng, n, cond, dtype):
    s = np.logspace(0, -np.log10(cond), n)
    return ((unitary(rng, (n, n), dtype) * s) @ conj_t(unitary(rng, (n, n), dtype))).astype(dtype)


@pytest.mark.parametrize("dtype,assume_a,shapes,strategy",
                         strategy_grid(DOUBLE_DTYPES, ("gen", "pos"), SHAPES))
def test_mixed_solve_is_as_accurate_as_a_float64_solve(rng, dtype, assume_a, shapes, strategy):
    a_shape, b_shape = shapes
    a = random_matrix(rng, a_shape, dtype, KINDS[assume_a])
    b = random_rhs(rng, b_shape, dtype)
    result = jcm.mixed_solve(a, b, assume_a=assume_a, strategy=strategy)
    expected = np.linalg.solve(widened(a), widened(b))
    assert result.x.dtype == dtype and result.x.shape == expected.shape
    n = a_shape[-1]
    assert rel_err(result.x, expected, 1 if b.ndim == 1 else 2) <= rtol_for(dtype, n, 10)
    batch = expected.shape[:-1] if b.ndim == 1 else expected.shape[:-2]
    for name in ("iterations", "backward_error", "fell_back"):
        assert getattr(result, name).shape == batch, name
    ours = backward_error(np.broadcast_to(a, batch + a_shape[-2:]), result.x,
                          np.broadcast_to(b, result.x.shape))
    eps = np.finfo(dtype).eps
    assert np.all(ours <= max(1, n) ** 0.5 * eps)
    # What the result reports is its backward error (to rounding: the residual is rounding).
    np.testing.assert_allclose(result.backward_error, ours, rtol=0, atol=4 * eps)
    assert not np.any(result.fell_back)


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES)
@pytest.mark.parametrize("assume_a", ("gen", "pos"))
def test_mixed_solve_refines_where_float32_conditioning_allows_and_falls_back_beyond(
        rng, dtype, assume_a):
    n = 32
    b = random_rhs(rng, (3, n, 2), dtype)
    mats = [ill_conditioned(rng, n, cond, dtype) for cond in (1e2, 1e5, 1e12)]
    if assume_a == "pos":  # the same conditioning, Hermitian positive definite
        mats = [m @ conj_t(m) for m in
                (ill_conditioned(rng, n, np.sqrt(c), dtype) for c in (1e2, 1e5, 1e12))]
    a = np.stack(mats)
    result = jcm.mixed_solve(a, b, assume_a=assume_a)
    np.testing.assert_array_equal(result.fell_back, [False, False, True])
    assert result.iterations[0] >= 1 and result.iterations[1] >= result.iterations[0]
    expected = np.linalg.solve(a, b)
    for i, cond in enumerate((1e2, 1e5, 1e12)):
        assert rel_err(result.x[i], expected[i]) <= rtol_for(dtype, n, cond)
    assert np.all(backward_error(a, result.x, b) <= n ** 0.5 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES)
def test_mixed_solve_with_no_refinement_falls_back_to_float64(rng, dtype):
    a = random_matrix(rng, (2, 16, 16), dtype, "well_conditioned")
    b = random_rhs(rng, (2, 16, 1), dtype)
    result = jcm.mixed_solve(a, b, max_iterations=0)
    # A float32 solve alone is 1e-8-accurate: short of float64's test, so solved in float64.
    assert np.all(result.iterations == 0) and np.all(result.fell_back)
    assert rel_err(result.x, np.linalg.solve(a, b)) <= rtol_for(dtype, 16, 10)


@pytest.mark.parametrize("assume_a", ("gen", "pos"))
@pytest.mark.parametrize("trans", (False, True))
def test_refinement_and_its_fall_back_solve_a_or_its_transpose(rng, assume_a, trans):
    # custom_linear_solve's transpose solves with A^T (not A^H): the gradient's path.
    from jax_cusolver_ms import mixed

    a = random_matrix(rng, (2, 9, 9), np.complex128, KINDS[assume_a])
    a = (a + conj_t(a)) / 2 if assume_a == "pos" else a
    b = random_rhs(rng, (2, 9, 3), np.complex128)
    refiner = mixed._Refiner(jnp.asarray(a), assume_a, dict(strategy="auto", lanes=None))
    expected = np.linalg.solve(np.swapaxes(a, -1, -2) if trans else a, b)
    assert rel_err(refiner.full_solve(jnp.asarray(b), trans), expected) <= 1e-12
    x, (_, _, fell_back) = refiner.refine(jnp.asarray(b), trans, mixed.MAX_ITERATIONS)
    assert rel_err(x, expected) <= 1e-12 and not np.any(fell_back)


@pytest.mark.parametrize("scale", (1e200, 1e-200))
def test_mixed_solve_takes_entries_outside_float32_range(rng, scale):
    a = random_matrix(rng, (2, 12, 12), np.float64, "well_conditioned")
    b = random_rhs(rng, (2, 12, 2), np.float64)
    result = jcm.mixed_solve(a * scale, b * scale)
    assert not np.any(result.fell_back)
    assert rel_err(result.x, np.linalg.solve(a, b)) <= rtol_for(np.float64, 12, 10)


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES)
@pytest.mark.parametrize("assume_a", ("gen", "pos"))
def test_mixed_solve_nan_and_singular_matrices(rng, dtype, assume_a):
    a = random_matrix(rng, (3, 6, 6), dtype, KINDS[assume_a])
    a[0, 2, 3] = a[0, 3, 2] = np.nan
    a[1] = 0  # singular (not positive definite)
    b = random_rhs(rng, (3, 6, 2), dtype)
    result = jcm.mixed_solve(a, b, assume_a=assume_a)
    assert np.all(np.isnan(result.x[0]))
    assert not np.all(np.isfinite(result.x[1]))
    np.testing.assert_array_equal(result.fell_back, [True, True, False])
    assert rel_err(result.x[2], np.linalg.solve(a[2], b[2])) <= rtol_for(dtype, 6, 10)


@pytest.mark.parametrize("assume_a", ("gen", "pos"))
def test_mixed_solve_under_jit_vmap_and_grad(rng, assume_a):
    dtype = np.float64
    a = random_matrix(rng, (3, 7, 7), dtype, KINDS[assume_a])
    b = random_rhs(rng, (3, 7, 2), dtype)
    call = lambda a, b: jcm.mixed_solve(a, b, assume_a=assume_a).x
    eager = call(a, b)
    np.testing.assert_allclose(jax.jit(call)(a, b), eager, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(jax.vmap(call)(a, b), eager, rtol=1e-13, atol=1e-14)
    check_grads(call, (a, b), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


def test_solve_precision_mixed_is_mixed_solve(rng):
    a = random_matrix(rng, (4, 10, 10), np.complex128, "well_conditioned")
    b = random_rhs(rng, (10,), np.complex128)
    np.testing.assert_array_equal(jcm.solve(a, b, precision="mixed"), jcm.mixed_solve(a, b).x)


def test_mixed_solve_rejects_what_it_cannot_solve(rng):
    a = random_matrix(rng, (2, 4, 4), np.float32, "general")
    with pytest.raises(TypeError, match="mixed_solve: .*float64 or complex128"):
        jcm.mixed_solve(a, a)
    with pytest.raises(TypeError, match="solve: mixed precision takes float64"):
        jcm.solve(a, a, precision="mixed")
    a = a.astype(np.float64)
    with pytest.raises(ValueError, match="mixed_solve: assume_a"):
        jcm.mixed_solve(a, a, assume_a="sym")
    with pytest.raises(ValueError, match="mixed_solve: max_iterations"):
        jcm.mixed_solve(a, a, max_iterations=-1)
    with pytest.raises(ValueError, match="mixed_solve: b of shape"):
        jcm.mixed_solve(a, a[..., :3, :])
    with pytest.raises(ValueError, match="solve: precision"):
        jcm.solve(a, a, precision="half")


# --- least squares: mixed_lstsq and lstsq(precision="mixed") ------------------------------------

# (a's shape, b's shape): tall, wide, square, vectors, broadcast batch dims, batch 0, n = 0.
LSTSQ_SHAPES = [
    ((40, 8), (40,)), ((3, 30, 12), (3, 30, 2)), ((2, 9, 25), (2, 9, 3)), ((16, 16), (16, 1)),
    ((2, 1, 20, 5), (1, 3, 20, 2)), ((0, 6, 4), (0, 6, 1)), ((2, 5, 0), (2, 5, 1)),
]


def oblong_conditioned(rng, m, n, cond, dtype):
    """An m x n matrix with singular values log-spaced from 1 down to 1 / cond."""
    k = min(m, n)
    s = np.logspace(0, -np.log10(cond), k)
    u, v = unitary(rng, (m, m), dtype)[:, :k], unitary(rng, (n, n), dtype)[:, :k]
    return ((u * s) @ conj_t(v)).astype(dtype)


def numpy_lstsq(a, b):
    """NumPy's float64 least squares per matrix of the broadcast batch: (x, s)."""
    a, b = widened(a), widened(b)
    vector = b.ndim == a.ndim - 1
    bm = b[..., None] if vector else b
    batch = np.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    bm = np.broadcast_to(bm, batch + bm.shape[-2:])
    x = np.zeros(batch + (a.shape[-1], bm.shape[-1]), a.dtype)
    for i in np.ndindex(*batch):
        x[i] = np.linalg.lstsq(a[i], bm[i], rcond=None)[0]
    return (x[..., 0] if vector else x), np.linalg.svd(a, compute_uv=False)


@pytest.mark.parametrize(
    "dtype,shapes,strategy",
    rotated_grid(("auto", "looped", "sequential"), DOUBLE_DTYPES, LSTSQ_SHAPES))
def test_mixed_lstsq_is_as_accurate_as_a_float64_lstsq(rng, dtype, shapes, strategy):
    a_shape, b_shape = shapes
    a = random_matrix(rng, a_shape, dtype, "general")
    b = random_rhs(rng, b_shape, dtype)
    result = jcm.mixed_lstsq(a, b, strategy=strategy)
    expected, s = numpy_lstsq(a, b)
    m, n = a_shape[-2:]
    assert result.x.dtype == dtype and result.x.shape == expected.shape
    k = min(m, n)
    # Gaussian m x n matrices: condition numbers of order 10 for these shapes.
    assert rel_err(result.x, expected, 1 if b.ndim == a.ndim - 1 else 2) <= rtol_for(dtype, k, 100)
    batch = expected.shape[:-1] if b.ndim == a.ndim - 1 else expected.shape[:-2]
    assert result.iterations.shape == batch and result.fell_back.shape == batch
    assert not np.any(result.fell_back)
    np.testing.assert_array_equal(result.rank, np.full(batch, k))
    # s from the float32 R: to float32's accuracy relative to the largest.
    np.testing.assert_allclose(result.s, s, rtol=0, atol=1e-5 * max(1.0, np.max(s, initial=0)))
    x = result.x if b.ndim == a.ndim else result.x[..., None]
    bm = b if b.ndim == a.ndim else b[..., None]
    residuals = np.sum(np.abs(widened(bm) - widened(a) @ widened(x)) ** 2, axis=-2)
    np.testing.assert_allclose(result.residuals, residuals, rtol=1e-10, atol=1e-12)
    # lstsq(precision="mixed") is the same computation.
    same = jcm.lstsq(a, b, precision="mixed", strategy=strategy)
    for got, want in zip(same, result[:4]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES)
@pytest.mark.parametrize("m,n", [(40, 10), (10, 40)])
def test_mixed_lstsq_refines_where_float32_allows_and_falls_back_beyond(rng, dtype, m, n):
    conds = (1e2, 1e5, 1e12)
    a = np.stack([oblong_conditioned(rng, m, n, c, dtype) for c in conds])
    a[1] *= 1e3  # the scaling into float32's range is per matrix
    rank_deficient = oblong_conditioned(rng, m, n, 10, dtype)
    if m > n:
        rank_deficient[:, -1] = rank_deficient[:, 0]
    else:
        rank_deficient[-1] = rank_deficient[0]
    a = np.concatenate([a, rank_deficient[None]])
    b = random_rhs(rng, (4, m, 2), dtype)
    result = jcm.mixed_lstsq(a, b)
    np.testing.assert_array_equal(result.fell_back, [False, False, True, True])
    assert 1 <= result.iterations[0] <= result.iterations[1]
    expected, s = numpy_lstsq(a, b)
    for i, cond in enumerate(conds):
        assert rel_err(result.x[i], expected[i]) <= rtol_for(dtype, min(m, n), cond)
    # Rank deficient: the minimum-norm solution, from the float64 SVD (lstsq's default method).
    assert rel_err(result.x[3], expected[3]) <= rtol_for(dtype, min(m, n), 100)
    np.testing.assert_array_equal(result.rank, [min(m, n)] * 3 + [min(m, n) - 1])
    np.testing.assert_allclose(result.s[2:], s[2:], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES)
def test_mixed_lstsq_nan_and_zero_matrices(rng, dtype):
    a = random_matrix(rng, (3, 12, 5), dtype, "general")
    a[0, 2, 3] = np.nan
    a[1] = 0  # rank 0: x = 0, the minimum-norm solution
    b = random_rhs(rng, (3, 12), dtype)
    result = jcm.mixed_lstsq(a, b)
    assert np.all(np.isnan(result.x[0]))
    np.testing.assert_array_equal(result.x[1], np.zeros(5))
    np.testing.assert_array_equal(result.fell_back, [True, True, False])
    assert rel_err(result.x[2], numpy_lstsq(a[2], b[2])[0], 1) <= rtol_for(dtype, 5, 100)


@pytest.mark.parametrize("m,n", [(14, 5), (5, 14)])
def test_mixed_lstsq_under_jit_vmap_and_grad(rng, m, n):
    a = random_matrix(rng, (3, m, n), np.float64, "general")
    b = random_rhs(rng, (3, m, 2), np.float64)
    call = lambda a, b: jcm.lstsq(a, b, precision="mixed")[0]
    eager = call(a, b)
    np.testing.assert_allclose(jax.jit(call)(a, b), eager, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(jax.vmap(call)(a, b), eager, rtol=1e-13, atol=1e-14)
    check_grads(call, (a, b), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)
    # The derivative is the float64 one's (jnp.linalg.lstsq's, which takes 2-D a only).
    loss = lambda f: lambda a, b: jnp.sum(jnp.sin(f(a, b)))
    ours = jax.grad(loss(call), (0, 1))(a[0], b[0])
    jaxs = jax.grad(loss(lambda a, b: jnp.linalg.lstsq(a, b)[0]), (0, 1))(a[0], b[0])
    for got, want in zip(ours, jaxs):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_mixed_lstsq_rejects_what_it_cannot_solve(rng):
    a = random_matrix(rng, (2, 6, 4), np.float32, "general")
    b = random_rhs(rng, (2, 6), np.float32)
    with pytest.raises(TypeError, match="mixed_lstsq: mixed precision takes float64"):
        jcm.mixed_lstsq(a, b)
    with pytest.raises(TypeError, match="lstsq: mixed precision takes float64"):
        jcm.lstsq(a, b, precision="mixed")
    a, b = a.astype(np.float64), b.astype(np.float64)
    with pytest.raises(ValueError, match="lstsq: precision must be None or 'mixed'"):
        jcm.lstsq(a, b, precision="single")
    with pytest.raises(ValueError, match="mixed_lstsq: max_iterations"):
        jcm.mixed_lstsq(a, b, max_iterations=1.5)
    with pytest.raises(ValueError, match="mixed_lstsq: leading dimensions"):
        jcm.mixed_lstsq(a, b[..., :5])
