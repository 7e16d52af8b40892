"""enable() / disable(): JAX's own linalg primitives lower to this package on CUDA.

The CUDA lowering is checked on any machine (cross-platform lowering, with the extension built
or claimed); the numbers on the GPU (unchanged jnp.linalg code, enabled vs not).
"""
import threading
import warnings

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import jax_cusolver_ms as jcm
from jax_cusolver_ms import dropin
from conftest import (DTYPES, assert_trees_close, cuda_targets, param_id, random_matrix,
                      random_rhs, requires_gpu)


def cuda_program(fn, *args):
    """jit(fn)'s CUDA lowering as text, for operands shaped as `args`."""
    structs = [jax.ShapeDtypeStruct(np.shape(a), np.dtype(a.dtype)) for a in args]
    return jax.jit(fn).trace(*structs).lower(lowering_platforms=("cuda",)).as_text()


def ours(targets):
    return {t for t in targets if t.startswith("jcm_")}


# Unchanged JAX code for each primitive enable() redirects, with the routine it runs here.
PROGRAMS = {
    "solve": (lambda a, b: jnp.linalg.solve(a, b), "square_rhs", "jcm_getrf"),
    "lu_factor": (lambda a: jsl.lu_factor(a), "square", "jcm_getrf"),
    "cholesky": (lambda a: jnp.linalg.cholesky(a), "spd", "jcm_potrf"),
    "cho_solve": (lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b), "spd_rhs", "jcm_potrf"),
    "eigh": (lambda a: jnp.linalg.eigh(a), "spd", "jcm_syevd"),
    "svd": (lambda a: jnp.linalg.svd(a, full_matrices=False), "rect", "jcm_gesvdj"),
    "eig": (lambda a: jnp.linalg.eig(a), "square", "jcm_geev"),
    "qr": (lambda a: jnp.linalg.qr(a), "rect", "jcm_geqrf"),
    "householder_product": (lambda a: jnp.linalg.qr(a)[0], "rect", "jcm_orgqr"),
    "qr_multiply": (lambda a, c: jsl.qr_multiply(a, c), "rect_c", "jcm_ormqr"),
    "solve_triangular": (lambda a, b: jsl.solve_triangular(a, b, lower=True), "square_rhs",
                         "jcm_trsm"),
}


def operands(rng, kind, dtype, batch=(3,), n=40):
    a = random_matrix(rng, batch + (n, n), dtype, "spd" if kind.startswith("spd") else "general")
    if kind.startswith("rect"):
        a = random_matrix(rng, batch + (n + 8, n), dtype, "general")
    if kind.endswith("rhs"):
        return a, random_rhs(rng, batch + (n, 2), dtype)
    if kind.endswith("_c"):
        return a, random_rhs(rng, batch + (5, n + 8), dtype)
    return (a,)


@pytest.mark.parametrize("name", PROGRAMS)
def test_enabled_jax_code_lowers_to_ours_and_disabled_to_jaxs(rng, claim_extension, switched_off,
                                                              name):
    fn, kind, target = PROGRAMS[name]
    args = operands(rng, kind, np.float32)
    jax_own = cuda_targets(fn, *args)
    assert not ours(jax_own)
    jcm.enable()
    assert jcm.enabled()
    # A strategy that runs the FFI everywhere (auto may hand a call to JAX, see below).
    with jcm.config(strategy="looped", lanes=2):
        enabled = cuda_targets(fn, *args)
    assert target in enabled, (name, enabled)
    assert not enabled & {t for t in jax_own if t.startswith("cusolver_")} - {"cusolver_ormqr_ffi"}
    jcm.disable()
    assert not jcm.enabled()
    assert cuda_targets(fn, *args) == jax_own


def test_auto_under_enable_hands_unmeasured_calls_to_jaxs_own_rule(rng, claim_extension,
                                                                   switched_off, monkeypatch):
    # Nothing measured for this GPU name: auto chooses JAX's lowering for every call, and
    # enable() then leaves JAX's program exactly as it is (no NaN guard around it, no
    # recursion into the redirected rule).
    from jax_cusolver_ms import tables
    monkeypatch.setattr(tables, "gpu_name", lambda: "a GPU no table knows")
    monkeypatch.setattr(tables, "gpu_arch", lambda: {})
    for name, (fn, kind, _) in PROGRAMS.items():
        args = operands(rng, kind, np.float32)
        jax_own = cuda_program(fn, *args)
        jcm.enable()
        try:
            assert cuda_program(fn, *args) == jax_own, name
        finally:
            jcm.disable()


