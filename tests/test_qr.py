"""Tests for the QR family: qr (every jnp mode), householder_product, ormqr, qr_multiply.

Every result is checked against what it must satisfy (Q R = A, Q^H Q = I, R upper triangular)
with a per-dtype tolerance, and against float64 NumPy/SciPy and jax.numpy / jax.lax.linalg. On
CPU every strategy runs JAX's own implementation, so the CPU run checks the API, shape rules
and transformations; the GPU run (tests marked requires_gpu run there too) checks the FFI paths.
"""

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg
from jax.test_util import check_grads

import jax_cusolver_ms as jcm
from jax_cusolver_ms.qr import householder_product, ormqr, qr, qr_multiply
from conftest import (
    ALL_STRATEGIES,
    DTYPES,
    TINY_KERNEL_BATCH,
    TINY_KERNEL_N,
    assert_rejects_dtype,
    condition_number,
    conj_t,
    exported_text,
    jit_call,
    lowered_text,
    param_id,
    random_matrix,
    random_rhs,
    rel_err,
    requires_gpu,
    rotated_grid,
    rtol_for,
    strategy_grid,
    widened,
)

ids = param_id
MODES = ("reduced", "complete", "r", "raw")
DOUBLE_DTYPES = (np.float64, np.complex128)
TARGETS = ("jcm_geqrf", "jcm_orgqr", "jcm_ormqr")

# (batch..., m, n): n = 1, batch 0 and 1, several batch dims, square, tall and wide, empty.
QR_SHAPES = [
    (1, 1), (6, 6), (9, 4), (4, 9), (0, 3, 3), (1, 5, 5), (2, 3, 5, 5), (2, 24, 13),
    (3, 7, 12), (4, 0), (2, 9, 1), (2, 1, 9),
]
# (batch..., m, n, k) for householder_product: m >= n >= k.
HOUSEHOLDER_CASES = [(1, 1, 1), (6, 6, 6), (9, 5, 5), (9, 5, 3), (3, 8, 4, 4), (0, 4, 3, 3),
                     (2, 2, 7, 7, 2), (6, 6, 0), (2, 9, 1, 1)]
# (reflector order r, k, other dimension p of c, batch)
ORMQR_CASES = [(1, 1, 1, ()), (7, 7, 3, ()), (8, 5, 4, (3,)), (6, 2, 1, (2, 2)), (5, 0, 3, ()),
               (0, 0, 2, (2,))]


def _tol(dtype, a):
    return rtol_for(dtype, max(a.shape[-2:], default=1))


def check_qr(a, q, r, mode, dtype):
    """q, r factor a: shapes and dtype as jnp's, R upper triangular, Q^H Q = I, Q R = A."""
    *batch, m, n = a.shape
    k = min(m, n)
    kq = m if mode == "complete" else k
    assert q.shape == tuple(batch) + (m, kq), (q.shape, mode)
    assert r.shape == tuple(batch) + (kq, n), (r.shape, mode)
    assert q.dtype == r.dtype == np.dtype(dtype)
    q, r = np.asarray(q), np.asarray(r)
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(r)), "finite input gave non-finite QR"
    assert np.all(np.tril(r, -1) == 0), "R is not upper triangular"
    tol = _tol(dtype, a)
    eye = np.broadcast_to(np.eye(kq), tuple(batch) + (kq, kq))
    assert rel_err(conj_t(widened(q)) @ widened(q), eye) <= tol, "Q^H Q != I"
    assert rel_err(widened(q) @ widened(r), widened(a)) <= tol, "Q R != A"


def raw_to_qr(h, taus, m, n):
    """Q (reduced) and R from qr(..., mode="raw"), with JAX's own householder_product."""
    h = jnp.swapaxes(jnp.asarray(h), -1, -2)
    k = min(m, n)
    q = jit_call(jax.lax.linalg.householder_product, h[..., :, :k], taus)
    return q, jnp.triu(h[..., :k, :])


def abs_diag(r):
    return np.abs(np.diagonal(np.asarray(r), axis1=-2, axis2=-1))


def check_abs_diag(r, a, dtype):
    """|diag R| is unique (for full-rank A): compare with float64 NumPy."""
    if a.size == 0:
        return
    r_ref = np.linalg.qr(widened(a), mode="r")
    k = min(a.shape[-2:])
    tol = rtol_for(dtype, max(a.shape[-2:]), condition_number(a))
    assert rel_err(abs_diag(r)[..., :k], abs_diag(r_ref), 1) <= tol, "|diag R| != NumPy's"


