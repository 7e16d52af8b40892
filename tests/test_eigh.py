"""Tests for the symmetric / Hermitian eigendecomposition: eigh, eigvalsh, lax_eigh.

Eigenvectors are fixed only up to a sign / phase (and inside a repeated eigenvalue, up to a
rotation of the eigenspace), so results are checked through what is unique: eigenvalues,
reconstruction V diag(w) V^H = A, orthonormality, and the spectral projectors of eigenvalue
clusters. References: float64 NumPy and jax.numpy.linalg. On CPU every strategy runs JAX's own
implementation; the GPU run covers the FFI paths (both algorithms, every strategy).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jax_cusolver_ms as jcm
from jax_cusolver_ms.eigh import eigh, eigvalsh, lax_eigh
from conftest import (
    ALL_STRATEGIES,
    DTYPES,
    TINY_KERNEL_BATCH,
    TINY_KERNEL_N,
    conj_t,
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
IMPLEMENTATIONS = ("qr", "jacobi")
# (batch..., n, n): n = 1, batch 0 and 1, several batch dims; n = 40 is above the Jacobi cut-off
# (32) that implementation=None uses, so both algorithms run under the default.
SHAPES = [(1, 1), (6, 6), (0, 4, 4), (1, 5, 5), (2, 3, 7, 7), (3, 40, 40)]


def hermitian(rng, shape, dtype):
    a = random_matrix(rng, shape, dtype, "general")
    return ((a + conj_t(a)) / 2).astype(dtype)


def with_spectrum(rng, batch, spectrum, dtype):
    """Q diag(spectrum) Q^H for random unitary Q (float64 construction)."""
    n = len(spectrum)
    q, _ = np.linalg.qr(widened(random_matrix(rng, tuple(batch) + (n, n), dtype, "general")))
    return ((q * np.asarray(spectrum, float)) @ conj_t(q)).astype(dtype), q


def check_eigh(a, w, v, dtype, hermitian_a=None):
    """w ascending and real, V^H V = I, V diag(w) V^H = A, w = float64 NumPy's."""
    a_h = a if hermitian_a is None else hermitian_a
    *batch, n, _ = a.shape
    real = np.finfo(np.dtype(dtype)).dtype
    assert w.shape == tuple(batch) + (n,) and w.dtype == real, (w.shape, w.dtype)
    assert v.shape == a.shape and v.dtype == np.dtype(dtype), (v.shape, v.dtype)
    w, v = np.asarray(w), np.asarray(v)
    assert np.all(np.isfinite(w)) and np.all(np.isfinite(v)), "finite input gave non-finite output"
    assert np.all(np.diff(w, axis=-1) >= 0), "eigenvalues not ascending"
    tol = rtol_for(dtype, n)
    eye = np.broadcast_to(np.eye(n), v.shape)
    assert rel_err(conj_t(widened(v)) @ widened(v), eye) <= tol, "V^H V != I"
    scale = np.linalg.norm(widened(a_h), 2, axis=(-2, -1), keepdims=True) if a.size else 1
    recon = (widened(v) * widened(w)[..., None, :]) @ conj_t(widened(v))
    assert np.max(np.abs(recon - widened(a_h)) / np.maximum(scale, 1e-300), initial=0) <= tol, \
        "V diag(w) V^H != A"
    if a.size:
        w_ref = np.linalg.eigvalsh(widened(a_h))
        assert np.max(np.abs(w - w_ref) / np.maximum(scale[..., 0], 1e-300)) <= tol, \
            "eigenvalues != NumPy's"


def projector(v, w, lo, hi):
    """The spectral projector onto the eigenvalues in [lo, hi)."""
    mask = ((w >= lo) & (w < hi))[..., None, :]
    v = widened(v)
    return (v * mask) @ conj_t(v)


# ---------------------------------------------------------------------------------------------
# eigh / eigvalsh
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,shape,strategy", strategy_grid(DTYPES, SHAPES))
def test_eigh(rng, dtype, shape, strategy):
    a = hermitian(rng, shape, dtype)
    w, v = jit_call(eigh, a, strategy=strategy)
    check_eigh(a, w, v, dtype)
    ref_w, ref_v = jnp.linalg.eigh(a)
    assert w.dtype == ref_w.dtype and v.dtype == ref_v.dtype
    tol = rtol_for(dtype, shape[-1])
    if a.size:
        assert rel_err(w, ref_w, 1) <= tol, "eigenvalues != jnp's"
    np.testing.assert_array_equal(np.asarray(jit_call(eigvalsh, a, strategy=strategy)),
                                  np.asarray(w))