@pytest.mark.parametrize("call,expect", [
    # Parameters this package does not implement: JAX's own rule, JAX's own answer.
    (lambda a: jax.lax.linalg.svd(a, algorithm=jax.lax.linalg.SvdAlgorithm.POLAR), None),
    (lambda a: jax.lax.linalg.eigh(a, implementation=jax.lax.linalg.EighImplementation.QDWH),
     None),
    (lambda a: jnp.linalg.svd(a, compute_uv=False), "jcm_gesvdj"),
    (lambda a: jax.lax.linalg.eig(a, compute_left_eigenvectors=False), "jcm_geev"),
], ids=["svd-polar", "eigh-qdwh", "svd-values", "eig-right"])
def test_parameters_we_do_not_implement_keep_jaxs_lowering(rng, claim_extension, switched_off,
                                                           call, expect):
    a = random_matrix(rng, (2, 12, 12), np.float32, "spd")
    try:
        jax_own = cuda_targets(call, a)
    except NotImplementedError:
        jax_own = None
    jcm.enable()
    with jcm.config(strategy="looped", lanes=2):
        if jax_own is None:  # JAX itself cannot lower it on CUDA: neither can we, the same way
            with pytest.raises(NotImplementedError):
                cuda_targets(call, a)
            return
        enabled = cuda_targets(call, a)
    if expect is None:
        assert enabled == jax_own
    else:
        assert expect in enabled


def test_a_composite_strategy_under_enable_lowers_as_ours(rng, claim_extension, switched_off):
    # The QR-first SVD binds this package's QR and SVD-of-R primitives, and each step may then
    # choose JAX's lowering (as here, with no table): the whole is still ours, a QR JAX's SVD
    # does not run, not JAX's rule taken for want of an FFI call at the top.
    a = random_matrix(rng, (2, 60, 6), np.float32, "general")
    svd = lambda a: jnp.linalg.svd(a, full_matrices=False)
    jax_own = cuda_targets(svd, a)
    assert not any("geqrf" in t for t in jax_own), jax_own
    jcm.enable()
    with jcm.config(strategy="blocked"):
        enabled = cuda_targets(svd, a)
    assert any("geqrf" in t for t in enabled), enabled


def test_left_eigenvectors_go_to_jaxs_rule_inside_ours(rng, claim_extension, switched_off):
    # No cuSOLVER routine computes them: geev's implementation binds JAX's eig, which must lower
    # through JAX's original rule (not back into ours).
    a = random_matrix(rng, (2, 6, 6), np.float32, "general")
    jax_own = cuda_targets(lambda a: jax.lax.linalg.eig(a), a)
    jcm.enable()
    with jcm.config(strategy="looped", lanes=2):
        assert cuda_targets(lambda a: jax.lax.linalg.eig(a), a) >= jax_own


@pytest.mark.parametrize("name", ["solve", "eigh", "svd", "qr", "cholesky"])
def test_enabled_cpu_results_are_jaxs(rng, switched_off, name):
    # Only the CUDA lowering changes: on the CPU enabled code is JAX's, bit for bit, under jit,
    # vmap and grad alike.
    fn, kind, _ = PROGRAMS[name]
    args = operands(rng, kind, np.float64, batch=(2,), n=6)
    loss = lambda *xs: sum(jnp.sum(jnp.abs(y) ** 2) for y in jax.tree.leaves(fn(*xs))
                           if jnp.issubdtype(y.dtype, jnp.inexact))
    before = (jax.jit(fn)(*args), jax.vmap(fn)(*args), jax.grad(loss)(*args))
    jcm.enable()
    after = (jax.jit(fn)(*args), jax.vmap(fn)(*args), jax.grad(loss)(*args))
    for x, y in zip(jax.tree.leaves(before), jax.tree.leaves(after)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_switching_retraces_functions_jitted_before(rng, claim_extension, switched_off):
    traces = []

    @jax.jit
    def f(a):
        traces.append(1)
        return jnp.linalg.inv(a)

    a = random_matrix(rng, (2, 5, 5), np.float64, "well_conditioned")
    f(a)
    f(a)
    assert len(traces) == 1
    jcm.enable()
    f(a)
    assert len(traces) == 2  # jax.clear_caches(): traced and lowered again under the new rules
    jcm.enable()  # a second enable changes nothing, clears nothing
    f(a)
    assert len(traces) == 2
    jcm.disable()
    f(a)
    assert len(traces) == 3


def test_a_primitive_missing_from_this_jax_is_skipped_with_a_warning(switched_off, monkeypatch):
    monkeypatch.setitem(dropin.REDIRECTS, "renamed_p", dropin.REDIRECTS["lu_p"])
    with pytest.warns(UserWarning, match=r"no CUDA lowering of lax.linalg.renamed_p"):
        jcm.enable()
    assert jcm.enabled()
    jcm.disable()
    assert not dropin._originals


def test_disable_leaves_a_primitive_without_a_cuda_rule_without_one(switched_off):
    # triangular_solve_p lowers by one rule on every platform: enable() adds a CUDA rule,
    # disable() removes it rather than registering JAX's rule for CUDA in its place.
    from jax._src.lax import linalg as lax_linalg
    from jax_cusolver_ms import _compat
    prim = lax_linalg.triangular_solve_p
    before = _compat.cuda_lowering(prim)
    jcm.enable()
    assert _compat.cuda_lowering(prim)[2]
    jcm.disable()
    assert _compat.cuda_lowering(prim) == before and not before[2]


def test_switching_from_many_threads_leaves_one_consistent_table(rng, claim_extension,
                                                                 switched_off):
    a, b = operands(rng, "square_rhs", np.float32, n=10)
    jax_own = cuda_targets(lambda a, b: jnp.linalg.solve(a, b), a, b)
    errors = []

    def switch(i):
        try:
            for _ in range(20):
                (jcm.enable if i % 2 else jcm.disable)()
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=switch, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    jcm.disable()
    assert cuda_targets(lambda a, b: jnp.linalg.solve(a, b), a, b) == jax_own
    jcm.enable()
    with jcm.config(strategy="looped", lanes=2):
        assert "jcm_getrf" in cuda_targets(lambda a, b: jnp.linalg.solve(a, b), a, b)


# ---------------------------------------------------------------------------------------------
# On the GPU: unchanged code, enabled vs not
# ---------------------------------------------------------------------------------------------


def gaussian_process_nll(x, y, lengthscale, noise):
    """A Gaussian process's negative log marginal likelihood, written with plain jnp / jsl."""
    d = x[:, None, :] - x[None, :, :]
    k = jnp.exp(-0.5 * jnp.sum(d * d, axis=-1) / lengthscale ** 2) + noise * jnp.eye(x.shape[0])
    c, lower = jsl.cho_factor(k, lower=True)
    alpha = jsl.cho_solve((c, lower), y)
    return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diagonal(c))) + 0.5 * x.shape[0] * jnp.log(
        2 * jnp.pi)