# ---------------------------------------------------------------------------------------------
# The batched QR kernels (ffi/qr/qr_kernels.cu) on the GPU
# ---------------------------------------------------------------------------------------------


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(3, 2, 2), (3, 33, 33), (2, 300, 40), (2, 40, 300),
                                   (2, 257, 257), (1, 64, 64)], ids=ids)
def test_batched_kernels_match_lapack(rng, dtype, shape):
    # Sizes around the warp (32) and the block (256 threads), tall and wide, a single matrix.
    # The kernels follow LAPACK ?geqr2 / ?org2r: the raw factor, the taus and Q agree with
    # SciPy's LAPACK (blocked for large n: the same reflectors up to rounding).
    a = random_matrix(rng, shape, dtype, "general")
    q, r = qr(a, strategy="batched")
    check_qr(a, q, r, "reduced", dtype)
    h, taus = qr(a, mode="raw", strategy="batched")
    geqrf = scipy.linalg.lapack.get_lapack_funcs(("geqrf",), dtype=np.dtype(dtype))[0]
    tol = rtol_for(dtype, max(shape[-2:]), condition_number(a))
    for i in range(shape[0]):
        h_ref, taus_ref, _, info = geqrf(np.asarray(a[i]))
        assert info == 0
        assert rel_err(np.swapaxes(np.asarray(h[i]), -1, -2), h_ref) <= tol
        assert rel_err(np.asarray(taus[i]), taus_ref, 1) <= tol
    # householder_product with the kernel against JAX's own, on the same reflectors.
    m, n = shape[-2:]
    k = min(m, n)
    hh = jnp.swapaxes(h, -1, -2)[..., :, :k]
    q_kernel = householder_product(hh, taus, strategy="batched")
    assert rel_err(q_kernel, jax.lax.linalg.householder_product(hh, taus)) <= tol
    # ormqr with the kernel, every side and transpose, against JAX's on the same reflectors.
    for left in (True, False):
        for transpose in (False, True):
            c = random_matrix(rng, (shape[0], m, 3) if left else (shape[0], 3, m), dtype)
            got = ormqr(hh, taus, c, left=left, transpose=transpose, strategy="batched")
            want = jax.lax.linalg.ormqr(hh, taus, c, left=left, transpose=transpose)
            assert rel_err(got, want) <= tol, (left, transpose)


@requires_gpu
@pytest.mark.parametrize("n,dtype", rotated_grid(DTYPES, TINY_KERNEL_N), ids=ids)
def test_tiny_qr_kernels_over_blocks_match_lapack(rng, n, dtype):
    """The thread-per-matrix kernels (square n <= 4), over several blocks of matrices: random
    ones, and among them a zero column (tau 0), an upper triangle (nothing below the diagonal)
    and graded columns; the raw factor and taus as LAPACK's ?geqrf, Q from all n reflectors and
    from the first n - 1 (?org2r with k < n)."""
    a = random_matrix(rng, (TINY_KERNEL_BATCH, n, n), dtype, "general")
    a[1, :, 0] = 0
    a[2] = np.triu(a[2])
    a[3] = a[3] * np.logspace(0, -5, n)[None, :].astype(a.real.dtype)
    assert jcm.explain("qr", a.shape, dtype, strategy="batched").strategy == "batched"
    q, r = qr(a, strategy="batched")
    check_qr(a, q, r, "reduced", dtype)
    h, taus = qr(a, mode="raw", strategy="batched")
    geqrf = scipy.linalg.lapack.get_lapack_funcs(("geqrf",), dtype=np.dtype(dtype))[0]
    tol = rtol_for(dtype, n, 1e5)
    for i in range(a.shape[0]):
        h_ref, taus_ref, _, info = geqrf(np.asarray(a[i]))
        assert info == 0
        assert rel_err(np.swapaxes(np.asarray(h[i]), -1, -2), h_ref, 1) <= tol, i
        assert rel_err(np.asarray(taus[i]), taus_ref, 1) <= tol, i
    hh = jnp.swapaxes(h, -1, -2)
    for k in {n, max(n - 1, 1)}:
        got = householder_product(hh, taus[..., :k], strategy="batched")
        want = jax.lax.linalg.householder_product(hh, taus[..., :k])
        assert rel_err(got, want) <= tol, k


@requires_gpu
def test_batched_kernels_zero_column_and_large_n_refused(rng):
    # A zero column below the diagonal and on it: tau = 0, H = I, as LAPACK.
    a = random_matrix(rng, (2, 12, 8), np.float64, "general")
    a[1, :, 3] = 0
    h, taus = qr(a, mode="raw", strategy="batched")
    assert np.asarray(taus)[1, 3] == 0
    q, r = qr(a, strategy="batched")
    check_qr(a, q, r, "reduced", np.float64)
    # Beyond the kernels' n a batched request is refused at trace time, naming the op.
    a = random_matrix(rng, (2, 1030, 1030), np.float32, "general")
    with pytest.raises(ValueError, match="larger than the batched kernel takes"):
        qr(a, strategy="batched")