@pytest.mark.parametrize("dtype,implementation,strategy",
                         strategy_grid(DTYPES, IMPLEMENTATIONS))
@pytest.mark.parametrize("n", [8, 33], ids=ids)
def test_implementations_agree(rng, dtype, implementation, strategy, n):
    # Well-separated spectrum: every eigenvector is unique up to phase, so |V1^H V2| = I.
    spectrum = np.arange(n) - n / 2
    a, q = with_spectrum(rng, (5,), spectrum, dtype)
    w, v = jit_call(eigh, a, implementation=implementation, strategy=strategy)
    check_eigh(a, w, v, dtype)
    overlap = np.abs(conj_t(widened(v)) @ q)
    assert rel_err(overlap, np.broadcast_to(np.eye(n), overlap.shape)) <= rtol_for(dtype, n) * n
    other = "qr" if implementation == "jacobi" else "jacobi"
    w2, _ = jit_call(eigh, a, implementation=jax.lax.linalg.EighImplementation(other),
                     strategy=strategy)
    assert rel_err(w, w2, 1) <= rtol_for(dtype, n)


@pytest.mark.parametrize("dtype,uplo,strategy", strategy_grid(DTYPES, ["L", "U"]))
def test_one_triangle_without_symmetrize(rng, dtype, uplo, strategy):
    a = hermitian(rng, (3, 9, 9), dtype)
    garbage = random_matrix(rng, (3, 9, 9), dtype, "general")
    other = np.triu(garbage, 1) if uplo == "L" else np.tril(garbage, -1)
    kept = np.tril(a) if uplo == "L" else np.triu(a)
    w, v = jit_call(eigh, kept + other, UPLO=uplo, symmetrize_input=False, strategy=strategy)
    check_eigh(a, w, v, dtype)
    ref_w, _ = jnp.linalg.eigh(kept + other, UPLO=uplo, symmetrize_input=False)
    assert rel_err(w, ref_w, 1) <= rtol_for(dtype, 9)
    # lax_eigh's `lower` is the same switch.
    v2, w2 = jit_call(lax_eigh, kept + other, lower=uplo == "L", symmetrize_input=False,
                      sort_eigenvalues=False, strategy=strategy)
    assert rel_err(w2, w, 1) <= rtol_for(dtype, 9) and v2.shape == v.shape


@pytest.mark.parametrize("dtype,implementation,strategy",
                         strategy_grid(DTYPES, IMPLEMENTATIONS))
def test_repeated_and_clustered_eigenvalues(rng, dtype, implementation, strategy):
    eps = np.finfo(np.dtype(dtype)).eps
    spectrum = [-2, -2, -2, 0.5, 1, 1 + 100 * eps, 1 + 200 * eps, 3, 3]
    a, q = with_spectrum(rng, (4,), spectrum, dtype)
    w, v = jit_call(eigh, a, implementation=implementation, strategy=strategy)
    check_eigh(a, w, v, dtype)
    truth = np.sort(spectrum)
    assert np.max(np.abs(np.asarray(w) - truth)) <= rtol_for(dtype, 9) * 3
    # The eigenspace of each cluster is unique even where its basis is not.
    for lo, hi in [(-3, -1), (0.9, 1.1), (2, 4)]:
        inside = (truth >= lo) & (truth < hi)
        ref = (q * inside) @ conj_t(q)
        assert rel_err(projector(v, np.asarray(w), lo, hi), ref) <= rtol_for(dtype, 9) * 10


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_nan_input_stays_in_its_matrix(rng, dtype, strategy):
    a = hermitian(rng, (3, 6, 6), dtype)
    a[1, 2, 3] = a[1, 3, 2] = np.nan
    w, v = jit_call(eigh, a, strategy=strategy)
    assert np.isnan(np.asarray(w[1])).any(), "NaN input gave NaN-free eigenvalues"
    check_eigh(a[[0, 2]], w[np.array([0, 2])], v[np.array([0, 2])], dtype)


