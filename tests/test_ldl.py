"""Tests for the LDL^T family: ldl_factor, ldl_solve (torch.linalg.ldl_factor / ldl_solve).

The compact factor is unpacked here from LAPACK's format (independently of the package) and
checked by reconstruction, P L D L^T P^T = A, against A's lower triangle, and by the inertia of D
against scipy.linalg.ldl's; solves against float64 NumPy. On CPU the op runs LAPACK through a
host callback; on a GPU (tests marked requires_gpu run there too) cuSOLVER through the FFI.
"""

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.test_util import check_grads

import jax_cusolver_ms as jcm
from conftest import (
    ALL_STRATEGIES,
    DTYPES,
    is_complex,
    param_id,
    rel_err,
    requires_extension,
    requires_gpu,
    rtol_for,
    strategy_grid,
    wide_dtype,
)
from jax_cusolver_ms import ldl as ldl_module
from jax_cusolver_ms.ldl import ldl_factor, ldl_solve

ids = param_id
COMPLEX_DTYPES = (np.complex64, np.complex128)

# (batch..., n, n): n = 1, batch 0 and 1, several batch dims, one larger matrix.
FACTOR_SHAPES = [(1, 1), (5, 5), (0, 4, 4), (1, 6, 6), (3, 7, 7), (2, 3, 5, 5), (24, 24)]

# (LD shape, B shape): batch dims broadcast as in torch.linalg.ldl_solve.
SOLVE_CASES = [
    ((1, 1), (1, 1)),
    ((6, 6), (6, 3)),
    ((3, 7, 7), (3, 7, 2)),
    ((3, 7, 7), (7, 2)),
    ((2, 1, 5, 5), (3, 5, 2)),
    ((0, 4, 4), (0, 4, 2)),
    ((20, 20), (20, 1)),
]


# ---------------------------------------------------------------------------------------------
# Matrices and the reference unpacking of LAPACK's compact form
# ---------------------------------------------------------------------------------------------