# ---------------------------------------------------------------------------------------------
# qr
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,shape,mode,strategy", strategy_grid(DTYPES, QR_SHAPES, MODES))
def test_qr(rng, dtype, shape, mode, strategy):
    a = random_matrix(rng, shape, dtype, "general")
    *_, m, n = shape
    got = jit_call(qr, a, mode=mode, strategy=strategy)
    ref = jnp.linalg.qr(jnp.asarray(a), mode)
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
    if mode == "raw":
        q, r = raw_to_qr(*got, m, n)
        check_qr(a, q, r, "reduced", dtype)
    elif mode == "r":
        r = got
        _, r_reduced = jit_call(qr, a, mode="reduced", strategy=strategy)
        np.testing.assert_array_equal(np.asarray(r), np.asarray(r_reduced))
    else:
        q, r = got
        assert isinstance(got, tuple) and got.Q is q and got.R is r
        check_qr(a, q, r, mode, dtype)
    check_abs_diag(r, a, dtype)
    if a.size:
        tol = rtol_for(dtype, max(m, n), condition_number(a))
        ref_r = ref if mode == "r" else (raw_to_qr(*ref, m, n)[1] if mode == "raw" else ref[1])
        assert rel_err(abs_diag(r), abs_diag(ref_r), 1) <= tol, "|diag R| != jnp's"


@pytest.mark.parametrize("dtype,kind,strategy", strategy_grid(DTYPES, ["singular", "rank1"]))
def test_qr_rank_deficient(rng, dtype, kind, strategy):
    shape = (3, 12, 8)
    if kind == "rank1":
        u, v = random_rhs(rng, (3, 12, 1), dtype), random_rhs(rng, (3, 1, 8), dtype)
        a = (u @ v).astype(dtype)
    else:
        a = random_matrix(rng, shape, dtype, "singular")
    for mode in ("reduced", "complete"):
        q, r = qr(a, mode, strategy=strategy)
        check_qr(a, q, r, mode, dtype)
    if kind == "rank1":
        # Only the first column is independent: every later |r_jj| is rounding noise.
        scale = np.linalg.norm(widened(a), axis=(-2, -1))[..., None]
        assert np.all(abs_diag(r)[..., 1:] <= _tol(dtype, a) * scale)
        first_column = np.linalg.norm(widened(a)[..., :, 0], axis=-1)
        assert rel_err(abs_diag(r)[..., 0], first_column, 1) <= _tol(dtype, a)


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_qr_nan_input_stays_in_its_matrix(rng, dtype, strategy):
    a = random_matrix(rng, (3, 7, 5), dtype, "general")
    a[1, 2, 3] = np.nan
    q, r = qr(a, strategy=strategy)
    assert np.any(np.isnan(np.asarray(r[1]))), "NaN input gave a NaN-free R"
    good = [0, 2]
    check_qr(a[good], np.asarray(q)[good], np.asarray(r)[good], "reduced", dtype)


def test_qr_full_mode_is_reduced_like_jnp(rng):
    a = random_matrix(rng, (6, 4), np.float64, "general")
    q, r = qr(a, "full")
    q_ref, r_ref = qr(a)
    np.testing.assert_array_equal(np.asarray(q), np.asarray(q_ref))
    np.testing.assert_array_equal(np.asarray(r), np.asarray(r_ref))


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(7, 7), (2, 9, 5), (4, 8)], ids=ids)
def test_qr_matches_numpy(rng, dtype, shape):
    # Householder QR is deterministic up to rounding: same LAPACK convention as NumPy's.
    a = random_matrix(rng, shape, dtype, "general")
    tol = rtol_for(dtype, max(shape[-2:]), condition_number(a))
    for mode in ("reduced", "complete"):
        q, r = qr(a, mode)
        q_np, r_np = np.linalg.qr(widened(a), mode)
        assert rel_err(q, q_np) <= tol and rel_err(r, r_np) <= tol, mode


# ---------------------------------------------------------------------------------------------
# householder_product and ormqr
# ---------------------------------------------------------------------------------------------


def _reflectors(rng, shape, dtype):
    """geqrf output (h, taus) of a random matrix of `shape`: valid Householder reflectors."""
    a = random_matrix(rng, shape, dtype, "general")
    h, taus = jnp.linalg.qr(jnp.asarray(a), mode="raw")
    return np.asarray(jnp.swapaxes(h, -1, -2)), np.asarray(taus)