def least_squares_fit(a, b):
    """A batched least-squares fit through the normal equations and a QR, plain jnp."""
    q, r = jnp.linalg.qr(a)
    return jsl.solve_triangular(r, jnp.swapaxes(q, -1, -2) @ b, lower=False)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=param_id)
def test_enabled_gpu_results_match_jaxs(rng, switched_off, dtype):
    a = random_matrix(rng, (16, 48, 48), dtype, "well_conditioned")
    spd = random_matrix(rng, (16, 48, 48), dtype, "spd")
    b = random_rhs(rng, (16, 48, 3), dtype)
    programs = [
        (lambda: jnp.linalg.solve(a, b)), (lambda: jnp.linalg.inv(a)),
        (lambda: jnp.linalg.det(a)), (lambda: jnp.linalg.slogdet(a)),
        (lambda: jsl.lu_factor(a)[0]), (lambda: jnp.linalg.cholesky(spd)),
        (lambda: jnp.linalg.eigvalsh(spd)), (lambda: jnp.abs(jnp.linalg.eigh(spd)[1])),
        (lambda: jnp.linalg.svd(a, compute_uv=False)), (lambda: jnp.linalg.pinv(a)),
        (lambda: jnp.abs(jnp.linalg.qr(a)[1])), (lambda: jnp.sort_complex(jnp.linalg.eigvals(a))),
    ]
    reference = [jax.jit(p)() for p in programs]
    jcm.enable()
    for i, (p, ref) in enumerate(zip(programs, reference)):
        with jcm.config(strategy="looped", lanes=4) if i % 2 else jcm.config():
            got = jax.jit(p)()
        assert_trees_close(got, ref, dtype, 48, f"program {i}, enabled")


@requires_gpu
def test_a_library_code_path_is_unchanged_and_fast_path_taken(rng, switched_off):
    x = rng.standard_normal((64, 3))
    y = rng.standard_normal(64)
    grad = jax.jit(jax.grad(gaussian_process_nll, argnums=(2, 3)))
    a = rng.standard_normal((32, 40, 12))
    b = rng.standard_normal((32, 40, 2))
    before = grad(x, y, 1.3, 0.1), jax.jit(least_squares_fit)(a, b)
    jcm.enable()
    with jcm.config(strategy="looped", lanes=4):
        text = jax.jit(gaussian_process_nll).lower(x, y, 1.3, 0.1).as_text()
        after = grad(x, y, 1.3, 0.1), jax.jit(least_squares_fit)(a, b)
    assert "jcm_potrf" in text
    assert_trees_close(after, before, np.float64, 64, "enabled vs not")


@requires_gpu
def test_nan_input_gives_nan_under_enable(rng, switched_off):
    # Where this package's kernels run, NaN stays in its matrix; where `auto` hands the call to
    # JAX, the program is JAX's own, and so are its results.
    a = random_matrix(rng, (4, 20, 20), np.float32, "well_conditioned")
    a[1, 3, 4] = np.nan
    jcm.enable()
    with warnings.catch_warnings(), jcm.config(strategy="looped", lanes=2):
        warnings.simplefilter("ignore")
        x = np.asarray(jax.jit(jnp.linalg.inv)(a))
    assert np.isnan(x[1]).all() and np.isfinite(np.delete(x, 1, 0)).all()