# ---------------------------------------------------------------------------------------------
# The Jacobi kernel (batched strategy, n <= 32; `auto`'s choice there on the GPU)
# ---------------------------------------------------------------------------------------------

KERNEL_NS = list(range(1, 33))  # every m / 2: thread layout and leading dimension differ


@requires_gpu
@pytest.mark.parametrize("n,dtype", rotated_grid(DTYPES, KERNEL_NS))
def test_jacobi_kernel_every_size(rng, dtype, n):
    # Odd n runs with a padding row and column; n = 32 is the kernel's largest.
    a = hermitian(rng, (5, n, n), dtype)
    w, v = jit_call(eigh, a, strategy="batched")
    check_eigh(a, w, v, dtype)
    w_auto, _ = jit_call(eigh, a)
    assert rel_err(w_auto, w, 1) <= rtol_for(dtype, n)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("scale_exp", ["huge", "tiny"])
def test_jacobi_kernel_extreme_scales(rng, dtype, scale_exp):
    # Squares of these entries overflow / underflow the dtype: the kernel's power-of-two scaling
    # keeps them in range.
    big = np.finfo(np.dtype(dtype)).max ** 0.75
    scale = big if scale_exp == "huge" else 1 / big
    a = (hermitian(rng, (3, 12, 12), dtype) * scale).astype(dtype)
    w, v = jit_call(eigh, a, strategy="batched")
    check_eigh(a, w, v, dtype)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_jacobi_kernel_special_matrices(rng, dtype):
    n = 10
    zero = np.zeros((n, n), dtype)
    diag = np.diag(rng.permutation(n).astype(dtype) - 3)
    # Graded: eigenvalues from 1 down to 1e-6 (float32: resolved only to eps * |A|).
    graded, _ = with_spectrum(rng, (), np.logspace(0, -6, n) * (-1) ** np.arange(n), dtype)
    a = np.stack([zero, diag, graded, np.eye(n, dtype=dtype)])
    w, v = jit_call(eigh, a, strategy="batched")
    check_eigh(a, w, v, dtype)
    np.testing.assert_array_equal(np.asarray(w[0]), 0)
    np.testing.assert_array_equal(np.asarray(w[1]), np.arange(n) - 3)
    np.testing.assert_array_equal(np.asarray(w[3]), 1)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=ids)
def test_jacobi_kernel_nonfinite_input(rng, dtype, bad):
    a = hermitian(rng, (3, 9, 9), dtype)
    a[1, 4, 2] = a[1, 2, 4] = bad
    w, v = jit_call(eigh, a, strategy="batched")
    assert np.isnan(np.asarray(w[1])).all() and np.isnan(np.asarray(v[1])).all()
    check_eigh(a[[0, 2]], w[np.array([0, 2])], v[np.array([0, 2])], dtype)
    # Only the triangle read counts: the same value in the other one changes nothing.
    kept = np.tril(hermitian(rng, (9, 9), dtype))
    kept[2, 4] = bad
    w, v = jit_call(eigh, kept, symmetrize_input=False, strategy="batched")
    check_eigh(kept, w, v, dtype, hermitian_a=np.tril(kept) + conj_t(np.tril(kept, -1)))


