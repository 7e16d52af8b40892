"""Tests for the SVD family: svd (every algorithm and mode), svdvals, pinv, matrix_rank, lstsq,
norm and cond.

Singular vectors are unique only up to a sign (real) or a phase (complex) per singular value,
so vectors are checked through what does not depend on that choice: A = U diag(S) V^H, U^H U =
I, V V^H = I, projectors onto singular subspaces, and the singular values themselves (against
float64 NumPy and jax.numpy.linalg). On CPU every strategy and algorithm runs JAX's own SVD, so
the CPU run checks the API, shape rules and transformations; the GPU run (tests marked
requires_gpu run there too) checks the FFI paths: gesvd, gesvdj, this project's Jacobi kernel
(m, n <= 128) and the QR-first SVD of tall and wide matrices.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jax_cusolver_ms as jcm
from jax_cusolver_ms import strategy as jcm_strategy
from jax_cusolver_ms.svd import cond, lstsq, matrix_rank, norm, pinv, svd, svdvals
from conftest import (
    ALL_STRATEGIES,
    DTYPES,
    assert_rejects_dtype,
    FULL_GRID,
    conj_t,
    exported_text,
    jit_call,
    lowered_text,
    param_id,
    random_matrix,
    random_rhs,
    rel_err,
    requires_extension,
    requires_gpu,
    rtol_for,
    strategy_grid,
    wide_dtype,
    widened,
)

ids = param_id
DOUBLE_DTYPES = (np.float64, np.complex128)
TARGETS = ("jcm_gesvd", "jcm_gesvdj")
ALGORITHMS = ("default", "qr", "jacobi")
# (full_matrices, compute_uv)
MODES = {"full": (True, True), "reduced": (False, True), "values": (False, False)}

# (batch..., m, n): n = 1, one column and one row, batch 0 and 1, several batch dims, square,
# tall and wide, and above 32 the Jacobi kernel's longer columns under strategy "batched" on the
# GPU: two, three and four rows a lane, the full U completed past 32 rows, and at 128 x 128 V
# (float64, complex64) or the matrix and V (complex128) in the workspace instead of shared memory.
SVD_SHAPES = [
    (1, 1), (6, 6), (9, 4), (4, 9), (0, 3, 3), (1, 5, 5), (2, 3, 7, 5), (3, 6, 11),
    (2, 40, 33), (3, 37, 70), (2, 100, 37), (2, 128, 128), (4, 0), (2, 9, 1), (2, 1, 9),
]


def _tol(dtype, a):
    return rtol_for(dtype, max(a.shape[-2:], default=1))


def _eye_batch(batch, k):
    return np.broadcast_to(np.eye(k), tuple(batch) + (k, k))


def check_values(a, s, dtype):
    """s: real, of a's precision, descending, non-negative, and equal to float64 NumPy's
    (singular values are perfectly conditioned: |ds| <= ||dA||)."""
    assert s.dtype == np.finfo(np.dtype(dtype)).dtype, s.dtype
    assert s.shape == a.shape[:-2] + (min(a.shape[-2:]),)
    s = np.asarray(s)
    assert np.all(np.isfinite(s)), "finite input gave non-finite singular values"
    assert np.all(s >= 0) and np.all(np.diff(s, axis=-1) <= 0), "not descending / negative"
    if a.size:
        s_ref = np.linalg.svd(widened(a), compute_uv=False)
        scale = np.max(s_ref, axis=-1, keepdims=True)
        assert np.max(np.abs(s - s_ref) / np.where(scale > 0, scale, 1)) <= _tol(dtype, a)


def check_svd(a, u, s, vh, full_matrices, dtype):
    """Shapes and dtypes as jnp's, U and V unitary, U diag(S) V^H = A, S as NumPy's."""
    *batch, m, n = a.shape
    k = min(m, n)
    ku, kv = (m, n) if full_matrices else (k, k)
    assert u.shape == tuple(batch) + (m, ku) and vh.shape == tuple(batch) + (kv, n)
    assert u.dtype == vh.dtype == np.dtype(dtype)
    check_values(a, s, dtype)
    u, vh = widened(u), widened(vh)
    tol = _tol(dtype, a)
    assert rel_err(conj_t(u) @ u, _eye_batch(batch, ku)) <= tol, "U^H U != I"
    assert rel_err(vh @ conj_t(vh), _eye_batch(batch, kv)) <= tol, "V^H V != I"
    recon = (u[..., :, :k] * np.asarray(s)[..., None, :]) @ vh[..., :k, :]
    assert rel_err(recon, widened(a)) <= tol, "U S V^H != A"


# ---------------------------------------------------------------------------------------------
# svd and svdvals
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,shape,mode,strategy", strategy_grid(DTYPES, SVD_SHAPES, MODES))
def test_svd(rng, dtype, shape, mode, strategy):
    a = random_matrix(rng, shape, dtype, "general")
    full_matrices, compute_uv = MODES[mode]
    got = jit_call(svd, a, full_matrices=full_matrices, compute_uv=compute_uv,
                   strategy=strategy)
    ref = jnp.linalg.svd(jnp.asarray(a), full_matrices=full_matrices, compute_uv=compute_uv)
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
    if not compute_uv:
        check_values(a, got, dtype)
        return
    u, s, vh = got
    assert isinstance(got, tuple) and got.U is u and got.S is s and got.Vh is vh
    check_svd(a, u, s, vh, full_matrices, dtype)
    if a.size:
        assert rel_err(s, ref.S, 1) <= _tol(dtype, a), "S != jnp's"


@pytest.mark.parametrize("dtype,algorithm,strategy", strategy_grid(DTYPES, ALGORITHMS))
@pytest.mark.parametrize("shape", [(5, 12, 7), (3, 7, 12), (2, 24, 24)], ids=ids)
def test_algorithms(rng, dtype, algorithm, strategy, shape):
    a = random_matrix(rng, shape, dtype, "general")
    for full_matrices in (True, False):
        u, s, vh = jit_call(svd, a, full_matrices=full_matrices, algorithm=algorithm,
                            strategy=strategy)
        check_svd(a, u, s, vh, full_matrices, dtype)
    s = jit_call(svdvals, a, algorithm=algorithm, strategy=strategy)
    check_values(a, s, dtype)


def test_algorithm_spellings_are_jax_s(rng):
    a = random_matrix(rng, (6, 4), np.float64, "general")
    s = np.asarray(svdvals(a))
    for algorithm in (None, "default", "QR", "Jacobi", "jacobi", jax.lax.linalg.SvdAlgorithm.QR,
                      jax.lax.linalg.SvdAlgorithm.JACOBI, jax.lax.linalg.SvdAlgorithm.DEFAULT):
        assert rel_err(svdvals(a, algorithm=algorithm), s, 1) <= 1e-12, algorithm


@pytest.mark.parametrize("dtype,kind,strategy", strategy_grid(DTYPES, ["zero_column", "rank2"]))
@pytest.mark.parametrize("shape", [(3, 12, 8), (3, 8, 12), (2, 30, 30), (2, 70, 50)], ids=ids)
def test_rank_deficient(rng, dtype, kind, strategy, shape):
    *batch, m, n = shape
    if kind == "rank2":
        a = (random_rhs(rng, tuple(batch) + (m, 2), dtype)
             @ random_rhs(rng, tuple(batch) + (2, n), dtype)).astype(dtype)
        rank = 2
    else:
        a = random_matrix(rng, shape, dtype, "singular")
        rank = min(m, n) - (1 if n <= m else 0)
    for algorithm in ALGORITHMS:
        u, s, vh = svd(a, full_matrices=False, algorithm=algorithm, strategy=strategy)
        check_svd(a, u, s, vh, False, dtype)
        scale = np.asarray(s)[..., :1]
        assert np.all(np.asarray(s)[..., rank:] <= _tol(dtype, a) * scale), algorithm
        assert np.all(np.asarray(matrix_rank(a, strategy=strategy)) == rank)


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_nan_input_stays_in_its_matrix(rng, dtype, strategy, algorithm):
    a = random_matrix(rng, (3, 7, 5), dtype, "general")
    a[1, 2, 3] = np.nan
    u, s, vh = svd(a, full_matrices=False, algorithm=algorithm, strategy=strategy)
    assert np.all(np.isnan(np.asarray(s[1]))), "NaN input gave non-NaN singular values"
    for x in (u, vh):
        assert np.any(np.isnan(np.asarray(x[1]))), "NaN input gave NaN-free vectors"
    good = [0, 2]
    check_svd(a[good], np.asarray(u)[good], np.asarray(s)[good], np.asarray(vh)[good], False,
              dtype)
    values = svdvals(a, algorithm=algorithm, strategy=strategy)
    assert np.all(np.isnan(np.asarray(values[1]))) and np.all(np.isfinite(values[0::2]))


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(7, 7), (2, 9, 5), (4, 8)], ids=ids)
def test_subspaces_match_numpy(rng, dtype, shape):
    # Distinct singular values: each singular vector's projector u u^H is unique.
    a = random_matrix(rng, shape, dtype, "general")
    u, s, vh = svd(a, full_matrices=False)
    u_np, s_np, vh_np = np.linalg.svd(widened(a), full_matrices=False)
    tol = 1e-9
    assert rel_err(s, s_np, 1) <= tol
    for ours, theirs in ((widened(u), u_np), (conj_t(widened(vh)), conj_t(vh_np))):
        # (..., rows, k) -> per-column projectors (..., k, rows, rows)
        p_ours = np.einsum("...ik,...jk->...kij", ours, np.conj(ours))
        p_theirs = np.einsum("...ik,...jk->...kij", theirs, np.conj(theirs))
        assert rel_err(p_ours, p_theirs, 2) <= tol


def test_hermitian_is_jnp_s(rng):
    b = random_matrix(rng, (3, 6, 6), np.complex128, "general")
    a = b + conj_t(b)
    got = svd(a, hermitian=True)
    ref = jnp.linalg.svd(a, hermitian=True)
    for g, e in zip(got, ref):
        assert rel_err(g, e, 1 if g.ndim == 2 else 2) <= 1e-12
    assert rel_err(svd(a, compute_uv=False, hermitian=True),
                   jnp.linalg.svd(a, compute_uv=False, hermitian=True), 1) <= 1e-12
    check_svd(a, *got, True, np.complex128)


# ---------------------------------------------------------------------------------------------
# Strategies, jit and vmap
# ---------------------------------------------------------------------------------------------


# On CPU (one JAX implementation behind every strategy) each strategy meets one algorithm.
STRATEGY_ALGORITHM_PAIRS = (
    [(s, alg) for s in ALL_STRATEGIES for alg in ALGORITHMS] if FULL_GRID
    else [(s, ALGORITHMS[i % len(ALGORITHMS)]) for i, s in enumerate(ALL_STRATEGIES)])


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(6, 10, 7), (6, 7, 10), (5, 40, 36)], ids=ids)
def test_strategies_agree(rng, dtype, shape):
    # Every strategy x algorithm gives the same singular values and the same reconstruction;
    # the vectors may differ in sign / phase, so they are compared through U S V^H.
    a = random_matrix(rng, shape, dtype, "general")
    tol = _tol(dtype, a)
    s_ref = svdvals(a, strategy="sequential")
    routines = {alg: jcm.strategy.svd_routine(alg, *shape[-2:]) for alg in ALGORITHMS}
    for strategy, algorithm in STRATEGY_ALGORITHM_PAIRS:
        if strategy not in jcm.strategy.feasible(routines[algorithm], *shape[-2:]) + ("auto",):
            continue  # refused for this shape: test_strategy.py checks the refusal
        kw = dict(strategy=strategy, algorithm=algorithm)
        u, s, vh = jit_call(svd, a, full_matrices=False, **kw)
        assert rel_err(s, s_ref, 1) <= tol, kw
        assert rel_err(jit_call(svdvals, a, **kw), s_ref, 1) <= tol, kw
        check_svd(a, u, s, vh, False, dtype)
    with jcm.config(strategy="looped", lanes=2):
        assert rel_err(svdvals(a), s_ref, 1) <= tol


def test_jit(rng):
    a = random_matrix(rng, (2, 8, 5), np.complex64, "general")
    jitted = jax.jit(svd, static_argnames=("full_matrices", "compute_uv", "algorithm",
                                           "strategy", "lanes"))
    for full_matrices in (True, False):
        u, s, vh = jitted(a, full_matrices, algorithm="qr")
        check_svd(a, u, s, vh, full_matrices, np.complex64)
    assert rel_err(jitted(a, compute_uv=False), svdvals(a), 1) <= rtol_for(np.complex64, 8)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_vmap(rng, axis):
    a = random_matrix(rng, (3, 4, 7, 5), np.float64, "general")  # vmapped 3, batch 4, 7 x 5
    x = np.moveaxis(a, 0, axis)  # the vmapped axis anywhere, the last one included
    s = jax.vmap(svdvals, in_axes=axis)(x)
    assert rel_err(s, svdvals(a), 1) <= 1e-12
    u, s, vh = jax.vmap(lambda m: svd(m, full_matrices=False), in_axes=axis)(x)
    check_svd(a, u, s, vh, False, np.float64)


def test_vmap_nested(rng):
    a = random_matrix(rng, (2, 3, 6, 4), np.complex128, "general")
    u, s, vh = jax.vmap(jax.vmap(lambda m: svd(m, algorithm="qr")))(a)
    check_svd(a, u, s, vh, True, np.complex128)
    g = jax.vmap(jax.vmap(svdvals, in_axes=1), in_axes=0)(a.swapaxes(1, 2))
    assert rel_err(g, svdvals(a), 1) <= 1e-12
    ranks = jax.vmap(jax.vmap(matrix_rank))(a)
    assert np.all(np.asarray(ranks) == 4)


# ---------------------------------------------------------------------------------------------
# Derivatives
# ---------------------------------------------------------------------------------------------


def well_separated(rng, shape, dtype):
    """U diag(s) V^H with singular values 1, 2, ..., k (times 1.5): gaps far above the finite
    differences' step."""
    *batch, m, n = shape
    k = min(m, n)
    u, _ = np.linalg.qr(random_rhs(rng, tuple(batch) + (m, m), wide_dtype(dtype)))
    v, _ = np.linalg.qr(random_rhs(rng, tuple(batch) + (n, n), wide_dtype(dtype)))
    s = 1.5 * np.arange(k, 0, -1, dtype=np.float64)
    return ((u[..., :, :k] * s) @ conj_t(v[..., :, :k])).astype(dtype)