def full_q(h, taus):
    """The whole m x m Q = H_1 ... H_k, in float64/complex128 (NumPy, reflector by reflector)."""
    h, taus = widened(h), widened(taus)
    *batch, m, _ = h.shape
    k = taus.shape[-1]
    q = np.broadcast_to(np.eye(m, dtype=h.dtype), tuple(batch) + (m, m)).copy()
    for i in range(k):
        v = np.tril(h[..., :, i:i + 1], -i - 1)
        v[..., i, 0] = 1
        q = q - (q @ v) * taus[..., i, None, None] @ conj_t(v)
    return q


@pytest.mark.parametrize("dtype,case,strategy", strategy_grid(DTYPES, HOUSEHOLDER_CASES))
def test_householder_product(rng, dtype, case, strategy):
    *batch, m, n, k = case
    h, taus = _reflectors(rng, tuple(batch) + (m, n), dtype)
    taus = taus[..., :k]
    q = jit_call(householder_product, h, taus, strategy=strategy)
    q_jax = jit_call(jax.lax.linalg.householder_product, h, taus)
    assert q.shape == q_jax.shape == h.shape and q.dtype == np.dtype(dtype)
    tol = _tol(dtype, h)
    assert rel_err(q, full_q(h, taus)[..., :, :n]) <= tol
    assert rel_err(q, q_jax) <= tol
    eye = np.broadcast_to(np.eye(n), h.shape[:-2] + (n, n))
    assert rel_err(conj_t(widened(q)) @ widened(q), eye) <= tol


@pytest.mark.parametrize("dtype,case,strategy", strategy_grid(DTYPES, ORMQR_CASES))
@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
@pytest.mark.parametrize("transpose", [False, True], ids=["Q", "QH"])
def test_ormqr(rng, dtype, case, strategy, left, transpose):
    order, k, p, batch = case
    h, taus = _reflectors(rng, batch + (order, max(k, 1)), dtype)
    h, taus = h[..., :, :k], taus[..., :k]
    c = random_rhs(rng, batch + ((order, p) if left else (p, order)), dtype)
    out = jit_call(ormqr, h, taus, c, left=left, transpose=transpose, strategy=strategy)
    out_jax = jit_call(jax.lax.linalg.ormqr, h, taus, c, left=left, transpose=transpose)
    assert out.shape == c.shape and out.dtype == np.dtype(dtype)
    op_q = full_q(h, taus)
    op_q = conj_t(op_q) if transpose else op_q
    ref = op_q @ widened(c) if left else widened(c) @ op_q
    tol = rtol_for(dtype, max(order, 1))
    assert rel_err(out, ref) <= tol
    assert rel_err(out, out_jax) <= tol


def test_ormqr_takes_whole_geqrf_output_and_broadcasts(rng):
    # As jax.lax.linalg.ormqr: a may hold more columns than there are taus; batch dims broadcast.
    h, taus = _reflectors(rng, (9, 6), np.complex128)
    c = random_rhs(rng, (4, 9, 2), np.complex128)
    out = ormqr(h, taus[:4], c)
    ref = full_q(h[:, :4], taus[:4]) @ c
    assert out.shape == c.shape
    assert rel_err(out, ref) <= rtol_for(np.complex128, 9)


# ---------------------------------------------------------------------------------------------
# qr_multiply
# ---------------------------------------------------------------------------------------------

# (a shape, c shape, mode): c as scipy.linalg.qr_multiply accepts it, 1-D included.
QR_MULTIPLY_CASES = [
    ((6, 4), (3, 6), "right"), ((6, 4), (6,), "right"), ((6, 4), (4, 3), "left"),
    ((6, 4), (4,), "left"), ((4, 6), (2, 4), "right"), ((4, 6), (4, 5), "left"),
    ((5, 5), (5, 5), "left"), ((5, 5), (1, 5), "right"), ((1, 1), (1,), "left"),
    ((2, 7, 3), (2, 4, 7), "right"), ((2, 7, 3), (3, 2), "left"), ((3, 6, 4), (6,), "right"),
]


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES, ids=ids)
@pytest.mark.parametrize("conjugate", [False, True], ids=["Q", "conjQ"])
@pytest.mark.parametrize("case", QR_MULTIPLY_CASES, ids=ids)
def test_qr_multiply_matches_scipy(rng, dtype, conjugate, case):
    a_shape, c_shape, mode = case
    a = random_matrix(rng, a_shape, dtype, "general")
    c = random_rhs(rng, c_shape, dtype)
    out, r = jit_call(qr_multiply, a, c, mode=mode, conjugate=conjugate)
    out_sp, r_sp = scipy.linalg.qr_multiply(a, c, mode, conjugate=conjugate)
    assert out.shape == out_sp.shape and r.shape == r_sp.shape, (out.shape, out_sp.shape)
    assert out.dtype == r.dtype == np.dtype(dtype)
    tol = rtol_for(dtype, max(a_shape[-2:]), condition_number(a))
    core = 1 if out.ndim == 1 or (len(c_shape) == 1 and len(a_shape) > 2) else 2
    assert rel_err(out, out_sp, core) <= tol
    assert rel_err(r, r_sp) <= tol