@requires_gpu
@pytest.mark.parametrize("n,dtype", rotated_grid(DTYPES, TINY_KERNEL_N))
def test_tiny_jacobi_kernel_over_blocks_degenerate_scaled_and_non_finite(rng, dtype, n):
    # A thread per matrix, 128 a block: special matrices at both edges of a block.
    a = hermitian(rng, (TINY_KERNEL_BATCH, n, n), dtype)
    big = np.finfo(np.dtype(dtype)).max ** 0.75
    a[0] = 0
    a[1] = np.eye(n)                                  # one eigenvalue n times
    a[2] = np.diag(np.arange(n)[::-1] % 2)            # repeated, out of order
    a[127] = a[127] * big                             # squares overflow unscaled
    a[129] = a[129] / big                             # and underflow
    a[130] = with_spectrum(rng, (), 1 + np.arange(n) * 1e-5, dtype)[0]  # nearly degenerate
    a[128, n - 1, 0] = a[128, 0, n - 1] = np.nan
    a[255, 0, 0] = np.inf
    bad = np.array([128, 255])
    good = np.setdiff1d(np.arange(len(a)), bad)
    w, v = (np.asarray(x) for x in jit_call(eigh, a, strategy="batched"))
    check_eigh(a[good], w[good], v[good], dtype)
    assert np.isnan(w[bad]).all() and np.isnan(v[bad]).all()
    np.testing.assert_array_equal(w[0], 0)
    np.testing.assert_array_equal(w[1], 1)
    np.testing.assert_array_equal(w[2], np.sort(np.arange(n)[::-1] % 2))
    # Only the triangle read counts, lower or upper.
    for lower in (True, False):
        kept = np.tril(a[:4]) if lower else np.triu(a[:4])
        full = kept + conj_t(kept) - np.einsum("...ii->...i", kept)[..., None] * np.eye(n)
        w_t, v_t = (np.asarray(x) for x in jit_call(eigh, kept, UPLO="L" if lower else "U",
                                                     symmetrize_input=False, strategy="batched"))
        check_eigh(full, w_t, v_t, dtype)


def test_auto_takes_the_jacobi_kernel_up_to_32(ours_measured_faster):
    for shape in [(1, 16, 16), (4, 32, 32), (256, 8, 8), (3, 1, 1)]:
        plan = jcm.explain("eigh", shape, np.float32)
        assert (plan.op, plan.strategy, plan.lanes) == ("syevj", "batched", 1), plan
    assert jcm.explain("eigh", (4, 33, 33), np.float32).op == "syevd"


def test_the_jacobi_kernel_runs_without_the_guard(claim_extension):
    # The kernel writes NaN itself: no is_finite pass and no mask around its call.
    text = lowered_text(lambda a: eigh(a, strategy="batched"), (4, 16, 16), np.float32, "cuda")
    assert "jcm_syevd" in text and "is_finite" not in text
    text = lowered_text(lambda a: eigh(a, strategy="looped"), (4, 16, 16), np.float32, "cuda")
    assert "jcm_syevd" in text and "is_finite" in text


def test_sort_eigenvalues_and_implementation_options(rng):
    a = hermitian(rng, (2, 12, 12), np.float64)
    for impl in (None, "qr", "jacobi", jax.lax.linalg.EighImplementation.JACOBI):
        v, w = lax_eigh(a, sort_eigenvalues=False, implementation=impl)
        check_eigh(a, w, v, np.float64)


# ---------------------------------------------------------------------------------------------
# Transformations
# ---------------------------------------------------------------------------------------------


def test_vmap_any_axis_and_nested(rng):
    a = hermitian(rng, (3, 4, 7, 7), np.complex64)
    ref_w = np.asarray(eigvalsh(a))
    tol = rtol_for(np.complex64, 7)
    for axis in (0, 1):
        got = jax.vmap(eigvalsh, in_axes=axis, out_axes=axis)(np.moveaxis(a, 0, axis)
                                                              if axis else a)
        assert rel_err(got, np.moveaxis(ref_w, 0, axis) if axis else ref_w, 1) <= tol
    # The matrix axes in other places: vmap over a matrix's row axis of a stack.
    stacked = np.moveaxis(a[0], 0, 2)  # (7, 7, 4): item k is stacked[:, :, k]
    got = jax.vmap(eigvalsh, in_axes=2)(stacked)
    assert rel_err(got, ref_w[0], 1) <= tol
    nested = jax.jit(jax.vmap(jax.vmap(lambda m: eigh(m, strategy="looped", lanes=2))))
    w, v = nested(a)
    check_eigh(a, w, v, np.complex64)


GRAD_CASES = [((5, 5), np.float64), ((2, 4, 4), np.complex128), ((1, 1), np.float64)]