def _gauge_invariant(svd_fn):
    """Outputs of the SVD that do not depend on the vectors' signs / phases: S, U f(S) V^H and
    the projectors onto the leading two left and right singular subspaces."""

    def f(a):
        u, s, vh = svd_fn(a)
        weighted = jnp.matmul(u * jnp.sqrt(s + 1).astype(u.dtype)[..., None, :], vh)
        left = jnp.matmul(u[..., :, :2], jnp.conj(jnp.swapaxes(u[..., :, :2], -1, -2)))
        right = jnp.matmul(jnp.conj(jnp.swapaxes(vh[..., :2, :], -1, -2)), vh[..., :2, :])
        return s, weighted, left, right

    return f


# (shape, algorithm): square, tall, wide and batched, each algorithm met.
GRAD_CASES = [((5, 5), "default"), ((6, 4), "qr"), ((4, 6), "default"), ((2, 4, 4), "qr"),
              ((3, 5, 3), "jacobi"), ((4, 6), "qr")]


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES, ids=ids)
@pytest.mark.parametrize("shape,algorithm", GRAD_CASES, ids=ids)
def test_svd_check_grads(rng, dtype, shape, algorithm):
    a = well_separated(rng, shape, dtype)
    f = jax.jit(_gauge_invariant(lambda a: svd(a, full_matrices=False, algorithm=algorithm)))
    check_grads(f, (a,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)
    g = jax.jit(lambda a: svdvals(a, algorithm=algorithm))
    check_grads(g, (a,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("shape", [(5, 5), (6, 4)], ids=ids)
def test_svdvals_second_order(rng, shape):
    a = well_separated(rng, shape, np.float64)
    check_grads(jax.jit(svdvals), (a,), order=2, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (4, 6)], ids=ids)
def test_jvp_matches_jax(rng, dtype, shape):
    a = well_separated(rng, shape, dtype)
    t = random_rhs(rng, shape, dtype)
    full = shape[0] == shape[1]  # full_matrices=True is differentiable for square matrices only
    pairs = [
        (_gauge_invariant(lambda a: svd(a, full)),
         _gauge_invariant(lambda a: jnp.linalg.svd(a, full))),
        (svdvals, jnp.linalg.svdvals),
    ]
    if not jcm.gpu_available():
        # On CPU both run the same LAPACK SVD: even the raw vectors' tangents agree.
        pairs.append((lambda a: svd(a, False), lambda a: jnp.linalg.svd(a, False)))
    for ours, theirs in pairs:
        jvp = lambda f: jax.jit(lambda a, t: jax.jvp(f, (a,), (t,))[1])(a, t)
        got, ref = jvp(ours), jvp(theirs)
        for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
            assert rel_err(g, e, min(g.ndim, 2)) <= 1e-9
    grad = jax.grad(lambda a: jnp.sum(svdvals(a) ** 3))(a)
    grad_ref = jax.grad(lambda a: jnp.sum(jnp.linalg.svdvals(a) ** 3))(a)
    assert rel_err(grad, grad_ref) <= 1e-9


def test_full_matrices_jvp_not_implemented_like_jax(rng):
    a = well_separated(rng, (5, 3), np.float64)
    with pytest.raises(NotImplementedError, match="full_matrices"):
        jax.jvp(lambda a: svd(a), (a,), (a,))
    jax.jvp(lambda a: svd(a, compute_uv=False), (a,), (a,))  # values only: fine


# ---------------------------------------------------------------------------------------------
# pinv, matrix_rank, lstsq, norm, cond
# ---------------------------------------------------------------------------------------------

DERIVED_SHAPES = [(1, 1), (6, 6), (9, 4), (4, 9), (2, 3, 5, 7), (0, 4, 4)]


@pytest.mark.parametrize("dtype,shape,strategy", strategy_grid(DTYPES, DERIVED_SHAPES))
def test_pinv(rng, dtype, shape, strategy):
    a = random_matrix(rng, shape, dtype, "general")
    p = jit_call(pinv, a, strategy=strategy)
    ref = jnp.linalg.pinv(a)
    assert p.shape == ref.shape and p.dtype == ref.dtype
    tol = rtol_for(dtype, max(shape[-2:]), 100)
    assert rel_err(p, np.linalg.pinv(widened(a))) <= tol
    assert rel_err(p, ref) <= tol
    if a.size:  # Penrose: A P A = A
        assert rel_err(widened(a) @ widened(p) @ widened(a), widened(a)) <= tol


def test_pinv_cuts_small_singular_values(rng):
    a = random_matrix(rng, (2, 8, 8), np.float64, "singular")  # one zero singular value
    for kw in ({}, dict(rtol=1e-3), dict(rcond=np.array([1e-3, 0.5])), dict(hermitian=False)):
        assert rel_err(pinv(a, **kw), jnp.linalg.pinv(a, **kw)) <= 1e-9, kw
    b = a @ conj_t(a)
    assert rel_err(pinv(b, hermitian=True), jnp.linalg.pinv(b, hermitian=True)) <= 1e-9
    with pytest.raises(ValueError, match="rtol"):
        pinv(a, rtol=1e-3, rcond=1e-3)


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (4, 6)], ids=ids)
def test_pinv_check_grads(rng, dtype, shape):
    a = well_separated(rng, shape, dtype)
    check_grads(jax.jit(pinv), (a,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)
    t = random_rhs(rng, shape, dtype)
    got = jax.jvp(pinv, (a,), (t,))[1]
    assert rel_err(got, jax.jvp(jnp.linalg.pinv, (a,), (t,))[1]) <= 1e-9


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_matrix_rank(rng, dtype, strategy):
    shape = (4, 10, 7)
    a = random_matrix(rng, shape, dtype, "general")
    a[1] = (random_rhs(rng, (10, 3), dtype) @ random_rhs(rng, (3, 7), dtype)).astype(dtype)
    a[2] = 0
    expected = np.array([7, 3, 0, 7])
    got = matrix_rank(a, strategy=strategy)
    assert np.all(np.asarray(got) == expected)
    assert np.all(np.asarray(jnp.linalg.matrix_rank(a)) == expected)
    # As jnp, a given rtol is compared with the singular values as they are (not scaled).
    s = np.linalg.svd(widened(a), compute_uv=False)
    for kw in (dict(rtol=np.median(s)), dict(tol=np.array([1.0, 2.0, 0.5, 3.0]))):
        threshold = next(iter(kw.values()))
        expected = np.sum(s > np.asarray(threshold)[..., None], axis=-1)
        assert np.all(np.asarray(matrix_rank(a, strategy=strategy, **kw)) == expected), kw
        with jax.numpy_rank_promotion("allow"):  # JAX's broadcasts a scalar rtol implicitly
            assert np.all(np.asarray(jnp.linalg.matrix_rank(a, **kw)) == expected), kw
    assert int(matrix_rank(np.zeros(3))) == 0 and int(matrix_rank(np.ones(3))) == 1
    with pytest.raises(ValueError, match="tol"):
        matrix_rank(a, rtol=1e-3, tol=1e-3)


LSTSQ_CASES = [((9, 4), (9,)), ((9, 4), (9, 3)), ((4, 9), (4, 2)), ((6, 6), (6,)), ((1, 1), (1,))]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("case", LSTSQ_CASES, ids=ids)
def test_lstsq(rng, dtype, case):
    a_shape, b_shape = case
    a = random_matrix(rng, a_shape, dtype, "general")
    b = random_rhs(rng, b_shape, dtype)
    x, resid, rank, s = jit_call(lstsq, a, b)
    ref = jnp.linalg.lstsq(a, b)
    for g, e in zip((x, resid, rank, s), ref):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
    x_np, _, rank_np, s_np = np.linalg.lstsq(widened(a), widened(b), rcond=None)
    tol = rtol_for(dtype, max(a_shape), 100)
    assert rel_err(x, x_np, 1) <= tol and int(rank) == rank_np
    assert rel_err(s, s_np, 1) <= tol
    # Residuals may be ~0 (wide a): compare them on the scale of ||b||^2.
    assert np.max(np.abs(np.asarray(resid) - np.asarray(ref[1]))) <= tol * np.sum(np.abs(b) ** 2)


def test_lstsq_rank_deficient_and_numpy_resid(rng):
    a = random_matrix(rng, (8, 5), np.float64, "singular")
    b = random_rhs(rng, (8, 2), np.float64)
    for kw in ({}, dict(rcond=1e-2), dict(numpy_resid=True), dict(rcond=-1)):
        for g, e in zip(lstsq(a, b, **kw), jnp.linalg.lstsq(a, b, **kw)):
            assert g.shape == e.shape and rel_err(np.atleast_1d(g), np.atleast_1d(e), 1) <= 1e-9
    x, resid, rank, s = lstsq(np.zeros((3, 0)), np.ones(3))
    assert x.shape == (0,) and int(rank) == 0 and s.shape == (0,)


# (a's shape, b's shape): batches of tall, wide and square matrices, vectors and matrices of
# right-hand sides, broadcasting batch dims, an oblong 16:1, batch 0 and 1.
BATCHED_LSTSQ_CASES = [((3, 9, 4), (3, 9)), ((3, 9, 4), (3, 9, 2)), ((2, 4, 9), (2, 4, 3)),
                       ((2, 2, 6, 6), (2, 2, 6)), ((1, 48, 3), (5, 48, 2)), ((4, 5, 5), (5,)),
                       ((0, 7, 3), (0, 7)), ((1, 3, 12), (1, 3))]


def _rank_deficient_lstsq_inputs(rng, a_shape, b_shape, dtype):
    """a with, where the batch has two matrices or more, the second of rank min(m, n) - 1
    (a column repeated, or a row for a wide a) and the last ill-conditioned (cond ~ 1e4)."""
    a = random_matrix(rng, a_shape, dtype, "general")
    b = random_rhs(rng, b_shape, dtype)
    flat = a.reshape((-1,) + a_shape[-2:])
    m, n = a_shape[-2:]
    if flat.shape[0] >= 2 and min(m, n) >= 2:
        if m >= n:
            flat[1, :, -1] = flat[1, :, 0]
        else:
            flat[1, -1, :] = flat[1, 0, :]
    if flat.shape[0] >= 3:
        u, _, vh = np.linalg.svd(widened(flat[-1]), full_matrices=False)
        flat[-1] = ((u * np.logspace(0, -4, min(m, n))) @ vh).astype(dtype)
    return flat.reshape(a_shape), b


def _numpy_lstsq(a, b, vector):
    """NumPy's lstsq in float64 matrix by matrix over the broadcast batch: x, rank, s."""
    m, n = a.shape[-2:]
    b = widened(b)[..., None] if vector else widened(b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(widened(a), batch + (m, n))
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = [np.linalg.lstsq(a[i], b[i], rcond=None) for i in np.ndindex(batch)]
    x = np.stack([o[0] for o in out]) if out else np.zeros((0, n, b.shape[-1]))
    rank = np.array([o[2] for o in out], dtype=int)
    s = np.stack([o[3] for o in out]) if out else np.zeros((0, min(m, n)))
    x, rank, s = (v.reshape(batch + v.shape[1:]) for v in (x, rank, s))
    return (x[..., 0] if vector else x), rank, s


def _residuals(a, b, x, vector):
    """||b - a x||^2 per right-hand side (vectors: one), in float64."""
    if vector:
        b, x = b[..., None], x[..., None]
    return np.sum(np.abs(widened(b) - widened(a) @ widened(x)) ** 2, axis=-2)


@pytest.mark.parametrize("method", ["svd", "qr", "auto"])
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("case", BATCHED_LSTSQ_CASES, ids=ids)
def test_batched_lstsq(rng, dtype, case, method):
    """Every matrix's minimum-norm solution, rank and singular values, as NumPy's one by one;
    "qr" on full-rank matrices only (on a rank-deficient one it is not the minimum norm)."""
    a_shape, b_shape = case
    a, b = (_rank_deficient_lstsq_inputs(rng, a_shape, b_shape, dtype) if method != "qr" else
            (random_matrix(rng, a_shape, dtype, "general"), random_rhs(rng, b_shape, dtype)))
    vector = len(b_shape) in (1, len(a_shape) - 1)
    x, resid, rank, s = jit_call(functools.partial(lstsq, method=method), a, b)
    x_np, rank_np, s_np = _numpy_lstsq(a, b, vector)
    assert x.shape == x_np.shape and x.dtype == np.dtype(dtype)
    assert s.shape == s_np.shape and s.dtype == np.finfo(np.dtype(dtype)).dtype
    np.testing.assert_array_equal(np.asarray(rank), rank_np)
    tol = rtol_for(dtype, max(a_shape[-2:]), 1e4)
    assert rel_err(s, s_np, 1) <= tol
    expected = _residuals(a, b, x_np, vector)
    assert resid.shape == expected.shape
    if x.size:
        assert rel_err(x, x_np, 1) <= tol
        scale = max(1.0, float(np.max(_residuals(a, b, 0 * x_np, vector))))
        assert np.max(np.abs(np.asarray(resid) - expected)) <= tol * scale


@pytest.mark.parametrize("shape", [(2, 12, 4), (2, 4, 12), (2, 6, 6)], ids=ids)
def test_batched_lstsq_grads_are_jax_s(rng, shape):
    a = random_matrix(rng, shape, np.float64, "general")
    b = random_rhs(rng, shape[:-1], np.float64)

    def loss(lstsq_fn):
        return lambda a, b: jnp.sum(jnp.sin(lstsq_fn(a, b)))

    theirs = jax.grad(loss(lambda a, b: jax.vmap(lambda a, b: jnp.linalg.lstsq(a, b)[0])(a, b)),
                      (0, 1))(a, b)
    oblong = max(shape[-2:]) >= 2 * min(shape[-2:])  # where the QR-first SVD can run
    for method, strategy in (("svd", None), ("qr", None), ("auto", None),
                             ("svd", "blocked" if oblong else None)):
        ours = jax.jit(jax.grad(loss(lambda a, b: lstsq(a, b, method=method,
                                                        strategy=strategy)[0]), (0, 1)))(a, b)
        for g, r in zip(ours, theirs):
            assert rel_err(g, r) <= 1e-9, (method, strategy)


def test_batched_lstsq_auto_falls_back_only_where_rank_is_short(rng):
    """"auto" is "qr" where every matrix has full rank, else the minimum-norm solution for all
    (also under vmap, where the choice is per call of the vmapped function)."""
    a = random_matrix(rng, (3, 10, 4), np.float64, "general")
    b = random_rhs(rng, (3, 10), np.float64)
    full = [np.asarray(x) for x in lstsq(a, b, method="auto")]
    for g, e in zip(full, lstsq(a, b, method="qr")):
        np.testing.assert_array_equal(g, np.asarray(e))
    a[1, :, 3] = a[1, :, 2]
    x = np.asarray(lstsq(a, b, method="auto")[0])
    assert rel_err(x, _numpy_lstsq(a, b, True)[0], 1) <= 1e-9
    assert not np.all(np.isfinite(np.asarray(lstsq(a, b, method="qr")[0][1]))) or \
        rel_err(np.asarray(lstsq(a, b, method="qr")[0][1]), x[1], 1) > 1e-6
    vmapped = jax.vmap(lambda a, b: lstsq(a, b, method="auto")[0])(a, b)
    assert rel_err(vmapped, x, 1) <= 1e-9


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=ids)
def test_full_rank_is_shown_only_where_the_singular_values_keep_all(rng, dtype):
    """lstsq "auto"'s test of full rank without the SVD: sound (where it says so, every
    singular value is above rcond times the largest) over condition numbers from 1 to beyond
    1 / rcond, on tiny and huge scales; never for a singular, NaN or Inf R."""
    from jax_cusolver_ms.svd import _full_rank_shown
    n, count = 6, 40
    rcond = float(np.finfo(dtype).eps) * 40
    u = np.linalg.qr(random_matrix(rng, (count, n, n), dtype))[0]
    v = np.linalg.qr(random_matrix(rng, (count, n, n), dtype))[0]
    conds = np.logspace(0, np.log10(10 / rcond), count)
    s = np.stack([np.logspace(0, -np.log10(c), n) for c in conds])
    r = np.linalg.qr((u * s[:, None, :].astype(dtype)) @ v.conj().swapaxes(-1, -2))[1]
    shown = np.asarray(_full_rank_shown(r, rcond))
    s_r = np.linalg.svd(r.astype(np.complex128), compute_uv=False)
    all_kept = np.all(s_r >= rcond * s_r[:, :1], axis=-1)
    assert not np.any(shown & ~all_kept)
    assert shown[conds < 1 / (2 * n * rcond)].all() and not shown[conds > 1 / rcond].any()
    for scale in (1e-30, 1e30):
        assert np.asarray(_full_rank_shown(r[:4] * dtype(scale), rcond)).all()
    bad = np.array(r[:3])
    bad[0, -1, -1] = 0
    bad[1, 0, 1] = np.nan
    bad[2, 2, 2] = np.inf
    assert not np.asarray(_full_rank_shown(bad, rcond)).any()


def test_lstsq_auto_keeping_x_alone_runs_no_svd_but_the_fallback(rng):
    """lstsq(method="auto")'s choice of the QR solution needs no singular values: where the
    caller keeps x alone, XLA drops them, and the one SVD left is the fallback's."""
    import re
    a = random_matrix(rng, (3, 10, 4), np.float64, "general")
    b = random_rhs(rng, (3, 10, 2), np.float64)

    def svd_calls(fn):
        text = jax.jit(fn).lower(a, b).compile().as_text()
        return sum(bool(re.search("gesvd|gesdd", t))
                   for t in re.findall(r'custom_call_target="([^"]+)"', text))

    whole = svd_calls(lambda a, b: lstsq(a, b, method="auto"))
    alone = svd_calls(lambda a, b: lstsq(a, b, method="auto")[0])
    assert alone == whole - 1 >= 1


@pytest.mark.parametrize("kw", [dict(method="qr"), dict(method="auto"),
                                dict(method="svd", strategy="blocked")], ids=ids)
def test_tall_lstsq_by_qr_applies_q_without_forming_it(rng, kw):
    """A tall a's QR path, and the SVD where it runs QR first, take Q^H b from the R of [a b]:
    no orgqr in the primal (forming Q of 64 x 1024 x 64 matrices cost more than their QR)."""
    a = random_matrix(rng, (3, 40, 6), np.float64, "general")
    b = random_rhs(rng, (3, 40, 2), np.float64)
    jaxpr = str(jax.make_jaxpr(functools.partial(lstsq, **kw))(a, b))
    assert "jcm_geqrf" in jaxpr and "jcm_orgqr" not in jaxpr
    if kw["method"] != "svd":
        wide = str(jax.make_jaxpr(functools.partial(lstsq, **kw))(np.swapaxes(a, -1, -2),
                                                                   b[:, :6]))
        assert "jcm_orgqr" in wide  # x = Q R^-H b: a wide a's Q is applied as a matrix


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("case", [c for c in BATCHED_LSTSQ_CASES if c[0][-2] >= 2 * c[0][-1]],
                         ids=ids)
def test_batched_lstsq_svd_qr_first(rng, dtype, case):
    """method="svd" where the SVD runs QR first: x = V S^+ U_R^H Q^H b, the minimum-norm
    solution of rank-deficient and ill-conditioned matrices as NumPy's (grads: above)."""
    a_shape, b_shape = case
    a, b = _rank_deficient_lstsq_inputs(rng, a_shape, b_shape, dtype)
    vector = len(b_shape) in (1, len(a_shape) - 1)
    x, resid, rank, s = jit_call(functools.partial(lstsq, strategy="blocked"), a, b)
    x_np, rank_np, s_np = _numpy_lstsq(a, b, vector)
    np.testing.assert_array_equal(np.asarray(rank), rank_np)
    tol = rtol_for(dtype, max(a_shape[-2:]), 1e4)
    assert rel_err(s, s_np, 1) <= tol
    if x.size:
        assert x.shape == x_np.shape and rel_err(x, x_np, 1) <= tol
        np.testing.assert_allclose(np.asarray(resid), _residuals(a, b, x, vector),
                                   rtol=tol, atol=tol * float(np.max(np.abs(widened(b))) ** 2))


@pytest.mark.parametrize("strategy", ["batched", "looped"])
def test_lstsq_takes_a_strategy_as_svd_does(rng, strategy):
    """A strategy asked of lstsq's SVD runs, or fails, as svd's own (batched cannot run a
    200 x 40 SVD on the GPU; on the CPU JAX's SVD runs): lstsq's own look at the strategy,
    for the QR-first path, neither adds an error nor hides one."""
    a = random_matrix(rng, (3, 200, 40), np.float64, "general")
    b = random_rhs(rng, (3, 200), np.float64)
    try:
        jax.block_until_ready(svd(a, strategy=strategy))
    except Exception as exc:  # noqa: BLE001  (whatever svd raises, lstsq raises the same)
        with pytest.raises(type(exc)):
            jax.block_until_ready(lstsq(a, b, strategy=strategy))
        return
    try:
        x = lstsq(a, b, strategy=strategy)[0]
    except ValueError as exc:  # (not left to conftest, which skips a shape a strategy refuses)
        pytest.fail(f"lstsq refused a strategy svd ran: {exc}")
    assert rel_err(x, _numpy_lstsq(a, b, True)[0], 1) <= 1e-9


def test_batched_lstsq_bad_arguments_raise():
    a, b = np.ones((2, 5, 3)), np.ones((2, 5))
    with pytest.raises(ValueError, match="lstsq: method"):
        lstsq(a, b, method="normal_equations")
    with pytest.raises(ValueError, match="lstsq: numpy_resid"):
        lstsq(a, b, numpy_resid=True)
    with pytest.raises(TypeError, match="lstsq: b of shape"):
        lstsq(a, np.ones((2, 5, 1, 1)))
    with pytest.raises(TypeError, match="lstsq"):
        lstsq(np.ones(5), np.ones(5))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("ord", [2, -2, "nuc", None, "fro", 1, np.inf], ids=ids)
@pytest.mark.parametrize("axis,keepdims", [((-2, -1), False), ((0, 2), True), (None, False)],
                         ids=ids)
def test_norm(rng, dtype, ord, axis, keepdims):
    x = random_rhs(rng, (3, 5, 4), dtype)
    if axis is None and ord is not None:
        x = x[0]  # a matrix norm over all axes needs a matrix
    got = norm(x, ord, axis, keepdims)
    ref = jnp.linalg.norm(x, ord, axis, keepdims)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert rel_err(np.atleast_1d(got), np.atleast_1d(ref), 1) <= rtol_for(dtype, 5)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("p", [None, 2, -2, 1, "fro", -np.inf], ids=ids)
def test_cond(rng, dtype, p):
    x = random_matrix(rng, (3, 5, 5), dtype, "ill_conditioned")
    got, ref = cond(x, p), jnp.linalg.cond(x, p)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert rel_err(got, np.linalg.cond(widened(x), p), 0) <= 0.05  # forward error ~ cond * eps
    singular = np.zeros((2, 4, 4), dtype)
    singular[1] = np.eye(4)
    # NumPy's convention (jax 0.11's too; jax 0.10 gave NaN for p = None / 2): a singular x
    # without NaN has cond inf, never NaN.
    with np.errstate(all="ignore"):
        ref = np.linalg.cond(singular, p)
    got = np.asarray(cond(singular, p))
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(np.isinf(got),
                                                                            np.isinf(ref))
    assert np.isinf(got[0]) and got[1] == pytest.approx(ref[1])
    if p in (2, None):  # rectangular works for the SVD norms
        r = random_matrix(rng, (6, 4), dtype, "general")
        assert rel_err(cond(r, p), np.linalg.cond(widened(r), p), 0) <= rtol_for(dtype, 6, 100)


def test_derived_ops_take_strategy_and_agree(rng):
    a = random_matrix(rng, (6, 9, 7), np.complex64, "general")
    tol = rtol_for(np.complex64, 9, 100)
    for strategy in ALL_STRATEGIES:
        kw = dict(strategy=strategy, lanes=3)
        assert rel_err(pinv(a, **kw), jnp.linalg.pinv(a)) <= tol
        assert rel_err(norm(a, 2, (-2, -1), **kw), jnp.linalg.norm(a, 2, (-2, -1)), 0) <= tol
        assert rel_err(cond(a, **kw), jnp.linalg.cond(a), 0) <= tol
        assert np.all(np.asarray(matrix_rank(a, **kw)) == 7)
        x, *_ = lstsq(a[0], a[0, :, 0], **kw)
        assert rel_err(x, np.eye(7)[0], 1) <= tol


# ---------------------------------------------------------------------------------------------
# Lowering: the FFI targets on CUDA, none on CPU; what auto picks
# ---------------------------------------------------------------------------------------------


def _svd_family_calls(strategy):
    kw = dict(strategy=strategy)
    return {
        "svd": (lambda a: svd(a, **kw), [(4, 9, 5)], {"jcm_gesvdj"}),
        "svd reduced wide": (lambda a: svd(a, False, **kw), [(4, 5, 40)], {"jcm_gesvdj"}),
        "svd qr tall": (lambda a: svd(a, algorithm="qr", **kw), [(4, 9, 5)], {"jcm_gesvd"}),
        "svd qr wide": (lambda a: svd(a, False, algorithm="qr", **kw), [(3, 5, 9)],
                        {"jcm_gesvd"}),
        "svd large": (lambda a: svd(a, False, **kw), [(2, 1100, 3)], {"jcm_gesvd"}),
        "svdvals": (lambda a: svdvals(a, **kw), [(9, 5)], {"jcm_gesvdj"}),
        "svdvals qr": (lambda a: svdvals(a, algorithm="qr", **kw), [(4, 5, 9)], {"jcm_gesvd"}),
        "pinv": (lambda a: pinv(a, **kw), [(4, 9, 5)], {"jcm_gesvdj"}),
        "norm": (lambda a: norm(a, 2, (-2, -1), **kw), [(4, 9, 5)], {"jcm_gesvdj"}),
        "grad svdvals": (jax.grad(lambda a: jnp.sum(svdvals(a, **kw))), [(4, 9, 5)],
                         {"jcm_gesvdj"}),
    }


def _exported_text(fn, shapes, dtype, platform):
    return exported_text(fn, shapes, dtype, platform, TARGETS)


@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=ids)
def test_cuda_lowering_uses_ffi(claim_extension, ours_measured_faster, strategy, dtype):
    for name, (fn, shapes, expected) in _svd_family_calls(strategy).items():
        text = _exported_text(fn, shapes, dtype, "cuda")
        for target in TARGETS:
            assert (f"@{target}(" in text) == (target in expected), (name, target)
        # JAX's own SVD is not used next to ours, and is what runs where ours does not.
        assert ("cusolver_gesvd" in text) == (not expected), name


