"""Tests for the LU family: lu_factor, lu, lu_solve, solve, inv, det, slogdet.

Every result is checked against what it must satisfy (P A = L U, A x = b, A A^-1 = I) with a
per-dtype tolerance, and against float64 NumPy/SciPy and jax.numpy/jax.scipy. On CPU every
strategy runs JAX's own implementation, so the CPU run checks the API, shape rules and
transformations; the GPU run (tests marked requires_gpu run there too) checks the FFI paths.
"""

import functools
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg
from jax.test_util import check_grads

import jax_cusolver_ms as jcm
from conftest import (
    ALL_STRATEGIES,
    DTYPES,
    FULL_GRID,
    SMALL_KERNEL_N,
    TINY_KERNEL_BATCH,
    TINY_KERNEL_N,
    assert_rejects_dtype,
    assert_trees_close,
    assert_vmap_in_axis,
    condition_number,
    is_complex,
    lowered_text,
    numpy_solve,
    param_id,
    precision,
    random_matrix,
    random_rhs,
    rel_err,
    requires_extension,
    requires_gpu,
    rotated_grid,
    rtol_for,
    solve_residual,
    strategy_grid,
    wide_dtype,
)

DOUBLE_DTYPES = (np.float64, np.complex128)
REAL_DTYPES = (np.float32, np.float64)

# (batch..., m, n): n = 1, batch 0 and 1, several batch dims, tall and wide.
LU_FACTOR_SHAPES = [
    (1, 1), (5, 5), (64, 64), (0, 4, 4), (1, 6, 6), (8, 7, 7), (2, 3, 5, 5),
    (9, 4), (4, 9), (3, 10, 6), (2, 5, 12), (1, 1, 3),
]
LU_SHAPES = [(1, 1), (33, 33), (3, 8, 8), (0, 3, 3), (7, 4), (2, 4, 7)]
SQUARE_SHAPES = [(1, 1), (6, 6), (40, 40), (0, 4, 4), (1, 5, 5), (2, 3, 5, 5)]

# (a shape, b shape) pairs that jnp.linalg.solve accepts: b.ndim == 1 is one vector for every
# matrix; otherwise b is (..., n, k) and the batch dims broadcast.
SOLVE_CASES = [
    ((1, 1), (1,)),
    ((6, 6), (6,)),
    ((40, 40), (40, 5)),
    ((4, 7, 7), (4, 7, 2)),
    ((4, 7, 7), (7,)),
    ((2, 1, 5, 5), (3, 5, 2)),
    ((1, 5, 5), (1, 5, 1)),
    ((0, 4, 4), (0, 4, 1)),
]

# (lu shape, b shape) pairs for jax.scipy.linalg.lu_solve (avoiding its deprecated
# "batched vector" case where b.ndim == lu.ndim - 1 and b.shape[-1] == n).
LU_SOLVE_CASES = [
    ((1, 1), (1,)),
    ((6, 6), (6,)),
    ((40, 40), (40, 3)),
    ((3, 7, 7), (3, 7, 2)),
    ((3, 7, 7), (7, 2)),
    ((3, 7, 7), (7,)),
    ((0, 4, 4), (0, 4, 2)),
]


ids = param_id
strategy_param = pytest.mark.parametrize("strategy", ALL_STRATEGIES)


# ---------------------------------------------------------------------------------------------
# Helpers: unpacking and checking LU factors
# ---------------------------------------------------------------------------------------------


def pivots_to_permutation(piv, m):
    """Apply LAPACK-style row swaps (0-based) to arange(m), batched: rows of A in P A order."""
    piv = np.asarray(piv)
    batch, k = piv.shape[:-1], piv.shape[-1]
    flat_piv = piv.reshape(-1, k)
    perm = np.tile(np.arange(m), (flat_piv.shape[0], 1))
    rows = np.arange(flat_piv.shape[0])
    for i in range(k):
        p = flat_piv[:, i]
        swapped = perm[rows, p]
        perm[rows, p] = perm[rows, i]
        perm[rows, i] = swapped
    return perm.reshape(batch + (m,))


def unpack_lu(lu, piv):
    """(perm, L, U) in float64/complex128 from a packed LU and its pivots."""
    lu = np.asarray(lu)
    m, n = lu.shape[-2:]
    k = min(m, n)
    wide = lu.astype(wide_dtype(lu.dtype))
    lower = np.tril(wide[..., :, :k], -1) + np.eye(m, k)
    upper = np.triu(wide[..., :k, :])
    return pivots_to_permutation(piv, m), lower, upper


def check_pivots(piv, m, n, batch):
    piv = np.asarray(piv)
    k = min(m, n)
    assert piv.dtype == np.int32, piv.dtype
    assert piv.shape == batch + (k,), (piv.shape, batch + (k,))
    if piv.size:
        # LAPACK convention: step i swaps row i with a row at or below it.
        assert np.all(piv >= np.arange(k)), piv
        assert np.all(piv < m), piv


def check_lu_factorization(a, lu, piv, dtype):
    """lu/piv factor a: shapes, dtypes, pivot range, |L| bounded, P A = L U."""
    a = np.asarray(a)
    lu = np.asarray(lu)
    *batch, m, n = a.shape
    batch = tuple(batch)
    assert lu.dtype == np.dtype(dtype), lu.dtype
    assert lu.shape == a.shape, (lu.shape, a.shape)
    check_pivots(piv, m, n, batch)
    assert np.all(np.isfinite(lu)), "finite input gave non-finite LU factors"
    perm, lower, upper = unpack_lu(lu, piv)
    # Partial pivoting keeps |l_ij| <= 1; complex pivot search by |re| + |im| allows sqrt(2).
    bound = (np.sqrt(2) if is_complex(dtype) else 1.0) * (1 + 1e-5)
    assert np.all(np.abs(lower) <= bound), f"max |L| = {np.abs(lower).max()}: no partial pivoting?"
    permuted_a = np.take_along_axis(a.astype(wide_dtype(dtype)), perm[..., :, None], axis=-2)
    err = rel_err(lower @ upper, permuted_a)
    assert err <= rtol_for(dtype, max(m, n)), f"||P A - L U|| / ||A|| = {err:.3g}"


def check_lu_matches(lu, piv, lu_ref, piv_ref, dtype, tol, same_pivots_required):
    """Compare with a reference LU, matrix by matrix.

    Where pivoting is ambiguous (near ties in single precision on general matrices) the two
    may pivot differently and both be right; those matrices are left to the reconstruction
    check. ``same_pivots_required`` is for inputs where the pivots are unambiguous.
    """
    lu, piv = np.asarray(lu), np.asarray(piv)
    lu_ref, piv_ref = np.asarray(lu_ref), np.asarray(piv_ref)
    assert lu.shape == lu_ref.shape and piv.shape == piv_ref.shape
    m, n = lu.shape[-2:]
    flat_lu, flat_ref = lu.reshape(-1, m, n), lu_ref.reshape(-1, m, n)
    k = min(m, n)
    flat_piv, flat_piv_ref = piv.reshape(-1, k), piv_ref.reshape(-1, k)
    for i in range(flat_lu.shape[0]):
        same = np.array_equal(flat_piv[i], flat_piv_ref[i])
        if same_pivots_required:
            assert same, f"matrix {i}: pivots {flat_piv[i]} != reference {flat_piv_ref[i]}"
        if same:
            err = rel_err(flat_lu[i], flat_ref[i])
            assert err <= tol, f"matrix {i}: LU differs from reference by {err:.3g} > {tol:.3g}"


def scipy_lu_factor(a):
    """Batched scipy.linalg.lu_factor in float64/complex128."""
    a = np.asarray(a).astype(wide_dtype(a.dtype))
    m, n = a.shape[-2:]
    flat = a.reshape(-1, m, n)
    lus, pivs = [], []
    for mat in flat:
        lu, piv = scipy.linalg.lu_factor(mat, check_finite=False)
        lus.append(lu)
        pivs.append(piv)
    k = min(m, n)
    return (
        np.array(lus).reshape(a.shape),
        np.array(pivs, dtype=np.int32).reshape(a.shape[:-2] + (k,)),
    )


def op_matrix(a, trans):
    """A, A^T or A^H for lu_solve's trans = 0, 1, 2."""
    if trans == 0:
        return a
    at = np.swapaxes(a, -1, -2)
    return np.conj(at) if trans == 2 else at


# ---------------------------------------------------------------------------------------------
# API surface
# ---------------------------------------------------------------------------------------------


def test_strategy_names():
    # The grid the tests run every op under, and "blocked" (getrf: below; potrf: test_cholesky.py).
    assert tuple(jcm.STRATEGIES) == ALL_STRATEGIES + ("blocked",)


def test_gpu_available_is_bool():
    assert isinstance(jcm.gpu_available(), bool)


def test_gpu_available_implies_gpu_backend():
    has_gpu_backend = any(d.platform == "gpu" for d in jax.devices())
    assert has_gpu_backend or not jcm.gpu_available()


# ---------------------------------------------------------------------------------------------
# lu_factor and lu
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,shape,strategy", strategy_grid(DTYPES, LU_FACTOR_SHAPES))
def test_lu_factor(rng, dtype, shape, strategy):
    a = random_matrix(rng, shape, dtype, "general")
    lu, piv = jcm.lu_factor(jnp.asarray(a), strategy=strategy)
    check_lu_factorization(a, lu, piv, dtype)

    lu_jax, piv_jax = jsl.lu_factor(jnp.asarray(a))
    tol = rtol_for(dtype, max(shape[-2:]), condition_number(a))
    # Complex pivoting compares |re| + |im| (LAPACK, cuBLAS batched) or |z| depending on the
    # library: equal pivots are only required for real float64.
    double = precision(dtype) == "double"
    real_double = double and not np.issubdtype(dtype, np.complexfloating)
    check_lu_matches(lu, piv, lu_jax, piv_jax, dtype, tol, same_pivots_required=real_double)
    if double:
        lu_sp, piv_sp = scipy_lu_factor(a)
        check_lu_matches(lu, piv, lu_sp, piv_sp, dtype, tol, same_pivots_required=real_double)