@pytest.mark.parametrize("shape,dtype", GRAD_CASES, ids=ids)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_check_grads(rng, shape, dtype, implementation):
    n = shape[-1]
    a, _ = with_spectrum(rng, shape[:-2], np.arange(n) * 1.5 - 2, dtype)
    f = jax.jit(lambda a: eigh(a, implementation=implementation))
    # Eigenvectors' phases are not differentiable: check gauge-free functions of them.
    g = jax.jit(lambda a: (lambda w, v: (w, jnp.abs(v) ** 2))(*eigh(a, implementation=implementation)))
    check_grads(g, (a,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)
    check_grads(lambda a: f(a).eigenvalues, (a,), order=2, modes=("fwd", "rev"), atol=1e-6,
                rtol=1e-6)


def test_jvp_matches_jax(rng):
    a, _ = with_spectrum(rng, (2,), np.arange(6) - 2.5, np.complex128)
    da = hermitian(rng, (2, 6, 6), np.complex128) + 0.3 * random_rhs(rng, (2, 6, 6), np.complex128)
    for uplo, sym in (("L", True), ("U", False)):
        (w1, v1), (dw1, dv1) = jax.jvp(lambda a: eigh(a, uplo, sym), (a,), (da,))
        (w2, v2), (dw2, dv2) = jax.jvp(lambda a: jnp.linalg.eigh(a, uplo, sym), (a,), (da,))
        assert rel_err(dw1, dw2, 1) <= 1e-10
        # Same phases on CPU (same LAPACK call): the vector tangents agree outright.
        assert rel_err(dv1, dv2) <= 1e-10 or not np.allclose(v1, v2)


# ---------------------------------------------------------------------------------------------
# Lowering: the FFI target on CUDA (Jacobi up to n = 32 by default), none on CPU
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=ids)
def test_cuda_lowering_uses_ffi(claim_extension, ours_measured_faster, strategy, dtype):
    calls = {"eigh": lambda a: eigh(a, strategy=strategy),
             "eigvalsh": lambda a: eigvalsh(a, strategy=strategy),
             "grad": jax.grad(lambda a: jnp.sum(eigvalsh(a, strategy=strategy) ** 3))}
    for name, fn in calls.items():
        for n, jacobi in ((16, 1), (40, 0)):
            text = lowered_text(fn, (4, n, n), dtype, "cuda")
            routine = "syevj" if jacobi else "syevd"
            if jcm.explain(routine, (4, n, n), dtype, strategy=strategy).uses_ffi:
                assert "jcm_syevd" in text and f"jacobi = {jacobi}" in text, (name, n)
                assert "cusolver_syevd" not in text, name
            else:  # auto where JAX's lowering calls the same batched routine
                assert "jcm_syevd" not in text and "cusolver_syevd" in text, (name, n)
    text = lowered_text(lambda a: eigh(a, implementation="jacobi"), (4, 40, 40), dtype, "cuda")
    assert "jacobi = 1" in text


def test_cpu_lowering_has_no_ffi_call():
    text = lowered_text(lambda a: eigh(a, strategy="looped"), (3, 5, 5), np.float64, "cpu")
    assert "jcm_syevd" not in text and "syevd" in text


def test_explain_knows_eigh():
    for op in ("eigh", "eigvalsh", "lax_eigh", "syevd", "syevj"):
        plan = jcm.explain(op, (8, 16, 16), np.float32)
        assert plan.strategy in ("looped", "sequential", "batched", "xla") and plan.lanes >= 1
    # The Jacobi kernel takes n <= 32 only: a larger batched Jacobi call is refused.
    with pytest.raises(ValueError, match="larger than the batched kernel takes"):
        jcm.explain("syevj", (8, 64, 64), np.float32, strategy="batched")


# ---------------------------------------------------------------------------------------------
# Bad input: clear errors
# ---------------------------------------------------------------------------------------------

_CALLS = {"eigh": eigh, "eigvalsh": eigvalsh, "lax_eigh": lax_eigh}


@pytest.mark.parametrize("bad_dtype", [np.float16], ids=ids)
@pytest.mark.parametrize("op", sorted(_CALLS))
def test_unsupported_dtype_raises_type_error(op, bad_dtype):
    a = np.eye(4).astype(bad_dtype)
    with pytest.raises(TypeError, match=np.dtype(bad_dtype).name):
        _CALLS[op](a)