@pytest.mark.parametrize("dtype,mode,strategy", strategy_grid(DTYPES, ["right", "left"]))
def test_qr_multiply_is_q_product(rng, dtype, mode, strategy):
    # Every dtype and strategy: the product with the reduced Q of our own qr.
    a = random_matrix(rng, (3, 9, 6), dtype, "general")
    c = random_rhs(rng, (3, 5, 9) if mode == "right" else (3, 6, 5), dtype)
    out, r = jit_call(qr_multiply, a, c, mode=mode, strategy=strategy)
    q, r_ref = jit_call(qr, a, strategy=strategy)
    ref = widened(c) @ widened(q) if mode == "right" else widened(q) @ widened(c)
    tol = _tol(dtype, a)
    assert rel_err(out, ref) <= tol and rel_err(r, r_ref) <= tol
    out_jax, _ = jit_call(jsl.qr_multiply, a, c, mode=mode)
    assert rel_err(out, out_jax) <= rtol_for(dtype, 9, condition_number(a))


def test_qr_multiply_pivoting_not_implemented(rng):
    a = random_matrix(rng, (5, 4), np.float64, "general")
    with pytest.raises(NotImplementedError, match="pivoting"):
        qr_multiply(a, np.ones((2, 5)), pivoting=True)


# ---------------------------------------------------------------------------------------------
# Strategies, jit and vmap
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_strategies_agree(rng, dtype):
    a = random_matrix(rng, (5, 10, 6), dtype, "general")
    c = random_rhs(rng, (5, 10, 3), dtype)
    h, taus = _reflectors(rng, (5, 10, 6), dtype)

    def run(strategy):
        kw = dict(strategy=strategy)
        return jax.jit(lambda a, h, taus, c: (
            qr(a, "complete", **kw), qr(a.swapaxes(-1, -2), **kw),
            householder_product(h, taus, **kw), ormqr(h, taus, c, transpose=True, **kw),
            qr_multiply(a, c.swapaxes(-1, -2), **kw)))(a, h, taus, c)

    ref = jax.tree.leaves(run("sequential"))
    tol = rtol_for(dtype, 10, condition_number(a))
    for strategy in ALL_STRATEGIES:
        for i, (g, e) in enumerate(zip(jax.tree.leaves(run(strategy)), ref)):
            assert rel_err(g, e) <= tol, f"{strategy}: output {i} differs from sequential"
    with jcm.config(strategy="looped", lanes=2):
        assert rel_err(qr(a)[1], qr(a, strategy="sequential")[1]) <= tol


@pytest.mark.parametrize("mode", ["reduced", "complete", "r", "raw"])
def test_jit(rng, mode):
    a = random_matrix(rng, (2, 8, 5), np.complex64, "general")
    jitted = jax.jit(qr, static_argnames=("mode", "strategy", "lanes"))
    for g, e in zip(jax.tree.leaves(jitted(a, mode)), jax.tree.leaves(qr(a, mode))):
        assert rel_err(g, e) <= rtol_for(np.complex64, 8)
    c = random_rhs(rng, (2, 3, 8), np.complex64)
    out, _ = jax.jit(qr_multiply, static_argnames=("mode",))(a, c, mode="right")
    assert rel_err(out, qr_multiply(a, c)[0]) <= rtol_for(np.complex64, 8)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_vmap_qr(rng, axis):
    a = random_matrix(rng, (3, 4, 7, 5), np.float64, "general")  # vmapped 3, batch 4, 7 x 5
    x = np.moveaxis(a, 0, axis)  # the vmapped axis anywhere, the last one included
    for mode in ("reduced", "complete", "r"):
        got = jax.vmap(lambda m: qr(m, mode), in_axes=axis)(x)
        for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(qr(a, mode))):
            assert rel_err(g, e) <= 1e-12, mode


