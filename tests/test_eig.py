"""Tests for the general eigendecomposition: eig, eigvals, lax_eig.

Eigenvectors are checked through what is unique: the residual A V - V diag(w), unit norms, the
normalisation (largest-magnitude component real), conjugate pairs for real input, and the
eigenvalues as a set against float64 NumPy and jax.numpy.linalg (their order is geev's, which
may differ between libraries). On CPU every strategy runs JAX's own implementation; the GPU run
covers the FFI paths (cusolverDnXgeev on the lanes, the tiny-matrix kernel for n <= 4, and the
unpacking of real eigenvectors).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jax_cusolver_ms as jcm
from jax_cusolver_ms.eig import eig, eigvals, lax_eig
from conftest import (
    ALL_STRATEGIES,
    DTYPES,
    TINY_KERNEL_BATCH,
    TINY_KERNEL_N,
    conj_t,
    is_complex,
    jit_call,
    lowered_text,
    param_id,
    random_matrix,
    random_rhs,
    rel_err,
    rotated_grid,
    rtol_for,
    strategy_grid,
    wide_dtype,
)

ids = param_id
SHAPES = [(1, 1), (6, 6), (0, 4, 4), (1, 5, 5), (2, 3, 7, 7), (3, 24, 24)]
# Forward errors of non-symmetric eigenvalues grow with their condition: a margin for random
# matrices of these sizes.
EIGENVALUE_CONDITION = 100


def _wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128)


def _norm2(a):
    return np.linalg.norm(_wide(a), 2, axis=(-2, -1)) if a.size else np.zeros(a.shape[:-2])


def complex_dtype(dtype):
    return np.result_type(np.dtype(dtype), np.complex64)


def with_eigenvectors(rng, batch, spectrum, dtype):
    """V diag(spectrum) V^-1 with V = I + small noise: well-conditioned eigenvectors, each with
    one clearly largest component (so geev's normalisation is smooth). A real dtype takes a
    real spectrum."""
    n = len(spectrum)
    noise = random_matrix(rng, tuple(batch) + (n, n), dtype, "general").astype(wide_dtype(dtype))
    v = np.eye(n) + 0.15 * noise
    a = (v * np.asarray(spectrum)) @ np.linalg.inv(v)
    return a.astype(dtype)


def match_distance(w, ref):
    """Largest distance from an eigenvalue of either set to the nearest of the other set."""
    d = np.abs(_wide(w)[..., :, None] - _wide(ref)[..., None, :])
    return max(np.max(np.min(d, -1), initial=0), np.max(np.min(d, -2), initial=0))


def check_eig(a, w, v, dtype):
    """Shapes and complex dtypes as jnp's; A v_j = w_j v_j; unit norm with the largest-magnitude
    component real; the eigenvalues those of float64 NumPy."""
    *batch, n, _ = a.shape
    c = complex_dtype(dtype)
    assert w.shape == tuple(batch) + (n,) and w.dtype == c, (w.shape, w.dtype)
    w = np.asarray(w)
    assert np.all(np.isfinite(w)), "finite input gave non-finite eigenvalues"
    scale = _norm2(a)[..., None]
    tol = rtol_for(dtype, n)
    if v is not None:
        assert v.shape == a.shape and v.dtype == c, (v.shape, v.dtype)
        v = np.asarray(v)
        assert np.all(np.isfinite(v)), "finite input gave non-finite eigenvectors"
        # Over the norm first: a matrix scaled to near the dtype's largest squares past it.
        unit = np.where(scale > 0, scale, 1)
        residual = np.linalg.norm(_wide(a) / unit[..., None] @ _wide(v)
                                  - _wide(v) * (_wide(w) / unit)[..., None, :], axis=-2)
        assert np.max(residual, initial=0) <= tol, "A V != V diag(w)"
        assert np.max(np.abs(np.linalg.norm(_wide(v), axis=-2) - 1), initial=0) <= tol, \
            "eigenvectors are not of unit norm"
        largest = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
        assert np.max(np.abs(np.imag(largest)), initial=0) <= tol, "largest component not real"
    if a.size:
        ref = np.linalg.eigvals(_wide(a) if is_complex(dtype) else a.astype(np.float64))
        err = match_distance(w, ref) / max(float(np.max(scale)), 1e-300)
        assert err <= rtol_for(dtype, n, EIGENVALUE_CONDITION), "eigenvalues != NumPy's"


# ---------------------------------------------------------------------------------------------
# eig / eigvals / lax_eig
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,shape,strategy", strategy_grid(DTYPES, SHAPES))
def test_eig(rng, dtype, shape, strategy):
    a = random_matrix(rng, shape, dtype, "general")
    w, v = jit_call(eig, a, strategy=strategy)
    check_eig(a, w, v, dtype)
    ref_w, ref_v = jnp.linalg.eig(a)
    assert (w.dtype, v.dtype, w.shape, v.shape) == (ref_w.dtype, ref_v.dtype, ref_w.shape,
                                                    ref_v.shape)
    n = shape[-1]
    if a.size:
        tol = rtol_for(dtype, n, EIGENVALUE_CONDITION)
        assert match_distance(w, ref_w) / np.max(_norm2(a)) <= tol, "eigenvalues != jnp's"
    vals = jit_call(eigvals, a, strategy=strategy)
    check_eig(a, vals, None, dtype)
    assert match_distance(vals, w) <= rtol_for(dtype, n) * max(1.0, float(np.max(_norm2(a),
                                                                                  initial=1)))


@pytest.mark.parametrize("dtype,strategy", strategy_grid([np.float32, np.float64]))
def test_real_input_gives_conjugate_pairs(rng, dtype, strategy):
    a = random_matrix(rng, (4, 12, 12), dtype, "general")
    w, v = jit_call(eig, a, strategy=strategy)
    check_eig(a, w, v, dtype)
    w, v = np.asarray(w), np.asarray(v)
    tol = rtol_for(dtype, 12) * 10
    assert np.any(np.abs(w.imag) > 0.1), "want some complex eigenvalues in this test"
    for b in range(4):
        for j in np.nonzero(w[b].imag > tol)[0]:
            k = np.argmin(np.abs(w[b] - np.conj(w[b, j])))
            assert abs(w[b, k] - np.conj(w[b, j])) <= tol * np.abs(w[b]).max()
            # The conjugate eigenvalue's eigenvector is the conjugate eigenvector (same gauge).
            assert np.max(np.abs(v[b, :, k] - np.conj(v[b, :, j]))) <= tol
        real = np.abs(w[b].imag) <= tol
        assert np.max(np.abs(v[b][:, real].imag), initial=0) <= tol, "real eigenvalue, complex v"


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_repeated_eigenvalues(rng, dtype, strategy):
    spectrum = [2, 2, 2, -1, 0.5, 0.5] if not is_complex(dtype) else [2j, 2j, 1, 1, -1, 3 + 1j]
    a = with_eigenvectors(rng, (3,), spectrum, dtype)
    w, v = jit_call(eig, a, strategy=strategy)
    check_eig(a, w, v, dtype)
    eps = np.finfo(np.dtype(dtype)).eps
    # A defective-free multiple eigenvalue is perturbed like sqrt(eps)-ish at worst: compare
    # with the truth as a set.
    truth = np.broadcast_to(np.asarray(spectrum), w.shape)
    assert match_distance(w, truth) <= 100 * np.sqrt(eps)


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_left_eigenvectors(rng, dtype, strategy):
    a = random_matrix(rng, (2, 7, 7), dtype, "general")
    w, vl, vr = lax_eig(a, strategy=strategy)
    check_eig(a, w, vr, dtype)
    # u_j^H A = w_j u_j^H, i.e. A^H u_j = conj(w_j) u_j.
    check_eig(conj_t(a).astype(dtype), jnp.conj(w), vl, dtype)
    (w2,) = lax_eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False,
                    strategy=strategy)
    assert match_distance(w2, w) <= rtol_for(dtype, 7) * float(np.max(_norm2(a)))


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_nan_input_stays_in_its_matrix(rng, dtype, strategy):
    a = random_matrix(rng, (3, 6, 6), dtype, "general")
    a[1, 2, 3] = np.nan
    w, v = jit_call(eig, a, strategy=strategy)
    assert np.isnan(np.asarray(w[1])).any(), "NaN input gave NaN-free eigenvalues"
    keep = np.array([0, 2])
    check_eig(a[keep], w[keep], v[keep], dtype)


def mixed_spectra(rng, count, n):
    """count real matrices V D V^-1, D block diagonal of real eigenvalues and 2 x 2 rotations
    (conjugate pairs) at random, V's columns scaled by 10^[-1, 0]: real eigenvalues whose
    imaginary parts in complex arithmetic are of rounding size times their condition."""
    out = np.zeros((count, n, n))
    for i in range(count):
        d, k = np.zeros((n, n)), 0
        while k < n:
            if k + 1 < n and rng.random() < 0.5:
                re, im = rng.standard_normal(2)
                d[k:k + 2, k:k + 2] = [[re, im], [-im, re]]
                k += 2
            else:
                d[k, k] = rng.standard_normal()
                k += 1
        v = rng.standard_normal((n, n)) * 10 ** rng.uniform(-1, 0, n)
        out[i] = v @ d @ np.linalg.inv(v)
    return out


@pytest.mark.parametrize("n,dtype", rotated_grid(DTYPES, TINY_KERNEL_N))
def test_tiny_kernel_over_blocks_degenerate_scaled_and_non_finite(rng, dtype, n):
    # A thread per matrix, 128 a block: special matrices at both edges of a block.
    a = random_matrix(rng, (TINY_KERNEL_BATCH, n, n), dtype, "general")
    big = np.finfo(np.dtype(dtype)).max ** 0.75
    a[0] = 0
    a[1] = np.eye(n)                                  # one eigenvalue n times, n vectors
    a[2] = np.diag(np.arange(n)[::-1] % 2)            # repeated, out of order
    a[3] = np.eye(n, k=1) + 3 * np.eye(n)             # a Jordan block: one vector, n times
    a[4] = np.eye(n, k=1) - np.eye(n, k=-1)           # real: conjugate pairs on the axis
    a[5:37] = mixed_spectra(rng, 32, n)               # real eigenvalues and pairs, mixed
    if jcm.gpu_available():
        # (JAX's CPU eig returns ?geev's eigenvalues of the matrix it scaled, for a norm beyond
        # 2^40 in float32: these rows check the kernel.)
        a[127] = a[127] * big                         # products overflow unscaled
        a[129] = a[129] / big                         # and underflow
    a[128, n - 1, 0] = np.nan
    a[255, 0, 0] = np.inf
    bad = np.array([128, 255])
    good = np.setdiff1d(np.arange(len(a)), np.r_[bad, 3])
    w, v = (np.asarray(x) for x in jit_call(eig, a, strategy="batched"))
    check_eig(a[good], w[good], v[good], dtype)
    assert np.isnan(w[bad]).all() and np.isnan(v[bad]).all()
    np.testing.assert_array_equal(w[0], 0)
    np.testing.assert_array_equal(w[1], 1)
    np.testing.assert_array_equal(v[1], np.eye(n))
    np.testing.assert_array_equal(np.sort(w[2].real), np.sort(np.arange(n) % 2))
    # The Jordan block's eigenvalue is 3 to about eps^(1/n) (as LAPACK's), its vectors all e_1.
    eps = np.finfo(np.dtype(dtype)).eps
    assert np.abs(w[3] - 3).max() <= 10 * eps ** (1 / n)
    assert np.abs(np.abs(v[3][0]) - 1).max() <= 10 * eps ** (1 / n)
    if not is_complex(dtype):
        # Exact conjugate pairs, and a pair's vectors conjugate too.
        np.testing.assert_array_equal(np.sort_complex(w), np.sort_complex(np.conj(w)))
        pair = np.abs(w.imag) > 0
        first = pair & (np.cumsum(pair, axis=-1) % 2 == 1)
        rows, cols = np.nonzero(first & ~np.isnan(w))
        np.testing.assert_array_equal(w[rows, cols + 1], np.conj(w[rows, cols]))
        np.testing.assert_array_equal(v[rows, :, cols + 1], np.conj(v[rows, :, cols]))
    vals = np.asarray(jit_call(eigvals, a, strategy="batched"))
    assert np.isnan(vals[bad]).all()
    assert match_distance(vals[good], w[good]) <= rtol_for(dtype, n) * float(
        np.max(_norm2(a[good])))


def test_the_tiny_kernel_runs_without_the_guard(claim_extension):
    # The kernel writes NaN itself: no is_finite pass and no mask around its call.
    text = lowered_text(lambda a: eig(a, strategy="batched"), (300, 4, 4), np.float32, "cuda")
    assert "jcm_geev" in text and "is_finite" not in text
    text = lowered_text(lambda a: eig(a, strategy="looped"), (300, 4, 4), np.float32, "cuda")
    assert "jcm_geev" in text and "is_finite" in text


# ---------------------------------------------------------------------------------------------
# Transformations
# ---------------------------------------------------------------------------------------------


def test_vmap_any_axis_and_nested(rng):
    a = random_matrix(rng, (3, 4, 6, 6), np.float64, "general")
    w, v = eig(a)
    for axis in (0, 1, 2):
        moved = np.moveaxis(a, 0, axis)
        w2, v2 = jax.vmap(eig, in_axes=axis)(moved)
        # vmap over a matrix axis maps over other matrices: compare with those.
        check_eig(np.moveaxis(moved, axis, 0), w2, v2, np.float64)
    w3, v3 = jax.jit(jax.vmap(jax.vmap(lambda m: eig(m, strategy="looped", lanes=3))))(a)
    assert rel_err(w3, w, 1) <= 1e-12 and rel_err(v3, v) <= 1e-12


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=ids)
def test_check_grads(rng, dtype):
    spectrum = [1, -2, 3.5, 0.25, 5] if not is_complex(dtype) else [1, -2j, 3 + 1j, 0.5, 4]
    a = with_eigenvectors(rng, (2,), spectrum, dtype)
    # First order only, as JAX: eigenvalue tangents use the eigenvectors, whose derivatives
    # need enable_eigvec_derivs.
    check_grads(jax.jit(eigvals), (a,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)
    f = jax.jit(lambda a: lax_eig(a, compute_left_eigenvectors=False, enable_eigvec_derivs=True))
    check_grads(f, (a,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


def test_jvp_matches_jax(rng):
    a = with_eigenvectors(rng, (), [1, 2 + 1j, -3, 4 - 2j, 6j], np.complex128)
    da = random_rhs(rng, (5, 5), np.complex128)
    for left in (False, True):
        f = lambda a: lax_eig(a, compute_left_eigenvectors=left, enable_eigvec_derivs=True)
        g = lambda a: jax.lax.linalg.eig(a, compute_left_eigenvectors=left,
                                         enable_eigvec_derivs=True)
        _, got = jax.jvp(f, (a,), (da,))
        _, ref = jax.jvp(g, (a,), (da,))
        for x, y in zip(got, ref):
            assert rel_err(x, y, x.ndim) <= 1e-9
    _, got = jax.jvp(eigvals, (a,), (da,))
    _, ref = jax.jvp(jnp.linalg.eigvals, (a,), (da,))
    assert rel_err(got, ref, 1) <= 1e-9


def test_eigenvector_derivatives_need_opt_in_like_jax(rng):
    a = random_matrix(rng, (4, 4), np.float64, "general")
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs"):
        jax.jvp(eig, (a,), (a,))
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs"):
        jax.grad(lambda a: jnp.sum(jnp.abs(lax_eig(a)[1])))(a)


# ---------------------------------------------------------------------------------------------
# Lowering
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=ids)
def test_cuda_lowering_uses_ffi(claim_extension, ours_measured_faster, strategy, dtype):
    calls = {
        "eig": (lambda a: eig(a, strategy=strategy), 1),
        "eigvals": (lambda a: eigvals(a, strategy=strategy), 0),
        "grad eigvals": (jax.grad(lambda a: jnp.sum(jnp.abs(eigvals(a, strategy=strategy)))), 1),
    }
    for name, (fn, right) in calls.items():
        text = lowered_text(fn, (4, 9, 9), dtype, "cuda")
        assert "jcm_geev" in text and f"compute_right_eigenvectors = {right}" in text, name
        assert "cusolver_geev" not in text, name
    # Left eigenvectors: JAX's own implementation (cuSOLVER has none).
    text = lowered_text(lambda a: lax_eig(a, strategy=strategy), (4, 9, 9), dtype, "cuda")
    assert "jcm_geev" not in text


def test_cpu_lowering_has_no_ffi_call():
    text = lowered_text(lambda a: eig(a, strategy="looped"), (3, 5, 5), np.float64, "cpu")
    assert "jcm_geev" not in text and "geev" in text


def test_explain_knows_eig():
    for op in ("eig", "eigvals", "lax_eig", "geev"):
        plan = jcm.explain(op, (8, 16, 16), np.float32, lanes=4)
        assert plan.strategy == "looped" and plan.lanes == 4
        # The batched geev is the tiny-matrix kernel: asking for it above n = 4 is refused,
        # naming the op and why.
        with pytest.raises(ValueError, match="cannot run a 16 x 16 matrix: the matrix is larger"):
            jcm.explain(op, (8, 16, 16), np.float32, strategy="batched")
        plan = jcm.explain(op, (10000, 3, 3), np.float32, strategy="batched")
        assert (plan.strategy, plan.lanes) == ("batched", 1)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------

_CALLS = {"eig": eig, "eigvals": eigvals, "lax_eig": lax_eig}


@pytest.mark.parametrize("bad_dtype", [np.float16], ids=ids)
@pytest.mark.parametrize("op", sorted(_CALLS))
def test_unsupported_dtype_raises_type_error(op, bad_dtype):
    with pytest.raises(TypeError, match=np.dtype(bad_dtype).name):
        _CALLS[op](np.eye(4).astype(bad_dtype))


@pytest.mark.parametrize("shape", [(4,), (), (3, 4), (2, 5, 3)], ids=ids)
@pytest.mark.parametrize("op", sorted(_CALLS))
def test_wrong_rank_or_not_square_raises_value_error(op, shape):
    with pytest.raises(ValueError, match="rank|square"):
        _CALLS[op](np.ones(shape, np.float32))


def test_bad_options_raise():
    for kwargs in (dict(strategy="fastest"), dict(lanes=0)):
        with pytest.raises(ValueError):
            eig(np.eye(3), **kwargs)