@pytest.mark.parametrize("shape", [(4,), (), (3, 4), (2, 5, 3)], ids=ids)
@pytest.mark.parametrize("op", sorted(_CALLS))
def test_wrong_rank_or_not_square_raises_value_error(op, shape):
    with pytest.raises(ValueError, match="rank|square"):
        _CALLS[op](np.ones(shape, np.float32))


@pytest.mark.parametrize("uplo", ["l", "upper", "", 0])
def test_bad_uplo_raises_value_error(uplo):
    with pytest.raises(ValueError, match="UPLO"):
        eigh(np.eye(3), uplo)
    with pytest.raises(ValueError, match="UPLO"):
        eigvalsh(np.eye(3), uplo)


def test_bad_options_raise():
    a = np.eye(3)
    for kwargs in (dict(strategy="fastest"), dict(lanes=0), dict(implementation="qdwh")):
        with pytest.raises(ValueError):
            eigh(a, **kwargs)


# ---------------------------------------------------------------------------------------------
# The generalized problem (SciPy's eigh(a, b, type=...)), on any batch
# ---------------------------------------------------------------------------------------------


def _definite_pair(rng, shape, dtype):
    """A Hermitian A and a positive definite B (condition number ~ n), shape (..., n, n)."""
    g = random_matrix(rng, shape, dtype, "general")
    return (g + conj_t(g)) / 2, random_matrix(rng, shape, dtype, "spd")


def _generalized_residual(a, b, w, v, type_):
    """The pairs' residual and the normalization's defect, relative, in float64."""
    a, b, w, v = (widened(x) for x in (a, b, w, v))
    vw = v * w[..., None, :]
    residual = {1: a @ v - b @ vw, 2: a @ b @ v - vw, 3: b @ a @ v - vw}[type_]
    gram = conj_t(v) @ (np.linalg.inv(b) if type_ == 3 else b) @ v
    scale = np.linalg.norm(a) * np.linalg.norm(b) * max(1, np.linalg.norm(v)) ** 2
    return np.linalg.norm(residual) / scale, np.max(np.abs(gram - np.eye(v.shape[-1])))


@pytest.mark.parametrize("type_", [1, 2, 3])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shape,dtype", rotated_grid(DTYPES, [(3, 6, 6), (1, 1, 1),
                                                               (2, 2, 5, 5), (0, 4, 4)]),
                         ids=ids)
def test_generalized_eigh_is_scipys(rng, shape, dtype, type_, lower):
    import scipy.linalg
    a, b = _definite_pair(rng, shape, dtype)
    # Only the named triangle is read: the other holds garbage.
    garbage = random_matrix(rng, shape, dtype, "general")
    keep = np.tril if lower else np.triu
    a_in = keep(a) + (np.triu if lower else np.tril)(garbage, 1 if lower else -1)
    b_in = keep(b) + (np.triu if lower else np.tril)(garbage, 1 if lower else -1)
    w, v = jit_call(lambda a, b: jcm.generalized_eigh(a, b, lower=lower, type=type_), a_in, b_in)
    assert w.shape == shape[:-1] and v.shape == shape
    assert w.dtype == np.finfo(np.dtype(dtype)).dtype and v.dtype == np.dtype(dtype)
    n = shape[-1]
    flat = [(a.reshape((-1, n, n))[i], b.reshape((-1, n, n))[i])
            for i in range(int(np.prod(shape[:-2])))]
    w_ref = np.array([scipy.linalg.eigh(widened(x), widened(y), type=type_, eigvals_only=True)
                      for x, y in flat]).reshape(shape[:-1])
    tol = rtol_for(dtype, n, 100)
    assert rel_err(w, w_ref, 1) <= tol
    if w.size:
        residual, defect = _generalized_residual(a, b, w, v, type_)
        assert residual <= tol and defect <= tol, (residual, defect)


def sygvd_strategies():
    """auto, then the strategies the extension's limits give sygvd (batched only where the
    cuSOLVER built against has XsygvStridedBatched); all of them without the limits."""
    from jax_cusolver_ms import _ffi, strategy
    if _ffi.limits is None:
        return ALL_STRATEGIES
    return ("auto",) + tuple(s for s in ALL_STRATEGIES
                             if s in strategy.limits()["sygvd"]["strategies"])