def test_cuda_lowering_layouts_and_attributes(claim_extension, ours_measured_faster):
    # A wide matrix reaches gesvd row-major (A^T column-major) with transposed = 1; a tall one
    # column-major.
    wide = _exported_text(lambda a: svd(a, algorithm="qr"), [(3, 5, 9)], np.float32, "cuda")
    assert "transposed = 1" in wide and "dense<[2, 1, 0]>" in wide
    tall = _exported_text(lambda a: svd(a, algorithm="qr"), [(3, 9, 5)], np.float32, "cuda")
    assert "transposed = 0" in tall and "dense<[1, 2, 0]>" in tall
    # The Jacobi kernel (batched) has an economy mode, as gesvdj on the lanes.
    batched = _exported_text(lambda a: svd(a, False, strategy="batched"), [(8, 9, 5)],
                             np.float32, "cuda")
    assert "econ = 1" in batched and "strategy = 2" in batched
    looped = _exported_text(lambda a: svd(a, False, strategy="looped"), [(8, 9, 5)],
                            np.float32, "cuda")
    assert "econ = 1" in looped and "strategy = 0" in looped
    values = _exported_text(lambda a: svdvals(a), [(8, 9, 5)], np.float32, "cuda")
    assert "compute_uv = 0" in values


def test_auto_takes_the_svd_kernel_up_to_its_limit(ours_measured_faster):
    for shape in [(1, 16, 16), (4, 32, 32), (256, 8, 8), (3, 1, 1), (4, 9, 30), (4, 128, 70)]:
        plan = jcm.explain("svd", shape, np.float32)
        assert (plan.op, plan.strategy, plan.lanes) == ("gesvdj", "batched", 1), plan
    assert not jcm.explain("svd", (4, 129, 70), np.float32).runs_small_kernel