def _gaussian(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if is_complex(dtype):
        x = x + 1j * rng.standard_normal(shape)
    return x


def symmetric(rng, shape, dtype, hermitian=False, kind="indefinite"):
    """A random symmetric (complex symmetric, or Hermitian) indefinite matrix, in float64.

    kinds: "indefinite" (X + X^T), "zero_diagonal" (the same with a zero diagonal: every first
    pivot has to be a 2x2 block), "singular" (one random row and column exactly zero, so D has an
    exact zero), "banded" (small X + X^T under two strong bands beside the diagonal and a
    diagonal of tiny and large entries: the pivot row is mostly k + 1 or k + 2, interchanges
    with the next row or the one after, 1x1 and 2x2).
    """
    x = _gaussian(rng, shape, dtype)
    xt = np.swapaxes(x, -1, -2)
    a = x + (np.conj(xt) if hermitian else xt)
    n = shape[-1]
    if kind == "zero_diagonal":
        a = a * (1 - np.eye(n))
    elif kind == "banded":
        a = 0.01 * a
        for offset in (1, 2):
            band = rng.uniform(1, 2, size=shape[:-2] + (n - offset,))
            band = band * rng.choice([-1.0, 1.0], size=band.shape)
            idx = np.arange(n - offset)
            a[..., idx + offset, idx] += band
            a[..., idx, idx + offset] += band
        d = rng.choice([0.01, 3.0], size=shape[:-2] + (n,)) * rng.choice([-1.0, 1.0],
                                                                          size=shape[:-2] + (n,))
        idx = np.arange(n)
        a[..., idx, idx] += d
    elif kind == "singular":
        j = rng.integers(0, n, size=shape[:-2])[..., None, None]
        keep = (np.arange(n)[:, None] != j) & (np.arange(n)[None, :] != j)
        a = np.where(keep, a, 0)
    return a


def from_lower(a, hermitian=False):
    """The full matrix that a factorization reading only a's lower triangle factors."""
    low = np.tril(a, -1)
    diag = np.diagonal(a, axis1=-2, axis2=-1)
    if hermitian:
        diag = diag.real
    t = np.swapaxes(low, -1, -2)
    return low + (np.conj(t) if hermitian else t) + diag[..., None] * np.eye(a.shape[-1])


def unpack_ldl(ld, pivots, hermitian=False):
    """(M, D) with A = M D M^T (M^H if hermitian) from LAPACK ?sytrf's lower compact form.

    M = P(1) L(1) P(2) L(2) ... over the pivot blocks, in order: P(k) swaps row k (k + 1 for a
    2x2 block) with the 1-based pivot's, L(k) is the identity with the stored multipliers below
    block k. Checks the pivot format on the way.
    """
    ld = np.asarray(ld, dtype=np.complex128)
    pivots = np.asarray(pivots)
    n = ld.shape[0]
    m = np.eye(n, dtype=np.complex128)
    d = np.zeros((n, n), dtype=np.complex128)
    k = 0
    while k < n:
        p = int(pivots[k])
        assert p != 0, f"pivot {k} is 0: not LAPACK's 1-based format ({pivots})"
        size = 1 if p > 0 else 2
        if size == 2:
            assert k + 1 < n and pivots[k + 1] == p, f"2x2 block at {k} not paired: {pivots}"
        swap, target = k + size - 1, abs(p) - 1
        assert swap <= target < n, f"pivot {k} = {p} out of range: {pivots}"
        # m @ P(k) swaps two columns; m @ L(k) adds m's trailing columns times the multipliers
        # to columns k.. (O(n^2) a step: dense products would make large n take minutes).
        m[:, [swap, target]] = m[:, [target, swap]]
        m[:, k:k + size] += m[:, k + size:] @ ld[k + size:, k:k + size]
        d[k:k + size, k:k + size] = np.tril(ld[k:k + size, k:k + size])
        if size == 2:
            d[k, k + 1] = np.conj(d[k + 1, k]) if hermitian else d[k + 1, k]
        k += size
    return m, d


def reconstruct(ld, pivots, hermitian=False):
    m, d = unpack_ldl(ld, pivots, hermitian)
    return m @ d @ (np.conj(m.T) if hermitian else m.T), d


def inertia(d):
    """(negative, zero, positive) eigenvalue counts of a Hermitian block diagonal D."""
    eig = np.linalg.eigvalsh(d)
    tol = 1e-8 * max(1.0, float(np.max(np.abs(eig)))) if d.size else 0.0
    return int(np.sum(eig < -tol)), int(np.sum(np.abs(eig) <= tol)), int(np.sum(eig > tol))


def check_factorization(a, ld, pivots, dtype, hermitian=False):
    """LD and pivots of every batch item reconstruct A (read from its lower triangle)."""
    a = np.asarray(a)
    ld = np.asarray(ld)
    pivots = np.asarray(pivots)
    assert ld.shape == a.shape and ld.dtype == np.dtype(dtype)
    assert pivots.shape == a.shape[:-1] and pivots.dtype == np.int32
    n = a.shape[-1]
    full = from_lower(a.astype(wide_dtype(dtype)), hermitian)
    flat = full.reshape((-1, n, n))
    for i, (ld_i, piv_i) in enumerate(zip(ld.reshape((-1, n, n)), pivots.reshape((-1, n)))):
        assert np.all(np.triu(ld_i, 1) == 0), "LD's strict upper triangle must be zero (as torch)"
        rebuilt, d = reconstruct(ld_i, piv_i, hermitian)
        # Bunch-Kaufman is backward stable up to its (small in practice) growth factor.
        tol = 10 * rtol_for(dtype, n)
        assert rel_err(rebuilt, flat[i]) <= tol, f"item {i}: P L D L^T P^T != A"
        if not is_complex(dtype) or hermitian:
            # Sylvester: D has A's inertia, and so scipy.linalg.ldl's D.
            _, d_ref, _ = scipy.linalg.ldl(flat[i], lower=True, hermitian=hermitian)
            assert inertia(d) == inertia(d_ref.astype(np.complex128)), f"item {i}"


def reference_solve(a, b, hermitian=False):
    """float64/complex128 NumPy solve of from_lower(a) x = b, batch dims broadcast."""
    full = from_lower(np.asarray(a).astype(wide_dtype(a.dtype)), hermitian)
    b = np.asarray(b).astype(wide_dtype(b.dtype))
    batch = np.broadcast_shapes(full.shape[:-2], b.shape[:-2])
    full = np.broadcast_to(full, batch + full.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    if full.size == 0 or b.size == 0:
        return np.zeros(b.shape, b.dtype)
    return np.linalg.solve(full, b)


def solve_tolerance(a, dtype, hermitian=False):
    full = from_lower(np.asarray(a).astype(wide_dtype(dtype)), hermitian)
    cond = float(np.max(np.linalg.cond(full))) if full.size else 1.0
    return rtol_for(dtype, a.shape[-1], cond)


# ---------------------------------------------------------------------------------------------
# Factorization
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, shape, strategy", strategy_grid(DTYPES, FACTOR_SHAPES))
def test_ldl_factor(rng, dtype, shape, strategy):
    a = symmetric(rng, shape, dtype).astype(dtype)
    ld, pivots = ldl_factor(a, strategy=strategy)
    check_factorization(a, ld, pivots, dtype)


@pytest.mark.parametrize("dtype, strategy", strategy_grid(DTYPES))
def test_indefinite_needs_2x2_pivots(rng, dtype, strategy):
    # A zero diagonal forces 2x2 blocks; they must come out in LAPACK's negative-pair format.
    a = symmetric(rng, (4, 8, 8), dtype, kind="zero_diagonal").astype(dtype)
    ld, pivots = ldl_factor(a, strategy=strategy)
    assert np.all(np.asarray(pivots)[:, 0] < 0), pivots
    check_factorization(a, ld, pivots, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_pivot_format_exact(dtype):
    # [[0, 1], [1, 0]]: one 2x2 block swapping nothing, stored as pivots [-2, -2] (1-based).
    ld, pivots = ldl_factor(np.array([[0, 1], [1, 0]], dtype))
    np.testing.assert_array_equal(pivots, np.array([-2, -2], np.int32))
    np.testing.assert_array_equal(ld, np.array([[0, 0], [1, 0]], dtype))
    # Diagonal dominant order: 1x1 blocks, no swaps: pivots [1, 2, 3], LD = A.
    d = np.diag(np.array([3, -2, 1], dtype))
    ld, pivots = ldl_factor(d)
    np.testing.assert_array_equal(pivots, np.array([1, 2, 3], np.int32))
    np.testing.assert_array_equal(ld, d)
    # A swap: |A[1, 0]| dominates and the second diagonal entry is large: pivots [2, 2].
    ld, pivots = ldl_factor(np.array([[0.0, 1.0], [1.0, 4.0]], dtype))
    np.testing.assert_array_equal(pivots, np.array([2, 2], np.int32))
    np.testing.assert_allclose(ld, np.array([[4.0, 0], [0.25, -0.25]], dtype), rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_only_the_lower_triangle_is_read(rng, dtype):
    a = symmetric(rng, (2, 6, 6), dtype).astype(dtype)
    garbage = np.triu(_gaussian(rng, (2, 6, 6), dtype), 1).astype(dtype)
    ld, pivots = ldl_factor(np.tril(a) + garbage)
    ld_ref, pivots_ref = ldl_factor(a)
    np.testing.assert_array_equal(pivots, pivots_ref)
    np.testing.assert_array_equal(ld, ld_ref)
    check_factorization(a, ld, pivots, dtype)


@pytest.mark.parametrize("dtype, strategy", strategy_grid(DTYPES))
def test_singular(rng, dtype, strategy):
    # D exactly singular: no exception (as torch and LAPACK), the factor still reconstructs A,
    # and solving with it gives inf/NaN for that item only.
    a = symmetric(rng, (3, 6, 6), dtype).astype(dtype)
    a[1] = symmetric(rng, (6, 6), dtype, kind="singular").astype(dtype)
    b = _gaussian(rng, (3, 6, 2), dtype).astype(dtype)
    ld, pivots = ldl_factor(a, strategy=strategy)
    check_factorization(a, ld, pivots, dtype)
    x = np.asarray(ldl_solve(ld, pivots, b, strategy=strategy))
    assert not np.all(np.isfinite(x[1]))
    ok = [0, 2]
    tol = solve_tolerance(a[ok], dtype)
    assert rel_err(x[ok], reference_solve(a[ok], b[ok])) <= tol


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_zero_matrix_n1(dtype):
    ld, pivots = ldl_factor(np.zeros((1, 1), dtype))
    np.testing.assert_array_equal(ld, np.zeros((1, 1), dtype))
    np.testing.assert_array_equal(pivots, np.array([1], np.int32))
    x = np.asarray(ldl_solve(ld, pivots, np.ones((1, 1), dtype)))
    assert not np.all(np.isfinite(x))


@pytest.mark.parametrize("dtype", COMPLEX_DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(1, 1), (7, 7), (3, 6, 6), (0, 3, 3)], ids=ids)
def test_hermitian_complex(rng, dtype, shape):
    a = symmetric(rng, shape, dtype, hermitian=True).astype(dtype)
    ld, pivots = ldl_factor(a, hermitian=True)
    check_factorization(a, ld, pivots, dtype, hermitian=True)
    b = _gaussian(rng, shape[:-1] + (2,), dtype).astype(dtype)
    x = ldl_solve(ld, pivots, b, hermitian=True)
    tol = solve_tolerance(a, dtype, hermitian=True)
    assert rel_err(x, reference_solve(a, b, hermitian=True)) <= tol
    if a.size and shape[-1] > 1:
        # The complex-symmetric factorization of the same array is a different one.
        sym_ld, _ = ldl_factor(a)
        assert not np.allclose(np.asarray(sym_ld), np.asarray(ld))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=ids)
def test_hermitian_has_no_effect_for_real(rng, dtype):
    a = symmetric(rng, (2, 6, 6), dtype).astype(dtype)
    b = _gaussian(rng, (2, 6, 1), dtype).astype(dtype)
    ld, pivots = ldl_factor(a)
    ld_h, pivots_h = ldl_factor(a, hermitian=True)
    np.testing.assert_array_equal(ld, ld_h)
    np.testing.assert_array_equal(pivots, pivots_h)
    np.testing.assert_array_equal(ldl_solve(ld, pivots, b), ldl_solve(ld, pivots, b,
                                                                        hermitian=True))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_upper_triangle_primitive(rng, dtype):
    # The public API reads the lower triangle (as torch); the primitives also take lower=False.
    a = symmetric(rng, (2, 7, 7), dtype).astype(dtype)
    b = _gaussian(rng, (2, 7, 2), dtype).astype(dtype)
    params = dict(lower=False, hermitian=False, strategy="auto", lanes=None)
    garbage = np.tril(_gaussian(rng, (2, 7, 7), dtype), -1).astype(dtype)
    ld, pivots = ldl_module.sytrf.bind(jnp.asarray(np.triu(a) + garbage), **params)
    assert np.all(np.tril(np.asarray(ld), -1) == 0)
    x, = ldl_module.sytrs.bind(ld, pivots, jnp.asarray(b), **params)
    assert rel_err(x, reference_solve(a, b)) <= solve_tolerance(a, dtype)


def test_result_is_a_named_tuple(rng):
    a = symmetric(rng, (4, 4), np.float64)
    res = ldl_factor(a)
    assert res.LD is res[0] and res.pivots is res[1]


# ---------------------------------------------------------------------------------------------
# Solve
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, case, strategy", strategy_grid(DTYPES, SOLVE_CASES))
def test_ldl_solve(rng, dtype, case, strategy):
    a_shape, b_shape = case
    a = symmetric(rng, a_shape, dtype).astype(dtype)
    b = _gaussian(rng, b_shape, dtype).astype(dtype)
    ld, pivots = ldl_factor(a, strategy=strategy)
    x = ldl_solve(ld, pivots, b, strategy=strategy)
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    assert x.shape == batch + b_shape[-2:] and x.dtype == np.dtype(dtype)
    assert rel_err(x, reference_solve(a, b)) <= solve_tolerance(a, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_strategies_agree(rng, dtype):
    a = symmetric(rng, (6, 12, 12), dtype).astype(dtype)
    b = _gaussian(rng, (6, 12, 3), dtype).astype(dtype)
    results = {}
    for strategy, lanes in [(s, 3) for s in ALL_STRATEGIES] + [("looped", 1)]:
        ld, pivots = ldl_factor(a, strategy=strategy, lanes=lanes)
        results[strategy, lanes] = (ld, pivots, ldl_solve(ld, pivots, b, strategy=strategy,
                                                          lanes=lanes))
    ld0, piv0, x0 = results["sequential", 3]
    check_factorization(a, ld0, piv0, dtype)
    tol = rtol_for(dtype, 12)
    for key, (ld, pivots, x) in results.items():
        np.testing.assert_array_equal(pivots, piv0, err_msg=str(key))
        assert rel_err(ld, ld0) <= tol, key
        assert rel_err(x, x0) <= tol * 10, key


def test_input_is_not_modified(rng):
    a = jnp.asarray(symmetric(rng, (3, 8, 8), np.float64))
    b = jnp.asarray(_gaussian(rng, (3, 8, 2), np.float64))
    a_copy, b_copy = np.array(a), np.array(b)
    for strategy in ALL_STRATEGIES:
        ld, pivots = jax.jit(functools.partial(ldl_factor, strategy=strategy))(a)
        jax.jit(functools.partial(ldl_solve, strategy=strategy))(ld, pivots, b)
    np.testing.assert_array_equal(a, a_copy)
    np.testing.assert_array_equal(b, b_copy)


def test_pivots_of_other_integer_types_and_promotion(rng):
    a = symmetric(rng, (2, 5, 5), np.float64)
    b = _gaussian(rng, (2, 5, 1), np.float32).astype(np.float32)
    ld, pivots = ldl_factor(a)
    x = ldl_solve(ld, np.asarray(pivots).astype(np.int64), b)
    assert x.dtype == np.float64
    assert rel_err(x, reference_solve(a, b)) <= solve_tolerance(a, np.float64)


@pytest.mark.parametrize(
    "bad", [[0, 1, 2, 3], [1, 2, 3, 5], [1, 2, 3, -4], [-4, 2, 3, 4], [-3, -3, -3, 4]], ids=ids
)
def test_malformed_pivots_give_nan_not_out_of_bounds(rng, bad):
    # 0-based pivots, out of range, unpaired 2x2 blocks at either end or inside a run: LAPACK and
    # cuSOLVER would index out of bounds; the item comes out NaN, its neighbours untouched.
    a = symmetric(rng, (2, 4, 4), np.float64)
    b = _gaussian(rng, (2, 4, 1), np.float64)
    ld, pivots = ldl_factor(a)
    pivots = np.array(pivots)
    pivots[1] = bad
    x = np.asarray(jax.jit(ldl_solve)(ld, pivots, b))
    assert np.all(np.isnan(x[1]))
    assert rel_err(x[:1], reference_solve(a[:1], b[:1])) <= solve_tolerance(a, np.float64)


# ---------------------------------------------------------------------------------------------
# Transformations: jit, vmap, grad
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, strategy", strategy_grid(DTYPES))
def test_jit(rng, dtype, strategy):
    a = symmetric(rng, (3, 9, 9), dtype).astype(dtype)
    b = _gaussian(rng, (3, 9, 2), dtype).astype(dtype)

    @jax.jit
    def f(a, b):
        ld, pivots = ldl_factor(a, strategy=strategy)
        return ld, pivots, ldl_solve(ld, pivots, 2 * b, strategy=strategy) + 1

    ld, pivots, x = f(a, b)
    check_factorization(a, ld, pivots, dtype)
    assert rel_err(x - 1, reference_solve(a, 2 * b)) <= solve_tolerance(a, dtype)


@pytest.mark.parametrize("in_axis", [0, 1, 2])
@pytest.mark.parametrize("strategy", ["auto", "looped"])
def test_vmap_factor(rng, in_axis, strategy):
    dtype = np.float64
    a = symmetric(rng, (3, 6, 6), dtype)
    moved = np.moveaxis(a, 0, in_axis)
    ld, pivots = jax.vmap(functools.partial(ldl_factor, strategy=strategy), in_axes=in_axis)(moved)
    ld_ref, pivots_ref = ldl_factor(a)
    np.testing.assert_array_equal(pivots, pivots_ref)
    np.testing.assert_allclose(ld, ld_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "in_axes", [(0, 0, 0), (None, None, 0), (None, None, 2), (1, 1, None), (0, 0, 1)], ids=ids
)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=ids)
def test_vmap_solve(rng, dtype, in_axes):
    batch, n, k = 3, 6, 2
    a = symmetric(rng, (batch, n, n), dtype).astype(dtype)
    b = _gaussian(rng, (batch, n, k), dtype).astype(dtype)
    ld, pivots = (np.asarray(v) for v in ldl_factor(a))
    ld_ax, piv_ax, b_ax = in_axes
    args = [
        ld[0] if ld_ax is None else np.moveaxis(ld, 0, ld_ax),
        pivots[0] if piv_ax is None else np.moveaxis(pivots, 0, piv_ax),
        b[0] if b_ax is None else np.moveaxis(b, 0, b_ax),
    ]
    x = jax.vmap(ldl_solve, in_axes=in_axes)(*args)
    a_ref = a[:1] if ld_ax is None else a
    b_ref = b[:1] if b_ax is None else b
    tol = solve_tolerance(a, dtype)
    assert rel_err(x, reference_solve(a_ref, b_ref)) <= tol


def test_vmap_nested(rng):
    a = symmetric(rng, (2, 3, 5, 5), np.float64)
    b = _gaussian(rng, (2, 3, 5, 2), np.float64)
    f = lambda a, b: ldl_solve(*ldl_factor(a), b)
    x = jax.vmap(jax.vmap(f, in_axes=(0, 0)), in_axes=(1, 1), out_axes=1)(a, b)
    assert rel_err(x, reference_solve(a, b)) <= solve_tolerance(a, np.float64)


@pytest.mark.parametrize("hermitian", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=ids)
def test_grad_wrt_b(rng, dtype, hermitian):
    if hermitian and not is_complex(dtype):
        pytest.skip("hermitian has no effect for real dtypes")
    a = symmetric(rng, (2, 6, 6), dtype, hermitian=hermitian).astype(dtype)
    b = _gaussian(rng, (2, 6, 2), dtype).astype(dtype)
    ld, pivots = ldl_factor(a, hermitian=hermitian)
    solve = lambda b: ldl_solve(ld, pivots, b, hermitian=hermitian)
    check_grads(solve, (b,), order=1, modes=("fwd", "rev"))
    # The transpose is A^-T, explicitly: for the real loss sum(Re(w * x)), JAX's grad is A^-T w
    # (A^-T = A^-1 when complex symmetric, conj(A)^-1 when Hermitian).
    w = _gaussian(rng, b.shape, dtype).astype(dtype)
    g = jax.grad(lambda b: jnp.sum(jnp.real(w * solve(b))))(b)
    full = from_lower(a, hermitian)
    expected = np.linalg.solve(np.swapaxes(full, -1, -2), w)
    assert rel_err(g, expected) <= solve_tolerance(a, dtype, hermitian)


def test_grad_through_factor_and_solve_wrt_b(rng):
    a = symmetric(rng, (5, 5), np.float64)
    b = _gaussian(rng, (5, 1), np.float64)
    g = jax.jit(jax.grad(lambda a, b: jnp.sum(ldl_solve(*ldl_factor(a), b)), argnums=1))(a, b)
    expected = np.linalg.solve(from_lower(a).T, np.ones((5, 1)))
    assert rel_err(g, expected) <= solve_tolerance(a, np.float64)


def test_factor_and_ld_are_not_differentiable(rng):
    a = symmetric(rng, (4, 4), np.float64)
    b = _gaussian(rng, (4, 1), np.float64)
    with pytest.raises(NotImplementedError, match="ldl_factor"):
        jax.jvp(lambda a: ldl_factor(a).LD, (a,), (a,))
    with pytest.raises(NotImplementedError, match="ldl_factor"):
        jax.grad(lambda a: jnp.sum(ldl_solve(*ldl_factor(a), b)))(a)
    ld, pivots = ldl_factor(a)
    with pytest.raises(NotImplementedError, match="LD"):
        jax.grad(lambda ld: jnp.sum(ldl_solve(ld, pivots, b)))(ld)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_dtype", [np.float16], ids=ids)
def test_unsupported_dtype_raises_type_error(bad_dtype):
    with pytest.raises(TypeError, match="ldl_factor"):
        ldl_factor(np.eye(3, dtype=bad_dtype))
    with pytest.raises(TypeError, match="ldl_solve"):
        ldl_solve(np.eye(3, dtype=bad_dtype), np.arange(1, 4, dtype=np.int32),
                  np.ones((3, 1), bad_dtype))


def test_bad_shapes_raise_value_error(rng):
    with pytest.raises(ValueError, match="ldl_factor"):
        ldl_factor(np.ones(3))
    with pytest.raises(ValueError, match="ldl_factor"):
        ldl_factor(np.ones((2, 3, 4)))
    ld, pivots = ldl_factor(symmetric(rng, (4, 4), np.float64))
    b = np.ones((4, 1))
    with pytest.raises(ValueError, match="ldl_solve"):
        ldl_solve(ld, pivots, np.ones(4))  # B must be a matrix (as torch)
    with pytest.raises(ValueError, match="ldl_solve"):
        ldl_solve(ld, pivots, np.ones((5, 1)))
    with pytest.raises(ValueError, match="ldl_solve"):
        ldl_solve(ld[:, :3], pivots, b)
    with pytest.raises(ValueError, match="ldl_solve"):
        ldl_solve(ld, pivots[:3], b)
    with pytest.raises(ValueError):
        ldl_solve(np.stack([ld] * 2), np.stack([pivots] * 3), b)  # batch dims don't broadcast
    with pytest.raises(TypeError, match="pivots"):
        ldl_solve(ld, np.asarray(pivots).astype(np.float32), b)
    with pytest.raises(TypeError, match="hermitian"):
        ldl_factor(np.eye(3), hermitian="yes")


def test_bad_options_raise(rng):
    a = symmetric(rng, (3, 3), np.float64)
    with pytest.raises(ValueError, match="strategy"):
        ldl_factor(a, strategy="fastest")
    with pytest.raises(ValueError, match="lanes"):
        ldl_factor(a, lanes=0)


def test_missing_scipy_raises_import_error_naming_the_op(monkeypatch, rng):
    # The host path (CPU, and hermitian complex everywhere) needs scipy; a fresh shape so that
    # nothing cached from another test is reused.
    monkeypatch.setitem(sys.modules, "scipy.linalg", None)
    a = symmetric(rng, (13, 13), np.complex64, hermitian=True).astype(np.complex64)
    with pytest.raises(ImportError, match="ldl_factor.*scipy"):
        ldl_factor(a, hermitian=True)


# ---------------------------------------------------------------------------------------------
# Lowerings: the FFI targets on CUDA, none on CPU
# ---------------------------------------------------------------------------------------------


def _export_cuda(f, *structs):
    checks = [jax.export.DisabledSafetyCheck.custom_call(n) for n in ("jcm_sytrf", "jcm_sytrs")]
    return jax.export.export(jax.jit(f), platforms=["cuda"], disabled_checks=checks)(
        *structs).mlir_module()


@requires_extension
@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_cuda_lowering_emits_the_targets(dtype, x64):
    # Every strategy reaches the FFI targets; Xsytrs's pivots are widened to int64 even with
    # jax_enable_x64 off (a plain astype would stay int32 there).
    for strategy in ALL_STRATEGIES:
        def f(a, b):
            ld, pivots = ldl_factor(a, strategy=strategy)
            return ldl_solve(ld, pivots, b, strategy=strategy)

        with jax.enable_x64(x64):
            text = _export_cuda(f, jax.ShapeDtypeStruct((3, 6, 6), dtype),
                                jax.ShapeDtypeStruct((3, 6, 2), dtype))
        assert "@jcm_sytrf" in text and "@jcm_sytrs" in text, strategy
        assert "tensor<3x6xi64>" in text


@requires_gpu
def test_gpu_lowering_hermitian_complex_uses_the_host():
    # (A host callback can only be lowered for the backend at hand: GPU only.)
    lowered = jax.jit(lambda a: ldl_factor(a, hermitian=True)).trace(
        jax.ShapeDtypeStruct((2, 4, 4), np.complex64)).lower()
    text = lowered.as_text()
    assert "@jcm_sytrf" not in text and "callback" in text


@pytest.mark.skipif(jax.default_backend() != "cpu",
                    reason="a host callback lowers only for the backend at hand (the GPU "
                           "lowering is checked by test_gpu_lowering_hermitian_complex_uses_the_host)")
def test_cpu_lowering_has_no_ffi_call(rng):
    a = symmetric(rng, (2, 5, 5), np.float64)
    b = _gaussian(rng, (2, 5, 1), np.float64)
    text = jax.jit(lambda a, b: ldl_solve(*ldl_factor(a), b)).trace(a, b).lower(
        lowering_platforms=("cpu",)).as_text()
    assert "@jcm_sytrf" not in text and "@jcm_sytrs" not in text and "callback" in text


def test_explain_knows_the_public_names():
    # This project's kernels, single matrices included (cuSOLVER's sytrf and Xsytrs
    # host-synchronise: H100 64x1024 sytrf 639 ms on 8 lanes): the factor's unblocked kernel at
    # small n, its blocked algorithm from BLOCKED_MIN_N on (any n; the unblocked kernel stops at
    # 1024, beyond which a batched request runs lanes); the solve kernel at every n.
    blocked_from = jcm.strategy.BLOCKED_MIN_N["sytrf"]
    factor = (((16, 64, 64), "batched"), ((1, 64, 64), "batched"),
              ((16, blocked_from, blocked_from), "blocked"), ((1, 512, 512), "blocked"),
              ((2, 1025, 1025), "blocked"))
    # The solve: the unblocked kernel at small n, the blocked solve from BLOCKED_MIN_N on, and
    # for a few matrices (the TRSM route) from BLOCKED_SMALL_BATCH's n.
    solve_from = jcm.strategy.BLOCKED_MIN_N["sytrs"]
    most, trsm_from = jcm.strategy.BLOCKED_SMALL_BATCH["sytrs"]
    solve = (((16, 16, 16), "batched"), ((16, solve_from - 1, solve_from - 1), "batched"),
             ((16, solve_from, solve_from), "blocked"), ((1, 512, 512), "blocked"),
             ((2, 1025, 1025), "blocked"), ((most, trsm_from - 1, trsm_from - 1), "batched"),
             ((most, trsm_from, trsm_from), "blocked"), ((1, trsm_from, trsm_from), "blocked"),
             ((most + 1, trsm_from, trsm_from), "batched"))
    for op, routine, cases in (("ldl_factor", "sytrf", factor), ("ldl_solve", "sytrs", solve)):
        for shape, want in cases:
            choice = jcm.explain(op, shape, np.float32)
            assert choice.op == routine and choice.strategy == want, (shape, str(choice))
    with pytest.raises(ValueError, match="larger than the batched kernel takes"):
        jcm.explain("ldl_factor", (4, 2048, 2048), np.float32, strategy="batched")
    assert jcm.explain("ldl_solve", (4, 2048, 2048), np.float32, strategy="batched").strategy \
        == "batched"
    assert jcm.explain("ldl_solve", (4, 16, 16), np.float32, strategy="blocked").strategy \
        == "blocked"


# ---------------------------------------------------------------------------------------------
# The batched kernels (ffi/ldl/) on the GPU
# ---------------------------------------------------------------------------------------------


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("n", [2, 5, 16, 17, 31, 32, 33, 63, 100, 128, 150, 257, 300])
@pytest.mark.parametrize("kind", ["indefinite", "zero_diagonal"])
def test_batched_kernel_matches_lapack(rng, dtype, n, kind):
    # The warp kernel's sizes (n <= 8 and 16), the small block kernel's (one and two rows a
    # lane), then the ?sytf2 block kernel (100 on; 256 threads from 150); zero
    # diagonals force 2x2 blocks. All follow LAPACK ?sytf2 step by step: below LAPACK's block
    # size (64) the pivots are LAPACK's own exactly; above, the factor must reconstruct A and
    # solve like NumPy. The solve: a warp per right-hand side up to n = 128, then the block
    # kernel with the factor in shared memory (150 in float32 / float64), then in global memory.
    a = symmetric(rng, (3, n, n), dtype, kind=kind).astype(dtype)
    ld, pivots = ldl_factor(a, strategy="batched")
    check_factorization(a, ld, pivots, dtype)
    if n < 64:
        sytrf = scipy.linalg.lapack.get_lapack_funcs(("sytrf",), dtype=np.dtype(dtype))[0]
        for i in range(3):
            _, piv_ref, info = sytrf(a[i], lower=1)
            assert info == 0
            np.testing.assert_array_equal(np.asarray(pivots[i]), piv_ref)
    for nrhs in (1, 40):  # 40: two blocks of right-hand sides
        b = _gaussian(rng, (3, n, nrhs), dtype).astype(dtype)
        x = ldl_solve(ld, pivots, b, strategy="batched")
        assert rel_err(x, reference_solve(a, b)) <= solve_tolerance(a, dtype)
        if n < 64:
            # The same factor solved by cuSOLVER on lanes. Small n only: Xsytrs synchronises
            # with the host per column, which under pytest-xdist (a dozen processes sharing the
            # GPU, each sync waiting for a time slice) took minutes at n = 257.
            x_lanes = ldl_solve(ld, pivots, b, strategy="looped")
            assert rel_err(x, x_lanes) <= solve_tolerance(a, dtype)


@pytest.mark.parametrize("n", [12, 40])
def test_batched_kernel_zero_column(rng, n):
    # A zero column: D(k, k) = 0 with no interchange, as LAPACK (info > 0 is not an error). On
    # the CPU this checks the expectation against LAPACK itself; on the GPU, the warp kernel
    # (n = 12) and the block kernel (40). Diagonally dominant: no interchange anywhere, so
    # column 5 is still zero at step 5.
    a = symmetric(rng, (2, n, n), np.float64) + 5 * n * np.eye(n)
    a[1, 5, :] = a[1, :, 5] = 0
    ld, pivots = ldl_factor(a, strategy="batched")
    assert np.asarray(pivots)[1, 5] == 6 and np.asarray(ld)[1, 5, 5] == 0
    check_factorization(a, ld, pivots, np.float64)


@pytest.mark.parametrize("n", [12, 40])
def test_batched_kernel_nan_stays_in_its_matrix(rng, n):
    # NaN in one matrix of the batch: no hang and no error, NaN in that factor, and its
    # neighbours factored as if alone (the warp kernel at n = 12, the block kernel at 40).
    a = symmetric(rng, (3, n, n), np.float64)
    a[1, 7, 2] = a[1, 2, 7] = np.nan
    ld, pivots = ldl_factor(a, strategy="batched")
    assert np.isnan(np.asarray(ld)[1]).any()
    check_factorization(a[0::2], np.asarray(ld)[0::2], np.asarray(pivots)[0::2], np.float64)


@requires_gpu
@pytest.mark.slow
def test_batched_beyond_kernel_n_falls_back_to_lanes(rng):
    # Beyond the kernels' n the batched request runs cuSOLVER on lanes (C++ falls back). Slow
    # under pytest-xdist: cuSOLVER's sytrf synchronises with the host per column.
    a = symmetric(rng, (2, 1030, 1030), np.float32).astype(np.float32)
    ld, pivots = ldl_factor(a, strategy="batched")
    check_factorization(a, ld, pivots, np.float32)


# ---------------------------------------------------------------------------------------------
# The blocked factorization (ffi/ldl/ldl_handlers.cc sytrf_blocked): kLdlBlock-column panels while
# at least that many columns are left beyond the panel, then the ?sytf2 kernel
# ---------------------------------------------------------------------------------------------

LDL_BLOCK = 32


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("n, kind", [
    (n, kind) for n in (2, 40, 2 * LDL_BLOCK, 2 * LDL_BLOCK + 1, 257)
    for kind in ("indefinite", "zero_diagonal")] + [(2 * LDL_BLOCK + 1, "banded"), (257, "banded"),
                                                    pytest.param(1100, "indefinite",
                                                                 marks=pytest.mark.slow)], ids=ids)
def test_blocked_matches_lapack(rng, dtype, n, kind):
    # No panel (n < 2 blocks), one panel and the tail, many panels with 2x2 pivots straddling
    # their ends (zero diagonals), interchanges with the next row or the one after (banded: the
    # shared-memory panel's read-ahead of the next column patched), and beyond the unblocked
    # kernel's n (1024).
    a = symmetric(rng, (3, n, n), dtype, kind=kind).astype(dtype)
    ld, pivots = ldl_factor(a, strategy="blocked")
    check_factorization(a, ld, pivots, dtype)
    if n <= 2 * LDL_BLOCK + 1 and np.dtype(dtype) in (np.float64, np.complex128):
        # ?sytrf's own pivots (LAPACK blocks at 64 here, this at 32: the same decisions).
        sytrf = scipy.linalg.lapack.get_lapack_funcs(("sytrf",), dtype=np.dtype(dtype))[0]
        for i in range(3):
            _, piv_ref, info = sytrf(a[i], lower=1)
            assert info == 0
            np.testing.assert_array_equal(np.asarray(pivots[i]), piv_ref)
    b = _gaussian(rng, (3, n, 3), dtype).astype(dtype)
    x = ldl_solve(ld, pivots, b, strategy="blocked")
    assert rel_err(x, reference_solve(a, b)) <= solve_tolerance(a, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("n", [2 * LDL_BLOCK + 1, 300])
def test_blocked_single_matrix_with_nan_above_the_diagonal(rng, dtype, n):
    # A single matrix updates its whole trailing square in one GEMM (ldl_handlers.cc
    # ldl_update_block): the upper triangle it writes is never read and never returned, NaN there
    # included.
    a = symmetric(rng, (n, n), dtype, kind="zero_diagonal").astype(dtype)
    poisoned = np.where(np.triu(np.ones((n, n), bool), 1), np.array(np.nan, dtype), a)
    ld, pivots = ldl_factor(poisoned, strategy="blocked")
    assert np.all(np.asarray(ld)[np.triu_indices(n, 1)] == 0)
    check_factorization(a, ld, pivots, dtype)
    b = _gaussian(rng, (n, 2), dtype).astype(dtype)
    x = ldl_solve(ld, pivots, b, strategy="blocked")
    assert rel_err(x, reference_solve(a, b)) <= solve_tolerance(a, dtype)


@requires_gpu
@pytest.mark.parametrize("dtype, batch, n", [
    pytest.param(np.float32, 17, 1100, marks=pytest.mark.slow), (np.float32, 1, 2100),
    (np.float64, 1, 2100)], ids=ids)
def test_blocked_tall_panels(rng, dtype, batch, n):
    # Panels of more rows than a block's threads, where they run as the rows shrink (on an
    # H100): more matrices than a cluster launch takes, one block of two rows a thread, 16
    # columns (17 x 1100); a cluster of two rows a thread, then of one, then one block (float32
    # 1 x 2100); global memory (no cluster fits), then a cluster, then one block (float64).
    a = symmetric(rng, (batch, n, n), dtype, kind="zero_diagonal").astype(dtype)
    ld, pivots = ldl_factor(a, strategy="blocked")
    check_factorization(a, ld, pivots, dtype)
    b = _gaussian(rng, (batch, n, 2), dtype).astype(dtype)
    x = ldl_solve(ld, pivots, b, strategy="blocked")
    assert rel_err(x, reference_solve(a, b)) <= solve_tolerance(a, dtype)


def small_kernel_cases():
    """test_small_kernels_match_lapack's matrices: the warp kernel's n (up to 8 and 16), the small
    block kernel's one and two rows a lane (17 to 64) and just past it (65: the ?sytf2 block
    kernel), random, with 2x2 pivots first (zero diagonal), interchanges with the next rows
    (banded), an exact zero in D (singular), exact ties in the argmaxes (entries in {-1, 0, 1})
    and a NaN in one matrix."""
    rng = np.random.default_rng(12)
    cases = {}
    for dtype in (np.float32, np.float64, np.complex128):
        name = np.dtype(dtype).name
        for n in (2, 5, 16, 17, 32, 33, 64, 65):
            for kind in ("indefinite", "zero_diagonal", "banded", "singular"):
                a = symmetric(rng, (3, n, n), dtype, kind=kind).astype(dtype)
                cases[f"{name}/{n}/{kind}"] = a
            x = rng.integers(-1, 2, size=(3, n, n)).astype(dtype)
            cases[f"{name}/{n}/ties"] = np.tril(x) + np.tril(x, -1).swapaxes(-1, -2)
            a = symmetric(rng, (3, n, n), dtype).astype(dtype)
            a[1, n - 1, n // 2] = a[1, n // 2, n - 1] = np.nan
            cases[f"{name}/{n}/nan"] = a
    return cases


def test_small_kernels_match_lapack():
    # The batched factor's kernels for small n (the warp and small block kernels; 65: the ?sytf2
    # block kernel): a factor that reconstructs A, NaN kept in its matrix, and in float64 /
    # complex128 LAPACK's own pivots up to n = 64, where its ?sytrf does not block (ties:
    # LAPACK's rounding, FMAs or not, may break them elsewhere). On the CPU this checks the
    # expectations against LAPACK.
    for key, a in small_kernel_cases().items():
        dtype, n, kind = a.dtype, a.shape[-1], key.split("/")[-1]
        ld, piv = ldl_factor(a, strategy="batched")
        ld, piv = np.asarray(ld), np.asarray(piv)
        if kind == "nan":
            assert np.isnan(ld[1]).any(), key
            check_factorization(a[0::2], ld[0::2], piv[0::2], dtype)
        elif kind != "singular":
            check_factorization(a, ld, piv, dtype)
        if kind not in ("nan", "ties") and dtype in (np.float64, np.complex128) and n <= 64:
            f = scipy.linalg.lapack.get_lapack_funcs(("sytrf",), dtype=dtype)[0]
            for i in range(3):
                np.testing.assert_array_equal(piv[i], f(a[i], lower=1)[1], err_msg=key)


@pytest.mark.parametrize("zero", [5, 3 * LDL_BLOCK + 7])
def test_blocked_zero_column(rng, zero):
    # A zero column in the first panel or a later one: D(k, k) = 0, no interchange, info kept
    # (not NaN). On the CPU this checks the expectation against LAPACK; on the GPU, the panels.
    n = 5 * LDL_BLOCK + 3
    a = symmetric(rng, (2, n, n), np.float64) + 4 * n * np.eye(n)
    a[1, zero, :] = a[1, :, zero] = 0
    ld, pivots = ldl_factor(a, strategy="blocked")
    assert np.asarray(pivots)[1, zero] == zero + 1 and np.asarray(ld)[1, zero, zero] == 0
    assert np.all(np.isfinite(np.asarray(ld)))
    check_factorization(a, ld, pivots, np.float64)


# ---------------------------------------------------------------------------------------------
# The blocked solve (ffi/ldl/ldl_handlers.cc sytrs_blocked): LAPACK ?sytrs in blocks of
# kLdlSolveBlock columns cut at 0, 64, 128, ... (a 2x2 pivot across a cut moves that matrix's cut
# down one)
# ---------------------------------------------------------------------------------------------

LDL_SOLVE_BLOCK = 64
LDL_SOLVE_TRSM_MAX_COUNT = 4  # ffi/ldl/ldl_kernels.h kLdlSolveTrsmMaxCount


def _lapack_factors(a, dtype):
    """LAPACK ?sytrf's compact factors and pivots of each matrix of a (batch, n, n)."""
    sytrf = scipy.linalg.lapack.get_lapack_funcs(("sytrf",), dtype=np.dtype(dtype))[0]
    out = [sytrf(m, lower=1) for m in a]
    assert all(info >= 0 for _, _, info in out)
    return np.stack([np.tril(f) for f, _, _ in out]), np.stack([p for _, p, _ in out])


def _lapack_solves(ld, pivots, b, dtype):
    sytrs = scipy.linalg.lapack.get_lapack_funcs(("sytrs",), dtype=np.dtype(dtype))[0]
    return np.stack([sytrs(ld[i], pivots[i], b[i], lower=1)[0] for i in range(len(ld))])


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("n, kind", [
    (n, kind) for n in (1, 2, LDL_SOLVE_BLOCK - 1, LDL_SOLVE_BLOCK, LDL_SOLVE_BLOCK + 1,
                        LDL_SOLVE_BLOCK + 2, 2 * LDL_SOLVE_BLOCK + 1, 300)
    for kind in ("indefinite", "zero_diagonal") if n > 1 or kind == "indefinite"], ids=ids)
@pytest.mark.parametrize("batch", [LDL_SOLVE_TRSM_MAX_COUNT, LDL_SOLVE_TRSM_MAX_COUNT + 2])
def test_blocked_solve_matches_lapack_sytrs(rng, dtype, n, kind, batch):
    # Up to LDL_SOLVE_TRSM_MAX_COUNT matrices, ?sytrs2's route (the factor converted, cuBLAS
    # TRSMs); more, the blocked kernels: one block; a block and the row just below it (updated by
    # the kernels, not the GEMM); many blocks, with rows swapped in from below each and 2x2 pivots
    # across the cuts (zero diagonals: every first pivot 2x2). LAPACK's own factor, so LAPACK's
    # ?sytrs is the answer; 1 and 40 right-hand sides (two chunks of 32).
    a = symmetric(rng, (batch, n, n), dtype, kind=kind).astype(dtype)
    ld, pivots = _lapack_factors(a, dtype)
    for nrhs in (1, 40):
        b = _gaussian(rng, (batch, n, nrhs), dtype).astype(dtype)
        x = ldl_solve(ld, pivots, b, strategy="blocked")
        tol = solve_tolerance(a, dtype)
        assert rel_err(x, _lapack_solves(ld, pivots, b, dtype)) <= tol
        assert rel_err(x, reference_solve(a, b)) <= tol


@requires_gpu
@pytest.mark.parametrize("batch", [3, LDL_SOLVE_TRSM_MAX_COUNT + 2])
def test_blocked_solve_singular_d_and_bad_pivots(rng, batch):
    # A singular D gives inf/NaN, no error; pivots that are no LAPACK pivot array give NaN (the
    # Python side solves that item with harmless pivots); its neighbours stay right. The TRSM
    # route (3 matrices) and the blocked kernels (6).
    n = 150
    a = symmetric(rng, (batch, n, n), np.float64)
    ld, pivots = _lapack_factors(a, np.float64)
    b = _gaussian(rng, (batch, n, 2), np.float64)
    ld[0, 70, 70] = 0
    pivots[0, 70] = 71
    pivots[1, 3] = n + 5
    x = np.asarray(ldl_solve(ld, pivots, b, strategy="blocked"))
    assert not np.all(np.isfinite(x[0])) and np.all(np.isnan(x[1]))
    assert rel_err(x[2:], _lapack_solves(ld[2:], pivots[2:], b[2:], np.float64)) <= \
        solve_tolerance(a[2:], np.float64)


@requires_extension
def test_blocked_lowers_to_sytrf_strategy_3():
    text = str(_export_cuda(
        lambda a, b: ldl_solve(*ldl_factor(a, strategy="blocked"), b, strategy="blocked"),
        jax.ShapeDtypeStruct((4, 16, 16), np.float32),
        jax.ShapeDtypeStruct((4, 16, 1), np.float32)))
    sytrf = [line for line in text.splitlines() if "@jcm_sytrf" in line]
    sytrs = [line for line in text.splitlines() if "@jcm_sytrs" in line]
    assert len(sytrf) == 1 and "strategy = 3 : i32" in sytrf[0], sytrf
    assert len(sytrs) == 1 and "strategy = 3 : i32" in sytrs[0], sytrs