@pytest.mark.parametrize("type_", [1, 2, 3])
@pytest.mark.parametrize("shape,dtype,strategy", strategy_grid([(3, 6, 6), (2, 40, 40), (1, 1, 1),
                                                                (0, 4, 4)], DTYPES), ids=ids)
def test_generalized_eigh_on_every_path_is_scipys(rng, shape, dtype, strategy, type_):
    # Every strategy of sygvd (?sygvd on lanes or XLA's stream, XsygvStridedBatched; auto: the
    # reduction where nothing is measured), with a NaN matrix and a B that is not definite
    # failing alone.
    import scipy.linalg
    if strategy not in sygvd_strategies():
        pytest.skip("the cuSOLVER built against has no XsygvStridedBatched (limits.h)")
    a, b = _definite_pair(rng, shape, dtype)
    poisoned = shape[0] >= 3
    if poisoned:
        a[0, 0, 0] = np.nan
        b[1] = -b[1]
    call = lambda a, b: jcm.generalized_eigh(a, b, type=type_, strategy=strategy, lanes=2)
    w, v = (np.asarray(x) for x in jit_call(call, a, b))
    assert w.shape == shape[:-1] and v.shape == shape
    n = shape[-1]
    tol = rtol_for(dtype, n, 100)
    for i in range(shape[0]):
        if poisoned and i < 2:
            assert np.isnan(w[i]).all() and np.isnan(v[i]).all(), i
            continue
        w_ref = scipy.linalg.eigh(widened(a[i]), widened(b[i]), type=type_, eigvals_only=True)
        assert rel_err(w[i], w_ref, 1) <= tol, i
        residual, defect = _generalized_residual(a[i], b[i], w[i], v[i], type_)
        assert residual <= tol and defect <= tol, (i, residual, defect)