def test_the_svd_kernel_runs_without_the_guard(claim_extension):
    # The kernel writes NaN itself: no is_finite pass and no mask around its call (square up to
    # 32, where the tables measure it; a non-square matrix keeps the guard).
    text = lowered_text(lambda a: svd(a, strategy="batched"), [(4, 16, 16)], np.float32, "cuda")
    assert "jcm_gesvdj" in text and "is_finite" not in text
    text = lowered_text(lambda a: svd(a, strategy="looped"), [(4, 16, 16)], np.float32, "cuda")
    assert "jcm_gesvdj" in text and "is_finite" in text


# (batch, m, n): square, tall and wide at a lane per row's limit (32) and at the kernel's (128,
# four rows a lane; at 128 x 128 V, or for complex128 the matrix too, in the workspace), odd and
# tiny sizes; square up to 4 x 4 is the tiny kernel's (a thread per matrix, 128 a block: 300
# fill three blocks). 1200 matrices of up to 32 rows and 15 columns or more are more than an H100
# or H200 (132 SMs) runs at once in blocks of a warp per pair of columns (up to 8 blocks a SM):
# a team of 16 lanes a matrix takes them, square, tall and wide, an even and an odd column count
# (a zero column added).
KERNEL_SHAPES = [(300, 32, 32), (300, 32, 7), (300, 5, 32), (50, 31, 31), (50, 1, 1), (50, 2, 3),
                 (50, 17, 16), (300, 2, 2), (300, 3, 3), (300, 4, 4), (20, 65, 65),
                 (20, 128, 41), (20, 41, 128), (8, 128, 128), (1200, 32, 32), (1200, 32, 17),
                 (1200, 16, 29), (1200, 21, 21)]