def test_vmap_nested(rng):
    a = random_matrix(rng, (2, 3, 6, 4), np.complex128, "general")
    f = jax.vmap(jax.vmap(lambda m: qr(m, "complete")))
    q, r = f(a)
    check_qr(a, q, r, "complete", np.complex128)
    g = jax.vmap(jax.vmap(lambda m: qr(m, "r"), in_axes=1), in_axes=0)(a.swapaxes(1, 2))
    assert rel_err(g, qr(a, "r")) <= 1e-12


@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
def test_vmap_ormqr(rng, left):
    h, taus = _reflectors(rng, (2, 7, 4), np.float64)
    c = random_rhs(rng, (5, 2, 7, 3) if left else (5, 2, 3, 7), np.float64)
    call = lambda h, t, c: ormqr(h, t, c, left=left)
    ref = np.stack([call(h, taus, ci) for ci in c])
    # Only c mapped (the mapped axis folds into c's columns / rows), on several axes.
    for axis in (0, 1, 2, -1):
        got = jax.vmap(call, in_axes=(None, None, axis))(h, taus, np.moveaxis(c, 0, axis))
        assert rel_err(got, ref) <= 1e-12, axis
    # Everything mapped; and the reflectors mapped while c is not.
    hs, ts = np.stack([h] * 5), np.stack([taus] * 5)
    assert rel_err(jax.vmap(call)(hs, ts, c), ref) <= 1e-12
    got = jax.vmap(call, in_axes=(0, 0, None))(hs, ts, c[0])
    assert rel_err(got, np.stack([ref[0]] * 5)) <= 1e-12


def test_vmap_householder_product(rng):
    h, taus = _reflectors(rng, (4, 3, 8, 5), np.complex64)
    got = jax.vmap(householder_product, in_axes=(1, 1), out_axes=1)(h, taus)
    assert rel_err(got, householder_product(h, taus)) <= rtol_for(np.complex64, 8)
    got = jax.vmap(householder_product, in_axes=(None, 0))(h[0, 0], taus[:, 0])
    assert rel_err(got, householder_product(np.broadcast_to(h[0, 0], h[:, 0].shape),
                                            taus[:, 0])) <= rtol_for(np.complex64, 8)


# ---------------------------------------------------------------------------------------------
# Derivatives
# ---------------------------------------------------------------------------------------------

GRAD_CASES = [
    ("reduced", (5, 5), np.float64), ("reduced", (6, 4), np.float64),
    ("reduced", (2, 4, 4), np.complex128), ("reduced", (6, 3), np.complex128),
    ("reduced", (3, 5), np.float64), ("complete", (5, 3), np.float64), ("r", (4, 4), np.float64),
]