@pytest.mark.parametrize("dtype,shape,strategy", strategy_grid(DTYPES, LU_SHAPES))
def test_lu(rng, dtype, shape, strategy):
    a = random_matrix(rng, shape, dtype, "general")
    lu, pivots, permutation = jcm.lu(jnp.asarray(a), strategy=strategy)
    check_lu_factorization(a, lu, pivots, dtype)
    *batch, m, n = shape
    permutation = np.asarray(permutation)
    assert permutation.dtype == np.int32
    assert permutation.shape == tuple(batch) + (m,)
    identity = np.broadcast_to(np.arange(m), permutation.shape)
    np.testing.assert_array_equal(np.sort(permutation, axis=-1), identity)
    np.testing.assert_array_equal(permutation, pivots_to_permutation(pivots, m))

    lu_jax, pivots_jax, permutation_jax = jax.lax.linalg.lu(jnp.asarray(a))
    tol = rtol_for(dtype, max(m, n), condition_number(a))
    # Complex pivot searches compare |re| + |im| in different orders across libraries: near ties
    # may pick different rows, both right (the reconstruction check above holds either way).
    real_double = precision(dtype) == "double" and not is_complex(dtype)
    check_lu_matches(lu, pivots, lu_jax, pivots_jax, dtype, tol, real_double)
    if real_double:
        np.testing.assert_array_equal(permutation, permutation_jax)


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_lu_factor_well_conditioned_pivots_exact(rng, dtype, strategy):
    # Unambiguous pivots: every implementation must pick the same rows, in every precision.
    a = random_matrix(rng, (5, 24, 24), dtype, "well_conditioned")
    lu, piv = jcm.lu_factor(jnp.asarray(a), strategy=strategy)
    check_lu_factorization(a, lu, piv, dtype)
    lu_sp, piv_sp = scipy_lu_factor(a)
    np.testing.assert_array_equal(np.asarray(piv), piv_sp)
    assert rel_err(lu, lu_sp) <= rtol_for(dtype, 24, condition_number(a))


# ---------------------------------------------------------------------------------------------
# lu_solve and solve
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,case,strategy", strategy_grid(DTYPES, LU_SOLVE_CASES))
def test_lu_solve(rng, dtype, case, strategy):
    check_lu_solve(rng, dtype, case, strategy, trans=0)


@pytest.mark.parametrize(
    "dtype,trans,strategy", strategy_grid(DTYPES, [1, 2])
)
@pytest.mark.parametrize("case", [((3, 7, 7), (3, 7, 2)), ((6, 6), (6,))], ids=ids)
def test_lu_solve_transposed(rng, dtype, trans, strategy, case):
    check_lu_solve(rng, dtype, case, strategy, trans)


def check_lu_solve(rng, dtype, case, strategy, trans):
    """jcm.lu_solve on jcm.lu_factor's output solves op(A) x = b, as JAX and NumPy do."""
    lu_shape, b_shape = case
    a = random_matrix(rng, lu_shape, dtype, "well_conditioned")
    b = random_rhs(rng, b_shape, dtype)
    n = lu_shape[-1]
    vector = len(b_shape) == 1
    core = 1 if vector else 2
    factors = jcm.lu_factor(jnp.asarray(a), strategy=strategy)
    x = jcm.lu_solve(factors, jnp.asarray(b), trans, strategy=strategy)
    with jax.numpy_rank_promotion("allow"):  # JAX's lu_solve broadcasts an unbatched b
        x_jax = jsl.lu_solve(jsl.lu_factor(jnp.asarray(a)), jnp.asarray(b), trans)
    assert x.shape == x_jax.shape, (x.shape, x_jax.shape)
    assert x.dtype == x_jax.dtype == np.dtype(dtype)
    op_a = op_matrix(a, trans)
    assert solve_residual(op_a, x, np.broadcast_to(b, x.shape), vector) <= rtol_for(dtype, n)
    cond = condition_number(a)
    assert rel_err(x, numpy_solve(op_a, b, vector), core) <= rtol_for(dtype, n, cond)
    assert rel_err(x, x_jax, core) <= rtol_for(dtype, n, cond)


@pytest.mark.parametrize("dtype,n,strategy", strategy_grid(DTYPES, [8, 80]))
@pytest.mark.parametrize("trans", [0, 1])
def test_lu_solve_out_of_range_pivots_give_nan_for_that_matrix(rng, dtype, n, strategy, trans):
    # n = 8 takes the small kernel, 80 the cuSOLVER / cuBLAS paths. No pivot out of [0, n) may
    # reach a solver (out-of-bounds access there): its matrix is NaN, the others are solved.
    a = random_matrix(rng, (3, n, n), dtype, "well_conditioned")
    b = random_rhs(rng, (3, n, 2), dtype)
    lu, piv = jcm.lu_factor(jnp.asarray(a), strategy=strategy)
    piv = np.array(piv)
    piv[1, 2], piv[1, n - 1] = n + 100000, -7
    x = np.asarray(jax.jit(functools.partial(jcm.lu_solve, trans=trans, strategy=strategy))(
        (lu, jnp.asarray(piv)), jnp.asarray(b)))
    assert np.isnan(x[1]).all()
    op_a = op_matrix(a, trans)
    good = [0, 2]
    assert solve_residual(op_a[good], x[good], b[good], False) <= rtol_for(dtype, n)
    # A pivot of n is out of range too; a pivot of n - 1 is not.
    piv[1, 2], piv[1, n - 1] = n, n - 1
    x = np.asarray(jcm.lu_solve((lu, jnp.asarray(piv)), jnp.asarray(b), trans, strategy=strategy))
    assert np.isnan(x[1]).all() and np.isfinite(x[good]).all()


def test_lu_solve_batched_vector_is_deprecated_like_jax(rng):
    # lu (3, n, n) with b (3, n): JAX treats b as a batch of vectors and warns; so must we.
    a = random_matrix(rng, (3, 7, 7), np.float64, "well_conditioned")
    b = random_rhs(rng, (3, 7), np.float64)
    with pytest.warns(FutureWarning):
        x = jcm.lu_solve(jcm.lu_factor(a), b)
    with pytest.warns(FutureWarning):
        x_jax = jsl.lu_solve(jsl.lu_factor(a), b)
    assert x.shape == x_jax.shape == (3, 7)
    assert rel_err(x, numpy_solve(a, b, vector=True), 1) <= rtol_for(np.float64, 7, 10)


def test_lu_solve_accepts_jax_factors(rng):
    # Drop-in: factors from jax.scipy.linalg.lu_factor work with jcm.lu_solve, and vice versa.
    a = random_matrix(rng, (3, 9, 9), np.float64, "general")
    b = random_rhs(rng, (3, 9, 2), np.float64)
    x_ref = numpy_solve(a, b, vector=False)
    tol = rtol_for(np.float64, 9, condition_number(a))
    assert rel_err(jcm.lu_solve(jsl.lu_factor(a), b), x_ref) <= tol
    assert rel_err(jsl.lu_solve(jcm.lu_factor(a), b), x_ref) <= tol


@pytest.mark.parametrize("dtype,case,strategy", strategy_grid(DTYPES, SOLVE_CASES))
def test_solve(rng, dtype, case, strategy):
    a_shape, b_shape = case
    a = random_matrix(rng, a_shape, dtype, "well_conditioned")
    b = random_rhs(rng, b_shape, dtype)
    n = a_shape[-1]
    vector = len(b_shape) == 1
    x = jcm.solve(jnp.asarray(a), jnp.asarray(b), strategy=strategy)
    with jax.numpy_rank_promotion("allow"):  # JAX's solve broadcasts the batch dims
        x_jax = jnp.linalg.solve(jnp.asarray(a), jnp.asarray(b))
    assert x.shape == x_jax.shape, (x.shape, x_jax.shape)
    assert x.dtype == x_jax.dtype == np.dtype(dtype)
    x_ref = numpy_solve(a, b, vector)
    core = 1 if vector else 2
    a_b = np.broadcast_to(a, x.shape[:-core] + (n, n))
    b_b = np.broadcast_to(b, x.shape)
    assert solve_residual(a_b, x, b_b, vector) <= rtol_for(dtype, n)
    cond = condition_number(a)
    assert rel_err(x, x_ref, core) <= rtol_for(dtype, n, cond)
    assert rel_err(x, x_jax, core) <= rtol_for(dtype, n, cond)


@pytest.mark.parametrize(
    "dtype,kind,strategy", strategy_grid(DTYPES, ["general", "spd", "ill_conditioned"])
)
def test_solve_matrix_kinds(rng, dtype, kind, strategy):
    n = 24
    a = random_matrix(rng, (3, n, n), dtype, kind)
    b = random_rhs(rng, (3, n, 2), dtype)
    x = np.asarray(jcm.solve(a, b, strategy=strategy))
    assert np.all(np.isfinite(x))
    # Backward error does not depend on conditioning; forward error does.
    assert solve_residual(a, x, b, False) <= rtol_for(dtype, n)
    cond = condition_number(a)
    assert rel_err(x, numpy_solve(a, b, False)) <= rtol_for(dtype, n, cond)
    lu, piv = jcm.lu_factor(a, strategy=strategy)
    check_lu_factorization(a, lu, piv, dtype)


# ---------------------------------------------------------------------------------------------
# inv, det, slogdet
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,shape,strategy", strategy_grid(DTYPES, SQUARE_SHAPES))
def test_inv(rng, dtype, shape, strategy):
    a = random_matrix(rng, shape, dtype, "well_conditioned")
    n = shape[-1]
    x = jcm.inv(jnp.asarray(a), strategy=strategy)
    x_jax = jnp.linalg.inv(jnp.asarray(a))
    assert x.shape == x_jax.shape == a.shape
    assert x.dtype == np.dtype(dtype)
    if a.size == 0:
        return
    wide = a.astype(wide_dtype(dtype))
    eye = np.broadcast_to(np.eye(n), a.shape)
    cond = condition_number(a)
    assert rel_err(wide @ np.asarray(x).astype(wide.dtype), eye) <= rtol_for(dtype, n, cond)
    assert rel_err(x, np.linalg.inv(wide)) <= rtol_for(dtype, n, cond)
    assert rel_err(x, x_jax) <= rtol_for(dtype, n, cond)


@pytest.mark.parametrize("dtype,shape,strategy", strategy_grid(DTYPES, SQUARE_SHAPES))
def test_det_and_slogdet(rng, dtype, shape, strategy):
    a = random_matrix(rng, shape, dtype, "well_conditioned")
    n = shape[-1]
    batch = shape[:-2]
    tol = rtol_for(dtype, n, condition_number(a))
    wide = a.astype(wide_dtype(dtype))

    d = jcm.det(jnp.asarray(a), strategy=strategy)
    d_jax = jnp.linalg.det(jnp.asarray(a))
    assert d.shape == d_jax.shape == batch
    assert d.dtype == d_jax.dtype == np.dtype(dtype)
    d_ref = np.linalg.det(wide)
    np.testing.assert_allclose(np.asarray(d).astype(wide.dtype), d_ref, rtol=tol, atol=0)
    np.testing.assert_allclose(np.asarray(d), np.asarray(d_jax), rtol=tol, atol=0)

    sign, logabsdet = jcm.slogdet(jnp.asarray(a), strategy=strategy)
    sign_jax, logabsdet_jax = jnp.linalg.slogdet(jnp.asarray(a))
    assert sign.shape == logabsdet.shape == batch
    assert sign.dtype == sign_jax.dtype and logabsdet.dtype == logabsdet_jax.dtype
    sign_ref, logabsdet_ref = np.linalg.slogdet(wide)
    np.testing.assert_allclose(np.asarray(sign).astype(wide.dtype), sign_ref, rtol=0, atol=tol)
    np.testing.assert_allclose(np.asarray(logabsdet), logabsdet_ref, rtol=0, atol=tol)
    np.testing.assert_allclose(np.asarray(logabsdet), np.asarray(logabsdet_jax), rtol=0, atol=tol)