@pytest.mark.parametrize("type_", [1, 2, 3])
def test_generalized_eigh_derivatives_by_types(rng, type_):
    # The JVP rule's three cases against finite differences of the primal (w, and the
    # gauge-free V diag(w) V^H), forward and reverse.
    a, b = _definite_pair(rng, (2, 4, 4), np.float64)
    check_grads(lambda a, b: jcm.generalized_eigh(a, b, type=type_, eigvals_only=True), (a, b),
                order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
    check_grads(lambda a, b: (lambda w, v: (v * w[..., None, :]) @ jnp.swapaxes(v, -1, -2))(
        *jcm.generalized_eigh(a, b, type=type_)), (a, b), order=1, modes=("fwd", "rev"),
        atol=1e-5, rtol=1e-5)


def test_generalized_eigh_complex_derivative(rng):
    a, b = _definite_pair(rng, (3, 3), np.complex128)
    check_grads(lambda a, b: jcm.generalized_eigh(a, b, eigvals_only=True), (a, b), order=1,
                modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


def test_generalized_eigh_lowers_to_sygvd_or_the_reduction(rng, claim_extension):
    from conftest import cuda_targets, table_where_ours_wins
    from jax_cusolver_ms import tables

    a, b = _definite_pair(rng, (8, 6, 6), np.float32)
    with tables.using(table_where_ours_wins()):
        assert "jcm_sygvd" in cuda_targets(lambda a, b: jcm.generalized_eigh(a, b, type=2), a, b)
    # Nothing measured: the reduction, its parts each JAX's own here.
    reduction = cuda_targets(lambda a, b: jcm.generalized_eigh(a, b, type=3), a, b)
    assert "jcm_sygvd" not in reduction and reduction
    for strategy in sygvd_strategies()[1:]:
        targets = cuda_targets(
            lambda a, b: jcm.generalized_eigh(a, b, eigvals_only=True, strategy=strategy), a, b)
        assert {t for t in targets if t.startswith("jcm_")} == {"jcm_sygvd"}, strategy


def test_generalized_eigh_subsets_broadcasts_and_the_scipy_mirror(rng):
    import scipy.linalg

    from jax_cusolver_ms.scipy import linalg as mirror
    a, b = _definite_pair(rng, (3, 7, 7), np.float64)
    w_all, v_all = jcm.generalized_eigh(a, b)
    w, v = jcm.generalized_eigh(a, b, subset_by_index=(2, 4))  # SciPy's: both ends included
    np.testing.assert_allclose(w, np.asarray(w_all)[..., 2:5], rtol=1e-12)
    assert v.shape == (3, 7, 3)
    w_ref = scipy.linalg.eigh(a[1], b[1], subset_by_index=(2, 4), eigvals_only=True)
    np.testing.assert_allclose(np.asarray(w)[1], w_ref, rtol=1e-10)
    # One B for the whole batch of A.
    w_one = jcm.generalized_eigh(a, b[0], eigvals_only=True)
    np.testing.assert_allclose(w_one[2], scipy.linalg.eigh(a[2], b[0], eigvals_only=True),
                               rtol=1e-10)
    # jax_cusolver_ms.scipy.linalg.eigh takes b, which JAX's refuses.
    with pytest.raises(NotImplementedError):
        jax.scipy.linalg.eigh(a[0], b[0])
    w_mirror, v_mirror = mirror.eigh(a, b, type=2)
    w2, v2 = jcm.generalized_eigh(a, b, type=2)
    np.testing.assert_allclose(w_mirror, w2, rtol=1e-12)
    assert mirror.eigh(a, b, eigvals_only=True).shape == (3, 7)
    # eigvals (SciPy's older name for subset_by_index), which JAX's eigh refuses.
    w_sub, v_sub = mirror.eigh(a, b, eigvals=(2, 4))
    np.testing.assert_allclose(w_sub, w, rtol=1e-12)
    np.testing.assert_allclose(np.abs(v_sub), np.abs(v), rtol=1e-10, atol=1e-12)
    h = (a[0] + a[0].T) / 2
    np.testing.assert_allclose(mirror.eigh(h, eigvals=(1, 3), eigvals_only=True),
                               scipy.linalg.eigh(h, subset_by_index=(1, 3), eigvals_only=True),
                               rtol=1e-10)
    assert mirror.eigh(h, eigvals=(0, 0))[1].shape == (7, 1)
    with pytest.raises(ValueError, match="eigh: eigvals must be"):
        mirror.eigh(a, b, eigvals=(4, 2))
    with pytest.raises(ValueError, match="eigh: eigvals must be"):
        mirror.eigh(h, eigvals=(0, 7))


def test_generalized_eigh_fails_only_the_matrix_whose_b_is_not_definite(rng):
    a, b = _definite_pair(rng, (4, 5, 5), np.float64)
    b[1] = -b[1]
    a[2, 1, 1] = np.nan
    w, v = (np.asarray(x) for x in jcm.generalized_eigh(a, b))
    for i in (1, 2):
        assert np.isnan(w[i]).all() and np.isnan(v[i]).all()
    for i in (0, 3):
        assert np.isfinite(w[i]).all() and np.isfinite(v[i]).all()
        assert max(_generalized_residual(a[i], b[i], w[i], v[i], 1)) <= 1e-10


def test_generalized_eigh_gradient(rng):
    a, b = _definite_pair(rng, (2, 4, 4), np.float64)
    check_grads(lambda a, b: jcm.generalized_eigh(a, b, eigvals_only=True), (a, b), order=1,
                modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
    # The vectors through a gauge-free function of them: V diag(w) V^H.
    check_grads(lambda a, b: (lambda w, v: (v * w[..., None, :]) @ jnp.swapaxes(v, -1, -2))(
        *jcm.generalized_eigh(a, b)), (a, b), order=1, modes=("rev",), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("call,error,match", [
    (lambda a, b: jcm.generalized_eigh(a, b, type=4), ValueError, "type must be one of"),
    (lambda a, b: jcm.generalized_eigh(a, b[..., :3, :3]), ValueError, "same order"),
    (lambda a, b: jcm.generalized_eigh(a, b, subset_by_index=(2, 5)), ValueError,
     "subset_by_index"),
    (lambda a, b: jcm.generalized_eigh(a[..., :3], b), ValueError, "square"),
    (lambda a, b: jcm.generalized_eigh(a.astype(np.float16), b.astype(np.float16)), TypeError,
     "generalized_eigh"),
])
def test_generalized_eigh_bad_arguments_raise(rng, call, error, match):
    a, b = _definite_pair(rng, (2, 5, 5), np.float32)
    with pytest.raises(error, match=match):
        call(a, b)