@pytest.mark.parametrize("mode,shape,dtype", GRAD_CASES, ids=ids)
def test_qr_check_grads(rng, mode, shape, dtype):
    a = random_matrix(rng, shape, dtype, "general")
    f = jax.jit(lambda a: qr(a, mode))
    check_grads(f, (a,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("mode,shape", [("reduced", (5, 5)), ("reduced", (6, 4)),
                                        ("complete", (6, 4)), ("reduced", (3, 5))], ids=ids)
def test_qr_jacobians_match_jax(rng, mode, shape):
    a = jnp.asarray(random_matrix(rng, shape, np.float64, "general"))
    for jac in (jax.jacfwd, jax.jacrev):
        got = jax.jit(jac(lambda a: qr(a, mode)))(a)
        ref = jax.jit(jac(lambda a: tuple(jnp.linalg.qr(a, mode))))(a)
        for g, e in zip(got, ref):
            assert rel_err(g.reshape(e.shape), e, g.ndim) <= 1e-8, jac.__name__
    loss = lambda qr_fn: lambda a: jnp.sum(jnp.abs(qr_fn(a, mode)[0][..., 0]) ** 3)
    got, ref = jax.jit(jax.grad(loss(qr)))(a), jax.jit(jax.grad(loss(jnp.linalg.qr)))(a)
    assert rel_err(got, ref) <= 1e-8


@pytest.mark.parametrize("dtype", DOUBLE_DTYPES, ids=ids)
def test_householder_ormqr_check_grads(rng, dtype):
    h, taus = _reflectors(rng, (7, 4), dtype)
    c = random_rhs(rng, (3, 7), dtype)
    check_grads(jax.jit(householder_product), (h, taus), order=1, modes=("fwd", "rev"),
                atol=1e-6, rtol=1e-6)
    f = jax.jit(lambda h, t, c: ormqr(h, t, c, left=False, transpose=True))
    check_grads(f, (h, taus, c), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


def test_qr_second_order(rng):
    a = random_matrix(rng, (5, 3), np.float64, "general")
    f = lambda a: jnp.sum(qr(a, "complete")[0] ** 3) + jnp.sum(qr(a)[1] ** 2)
    g = lambda a: jnp.sum(jnp.linalg.qr(a, "complete")[0] ** 3) + jnp.sum(jnp.linalg.qr(a)[1] ** 2)
    assert rel_err(jax.jit(jax.hessian(f))(a), jax.jit(jax.hessian(g))(a), 4) <= 1e-8


def test_raw_mode_not_differentiable_like_jax(rng):
    a = random_matrix(rng, (4, 3), np.float64, "general")
    with pytest.raises(NotImplementedError):
        jax.grad(lambda a: jnp.sum(qr(a, "raw")[0]))(a)


# ---------------------------------------------------------------------------------------------
# Lowering: the FFI targets on CUDA, none on CPU
# ---------------------------------------------------------------------------------------------


def _qr_family_calls(strategy):
    kw = dict(strategy=strategy)
    return {
        "qr": (lambda a: qr(a, **kw), [(4, 9, 5)]),
        "qr complete": (lambda a: qr(a, "complete", **kw), [(4, 9, 5)]),
        "qr wide": (lambda a: qr(a, **kw), [(4, 5, 9)]),
        "qr r": (lambda a: qr(a, "r", **kw), [(9, 5)]),
        "qr raw": (lambda a: qr(a, "raw", **kw), [(4, 9, 5)]),
        "householder_product": (lambda h, t: householder_product(h, t, **kw),
                                [(4, 9, 5), (4, 5)]),
        "ormqr": (lambda h, t, c: ormqr(h, t, c, transpose=True, **kw),
                  [(4, 9, 5), (4, 5), (4, 9, 3)]),
        "qr_multiply": (lambda a, c: qr_multiply(a, c, **kw), [(4, 9, 5), (4, 2, 9)]),
        "grad qr": (jax.grad(lambda a: jnp.sum(jnp.abs(qr(a, **kw)[0]) ** 3)), [(4, 9, 5)]),
    }


EXPECTED_TARGETS = {
    "qr": {"jcm_geqrf", "jcm_orgqr"}, "qr complete": {"jcm_geqrf", "jcm_orgqr"},
    "qr wide": {"jcm_geqrf", "jcm_orgqr"}, "qr r": {"jcm_geqrf"}, "qr raw": {"jcm_geqrf"},
    "householder_product": {"jcm_orgqr"}, "ormqr": {"jcm_ormqr"},
    "qr_multiply": {"jcm_geqrf", "jcm_ormqr"}, "grad qr": {"jcm_geqrf", "jcm_orgqr"},
}


def _exported_text(fn, shapes, dtype, platform):
    return exported_text(fn, shapes, dtype, platform, TARGETS)


@pytest.mark.parametrize("strategy", [s for s in ALL_STRATEGIES if s != "auto"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=ids)
def test_cuda_lowering_uses_ffi(claim_extension, strategy, dtype):
    for name, (fn, shapes) in _qr_family_calls(strategy).items():
        text = _exported_text(fn, shapes, dtype, "cuda")
        for target in TARGETS:
            assert (target in text) == (target in EXPECTED_TARGETS[name]), (name, target)
        # JAX's own cuSOLVER QR is not used next to ours.
        assert "cusolver_geqrf" not in text and "cusolver_orgqr" not in text, name


@pytest.mark.parametrize("n", [64, 256])
def test_auto_lowering_uses_ours(claim_extension, ours_measured_faster, n):
    # Where ours measures faster, ours for every part: never JAX's cuSOLVER QR next to ours.
    text = _exported_text(lambda a: qr(a), [(8, n, n)], np.float32, "cuda")
    assert "jcm_geqrf" in text and "jcm_orgqr" in text
    assert "cusolver_geqrf" not in text
    # qr_multiply's ormqr with one column follows the same rule.
    text = exported_text(lambda a, c: qr_multiply(a, c, mode="left"), [(8, n, n), (8, n, 1)],
                         np.float32, "cuda", TARGETS + ("cusolver_ormqr_ffi",))
    assert "jcm_geqrf" in text and "jcm_ormqr" in text
    assert "cusolver_ormqr_ffi" not in text


@pytest.mark.parametrize("strategy", ["auto", "looped"])
def test_cpu_lowering_has_no_ffi_call(strategy):
    for name, (fn, shapes) in _qr_family_calls(strategy).items():
        text = lowered_text(fn, shapes, np.float64, "cpu")
        assert not any(t in text for t in TARGETS), name
    # ... and it is JAX's own LAPACK QR instead.
    assert "geqrf" in lowered_text(lambda a: qr(a), [(5, 3)], np.float64, "cpu")


@requires_gpu
@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
def test_gpu_lowering_uses_ffi(strategy):
    for name, (fn, shapes) in _qr_family_calls(strategy).items():
        args = [jnp.ones(s, np.float32) for s in shapes]
        text = jax.jit(fn).lower(*args).as_text()  # lowered for the GPU it runs on
        expected = EXPECTED_TARGETS[name]
        if strategy == "auto":  # where auto hands a routine to JAX's own lowering, no target
            expected = {t for t in expected
                        if jcm.explain(t.removeprefix("jcm_"), shapes[0], np.float32).uses_ffi}
        assert all(t in text for t in expected), (name, expected)


def test_explain_knows_the_qr_ops():
    for op in ("qr", "geqrf", "householder_product", "orgqr", "qr_multiply", "ormqr"):
        plan = jcm.explain(op, (8, 16, 12), np.dtype(np.float32))
        assert plan.strategy in ("looped", "sequential", "batched", "xla") and plan.lanes >= 1
        plan = jcm.explain(op, (8, 512, 512), np.dtype(np.float32), lanes=8)
        assert plan.strategy == "looped" and plan.lanes == 8, plan


# ---------------------------------------------------------------------------------------------
# Bad input: clear errors
# ---------------------------------------------------------------------------------------------

_CALLS = {
    "qr": lambda a: qr(a),
    "householder_product": lambda a: householder_product(a, a[..., 0]),
    "ormqr": lambda a: ormqr(a, a[..., 0], a),
    "qr_multiply": lambda a: qr_multiply(a, a),
}


@pytest.mark.parametrize("bad_dtype", [np.float16], ids=ids)
@pytest.mark.parametrize("op", sorted(_CALLS))
def test_unsupported_dtype_raises_type_error(op, bad_dtype):
    a = (np.arange(16).reshape(4, 4) % 3 + np.eye(4)).astype(bad_dtype)
    assert_rejects_dtype(_CALLS[op], a, (op,))


@pytest.mark.parametrize("shape", [(4,), ()], ids=ids)
@pytest.mark.parametrize("op", sorted(_CALLS))
def test_wrong_rank_raises_value_error(rng, op, shape):
    v = random_rhs(rng, shape, np.float32)
    call = {"householder_product": lambda v: householder_product(v, np.ones(1, v.dtype)),
            "ormqr": lambda v: ormqr(v, np.ones(1, v.dtype), np.ones((4, 4), v.dtype))}
    with pytest.raises(ValueError) as info:
        call.get(op, _CALLS[op])(v)
    assert str(info.value).strip()


@pytest.mark.parametrize("mode", ["economic", "R", "", None])
def test_bad_mode_raises_value_error(rng, mode):
    a = random_matrix(rng, (5, 4), np.float64, "general")
    with pytest.raises(ValueError, match="mode"):
        qr(a, mode)
    with pytest.raises(ValueError, match="mode"):
        qr_multiply(a, np.ones((2, 5)), mode)


@pytest.mark.parametrize(
    "call",
    [
        lambda: householder_product(np.ones((3, 5)), np.ones(3)),      # m < n
        lambda: householder_product(np.ones((5, 3)), np.ones(4)),      # k > n
        lambda: householder_product(np.ones((2, 5, 3)), np.ones((3, 2))),  # batch mismatch
        lambda: ormqr(np.ones((5, 3)), np.ones(3), np.ones((4, 2))),   # rows of c
        lambda: ormqr(np.ones((5, 3)), np.ones(3), np.ones((2, 4)), left=False),
        lambda: ormqr(np.ones((5, 3)), np.ones(4), np.ones((5, 2))),   # k > columns of a
        lambda: qr_multiply(np.ones((6, 4)), np.ones((2, 4))),         # right: c needs 6 cols
        lambda: qr_multiply(np.ones((6, 4)), np.ones((6, 2)), "left"),  # left: c needs 4 rows
        lambda: qr_multiply(np.ones((6, 4)), np.ones(()), "left"),
    ],
    ids=["hp-wide", "hp-k", "hp-batch", "ormqr-rows", "ormqr-cols", "ormqr-k", "qrm-right",
         "qrm-left", "qrm-scalar"],
)
def test_mismatched_shapes_raise_value_error(call):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).strip()


def test_bad_options_raise(rng):
    a = random_matrix(rng, (2, 4, 4), np.float32, "general")
    for kwargs in (dict(strategy="fastest"), dict(lanes=0)):
        for call in (lambda: qr(a, **kwargs), lambda: qr_multiply(a, a, **kwargs),
                     lambda: householder_product(a, a[..., 0], **kwargs),
                     lambda: ormqr(a, a[..., 0], a, **kwargs)):
            with pytest.raises(ValueError):
                call()