def _kernel_inputs(rng, shape, dtype):
    """Random matrices, and among them: zero, rank one, graded (column scales 1 .. 1e-6),
    unitary (all singular values 1), one holding NaN and one holding Inf (the last two)."""
    count, m, n = shape
    a = random_matrix(rng, shape, dtype, "general")
    a[0] = 0
    a[1] = random_rhs(rng, (m, 1), dtype) @ random_rhs(rng, (1, n), dtype)
    a[2] = a[2] * np.logspace(0, -6, n)[None, :].astype(a.real.dtype)
    if m == n:
        a[3] = np.linalg.qr(widened(random_matrix(rng, (m, n), dtype)))[0].astype(dtype)
    a[-2, m // 2, n // 2] = np.nan
    a[-1, 0, n - 1] = np.inf
    return a


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", KERNEL_SHAPES, ids=ids)
def test_svd_kernel_on_many_matrices(rng, dtype, shape):
    a = _kernel_inputs(rng, shape, dtype)
    assert jcm.explain("svd", shape, dtype, strategy="batched").strategy == "batched"
    good = slice(0, shape[0] - 2)
    for full_matrices in (True, False):
        u, s, vh = (np.asarray(x) for x in svd(a, full_matrices, strategy="batched"))
        assert np.isnan(s[-2:]).all() and np.isnan(u[-2:]).all() and np.isnan(vh[-2:]).all()
        check_svd(a[good], u[good], s[good], vh[good], full_matrices, dtype)
        assert np.all(s[0] == 0) and np.all(s[1, 1:] <= _tol(dtype, a) * s[1, 0])
    values = np.asarray(svdvals(a, strategy="batched"))
    assert np.isnan(values[-2:]).all()
    check_values(a[good], values[good], dtype)


@requires_gpu
def test_svd_kernel_takes_a_batch_beyond_its_workspace_in_slices(rng):
    # complex128 128 x 128 keeps the matrix and V in the workspace, 512 KB a matrix: 256 MB
    # hold 512 of them, so 520 go through in two launches; the NaN matrix is in the second.
    dtype = np.complex128
    a = random_matrix(rng, (520, 128, 128), dtype, "general")
    a[-1, 3, 5] = np.nan
    u, s, vh = (np.asarray(x) for x in svd(a, False, strategy="batched"))
    assert np.isnan(s[-1]).all() and np.isnan(u[-1]).all() and np.isnan(vh[-1]).all()
    check_svd(a[:-1], u[:-1], s[:-1], vh[:-1], False, dtype)


# ---------------------------------------------------------------------------------------------
# The QR-first SVD (strategy "blocked") of a matrix twice as tall as wide or more, or as wide
# ---------------------------------------------------------------------------------------------

# (batch, m, n): tall and wide, the aspect at the limit (2), 16:1, k = 1, past a lane per row
# (32) in the long dimension only, and in both, and past the Jacobi kernel's 128 (the R factor
# within it).
OBLONG_SHAPES = [(3, 20, 10), (3, 10, 20), (2, 64, 4), (4, 5, 80), (2, 9, 1), (2, 90, 40),
                 (2, 300, 100)]


@pytest.mark.parametrize("mode", MODES, ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", OBLONG_SHAPES, ids=ids)
def test_qr_first_svd_is_the_svd(rng, shape, dtype, mode):
    """The composition itself, on this machine's platform (JAX's QR and SVD on the CPU)."""
    from jax_cusolver_ms.svd import _svd_qr_first
    full_matrices, compute_uv = MODES[mode]
    a = random_matrix(rng, shape, dtype, "general")
    out = jax.jit(lambda a: _svd_qr_first(a, full_matrices, compute_uv, "default"))(a)
    if not compute_uv:
        check_values(a, np.asarray(out[0]), dtype)
        return
    s, u, vh = (np.asarray(x) for x in out)
    check_svd(a, u, s, vh, full_matrices, dtype)


@requires_extension
@pytest.mark.parametrize("shape,feasible", [((4, 64, 16), True), ((4, 16, 32), True),
                                            ((4, 20, 11), False), ((4, 16, 16), False)],
                         ids=ids)
def test_the_qr_first_svd_takes_oblong_matrices_only(shape, feasible):
    for op in ("svd", "svdvals", "pinv"):
        if feasible:
            assert jcm.explain(op, shape, np.float32, strategy="blocked").strategy == "blocked"
        else:
            with pytest.raises(ValueError, match="QR-first SVD takes a matrix at least twice"):
                jcm.explain(op, shape, np.float32, strategy="blocked")


@requires_gpu
@pytest.mark.parametrize("mode", MODES, ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", OBLONG_SHAPES, ids=ids)
def test_qr_first_svd_on_the_gpu(rng, shape, dtype, mode):
    """svd(strategy="blocked"): the decomposition, rank-one and graded matrices among the
    random ones, and NaN for a matrix holding NaN or Inf without touching the others."""
    full_matrices, compute_uv = MODES[mode]
    count, m, n = shape
    a = random_matrix(rng, (count + 2, m, n), dtype, "general")
    a[1] = random_rhs(rng, (m, 1), dtype) @ random_rhs(rng, (1, n), dtype)
    a[-2, m // 2, n // 2] = np.nan
    a[-1, 0, n - 1] = np.inf
    good = slice(0, count)
    out = [np.asarray(x) for x in jax.jit(lambda a: svd(
        a, full_matrices, compute_uv, strategy="blocked"))(a)] if compute_uv else \
        [np.asarray(jax.jit(lambda a: svdvals(a, strategy="blocked"))(a))]
    for x in out:
        assert np.isnan(x[-2:]).all() and np.isfinite(x[good]).all()
    if compute_uv:
        u, s, vh = out
        check_svd(a[good], u[good], s[good], vh[good], full_matrices, dtype)
    else:
        check_values(a[good], out[0][good], dtype)


@pytest.mark.parametrize("strategy", ["auto", "looped"])
def test_cpu_lowering_has_no_ffi_call(strategy):
    for name, (fn, shapes, _) in _svd_family_calls(strategy).items():
        if name == "svd large":
            continue  # a big LAPACK SVD to compile, nothing new
        text = lowered_text(fn, shapes, np.float64, "cpu")
        assert not any(t in text for t in TARGETS), name
    assert "gesdd" in lowered_text(lambda a: svd(a), [(5, 3)], np.float64, "cpu")
    assert "gesvd" in lowered_text(lambda a: svd(a, algorithm="qr"), [(5, 3)], np.float64,
                                    "cpu")


@requires_gpu
@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
def test_gpu_lowering_uses_ffi(ours_measured_faster, strategy):
    for name, (fn, shapes, expected) in _svd_family_calls(strategy).items():
        args = [jnp.ones(s, np.float32) for s in shapes]
        text = jax.jit(fn).lower(*args).as_text()  # lowered for the GPU it runs on
        assert all(t in text for t in expected), name
        assert expected or not any(t in text for t in TARGETS), name


def test_auto_choices(ours_measured_faster):
    choose = jcm_strategy.choose
    assert jcm_strategy.svd_routine("default", 1024, 7) == "gesvdj"
    assert jcm_strategy.svd_routine("default", 1025, 7) == "gesvd"
    assert jcm_strategy.svd_routine("qr", 8, 8) == "gesvd"
    assert jcm_strategy.svd_routine("jacobi", 4000, 8) == "gesvdj"
    assert choose("gesvdj", 64, (128, 32), np.float32).strategy == "batched"
    assert not choose("gesvdj", 64, (129, 32), np.float32).runs_small_kernel
    # The Jacobi kernel cannot take m or n > 128: a request for it is refused.
    with pytest.raises(ValueError, match="larger than the batched kernel takes"):
        choose("gesvdj", 64, (64, 129), np.float32, "batched")
    for op in ("svd", "svdvals", "pinv", "matrix_rank", "lstsq", "norm", "cond"):
        plan = jcm.explain(op, (8, 16, 12), np.dtype(np.float32))
        assert plan.op == "gesvdj" and plan.strategy == "batched", op
    assert jcm.explain("svd", (4, 2048, 2048), np.float32).op == "gesvd"


# ---------------------------------------------------------------------------------------------
# Bad input: clear errors
# ---------------------------------------------------------------------------------------------

_CALLS = {
    "svd": lambda a: svd(a),
    "svdvals": lambda a: svdvals(a),
    "pinv": lambda a: pinv(a),
    "matrix_rank": lambda a: matrix_rank(a),
    "lstsq": lambda a: lstsq(a, a[:, 0]),
    "norm": lambda a: norm(a, 2),
}


@pytest.mark.parametrize("bad_dtype", [np.float16], ids=ids)
@pytest.mark.parametrize("op", sorted(_CALLS))
def test_unsupported_dtype_raises_type_error(op, bad_dtype):
    a = (np.arange(16).reshape(4, 4) % 3 + np.eye(4)).astype(bad_dtype)
    assert_rejects_dtype(_CALLS[op], a, (op,))


@pytest.mark.parametrize("shape", [(4,), ()], ids=ids)
@pytest.mark.parametrize("op", ["svd", "svdvals", "pinv", "cond"])
def test_wrong_rank_raises_value_error(rng, op, shape):
    v = random_rhs(rng, shape, np.float32)
    call = {"cond": cond}.get(op, _CALLS.get(op))
    with pytest.raises(ValueError) as info:
        call(v)
    assert str(info.value).strip()


@pytest.mark.parametrize("algorithm", ["gesvd", "polar", jax.lax.linalg.SvdAlgorithm.POLAR,
                                       jax.lax.linalg.SvdAlgorithm.DIVIDE_AND_CONQUER, 3, ""],
                         ids=ids)
def test_bad_algorithm_raises_value_error(rng, algorithm):
    a = random_matrix(rng, (5, 4), np.float64, "general")
    with pytest.raises(ValueError, match="algorithm"):
        svd(a, algorithm=algorithm)
    with pytest.raises(ValueError, match="algorithm"):
        svdvals(a, algorithm=algorithm)


@pytest.mark.parametrize(
    "call",
    [
        lambda: lstsq(np.ones((5, 3)), np.ones(4)),           # rows of b
        lambda: lstsq(np.ones((2, 5, 3)), np.ones((3, 5))),   # batch dims that differ
        lambda: lstsq(np.ones((5, 3)), np.ones((5, 2, 2))),   # b of rank 3
        lambda: cond(np.ones((0, 3))),
        lambda: cond(np.ones((4, 3)), 1),                     # p = 1 needs a square matrix
        lambda: norm(np.ones((2, 3, 4)), 2),                  # a matrix norm of three axes
    ],
    ids=["lstsq-rows", "lstsq-batched", "lstsq-b-rank", "cond-empty", "cond-p1-rect",
         "norm-3-axes"],
)
def test_mismatched_shapes_raise(call):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert str(info.value).strip()


def test_bad_options_raise(rng):
    a = random_matrix(rng, (2, 4, 4), np.float32, "general")
    for kwargs in (dict(strategy="fastest"), dict(lanes=0)):
        for call in (lambda: svd(a, **kwargs), lambda: svdvals(a, **kwargs),
                     lambda: pinv(a, **kwargs), lambda: matrix_rank(a, **kwargs)):
            with pytest.raises(ValueError):
                call()