# ---------------------------------------------------------------------------------------------
# Every strategy gives the same answer
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", DTYPES if FULL_GRID else (np.float32, np.complex128), ids=ids
)
def test_strategies_agree(rng, dtype):
    n = 32
    a = random_matrix(rng, (6, n, n), dtype, "well_conditioned")
    rect = random_matrix(rng, (6, n, n // 2), dtype, "general")
    b = random_rhs(rng, (6, n, 3), dtype)
    tol = rtol_for(dtype, n, condition_number(a))

    # The rectangular matrix takes the strategies getrf has for it (no batched API, no blocked
    # algorithm): the others are refused, and auto stands in.
    rect_strategies = jcm.strategy.feasible("getrf", n, n // 2)

    @functools.partial(jax.jit, static_argnames="s")
    def everything(a, rect, b, s):
        lu, piv = jcm.lu_factor(a, strategy=s)
        lu_rect, piv_rect = jcm.lu_factor(rect, strategy=s if s in rect_strategies else "auto")
        return dict(
            lu=lu,
            piv=piv,
            lu_rect=lu_rect,
            piv_rect=piv_rect,
            x=jcm.lu_solve((lu, piv), b, strategy=s),
            xt=jcm.lu_solve((lu, piv), b, 2, strategy=s),
            solve=jcm.solve(a, b, strategy=s),
            inv=jcm.inv(a, strategy=s),
            det=jcm.det(a, strategy=s),
            logabsdet=jcm.slogdet(a, strategy=s)[1],
        )

    results = {s: jax.tree.map(np.asarray, everything(a, rect, b, s)) for s in ALL_STRATEGIES}
    for s, r in results.items():
        check_lu_factorization(rect, r["lu_rect"], r["piv_rect"], dtype)
        check_lu_factorization(a, r["lu"], r["piv"], dtype)
    base = results["looped"]
    for s, r in results.items():
        np.testing.assert_array_equal(r["piv"], base["piv"], err_msg=f"pivots of {s}")
        for key in ("lu", "x", "xt", "solve", "inv"):
            assert rel_err(r[key], base[key]) <= tol, f"{key}: {s} vs looped"
        np.testing.assert_allclose(r["det"], base["det"], rtol=tol, err_msg=f"det: {s}")
        np.testing.assert_allclose(
            r["logabsdet"], base["logabsdet"], atol=tol, err_msg=f"slogdet: {s}"
        )


# ---------------------------------------------------------------------------------------------
# Singular, ill-conditioned and NaN inputs: same behaviour as JAX
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype,shape,strategy", strategy_grid(DTYPES, [(1, 1), (7, 7), (4, 9, 9), (3, 8, 5)])
)
def test_lu_factor_singular(rng, dtype, shape, strategy):
    a = random_matrix(rng, shape, dtype, "singular")
    lu, piv = jcm.lu_factor(jnp.asarray(a), strategy=strategy)
    lu = np.asarray(lu)
    # Like JAX: no NaN, an exactly zero pivot on U's diagonal, and P A = L U still holds, except
    # on cuBLAS getrfBatched (the GPU batched strategy, and JAX's own GPU path for batches of
    # small matrices): it stops at the first zero pivot (H100: P A != L U past it, as with JAX).
    assert not np.any(np.isnan(lu)), "singular matrix gave NaN in the LU factors"
    choice = jcm.explain("getrf", a.shape, dtype, strategy=strategy)
    # `xla` here is JAX's lowering, which takes getrfBatched for a batch of small matrices.
    cublas_batched = jcm.gpu_available() and (
        choice.strategy == "batched" or (choice.strategy == "xla" and len(shape) > 2))
    if cublas_batched:
        check_pivots(piv, shape[-2], shape[-1], tuple(shape[:-2]))
    else:
        check_lu_factorization(a, lu, piv, dtype)
    diag = np.diagonal(lu, axis1=-2, axis2=-1)
    assert np.all(np.any(diag == 0, axis=-1)), f"no exact zero on U's diagonal: {diag}"


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_singular_solve_inv_det(rng, dtype, strategy):
    n = 6
    a = random_matrix(rng, (n, n), dtype, "singular")
    b = random_rhs(rng, (n, 2), dtype)

    x = np.asarray(jcm.solve(a, b, strategy=strategy))
    x_jax = np.asarray(jnp.linalg.solve(a, b))
    assert not np.all(np.isfinite(x)), "solve of a singular matrix gave only finite numbers"
    np.testing.assert_array_equal(np.isfinite(x), np.isfinite(x_jax))

    ainv = np.asarray(jcm.inv(a, strategy=strategy))
    ainv_jax = np.asarray(jnp.linalg.inv(a))
    assert not np.all(np.isfinite(ainv)), "inv of a singular matrix gave only finite numbers"
    np.testing.assert_array_equal(np.isfinite(ainv), np.isfinite(ainv_jax))

    assert np.asarray(jcm.det(a, strategy=strategy)) == 0
    sign, logabsdet = jcm.slogdet(a, strategy=strategy)
    sign_jax, logabsdet_jax = jnp.linalg.slogdet(a)
    assert np.asarray(sign) == np.asarray(sign_jax) == 0
    assert np.asarray(logabsdet) == np.asarray(logabsdet_jax) == -np.inf


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_one_bad_matrix_in_a_batch_leaves_the_others_alone(rng, dtype, strategy):
    # Matrix 1 is singular and matrix 3 holds a NaN; the rest must come out exactly as if
    # factored alone (a batched path that shares pivots/info across the batch fails here).
    n = 8
    a = random_matrix(rng, (5, n, n), dtype, "well_conditioned")
    a[1] = random_matrix(rng, (n, n), dtype, "singular")
    a[3, 2, 5] = np.nan
    b = random_rhs(rng, (5, n, 2), dtype)
    good = [0, 2, 4]

    lu, piv = jcm.lu_factor(a, strategy=strategy)
    lu, piv = np.asarray(lu), np.asarray(piv)
    check_lu_factorization(a[good], lu[good], piv[good], dtype)
    assert np.any(np.diagonal(lu[1]) == 0) and not np.any(np.isnan(lu[1]))
    assert np.any(np.isnan(lu[3])), "NaN input did not propagate into the LU factors"

    x = np.asarray(jcm.solve(a, b, strategy=strategy))
    tol = rtol_for(dtype, n, condition_number(a[good]))
    assert rel_err(x[good], numpy_solve(a[good], b[good], False)) <= tol
    assert not np.all(np.isfinite(x[1]))
    assert np.any(np.isnan(x[3]))

    d = np.asarray(jcm.det(a, strategy=strategy))
    np.testing.assert_allclose(d[good], np.linalg.det(a[good].astype(wide_dtype(dtype))), rtol=tol)
    assert d[1] == 0
    assert np.isnan(d[3])


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_nan_input_propagates(rng, dtype, strategy):
    n = 5
    a = random_matrix(rng, (n, n), dtype, "well_conditioned")
    a[rng.integers(n), rng.integers(n)] = np.nan
    b = random_rhs(rng, (n,), dtype)
    assert np.any(np.isnan(np.asarray(jcm.lu_factor(a, strategy=strategy)[0])))
    assert np.any(np.isnan(np.asarray(jcm.lu(a, strategy=strategy)[0])))
    assert np.any(np.isnan(np.asarray(jcm.solve(a, b, strategy=strategy))))
    assert np.any(np.isnan(np.asarray(jcm.inv(a, strategy=strategy))))
    assert np.isnan(np.asarray(jcm.det(a, strategy=strategy)))
    assert np.isnan(np.asarray(jcm.slogdet(a, strategy=strategy)[1]))
    # A NaN right-hand side propagates through an otherwise good factorization.
    b[0] = np.nan
    good = random_matrix(rng, (n, n), dtype, "well_conditioned")
    factors = jcm.lu_factor(good, strategy=strategy)
    assert np.any(np.isnan(np.asarray(jcm.lu_solve(factors, b, strategy=strategy))))


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_ill_conditioned_factor_and_solve(rng, dtype, strategy):
    n = 32
    a = random_matrix(rng, (4, n, n), dtype, "ill_conditioned")
    b = random_rhs(rng, (4, n, 1), dtype)
    lu, piv = jcm.lu_factor(a, strategy=strategy)
    check_lu_factorization(a, lu, piv, dtype)
    x = np.asarray(jcm.lu_solve((lu, piv), b, strategy=strategy))
    assert np.all(np.isfinite(x))
    assert solve_residual(a, x, b, False) <= rtol_for(dtype, n)
    assert rel_err(x, numpy_solve(a, b, False)) <= rtol_for(dtype, n, condition_number(a))


# ---------------------------------------------------------------------------------------------
# Input layouts: non-contiguous and transposed views; inputs left untouched
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_non_contiguous_and_transposed_inputs(rng, dtype, strategy):
    n = 9
    big = random_matrix(rng, (3, 2 * n, 3 * n), dtype, "general")
    views = {
        "strided": big[:, ::2, ::3],
        "transposed": np.swapaxes(big[:, :n, :n], -1, -2),
        "fortran": np.asfortranarray(big[0, :n, n : 2 * n]),
        "reversed": big[::-1, n - 1 :: -1, :n],
    }
    for name, view in views.items():
        assert not view.flags.c_contiguous, name
        dense = np.ascontiguousarray(view)
        lu, piv = jcm.lu_factor(view, strategy=strategy)
        check_lu_factorization(dense, lu, piv, dtype)
        lu_dense, piv_dense = jcm.lu_factor(dense, strategy=strategy)
        np.testing.assert_array_equal(np.asarray(piv), np.asarray(piv_dense), err_msg=name)
        assert rel_err(lu, lu_dense) <= rtol_for(dtype, n), name

        b_view = random_rhs(rng, view.shape[:-2] + (2 * n, 4), dtype)[..., ::2, ::2]
        x = jcm.solve(view, b_view, strategy=strategy)
        tol = rtol_for(dtype, n, condition_number(dense))
        assert rel_err(x, numpy_solve(dense, np.ascontiguousarray(b_view), False)) <= tol, name
        d = np.asarray(jcm.det(view, strategy=strategy))
        d_ref = np.linalg.det(dense.astype(wide_dtype(dtype)))
        np.testing.assert_allclose(d, d_ref, rtol=tol, err_msg=name)

    # A transpose made by XLA inside a jitted function.
    a = random_matrix(rng, (2, n, n), dtype, "well_conditioned")
    b = random_rhs(rng, (2, n, 3), dtype)
    x = jax.jit(lambda a, b: jcm.solve(jnp.swapaxes(a, -1, -2), b, strategy=strategy))(a, b)
    tol = rtol_for(dtype, n, condition_number(a))
    assert rel_err(x, numpy_solve(np.swapaxes(a, -1, -2), b, False)) <= tol


def test_input_is_not_modified(rng):
    # The FFI factors in place into its output buffer; the caller's array must not change.
    a = jnp.asarray(random_matrix(rng, (4, 12, 12), np.float64, "general"))
    b = jnp.asarray(random_rhs(rng, (4, 12, 2), np.float64))
    a_copy, b_copy = np.array(a), np.array(b)
    for s in ALL_STRATEGIES:
        factors = jcm.lu_factor(a, strategy=s)
        jcm.lu_solve(factors, b, strategy=s)
        jcm.solve(a, b, strategy=s)
        np.testing.assert_array_equal(np.asarray(a), a_copy, err_msg=s)
        np.testing.assert_array_equal(np.asarray(b), b_copy, err_msg=s)

    # Inside jit, the factored input is used again after the factorization.
    def f(a):
        lu, _ = jcm.lu_factor(a)
        return lu, a * 2

    _, twice = jax.jit(f)(a)
    np.testing.assert_array_equal(np.asarray(twice), a_copy * 2)


# ---------------------------------------------------------------------------------------------
# jit
# ---------------------------------------------------------------------------------------------

# Inputs for the op table below: a batch of 3 in every argument.
def _solve_args(rng, dtype):
    a = random_matrix(rng, (3, 10, 10), dtype, "well_conditioned")
    return (a, random_rhs(rng, (3, 10, 2), dtype))


def _lu_solve_args(rng, dtype):
    a = random_matrix(rng, (3, 10, 10), dtype, "well_conditioned")
    lu, piv = jsl.lu_factor(a)
    return (lu, piv, random_rhs(rng, (3, 10, 2), dtype))


def _square_args(rng, dtype):
    return (random_matrix(rng, (3, 10, 10), dtype, "well_conditioned"),)


def _rect_args(rng, dtype):
    return (random_matrix(rng, (3, 10, 7), dtype, "general"),)


# name -> (jcm call taking (strategy, *args), JAX reference taking args, input maker).
OPS = {
    "lu_factor": (lambda s, a: jcm.lu_factor(a, strategy=s), jsl.lu_factor, _rect_args),
    "lu": (lambda s, a: jcm.lu(a, strategy=s), jax.lax.linalg.lu, _rect_args),
    "lu_solve": (
        lambda s, lu, piv, b: jcm.lu_solve((lu, piv), b, strategy=s),
        lambda lu, piv, b: jsl.lu_solve((lu, piv), b),
        _lu_solve_args,
    ),
    "lu_solve_trans": (
        lambda s, lu, piv, b: jcm.lu_solve((lu, piv), b, 2, strategy=s),
        lambda lu, piv, b: jsl.lu_solve((lu, piv), b, 2),
        _lu_solve_args,
    ),
    "solve": (lambda s, a, b: jcm.solve(a, b, strategy=s), jnp.linalg.solve, _solve_args),
    "inv": (lambda s, a: jcm.inv(a, strategy=s), jnp.linalg.inv, _square_args),
    "det": (lambda s, a: jcm.det(a, strategy=s), jnp.linalg.det, _square_args),
    "slogdet": (
        lambda s, a: tuple(jcm.slogdet(a, strategy=s)),
        lambda a: tuple(jnp.linalg.slogdet(a)),
        _square_args,
    ),
}


@pytest.mark.parametrize(
    "op,dtype,strategy", strategy_grid(sorted(OPS), [np.float32, np.complex128])
)
def test_jit(rng, dtype, op, strategy):
    call, reference, make_args = OPS[op]
    args = make_args(rng, dtype)
    jitted = jax.jit(functools.partial(call, strategy))(*args)
    assert_trees_close(jitted, reference(*args), dtype, 10, f"{op}: jit vs JAX")


# ---------------------------------------------------------------------------------------------
# vmap
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op,in_axis,strategy", strategy_grid(sorted(OPS), [0, 1, -1]))
def test_vmap_in_axes(rng, op, in_axis, strategy):
    # Every argument carries the mapped axis at in_axis (the stacked batch of 3 moved there).
    dtype = np.complex64
    call, reference, make_args = OPS[op]
    assert_vmap_in_axis(functools.partial(call, strategy), reference, make_args(rng, dtype),
                        in_axis, dtype, 10, op)


@pytest.mark.parametrize(
    "in_axes,strategy", strategy_grid([(0, None), (None, 0), (1, -1), (-1, 1), (None, 2)])
)
def test_vmap_solve_mixed_axes(rng, in_axes, strategy):
    dtype, n, batch = np.complex64, 6, 4
    a = random_matrix(rng, (batch, n, n), dtype, "well_conditioned")
    b = random_rhs(rng, (batch, n, 2), dtype)
    a_in = a[0] if in_axes[0] is None else np.moveaxis(a, 0, in_axes[0])
    b_in = b[0] if in_axes[1] is None else np.moveaxis(b, 0, in_axes[1])
    got = jax.vmap(lambda a, b: jcm.solve(a, b, strategy=strategy), in_axes=in_axes)(a_in, b_in)
    ref = jax.vmap(jnp.linalg.solve, in_axes=in_axes)(a_in, b_in)
    assert got.shape == ref.shape
    assert rel_err(got, ref) <= rtol_for(dtype, n, condition_number(a))


@strategy_param
def test_vmap_nested(rng, strategy):
    dtype, n = np.float64, 5
    # a: (P, n, Q, n), mapped over P (axis 0) outside and Q (axis 1 of what is left) inside.
    a = random_matrix(rng, (2, 3, n, n), dtype, "well_conditioned")
    b = random_rhs(rng, (2, 3, n), dtype)
    a_in = np.moveaxis(a, 1, 2)
    inner = lambda a, b: (
        jcm.lu_factor(a, strategy=strategy),
        jcm.solve(a, b, strategy=strategy),
        jcm.det(a, strategy=strategy),
        jcm.inv(a, strategy=strategy),
        jcm.lu_solve(jcm.lu_factor(a, strategy=strategy), b, 1, strategy=strategy),
    )
    got = jax.vmap(jax.vmap(inner, in_axes=(1, 0)), in_axes=(0, 0))(a_in, b)
    ref = jax.vmap(jax.vmap(lambda a, b: (
        jsl.lu_factor(a), jnp.linalg.solve(a, b), jnp.linalg.det(a), jnp.linalg.inv(a),
        jsl.lu_solve(jsl.lu_factor(a), b, 1),
    )))(a, b)
    assert_trees_close(got, ref, dtype, n, "nested vmap")
    # vmap over an argument that already has batch dimensions.
    got_batched = jax.vmap(lambda a: jcm.lu_factor(a, strategy=strategy))(a)
    assert_trees_close(got_batched, jsl.lu_factor(a), dtype, n, "vmap over batched input")


# ---------------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------------


def _grad_fn(op, strategy, rng, dtype):
    """(function, args, JAX reference function) for gradient tests; small well-conditioned."""
    a = random_matrix(rng, (2, 4, 4), dtype, "well_conditioned")
    if op == "solve":
        b = random_rhs(rng, (2, 4, 2), dtype)
        return (lambda a, b: jcm.solve(a, b, strategy=strategy)), (a, b), jnp.linalg.solve
    if op == "lu_solve":
        lu, piv = jsl.lu_factor(a)
        b = random_rhs(rng, (2, 4, 2), dtype)
        return (
            (lambda lu, b: jcm.lu_solve((lu, piv), b, strategy=strategy)),
            (np.asarray(lu), b),
            (lambda lu, b: jsl.lu_solve((lu, piv), b)),
        )
    if op == "inv":
        return (lambda a: jcm.inv(a, strategy=strategy)), (a,), jnp.linalg.inv
    if op == "det":
        return (lambda a: jcm.det(a, strategy=strategy)), (a,), jnp.linalg.det
    if op == "slogdet":
        return (
            (lambda a: jcm.slogdet(a, strategy=strategy)[1]),
            (a,),
            (lambda a: jnp.linalg.slogdet(a)[1]),
        )
    if op == "lu_factor":
        return (
            (lambda a: jcm.lu_factor(a, strategy=strategy)[0]),
            (a,),
            (lambda a: jsl.lu_factor(a)[0]),
        )
    raise AssertionError(op)


GRAD_OPS = ["solve", "lu_solve", "inv", "det", "slogdet", "lu_factor"]


@pytest.mark.parametrize("dtype,op,strategy", strategy_grid(DOUBLE_DTYPES, GRAD_OPS))
def test_check_grads(rng, dtype, op, strategy):
    fn, args, _ = _grad_fn(op, strategy, rng, dtype)
    check_grads(fn, args, order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op,strategy", strategy_grid(GRAD_OPS))
def test_jacobians_match_jax(rng, op, strategy):
    dtype = np.float64
    fn, args, ref_fn = _grad_fn(op, strategy, rng, dtype)
    argnums = tuple(range(len(args)))
    for jac in (jax.jacfwd, jax.jacrev):
        got = jac(fn, argnums=argnums)(*args)
        ref = jac(ref_fn, argnums=argnums)(*args)
        assert_trees_close(got, ref, dtype, 4, f"{op}: {jac.__name__}")


def test_jit_grad_of_complex_loss_matches_jax(rng):
    # A real loss of complex solve/det outputs, differentiated under jit.
    a = random_matrix(rng, (2, 3, 3), np.complex128, "well_conditioned")
    b = random_rhs(rng, (3,), np.complex128)

    def loss(solve, det):
        return lambda a, b: jnp.sum(jnp.abs(solve(a, b)) ** 2) + jnp.sum(jnp.abs(det(a)))

    got = jax.jit(jax.grad(loss(jcm.solve, jcm.det), argnums=(0, 1)))(a, b)
    with jax.numpy_rank_promotion("allow"):  # JAX's solve broadcasts the unbatched b
        ref = jax.grad(loss(jnp.linalg.solve, jnp.linalg.det), argnums=(0, 1))(a, b)
    assert_trees_close(got, ref, np.complex128, 3, "jit(grad) of a complex loss")


def matrix_of_corank(rng, shape, dtype, corank):
    """A random matrix whose last `corank` singular values are exactly 0."""
    u, s, vt = np.linalg.svd(random_matrix(rng, shape, dtype, "general"))
    s[..., shape[-1] - corank:] = 0
    return ((u * s[..., None, :]) @ vt).astype(dtype)


@pytest.mark.parametrize("corank", [0, 1, 2], ids=lambda c: f"corank{c}")
@pytest.mark.parametrize("dtype,n,strategy", strategy_grid(DTYPES, [1, 2, 4, 7]))
def test_det_derivative_is_jaxs_at_and_near_singular_matrices(rng, dtype, n, strategy, corank):
    # JAX differentiates det through the adjugate: finite and exact at singular matrices (rank
    # n - 1: a rank-one derivative; lower rank: 0), where det(A) tr(A^-1 A') is NaN.
    if corank >= n:
        pytest.skip("a matrix of rank >= 1")
    a = matrix_of_corank(rng, (3, n, n), dtype, corank)
    g = random_matrix(rng, (3, n, n), dtype, "general")
    y, t = jax.jvp(lambda x: jcm.det(x, strategy=strategy), (a,), (g,))
    y_jax, t_jax = jax.jvp(jnp.linalg.det, (a,), (g,))
    assert np.isfinite(np.asarray(t)).all()
    tol = rtol_for(dtype, n, 1e3)
    # Rounding is on the scale of |A|^n for det and |A|^(n-1) |A'| for its derivative, not of
    # the values themselves: at corank >= 1 both sides are rounding noise around 0 (and at
    # corank 2 the derivative is too).
    norm_a = np.linalg.norm(a, 2, axis=(-2, -1))
    size = norm_a ** (n - 1) * np.linalg.norm(g, 2, axis=(-2, -1))
    np.testing.assert_array_less(np.abs(np.asarray(y) - np.asarray(y_jax)), tol * norm_a ** n)
    np.testing.assert_array_less(np.abs(np.asarray(t) - np.asarray(t_jax)), tol * size)
    if corank == 2 and n > 2:  # the adjugate is 0, up to rounding
        assert (np.abs(np.asarray(t)) <= tol * size).all(), (t, size)


@pytest.mark.parametrize("dtype", REAL_DTYPES, ids=param_id)
def test_slogdet_method_qr_is_jaxs(rng, dtype):
    a = random_matrix(rng, (4, 6, 6), dtype, "well_conditioned")
    tol = rtol_for(dtype, 6, condition_number(a))
    for strategy in ("auto", "looped"):
        got = jcm.slogdet(a, method="qr", strategy=strategy)
        ref = jnp.linalg.slogdet(a, method="qr")
        np.testing.assert_array_equal(np.asarray(got.sign), np.asarray(ref.sign))
        np.testing.assert_allclose(got.logabsdet, ref.logabsdet, rtol=0, atol=tol)
        assert_trees_close(jcm.slogdet(a, method="lu"), jnp.linalg.slogdet(a), dtype, 6, "lu")
    grad = jax.grad(lambda x: jcm.slogdet(x, method="qr").logabsdet.sum())(a)
    grad_jax = jax.grad(lambda x: jnp.linalg.slogdet(x, method="qr").logabsdet.sum())(a)
    assert_trees_close(grad, grad_jax, dtype, 6, "grad of slogdet(method='qr')")


def test_slogdet_rejects_what_jax_rejects():
    with pytest.raises(ValueError, match="slogdet: unknown method 'cholesky'"):
        jcm.slogdet(np.eye(3), method="cholesky")
    with pytest.raises(NotImplementedError, match="slogdet: method='qr' .* complex"):
        jcm.slogdet(np.eye(3, dtype=np.complex64), method="qr")


# ---------------------------------------------------------------------------------------------
# The blocked strategy (getrf, square matrices): ffi kLuBlock = 32 columns per panel
# ---------------------------------------------------------------------------------------------

LU_BLOCK = 32


@pytest.mark.parametrize("n", [1, 40, LU_BLOCK, LU_BLOCK + 1, 2 * LU_BLOCK + 37], ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_blocked_lu_across_panel_edges(rng, dtype, n):
    # One panel, exactly one, one plus a column, several with a ragged last one.
    a = random_matrix(rng, (3, n, n), dtype, "general")
    lu, piv = jcm.lu_factor(a, strategy="blocked")
    check_lu_factorization(a, lu, piv, dtype)
    tol = rtol_for(dtype, n, condition_number(a))
    real_double = precision(dtype) == "double" and not is_complex(dtype)
    lu_sp, piv_sp = scipy_lu_factor(a)
    check_lu_matches(lu, piv, lu_sp, piv_sp, dtype, tol, same_pivots_required=real_double)
    # solve, inv and det factor with the blocked LU too (their getrs runs as auto picks).
    b = random_rhs(rng, (3, n, 2), dtype)
    x = jcm.solve(a, b, strategy="blocked")
    assert rel_err(x, numpy_solve(a, b, False)) <= tol
    wide = a.astype(wide_dtype(dtype))
    assert rel_err(jcm.inv(a, strategy="blocked"), np.linalg.inv(wide)) <= tol
    sign, logabsdet = jcm.slogdet(a, strategy="blocked")
    sign_ref, logabsdet_ref = np.linalg.slogdet(wide)
    np.testing.assert_allclose(np.asarray(sign), sign_ref, rtol=0, atol=tol)
    np.testing.assert_allclose(np.asarray(logabsdet), logabsdet_ref, rtol=0, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_blocked_lu_singular_in_a_later_panel(rng, dtype):
    # A zero column in the first panel (matrix 0) and in the second (matrix 2): an exact zero on
    # U's diagonal there, P A = L U still, no NaN; solve and det say singular as JAX does; the
    # good matrix comes out as if factored alone (the same pivots; the values to rounding: cuBLAS
    # may tile a GEMM differently for another batch count).
    n = LU_BLOCK + 40
    a = random_matrix(rng, (3, n, n), dtype, "well_conditioned")
    a[0, :, 3] = 0
    a[2, :, LU_BLOCK + 7] = 0
    lu, piv = (np.asarray(v) for v in jcm.lu_factor(a, strategy="blocked"))
    check_lu_factorization(a, lu, piv, dtype)
    assert lu[0, 3, 3] == 0 and lu[2, LU_BLOCK + 7, LU_BLOCK + 7] == 0
    assert np.all(np.diagonal(lu[1]) != 0)
    alone, alone_piv = (np.asarray(v) for v in jcm.lu_factor(a[1:2], strategy="blocked"))
    np.testing.assert_array_equal(piv[1:2], alone_piv)
    assert rel_err(lu[1:2], alone) <= rtol_for(dtype, n)
    b = random_rhs(rng, (3, n, 1), dtype)
    x = np.asarray(jcm.solve(a, b, strategy="blocked"))
    np.testing.assert_array_equal(np.isfinite(x), np.isfinite(np.asarray(jnp.linalg.solve(a, b))))
    assert not np.all(np.isfinite(x[0])) and not np.all(np.isfinite(x[2]))
    d = np.asarray(jcm.det(a, strategy="blocked"))
    assert d[0] == 0 and d[2] == 0 and d[1] != 0


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_blocked_lu_non_finite_input(rng, dtype):
    # NaN in one matrix, Inf in another (past the first panel): NaN propagates into those (all
    # NaN on the GPU, where the guard masks them), the others untouched.
    n = LU_BLOCK + 9
    a = random_matrix(rng, (4, n, n), dtype, "well_conditioned")
    a[1, 5, 2] = np.nan
    a[3, n - 1, n - 2] = np.inf
    lu, piv = (np.asarray(v) for v in jcm.lu_factor(a, strategy="blocked"))
    assert np.any(np.isnan(lu[1])) and np.any(np.isnan(lu[3]))
    check_lu_factorization(a[[0, 2]], lu[[0, 2]], piv[[0, 2]], dtype)
    assert np.isnan(np.asarray(jcm.det(a, strategy="blocked"))[[1, 3]]).all()


@requires_gpu
@pytest.mark.parametrize("trsm", ["kernel", "cublas"])
def test_blocked_lu_triangular_solve_in_the_laswp_kernel(trsm):
    # JCM_LU_TRSM=kernel: U12 = L11^-1 A12 by the ?laswp kernel instead of trsmBatched (read
    # once per process, so in a child). Panels of 32 (registers) and 40 (the global-memory loop).
    script = (
        "import jax, numpy as np, scipy.linalg, jax_cusolver_ms as jcm\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "rng = np.random.default_rng(0)\n"
        "n = 150\n"
        "for dtype in (np.float32, np.float64, np.complex64, np.complex128):\n"
        "    a = rng.standard_normal((3, n, n)).astype(dtype)\n"
        "    if np.iscomplexobj(a):\n"
        "        a = a + 1j * rng.standard_normal(a.shape).astype(a.real.dtype)\n"
        "    lu, piv = (np.asarray(v) for v in jcm.lu_factor(a, strategy='blocked'))\n"
        "    single = dtype in (np.float32, np.complex64)\n"
        "    for i in range(3):\n"
        "        perm = np.arange(n)\n"
        "        for k, p in enumerate(piv[i]):\n"
        "            perm[[k, p]] = perm[[p, k]]\n"
        "        l = np.tril(lu[i], -1) + np.eye(n)\n"
        "        u = np.triu(lu[i])\n"
        "        wide = a[i].astype(np.complex128)\n"
        "        err = np.linalg.norm(wide[perm] - l @ u) / np.linalg.norm(wide)\n"
        "        assert err < (1e-5 if single else 1e-13), (dtype, err)\n"
        "        # Partial pivoting by |re| + |im| (LAPACK's i?amax): |l| <= 1, sqrt(2) complex.\n"
        "        bound = np.sqrt(2) if np.iscomplexobj(a) else 1.0\n"
        "        assert np.abs(l).max() <= bound + 1e-6, (dtype, np.abs(l).max())\n"
        "        if dtype == np.float64:  # complex: rounding may break near-ties otherwise\n"
        "            assert (piv[i] == scipy.linalg.lu_factor(wide)[1]).all(), dtype\n"
        "print('ok')\n"
    )
    for block in ("32", "40"):
        env = dict(os.environ, JCM_LU_TRSM=trsm, JCM_LU_BLOCK=block)
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0 and out.stdout.split()[-1] == "ok", out.stderr[-3000:]


def test_blocked_lu_only_for_square_matrices(rng, claim_extension):
    import jax_cusolver_ms as jcm

    assert jcm.explain("lu_factor", (8, 256, 256), np.float32, strategy="blocked").strategy == \
        "blocked"
    with pytest.raises(ValueError, match="lu_factor: strategy 'blocked' cannot run a 256 x 100"):
        jcm.explain("lu_factor", (8, 256, 100), np.float32, strategy="blocked")
    # Under auto too: a table's blocked LU (measured on square matrices) is no candidate for a
    # rectangular one.
    square = jcm.explain("lu_factor", (64, 1024, 1024), np.float32, gpu="NVIDIA H100 80GB HBM3")
    tall = jcm.explain("lu_factor", (64, 1024, 700), np.float32, gpu="NVIDIA H100 80GB HBM3")
    assert square.strategy == "blocked" and tall.strategy != "blocked", (square, tall)
    a = random_matrix(rng, (4, 70, 70), np.float32, "general")
    cuda = dict(platform="cuda")
    (getrf,) = [line for line in _lowered_text(
        lambda a: jcm.lu_factor(a, strategy="blocked"), a, **cuda).splitlines()
        if "jcm_getrf" in line and "custom_call" in line]
    assert "strategy = 3 : i32" in getrf, getrf
    # A rectangular matrix is refused at trace time, naming the op.
    with pytest.raises(ValueError, match="square matrices only"):
        _lowered_text(lambda a: jcm.lu_factor(a, strategy="blocked"), a[:, :, :50], **cuda)


# ---------------------------------------------------------------------------------------------
# FFI dispatch (GPU) and its absence (CPU)
# ---------------------------------------------------------------------------------------------


def _lowered_text(fn, *args, platform=None):
    traced = jax.jit(fn).trace(*args)
    lowered = traced.lower(lowering_platforms=(platform,)) if platform else traced.lower()
    return lowered.as_text()


@requires_gpu
@strategy_param
def test_gpu_lowering_uses_ffi(rng, strategy):
    # Under auto, batches of small matrices go to JAX's own lowering (the same cuBLAS batched
    # API, tested below); with a lane count given, auto keeps to the FFI.
    kw = dict(strategy=strategy, lanes=2 if strategy == "auto" else None)
    a = random_matrix(rng, (4, 16, 16), np.float32, "general")
    b = random_rhs(rng, (4, 16, 2), np.float32)
    lu, piv = jcm.lu_factor(a)
    assert "jcm_getrf" in _lowered_text(lambda a: jcm.lu_factor(a, **kw), a)
    assert "jcm_getrf" in _lowered_text(lambda a: jcm.lu(a, **kw), a)
    assert "jcm_getrs" in _lowered_text(
        lambda lu, piv, b: jcm.lu_solve((lu, piv), b, **kw), lu, piv, b
    )
    assert "jcm_getrf" in _lowered_text(lambda a, b: jcm.solve(a, b, **kw), a, b)
    # "batched" on a rectangular matrix falls back to the looped FFI path, not to JAX's.
    rect = random_matrix(rng, (4, 16, 9), np.float32, "general")
    assert "jcm_getrf" in _lowered_text(lambda a: jcm.lu_factor(a, **kw), rect)


@requires_extension
@strategy_param
def test_cuda_lowering_uses_ffi(rng, strategy):
    # Lowered for CUDA on whatever machine this is: every strategy must reach the FFI targets.
    kw = dict(strategy=strategy, lanes=2 if strategy == "auto" else None)
    a = random_matrix(rng, (4, 16, 16), np.float64, "general")
    b = random_rhs(rng, (4, 16, 2), np.float64)
    lu, piv = jsl.lu_factor(a)
    rect = random_matrix(rng, (4, 16, 9), np.float64, "general")
    cuda = dict(platform="cuda")
    assert "jcm_getrf" in _lowered_text(lambda a: jcm.lu_factor(a, **kw), a, **cuda)
    assert "jcm_getrf" in _lowered_text(lambda a: jcm.lu_factor(a, **kw), rect, **cuda)
    assert "jcm_getrs" in _lowered_text(
        lambda lu, piv, b: jcm.lu_solve((lu, piv), b, **kw), lu, piv, b, **cuda
    )
    text = _lowered_text(lambda a, b: jcm.solve(a, b, **kw), a, b, **cuda)
    assert "jcm_getrf" in text and "jcm_getrs" in text
    text = _lowered_text(lambda a: jcm.det(a, **kw), a, **cuda)
    assert "jcm_getrf" in text
    # JAX's own cuSOLVER LU is not used next to ours.
    assert "cusolver_getrf" not in text


@requires_extension
def test_auto_without_a_table_is_jax_lowering():
    # No table for the GPU model: nothing measured around any call, so JAX's own lowering.
    for shape in [(4, 128, 128), (4, 1024, 1024), (256, 8, 8), (1, 2048, 2048)]:
        plan = jcm.explain("lu_factor", shape, np.float32, gpu="No Such GPU")
        assert (plan.strategy, plan.rule) == ("xla", "outside measured"), plan


@pytest.mark.parametrize("dtype", DTYPES, ids=param_id)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_auto_det_up_to_3_is_the_closed_form(rng, dtype, n):
    a = random_matrix(rng, (6, n, n), dtype, "general")
    a[2, 0, n - 1] = np.nan
    a[4, n - 1, 0] = np.inf
    good = [0, 1, 3, 5]
    d = np.asarray(jcm.det(jnp.asarray(a)))
    assert d.dtype == np.dtype(dtype) and d.shape == (6,)
    wide = a[good].astype(wide_dtype(dtype))
    np.testing.assert_allclose(d[good], np.linalg.det(wide),
                               rtol=rtol_for(dtype, n, condition_number(a[good])), atol=0)
    assert np.isnan(d[[2, 4]]).all()  # an Inf entry gives NaN too, not +-Inf
    # Differentiable like JAX's det (the formula's own derivative, also where a is singular).
    singular = np.ones((n, n), dtype)
    for x in (a[0], singular):
        np.testing.assert_allclose(jax.grad(lambda m: jnp.real(jcm.det(m)))(jnp.asarray(x)),
                                   jax.grad(lambda m: jnp.real(jnp.linalg.det(m)))(x),
                                   rtol=rtol_for(dtype, n, 10), atol=rtol_for(dtype, n, 10))
    # One elementwise pass: no factorization, no reduction over the matrix.
    text = lowered_text(jcm.det, (6, n, n), dtype, "cuda")
    assert "custom_call" not in text and "reduce" not in text
    plan = jcm.explain("det", (6, n, n), dtype)
    assert (plan.strategy, plan.rule) == ("xla", "closed form"), plan


def test_det_closed_form_only_under_auto_and_up_to_3(claim_extension):
    assert jcm.explain("det", (4, 4, 4), np.float32).rule != "closed form"
    assert jcm.explain("det", (4, 3, 3), np.float32, strategy="looped").rule == "user"
    assert jcm.explain("det", (4, 3, 3), np.float32, lanes=2).rule != "closed form"
    text = lowered_text(lambda a: jcm.det(a, strategy="looped"), (4, 3, 3), np.float32, "cuda")
    assert "jcm_getrf" in text


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=param_id)
def test_auto_hands_solve_and_det_to_jax_whole(claim_extension, rng, dtype):
    # Nothing measured (no table): solve runs JAX's own function inside the NaN guard, JAX's
    # numbers exactly, with no step of ours between JAX's; det JAX's LU, then the sign and the
    # log of the diagonal written out (fused with the guard): JAX's numbers up to the order of
    # a sum.
    a = random_matrix(rng, (5, 8, 8), dtype, "well_conditioned")
    b = random_rhs(rng, (5, 8, 3), dtype)
    np.testing.assert_array_equal(jcm.solve(a, b), jnp.linalg.solve(a, b))
    np.testing.assert_allclose(jcm.det(a), jnp.linalg.det(a), rtol=8 * np.finfo(dtype).eps)
    for fn, ours in [(lambda a, b: jnp.linalg.solve(a, b), lambda a, b: jcm.solve(a, b)),
                     (lambda a, b: jnp.linalg.det(a), lambda a, b: jcm.det(a))]:
        text, jax_text = (lowered_text(f, [(5, 8, 8), (5, 8, 3)], dtype, "cuda")
                          for f in (ours, fn))
        assert "jcm_" not in text
        for call in ("lu_pivots_to_permutation", "getrf"):
            assert text.count(call) == jax_text.count(call), call
    # The guard: a matrix holding NaN gives NaN, its neighbours JAX's numbers.
    a[1, 2, 3] = np.nan
    x = np.asarray(jcm.solve(a, b))
    assert np.isnan(x[1]).all() and np.isnan(np.asarray(jcm.det(a))[1])
    np.testing.assert_array_equal(np.delete(x, 1, 0), np.delete(jnp.linalg.solve(a, b), 1, 0))
    # Where ours is measured faster it runs instead (and with lanes asked for, as before).
    assert "jcm_getrf" in lowered_text(lambda a: jcm.det(a, lanes=2), (5, 8, 8), dtype, "cuda")


# ---------------------------------------------------------------------------------------------
# The small-matrix kernel (n <= 64: ffi/lu/lu_kernels.cu getrf_small_batched)
# ---------------------------------------------------------------------------------------------

def test_auto_takes_the_small_lu_kernel_up_to_64(ours_measured_faster):
    for shape in [(1, 16, 16), (16, 16), (4, 64, 64), (256, 8, 8), (3, 1, 1)]:
        plan = jcm.explain("lu_factor", shape, np.float32)
        assert (plan.strategy, plan.lanes) == ("batched", 1), plan
    # Lanes do not apply to the kernel; a rectangular matrix or n > 64 is not its.
    requested = dict(strategy="batched", lanes=4)
    assert jcm.explain("lu_factor", (8, 32, 32), np.float32, **requested).lanes == 1
    assert jcm.explain("lu_factor", (8, 65, 65), np.float32, **requested).lanes == 4
    with pytest.raises(ValueError, match="square matrices only"):
        jcm.explain("lu_factor", (4, 32, 16), np.float32, strategy="batched")
    assert not jcm.explain("lu_factor", (4, 65, 65), np.float32).runs_small_kernel


def test_the_small_lu_kernel_is_one_call_without_guard(claim_extension):
    # One launch: no non-finite-input pass, no pivot conversion, no permutation kernel.
    text = lowered_text(lambda a: jcm.lu(a, strategy="batched"), (4, 16, 16), np.float32, "cuda")
    assert "jcm_getrf_small" in text and "is_finite" not in text
    assert "lu_pivots_to_permutation" not in text and "cusolver" not in text
    text = lowered_text(lambda a: jcm.lu(a, strategy="batched"), (4, 65, 65), np.float32, "cuda")
    assert "jcm_getrf_small" not in text and "jcm_getrf" in text and "is_finite" in text
    text = lowered_text(lambda a: jcm.lu(a, strategy="looped"), (4, 16, 16), np.float32, "cuda")
    assert "jcm_getrf_small" not in text and "is_finite" in text


def test_the_small_solve_kernel_is_one_call(claim_extension, ours_measured_faster):
    def solve(a):
        return jcm.solve(a, a[..., :3], strategy="batched")

    text = lowered_text(solve, (4, 16, 16), np.float32, "cuda")
    assert "@jcm_getrf_small(" in text and "@jcm_getrs_small(" in text
    assert "@jcm_getrs(" not in text and "is_finite" not in text
    # inv (n right-hand sides) under auto takes both kernels where they measure faster.
    inv_plan = jcm.explain("inv", (4, 64, 64), np.float32, nrhs=64)
    assert inv_plan.runs_small_kernel and inv_plan.op == "getrs"
    assert not jcm.explain("solve", (4, 64, 64), np.float32, nrhs=65).runs_small_kernel
    assert not jcm.explain("solve", (4, 65, 65), np.float32, nrhs=1).runs_small_kernel


@requires_gpu
@pytest.mark.parametrize("n,nrhs,trans,dtype",
                         rotated_grid(DTYPES, [1, 2, 7, 32, 33, 64], [1, 3, 64], [0, 1, 2]))
def test_small_solve_kernel_matches_numpy(rng, dtype, n, nrhs, trans):
    a = random_matrix(rng, (3, n, n), dtype, "well_conditioned")
    b = random_rhs(rng, (3, n, nrhs), dtype)
    factors = jcm.lu_factor(jnp.asarray(a), strategy="batched")
    assert jcm.explain("lu_solve", a.shape, dtype, strategy="batched", nrhs=nrhs).runs_small_kernel
    x = np.asarray(jcm.lu_solve(factors, jnp.asarray(b), trans=trans, strategy="batched"))
    op_a = {0: a, 1: np.swapaxes(a, -1, -2), 2: np.conj(np.swapaxes(a, -1, -2))}[trans]
    wide = wide_dtype(dtype)
    ref = np.linalg.solve(op_a.astype(wide), b.astype(wide))
    assert x.dtype == dtype and x.shape == b.shape
    assert rel_err(x, ref) <= rtol_for(dtype, n, condition_number(a))


@requires_gpu
@pytest.mark.parametrize("n,dtype", rotated_grid(DTYPES, SMALL_KERNEL_N))
def test_small_lu_kernel_matches_lapack(rng, dtype, n):
    a = random_matrix(rng, (5, n, n), dtype, "general")
    assert jcm.explain("lu", a.shape, dtype, strategy="batched").runs_small_kernel
    lu, piv, perm = jcm.lu(jnp.asarray(a), strategy="batched")
    check_lu_factorization(a, lu, piv, dtype)
    np.testing.assert_array_equal(np.asarray(perm), pivots_to_permutation(piv, n))
    lu_sp, piv_sp = scipy_lu_factor(a)
    tol = rtol_for(dtype, n, condition_number(a))
    real_double = precision(dtype) == "double" and not is_complex(dtype)
    check_lu_matches(lu, piv, lu_sp, piv_sp, dtype, tol, same_pivots_required=real_double)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_small_lu_kernel_ties_singular_and_non_finite(rng, dtype):
    n = 24
    # Entries in {-1, 0, 1}: many exact ties in the pivot search; rank-deficient columns.
    ties = rng.integers(-1, 2, (3, n, n)).astype(dtype)
    ties[1, :, 5] = 0
    ties[2, 7] = ties[2, 3]
    bad = random_matrix(rng, (3, n, n), dtype, "general")
    bad[0, 2, 9] = np.nan
    bad[2, 0, 0] = np.inf
    a = np.concatenate([ties, bad])
    lu, piv, perm = (np.asarray(x) for x in jcm.lu(jnp.asarray(a), strategy="batched"))
    check_lu_factorization(a[:3], lu[:3], piv[:3], dtype)
    assert not np.any(np.isnan(lu[:3])), "a singular matrix gave NaN"
    assert np.any(np.diagonal(lu[1]) == 0)  # a zero column stays exactly zero
    # Two equal rows: a pivot at rounding level (exactly 0 only where no rounding happened).
    u2 = np.abs(np.diagonal(lu[2]))
    assert u2.min() <= 8 * n * np.finfo(dtype).eps * u2.max()
    assert np.isnan(lu[3]).all() and np.isnan(lu[5]).all()
    np.testing.assert_array_equal(piv[[3, 5]], np.broadcast_to(np.arange(n), (2, n)))
    np.testing.assert_array_equal(perm[[3, 5]], np.broadcast_to(np.arange(n), (2, n)))
    check_lu_factorization(a[4:5], lu[4:5], piv[4:5], dtype)
    d = np.asarray(jcm.det(jnp.asarray(a), strategy="batched"))
    assert np.isnan(d[[3, 5]]).all() and np.isfinite(d[[0, 4]]).all() and d[1] == 0


@requires_gpu
@pytest.mark.parametrize("n,dtype", rotated_grid(DTYPES, TINY_KERNEL_N))
def test_tiny_lu_kernel_over_blocks_ties_and_non_finite(rng, dtype, n):
    # A thread per matrix, 128 a block: special matrices at both edges of a block.
    a = random_matrix(rng, (TINY_KERNEL_BATCH, n, n), dtype, "general")
    a[7] = rng.integers(-1, 2, (n, n))  # exact ties in the pivot search
    a[127, :, 0] = 0                    # a zero pivot: LAPACK goes on
    a[299] = 0
    a[128, 0, n - 1] = np.nan
    a[255, n - 1, 0] = np.inf
    bad = np.array([128, 255])
    good = np.setdiff1d(np.arange(len(a)), bad)
    assert jcm.explain("lu", a.shape, dtype, strategy="batched").runs_small_kernel
    lu, piv, perm = (np.asarray(x) for x in jcm.lu(jnp.asarray(a), strategy="batched"))
    check_lu_factorization(a[good], lu[good], piv[good], dtype)
    np.testing.assert_array_equal(perm, pivots_to_permutation(piv, n))
    # LAPACK's pivots and factors, matrix by matrix; where the arithmetic is exact (entries in
    # {-1, 0, 1}, a zero column, zero) the pivots bit for bit.
    general = np.setdiff1d(good, [7, 127, 299])
    lu_sp, piv_sp = scipy_lu_factor(a[general])
    tol = rtol_for(dtype, n, condition_number(a[general]))
    real_double = precision(dtype) == "double" and not is_complex(dtype)
    check_lu_matches(lu[general], piv[general], lu_sp, piv_sp, dtype, tol,
                     same_pivots_required=real_double)
    exact = np.array([7, 127, 299])
    np.testing.assert_array_equal(piv[exact], scipy_lu_factor(a[exact])[1])
    assert np.isnan(lu[bad]).all()
    np.testing.assert_array_equal(piv[bad], np.broadcast_to(np.arange(n), (2, n)))
    np.testing.assert_array_equal(perm[bad], np.broadcast_to(np.arange(n), (2, n)))
    d = np.asarray(jcm.det(jnp.asarray(a), strategy="batched"))
    assert np.isnan(d[bad]).all() and np.isfinite(d[good]).all() and d[299] == 0
    np.testing.assert_allclose(d[general], np.linalg.det(a[general].astype(wide_dtype(dtype))),
                               rtol=tol, atol=0)


@requires_gpu
@pytest.mark.parametrize("n,nrhs,trans,dtype",
                         rotated_grid(DTYPES, TINY_KERNEL_N, [1, 4, 5], [0, 1, 2]))
def test_tiny_solve_kernel_over_blocks(rng, dtype, n, nrhs, trans):
    # nrhs 5: past the tiny kernel's right-hand sides, the block kernel at the same n.
    a = random_matrix(rng, (TINY_KERNEL_BATCH, n, n), dtype, "well_conditioned")
    b = random_rhs(rng, (TINY_KERNEL_BATCH, n, nrhs), dtype)
    b[128, 0, 0] = np.nan  # its own system only
    factors = jcm.lu_factor(jnp.asarray(a), strategy="batched")
    x = np.asarray(jcm.lu_solve(factors, jnp.asarray(b), trans=trans, strategy="batched"))
    op_a = op_matrix(a, trans)
    ref = np.linalg.solve(op_a.astype(wide_dtype(dtype)), b.astype(wide_dtype(dtype)))
    good = np.setdiff1d(np.arange(len(a)), [128])
    assert x.dtype == dtype and x.shape == b.shape
    assert rel_err(x[good], ref[good]) <= rtol_for(dtype, n, condition_number(a))
    assert np.isnan(x[128]).any()
    inv = np.asarray(jcm.inv(jnp.asarray(a), strategy="batched"))  # n right-hand sides
    np.testing.assert_allclose(inv @ a, np.broadcast_to(np.eye(n), a.shape),
                               atol=rtol_for(dtype, n, condition_number(a)))


@strategy_param
def test_cpu_lowering_has_no_ffi_call(rng, strategy):
    a = random_matrix(rng, (4, 16, 16), np.float64, "general")
    b = random_rhs(rng, (4, 16, 2), np.float64)
    lu, piv = jsl.lu_factor(a)
    texts = [
        _lowered_text(lambda a: jcm.lu_factor(a, strategy=strategy), a, platform="cpu"),
        _lowered_text(
            lambda lu, piv, b: jcm.lu_solve((lu, piv), b, strategy=strategy),
            lu, piv, b, platform="cpu",
        ),
        _lowered_text(lambda a, b: jcm.solve(a, b, strategy=strategy), a, b, platform="cpu"),
        _lowered_text(lambda a: jcm.det(a, strategy=strategy), a, platform="cpu"),
    ]
    for text in texts:
        assert "jcm_getrf" not in text and "jcm_getrs" not in text
    # ... and it is JAX's own LAPACK factorization instead.
    assert "getrf" in texts[0]


# ---------------------------------------------------------------------------------------------
# explain, config and environment defaults
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [(8, 8), (0, 8, 8), (1, 8, 8), (8, 8, 8), (256, 32, 32), (2, 3, 16, 16), (4, 12, 5)],
    ids=ids,
)
@pytest.mark.parametrize("op", ["getrf", "getrs", "lu_factor", "solve"])
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_explain(op, shape, dtype):
    if op in ("getrs", "solve") and shape[-1] != shape[-2]:
        pytest.skip("getrs needs a square LU")
    plan = jcm.explain(op, shape, np.dtype(dtype))
    batch = int(np.prod(shape[:-2]))
    assert plan.strategy in ("looped", "sequential", "batched", "blocked", "xla")
    assert int(plan.lanes) == plan.lanes and 1 <= plan.lanes <= max(batch, 1)
    assert isinstance(plan.reason, str) and plan.reason.strip()
    assert plan.strategy in str(plan), str(plan)


def test_explain_names_the_same_routine_publicly():
    # Public op names follow their routine: lu_factor/det -> getrf, solve/lu_solve -> getrs.
    shape, dtype = (16, 64, 64), np.dtype(np.float32)
    for public, routine in [("lu_factor", "getrf"), ("det", "getrf"), ("lu_solve", "getrs")]:
        a, b = jcm.explain(public, shape, dtype), jcm.explain(routine, shape, dtype)
        assert (a.strategy, a.lanes) == (b.strategy, b.lanes), public
    with pytest.raises(ValueError):
        jcm.explain("qr_of_a_banana", shape, dtype)


@pytest.mark.parametrize("strategy", ["looped", "sequential", "batched"])
def test_config_sets_and_restores_strategy(strategy):
    before = jcm.explain("getrf", (8, 16, 16), np.dtype(np.float32))
    with jcm.config(strategy=strategy):
        assert jcm.explain("getrf", (8, 16, 16), np.dtype(np.float32)).strategy == strategy
        if strategy == "batched":
            # "batched" is square-only; rectangular silently falls back to looped.
            assert jcm.explain("getrf", (8, 16, 9), np.dtype(np.float32)).strategy == "looped"
    after = jcm.explain("getrf", (8, 16, 16), np.dtype(np.float32))
    assert (after.strategy, after.lanes) == (before.strategy, before.lanes)


def test_config_lanes_nesting_and_exceptions():
    shape, dtype = (8, 16, 16), np.dtype(np.float64)
    before = jcm.explain("getrf", shape, dtype)
    with jcm.config(strategy="looped", lanes=3):
        assert jcm.explain("getrf", shape, dtype).lanes == 3
        assert jcm.explain("getrf", (2, 16, 16), dtype).lanes <= 2
        assert jcm.explain("getrf", (0, 16, 16), dtype).lanes >= 1
        with jcm.config(lanes=2):
            inner = jcm.explain("getrf", shape, dtype)
            assert (inner.strategy, inner.lanes) == ("looped", 2)
        assert jcm.explain("getrf", shape, dtype).lanes == 3
    with pytest.raises(RuntimeError):
        with jcm.config(strategy="sequential", lanes=5):
            raise RuntimeError("boom")
    after = jcm.explain("getrf", shape, dtype)
    assert (after.strategy, after.lanes) == (before.strategy, before.lanes)


@strategy_param
def test_config_default_is_used_by_calls(rng, strategy):
    a = random_matrix(rng, (3, 8, 8), np.complex64, "well_conditioned")
    b = random_rhs(rng, (3, 8, 1), np.complex64)
    with jcm.config(strategy=strategy, lanes=2):
        x = jcm.solve(a, b)
        lu, piv = jcm.lu_factor(a)
    check_lu_factorization(a, lu, piv, np.complex64)
    assert rel_err(x, numpy_solve(a, b, False)) <= rtol_for(np.complex64, 8, condition_number(a))


@pytest.mark.parametrize(
    "kwargs", [dict(strategy="fastest"), dict(strategy=""), dict(lanes=0), dict(lanes=-2)], ids=ids
)
def test_bad_options_raise(rng, kwargs):
    a = random_matrix(rng, (2, 4, 4), np.float32, "well_conditioned")
    with pytest.raises(ValueError):
        with jcm.config(**kwargs):
            pass
    for call in (
        lambda: jcm.lu_factor(a, **kwargs),
        lambda: jcm.lu(a, **kwargs),
        lambda: jcm.solve(a, a, **kwargs),
        lambda: jcm.lu_solve(jsl.lu_factor(a), a, **kwargs),
        lambda: jcm.inv(a, **kwargs),
        lambda: jcm.det(a, **kwargs),
        lambda: jcm.slogdet(a, **kwargs),
    ):
        with pytest.raises(ValueError):
            call()


@pytest.mark.parametrize(
    "env,expected",
    [
        ({"JAX_CUSOLVER_MS_STRATEGY": "looped", "JAX_CUSOLVER_MS_LANES": "2"}, ("looped", 2)),
        ({"JAX_CUSOLVER_MS_STRATEGY": "sequential"}, ("sequential", None)),
        ({"JAX_CUSOLVER_MS_STRATEGY": "batched", "JAX_CUSOLVER_MS_LANES": "1"}, ("batched", 1)),
    ],
    ids=["looped-2", "sequential", "batched-1"],
)
def test_environment_defaults(env, expected):
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(jcm.__file__)))
    child_env = dict(os.environ, **env)
    child_env["PYTHONPATH"] = os.pathsep.join([package_root, child_env.get("PYTHONPATH", "")])
    script = (
        "import numpy as np, jax_cusolver_ms as jcm\n"
        "p = jcm.explain('getrf', (8, 16, 16), np.dtype(np.float32))\n"
        "print(p.strategy, p.lanes)\n"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", script], env=child_env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    strategy, lanes = out.stdout.split()[-2:]
    assert strategy == expected[0]
    if expected[1] is not None:
        assert int(lanes) == expected[1]


# ---------------------------------------------------------------------------------------------
# Bad input: clear errors
# ---------------------------------------------------------------------------------------------

# name -> (call taking one matrix-like argument, words one of which the error must contain)
_ONE_ARG_CALLS = {
    # lu_factor is lu without the permutation; either name is the op.
    "lu_factor": (lambda a: jcm.lu_factor(a), ("lu_factor", "lu:", "getrf")),
    "lu": (lambda a: jcm.lu(a), ("lu", "getrf")),
    "solve": (lambda a: jcm.solve(a, np.ones(a.shape[-1:], a.dtype)), ("solve", "getrf", "getrs")),
    "lu_solve": (
        lambda a: jcm.lu_solve(
            (a, np.zeros(a.shape[:-1], np.int32)), np.ones(a.shape[-1:], a.dtype)
        ),
        ("lu_solve", "getrs"),
    ),
    "inv": (lambda a: jcm.inv(a), ("inv", "getrf", "getrs")),
    "det": (lambda a: jcm.det(a), ("det", "getrf")),
    "slogdet": (lambda a: jcm.slogdet(a), ("slogdet", "getrf")),
}


@pytest.mark.parametrize(
    "bad_dtype", [np.float16, jnp.bfloat16], ids=ids
)
@pytest.mark.parametrize("op", sorted(_ONE_ARG_CALLS))
def test_unsupported_dtype_raises_type_error(op, bad_dtype):
    call, names = _ONE_ARG_CALLS[op]
    assert_rejects_dtype(call, (np.arange(16).reshape(4, 4) % 3 + np.eye(4)).astype(bad_dtype),
                         names)


_WRONG_RANK_CALLS = {
    "lu_factor": lambda v: jcm.lu_factor(v),
    "lu": lambda v: jcm.lu(v),
    "solve": lambda v: jcm.solve(v, v),
    "lu_solve": lambda v: jcm.lu_solve((v, np.zeros(np.shape(v), np.int32)), v),
    "inv": lambda v: jcm.inv(v),
    "det": lambda v: jcm.det(v),
    "slogdet": lambda v: jcm.slogdet(v),
}


@pytest.mark.parametrize("shape", [(4,), ()], ids=ids)
@pytest.mark.parametrize("op", sorted(_WRONG_RANK_CALLS))
def test_wrong_rank_raises_value_error(rng, op, shape):
    v = random_rhs(rng, shape, np.float32)
    with pytest.raises(ValueError) as info:
        _WRONG_RANK_CALLS[op](v)
    assert str(info.value).strip()


@pytest.mark.parametrize("op", ["solve", "lu_solve", "inv", "det", "slogdet"])
@pytest.mark.parametrize("shape", [(4, 5), (3, 6, 2)], ids=ids)
def test_non_square_raises_value_error(rng, op, shape):
    call, _ = _ONE_ARG_CALLS[op]
    a = random_matrix(rng, shape, np.float64, "general")
    if op == "solve":
        call = lambda a: jcm.solve(a, np.ones(a.shape[:-1], a.dtype))
    if op == "lu_solve":
        def call(a):
            piv = np.zeros(a.shape[:-2] + (min(a.shape[-2:]),), np.int32)
            return jcm.lu_solve((a, piv), np.ones(a.shape[-2:-1], a.dtype))

    with pytest.raises(ValueError) as info:
        call(a)
    assert str(info.value).strip()
    with pytest.raises(ValueError):
        jax.jit(call)(a)


@pytest.mark.parametrize(
    "a_shape,b_shape",
    [
        ((4, 4), (5,)),
        ((4, 4), (5, 2)),
        ((3, 4, 4), (3, 5, 1)),
        ((3, 4, 4), (2, 4, 1)),
        ((4, 4), ()),
    ],
    ids=ids,
)
@pytest.mark.parametrize("op", ["solve", "lu_solve"])
def test_mismatched_b_raises_value_error(rng, op, a_shape, b_shape):
    a = random_matrix(rng, a_shape, np.float64, "well_conditioned")
    b = random_rhs(rng, b_shape, np.float64)
    if op == "solve":
        call = lambda a, b: jcm.solve(a, b)
    else:
        call = lambda a, b: jcm.lu_solve(jsl.lu_factor(a), b)
    with pytest.raises(ValueError) as info:
        call(a, b)
    assert str(info.value).strip()


@pytest.mark.parametrize(
    "lu_dtype,b_dtype",
    [(np.float32, np.float64), (np.float64, np.complex128), (np.complex64, np.float32)],
    ids=ids,
)
def test_lu_solve_mixed_dtypes_promote_like_jax(rng, lu_dtype, b_dtype):
    # As jax.scipy.linalg.lu_solve: lu and b are promoted to a common inexact dtype.
    a = random_matrix(rng, (5, 5), lu_dtype, "well_conditioned")
    factors = jcm.lu_factor(a)
    b = random_rhs(rng, (5, 2), b_dtype)
    x = jcm.lu_solve(factors, b)
    x_jax = jsl.lu_solve(jsl.lu_factor(jnp.asarray(a)), jnp.asarray(b))
    assert x.dtype == x_jax.dtype
    np.testing.assert_allclose(np.asarray(x), np.asarray(x_jax), rtol=1e-4, atol=1e-5)
