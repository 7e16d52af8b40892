"""Tests for the Cholesky family: cholesky, cho_factor, cho_solve.

Every result is checked against what it must satisfy (A = L L^H with the other triangle zero,
A x = b) with a per-dtype tolerance, and against float64 NumPy/SciPy and jax.numpy /
jax.scipy. On CPU every strategy runs JAX's own implementation, so the CPU run checks the API,
shape rules, NaN behaviour and transformations; the CUDA lowering is checked by exporting for
CUDA (no GPU needed); the GPU run (tests marked requires_gpu run there too) checks the FFI paths.
"""

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg
from jax.test_util import check_grads

import jax_cusolver_ms as jcm
import jax_cusolver_ms._ffi as jcm_ffi
from jax_cusolver_ms._compat import JAX_VERSION
from conftest import (
    ALL_STRATEGIES,
    DTYPES,
    FULL_GRID,
    ILL_CONDITION,
    SMALL_KERNEL_N,
    TINY_KERNEL_BATCH,
    TINY_KERNEL_N,
    assert_rejects_dtype,
    assert_trees_close,
    assert_vmap_in_axis,
    condition_number,
    exported_module_text,
    is_complex,
    numpy_solve,
    param_id,
    precision,
    random_matrix,
    random_rhs,
    rel_err,
    requires_gpu,
    rotated_grid,
    rtol_for,
    solve_residual,
    strategy_grid,
    wide_dtype,
)
from jax_cusolver_ms.cholesky import cho_factor, cho_solve, cholesky

ids = param_id
strategy_param = pytest.mark.parametrize("strategy", ALL_STRATEGIES)

# (batch..., n, n): n = 0 and 1, batch 0 and 1, several batch dims.
SHAPES = [(1, 1), (32, 32), (0, 4, 4), (1, 5, 5), (7, 8, 8), (2, 3, 4, 4), (3, 0, 0)]
# (shape, lower): each dtype meets both triangles.
CHO_FACTOR_CASES = [((1, 1), True), ((9, 9), False), ((0, 3, 3), True), ((1, 5, 5), False),
                    ((2, 3, 4, 4), True)]

# (c shape, b shape, lower) for jax.scipy.linalg.cho_solve (avoiding its deprecated "batched
# vector" case, tested on its own): b a vector, or matrices whose batch dims broadcast.
CHO_SOLVE_CASES = [
    ((1, 1), (1,), True),
    ((6, 6), (6,), False),
    ((24, 24), (24, 3), False),
    ((3, 7, 7), (3, 7, 2), True),
    ((3, 7, 7), (7, 2), False),
    ((3, 7, 7), (7,), True),
    ((2, 1, 5, 5), (3, 5, 1), False),
    ((0, 4, 4), (0, 4, 2), True),
]


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def herm(x):
    return np.conj(np.swapaxes(x, -1, -2))


def spd(rng, shape, dtype):
    return random_matrix(rng, shape, dtype, "spd")


def ill_conditioned_spd(rng, shape, dtype):
    """Q diag(s) Q^H with s log-spaced from 1 down to 1 / ILL_CONDITION (Hermitian PD)."""
    n = shape[-1]
    wide = wide_dtype(dtype)
    g = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if is_complex(dtype) else 0)
    q, _ = np.linalg.qr(g.astype(wide))
    s = np.logspace(0, -np.log10(ILL_CONDITION[precision(dtype)]), n)
    a = (q * s) @ herm(q)
    return ((a + herm(a)) / 2).astype(dtype)


def with_garbage(rng, a, keep_lower):
    """a with the triangle that must not be read (strictly upper if keep_lower) replaced."""
    noise = random_rhs(rng, a.shape, a.dtype) * 7
    return np.where(np.tri(a.shape[-1], dtype=bool) if keep_lower else
                    ~np.tri(a.shape[-1], k=-1, dtype=bool), a, noise).astype(a.dtype)


def reference_factor(a, lower):
    """float64/complex128 NumPy Cholesky factor of a (Hermitian PD), lower or upper."""
    a = np.asarray(a).astype(wide_dtype(a.dtype))
    if a.size == 0:
        return a
    l = np.linalg.cholesky(a)
    return l if lower else herm(l)


def check_factor(a, c, lower, dtype):
    """c factors the Hermitian PD a: shape, dtype, zero triangle, positive real diagonal,
    A = L L^H (lower) or U^H U (upper) to a backward-error tolerance."""
    a, c = np.asarray(a), np.asarray(c)
    assert c.dtype == np.dtype(dtype), c.dtype
    assert c.shape == a.shape, (c.shape, a.shape)
    if c.size == 0:
        return
    n = a.shape[-1]
    assert np.all(np.isfinite(c)), "a positive definite matrix gave non-finite factors"
    unused = ~np.tri(n, dtype=bool) if lower else ~np.tri(n, dtype=bool).T
    assert np.all(c[..., unused] == 0), "the unused triangle is not zero"
    diag = np.diagonal(c, axis1=-2, axis2=-1)
    assert np.all(diag.real > 0) and np.all(diag.imag == 0), f"diagonal {diag}"
    w = c.astype(wide_dtype(dtype))
    product = w @ herm(w) if lower else herm(w) @ w
    err = rel_err(product, a.astype(wide_dtype(dtype)))
    assert err <= rtol_for(dtype, n), f"||A - F F^H|| / ||A|| = {err:.3g}"


# ---------------------------------------------------------------------------------------------
# cholesky, cho_factor, cho_solve against JAX and NumPy/SciPy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,shape,strategy", strategy_grid(DTYPES, SHAPES))
def test_cholesky(rng, dtype, shape, strategy):
    a = spd(rng, shape, dtype)
    n = shape[-1]
    tol = rtol_for(dtype, n, condition_number(a))
    l = cholesky(jnp.asarray(a), strategy=strategy)
    check_factor(a, l, True, dtype)
    assert rel_err(l, reference_factor(a, True)) <= tol
    assert rel_err(l, jnp.linalg.cholesky(a)) <= tol

    u = cholesky(a, upper=True, strategy=strategy)
    check_factor(a, u, False, dtype)
    assert rel_err(u, jnp.linalg.cholesky(a, upper=True)) <= tol
    assert rel_err(u, herm(np.asarray(l))) <= tol

    # symmetrize_input=False reads only the lower triangle, for either output.
    garbage = with_garbage(rng, a, keep_lower=True)
    l2 = cholesky(garbage, symmetrize_input=False, strategy=strategy)
    assert rel_err(l2, l) <= tol
    assert rel_err(l2, jnp.linalg.cholesky(garbage, symmetrize_input=False)) <= tol
    u2 = cholesky(garbage, upper=True, symmetrize_input=False, strategy=strategy)
    assert rel_err(u2, u) <= tol


@pytest.mark.parametrize("dtype,case,strategy", strategy_grid(DTYPES, CHO_FACTOR_CASES))
def test_cho_factor(rng, dtype, case, strategy):
    shape, lower = case
    a = spd(rng, shape, dtype)
    n = shape[-1]
    tol = rtol_for(dtype, n, condition_number(a))
    # Only the `lower` (else upper) triangle of a is read, as in (jax.)scipy.
    garbage = with_garbage(rng, a, keep_lower=lower)
    c, lower_out = cho_factor(jnp.asarray(garbage), lower, strategy=strategy)
    assert lower_out is lower
    check_factor(a, c, lower, dtype)
    c_jax, _ = jsl.cho_factor(garbage, lower)
    assert rel_err(c, c_jax) <= tol
    assert rel_err(c, reference_factor(a, lower)) <= tol
    if a.ndim == 2 and n:
        # SciPy leaves its own input in the unused triangle; the used one must agree.
        c_sp, _ = scipy.linalg.cho_factor(garbage.astype(wide_dtype(dtype)), lower)
        used = np.tri(n, dtype=bool) if lower else np.tri(n, dtype=bool).T
        assert rel_err(np.where(used, c, 0), np.where(used, c_sp, 0)) <= tol


@pytest.mark.parametrize("dtype,case,strategy", strategy_grid(DTYPES, CHO_SOLVE_CASES))
def test_cho_solve(rng, dtype, case, strategy):
    c_shape, b_shape, lower = case
    a = spd(rng, c_shape, dtype)
    b = random_rhs(rng, b_shape, dtype)
    n = c_shape[-1]
    vector = len(b_shape) == 1
    c, _ = jsl.cho_factor(a, lower)
    x = cho_solve((c, lower), jnp.asarray(b), strategy=strategy)
    with jax.numpy_rank_promotion("allow"):  # JAX's cho_solve broadcasts an unbatched b
        x_jax = jsl.cho_solve((c, lower), b)
    assert x.shape == x_jax.shape and x.dtype == x_jax.dtype == np.dtype(dtype)
    core = 1 if vector else 2
    tol = rtol_for(dtype, n, condition_number(a))
    assert solve_residual(a, x, np.broadcast_to(b, x.shape), vector) <= rtol_for(dtype, n)
    assert rel_err(x, numpy_solve(a, b, vector), core) <= tol
    assert rel_err(x, x_jax, core) <= tol


def test_factors_interoperate_with_jax_and_scipy(rng):
    # Drop-in: factors from jax.scipy / SciPy (with its unused triangle left as garbage) work
    # with our cho_solve, and ours with jax.scipy's.
    a = spd(rng, (9, 9), np.float64)
    b = random_rhs(rng, (9, 2), np.float64)
    x_ref = numpy_solve(a, b, False)
    tol = rtol_for(np.float64, 9, condition_number(a))
    for lower in (True, False):
        garbage = with_garbage(rng, a, keep_lower=lower)
        for factors in (jsl.cho_factor(a, lower), scipy.linalg.cho_factor(garbage, lower)):
            for s in ALL_STRATEGIES:
                assert rel_err(cho_solve(factors, b, strategy=s), x_ref) <= tol, (lower, s)
        assert rel_err(jsl.cho_solve(cho_factor(a, lower), b), x_ref) <= tol


def test_cho_solve_batched_vector_is_deprecated_like_jax(rng):
    # b of shape c.shape[:-1]: one vector per matrix, with a FutureWarning (as jax.scipy).
    a = spd(rng, (3, 5, 5), np.float64)
    b = random_rhs(rng, (3, 5), np.float64)
    c = cho_factor(a, True)
    with pytest.warns(FutureWarning, match="cho_solve"):
        x = cho_solve(c, b)
    assert x.shape == (3, 5)
    x_ref = np.linalg.solve(a, b[..., None])[..., 0]
    assert rel_err(x, x_ref, 1) <= rtol_for(np.float64, 5, condition_number(a))


def test_cho_solve_promotes_like_jax(rng):
    a = spd(rng, (4, 4), np.float32)
    b = random_rhs(rng, (4, 2), np.complex128)
    factors = jsl.cho_factor(a)
    x = cho_solve(factors, b)
    x_jax = jsl.cho_solve(factors, b)
    assert x.dtype == x_jax.dtype
    assert rel_err(x, x_jax) <= rtol_for(np.float32, 4, condition_number(a))


# ---------------------------------------------------------------------------------------------
# Every strategy gives the same answer
# ---------------------------------------------------------------------------------------------


# On CPU every strategy runs the same JAX code: two dtypes suffice there.
@pytest.mark.parametrize("dtype", DTYPES if FULL_GRID else (np.float32, np.complex128), ids=ids)
def test_strategies_agree(rng, dtype):
    n = 32
    a = spd(rng, (6, n, n), dtype)
    b = random_rhs(rng, (6, n, 12), dtype)
    tol = rtol_for(dtype, n, condition_number(a))

    @functools.partial(jax.jit, static_argnames="s")
    def everything(a, b, s):
        c, _ = cho_factor(a, strategy=s)
        cl, _ = cho_factor(a, lower=True, strategy=s)
        return dict(
            l=cholesky(a, strategy=s),
            c=c,
            cl=cl,
            # One right-hand side (potrsBatched), a few, and many (XLA's solves under auto).
            x1=cho_solve((c, False), b[..., :1], strategy=s),
            x3=cho_solve((cl, True), b[..., :3], strategy=s),
            x12=cho_solve((c, False), b, strategy=s),
            xv=cho_solve((cl, True), b[0, :, 0], strategy=s),
        )

    results = {s: jax.tree.map(np.asarray, everything(a, b, s)) for s in ALL_STRATEGIES}
    x_ref = numpy_solve(a, b, False)
    for s, r in results.items():
        check_factor(a, r["l"], True, dtype)
        check_factor(a, r["c"], False, dtype)
        check_factor(a, r["cl"], True, dtype)
        assert rel_err(r["x12"], x_ref) <= tol, s
    base = results["looped"]
    for s, r in results.items():
        for key in base:
            assert rel_err(r[key], base[key], 1 if key == "xv" else 2) <= tol, f"{key}: {s}"


# ---------------------------------------------------------------------------------------------
# Not positive definite, NaN and ill-conditioned inputs: same behaviour as JAX
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_not_positive_definite_gives_nan_like_jax(rng, dtype, strategy):
    # Matrix 1 fails at a random leading minor, matrix 3 at the first; the rest must come out
    # as if factored alone (a path sharing info across the batch fails here).
    n = 8
    a = spd(rng, (5, n, n), dtype)
    k = rng.integers(1, n)
    a[1, k, k] = -n
    a[3] = -a[3]
    bad, good = [1, 3], [0, 2, 4]
    b = random_rhs(rng, (5, n, 2), dtype)
    tol = rtol_for(dtype, n, condition_number(a[good]))
    calls = {
        "cholesky": (lambda a: cholesky(a, strategy=strategy), jnp.linalg.cholesky),
        "cholesky_upper": (lambda a: cholesky(a, upper=True, strategy=strategy),
                           lambda a: jnp.linalg.cholesky(a, upper=True)),
        "cho_factor_lower": (lambda a: cho_factor(a, True, strategy=strategy)[0],
                             lambda a: jsl.cho_factor(a, True)[0]),
        "cho_factor_upper": (lambda a: cho_factor(a, strategy=strategy)[0],
                             lambda a: jsl.cho_factor(a)[0]),
    }
    for name, (ours, theirs) in calls.items():
        got, ref = np.asarray(ours(a)), np.asarray(theirs(a))
        # JAX: the used triangle all NaN, the other zero.
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=name)
        assert np.all(np.isnan(got[bad]).sum(axis=(-2, -1)) == n * (n + 1) // 2), name
        assert rel_err(got[good], ref[good]) <= tol, name
        lower = name in ("cholesky", "cho_factor_lower")
        check_factor(a[good], got[good], lower, dtype)
        x = np.asarray(cho_solve((got, lower), b, strategy=strategy))
        assert np.all(np.isnan(x[bad])), name
        assert rel_err(x[good], numpy_solve(a[good], b[good], False)) <= tol, name


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_nan_input_propagates(rng, dtype, strategy):
    n = 6
    a = spd(rng, (3, n, n), dtype)
    k = rng.integers(n)
    a[1, k, k] = np.nan
    for got in (cholesky(a, strategy=strategy), cholesky(a, upper=True, strategy=strategy),
                cho_factor(a, True, strategy=strategy)[0], cho_factor(a, strategy=strategy)[0]):
        got = np.asarray(got)
        assert np.any(np.isnan(got[1])), "NaN input did not propagate into the factor"
        assert np.all(np.isfinite(got[[0, 2]]))
    # A NaN right-hand side propagates through a good factorization, and only in its column.
    c = cho_factor(a[[0, 2]], strategy=strategy)
    b = random_rhs(rng, (2, n, 3), dtype)
    b[1, rng.integers(n), 2] = np.nan
    x = np.asarray(cho_solve(c, b, strategy=strategy))
    assert np.any(np.isnan(x[1, :, 2]))
    assert np.all(np.isfinite(x[0])) and np.all(np.isfinite(x[1, :, :2]))


@pytest.mark.parametrize("dtype,strategy", strategy_grid(DTYPES))
def test_ill_conditioned_spd(rng, dtype, strategy):
    n = 24
    a = ill_conditioned_spd(rng, (3, n, n), dtype)
    b = random_rhs(rng, (3, n, 2), dtype)
    cond = condition_number(a)
    assert cond > ILL_CONDITION[precision(dtype)] / 10, cond
    l = cholesky(a, strategy=strategy)
    check_factor(a, l, True, dtype)  # backward stable whatever the conditioning
    assert rel_err(l, reference_factor(a, True)) <= rtol_for(dtype, n, cond)
    x = np.asarray(cho_solve((l, True), b, strategy=strategy))
    assert np.all(np.isfinite(x))
    assert solve_residual(a, x, b, False) <= rtol_for(dtype, n)
    assert rel_err(x, numpy_solve(a, b, False)) <= rtol_for(dtype, n, cond)


def test_input_is_not_modified(rng):
    # The FFI factors and solves in place into its output buffers; the caller's arrays and
    # values reused inside jit must not change.
    a = jnp.asarray(spd(rng, (4, 12, 12), np.float64))
    b = jnp.asarray(random_rhs(rng, (4, 12, 2), np.float64))
    a_copy, b_copy = np.array(a), np.array(b)
    for s in ALL_STRATEGIES:
        cho_solve(cho_factor(a, strategy=s), b, strategy=s)
        cholesky(a, strategy=s)
        np.testing.assert_array_equal(np.asarray(a), a_copy, err_msg=s)
        np.testing.assert_array_equal(np.asarray(b), b_copy, err_msg=s)

    def f(a, b):
        c = cho_factor(a)
        return cho_solve(c, b), a * 2, b * 3

    _, twice, thrice = jax.jit(f)(a, b)
    np.testing.assert_array_equal(np.asarray(twice), a_copy * 2)
    np.testing.assert_array_equal(np.asarray(thrice), b_copy * 3)


# ---------------------------------------------------------------------------------------------
# jit and vmap
# ---------------------------------------------------------------------------------------------


def _spd_args(rng, dtype):
    return (spd(rng, (3, 8, 8), dtype),)


def _factor_args(lower):
    def make(rng, dtype):
        c, _ = jsl.cho_factor(spd(rng, (3, 8, 8), dtype), lower)
        return (np.asarray(c), random_rhs(rng, (3, 8, 2), dtype))

    return make


# name -> (our call taking (strategy, *args), JAX reference taking args, input maker).
OPS = {
    "cholesky": (lambda s, a: cholesky(a, strategy=s), jnp.linalg.cholesky, _spd_args),
    "cholesky_upper": (
        lambda s, a: cholesky(a, upper=True, strategy=s),
        lambda a: jnp.linalg.cholesky(a, upper=True),
        _spd_args,
    ),
    "cho_factor": (lambda s, a: cho_factor(a, strategy=s)[0], lambda a: jsl.cho_factor(a)[0],
                   _spd_args),
    "cho_solve_lower": (
        lambda s, c, b: cho_solve((c, True), b, strategy=s),
        lambda c, b: jsl.cho_solve((c, True), b),
        _factor_args(True),
    ),
    "cho_solve_upper": (
        lambda s, c, b: cho_solve((c, False), b, strategy=s),
        lambda c, b: jsl.cho_solve((c, False), b),
        _factor_args(False),
    ),
}


@pytest.mark.parametrize(
    "op,dtype,strategy", strategy_grid(sorted(OPS), [np.float32, np.complex128])
)
def test_jit(rng, dtype, op, strategy):
    call, reference, make_args = OPS[op]
    args = make_args(rng, dtype)
    eager = call(strategy, *args)
    jitted = jax.jit(functools.partial(call, strategy))(*args)
    assert_trees_close(jitted, eager, dtype, 8, f"{op}: jit vs eager")
    assert_trees_close(jitted, reference(*args), dtype, 8, f"{op}: jit vs JAX")


@pytest.mark.parametrize(
    "op,in_axis,dtype,strategy",
    strategy_grid(["cholesky", "cho_factor", "cho_solve_lower", "cho_solve_upper"], [0, 1, -1],
                  [np.float32, np.complex128]),
)
def test_vmap_in_axes(rng, dtype, op, in_axis, strategy):
    # Every argument carries the mapped axis at in_axis (the stacked batch of 3 moved there).
    call, reference, make_args = OPS[op]
    assert_vmap_in_axis(functools.partial(call, strategy), reference, make_args(rng, dtype),
                        in_axis, dtype, 8, op)


@pytest.mark.parametrize(
    "in_axes,strategy", strategy_grid([(0, None), (None, 0), (1, -1), (-1, 1), (None, 2)])
)
def test_vmap_cho_solve_mixed_axes(rng, in_axes, strategy):
    dtype, n, batch = np.complex64, 6, 4
    c = np.asarray(jsl.cho_factor(spd(rng, (batch, n, n), dtype), True)[0])
    b = random_rhs(rng, (batch, n, 2), dtype)
    c_in = c[0] if in_axes[0] is None else np.moveaxis(c, 0, in_axes[0])
    b_in = b[0] if in_axes[1] is None else np.moveaxis(b, 0, in_axes[1])
    f = lambda c, b: cho_solve((c, True), b, strategy=strategy)
    got = jax.vmap(f, in_axes=in_axes)(c_in, b_in)
    ref = jax.vmap(lambda c, b: jsl.cho_solve((c, True), b), in_axes=in_axes)(c_in, b_in)
    assert got.shape == ref.shape
    assert rel_err(got, ref) <= rtol_for(dtype, n, 10)
    if in_axes[0] is None:
        # Only b mapped: the mapped axis becomes more right-hand sides, c is not copied.
        jaxpr = jax.make_jaxpr(jax.vmap(f, in_axes=in_axes))(c_in, b_in)
        eqn, = [e for e in jaxpr.eqns if e.primitive.name == "jcm_potrs"]
        assert eqn.invars[0].aval.shape == (n, n)
        assert eqn.invars[1].aval.shape == (n, 2 * batch)


@pytest.mark.parametrize("strategy", strategy_grid())
def test_vmap_nested(rng, strategy):
    dtype, n = np.float64, 5
    # a: (P, n, Q, n), mapped over P (axis 0) outside and Q (axis 1 of what is left) inside.
    a = spd(rng, (2, 3, n, n), dtype)
    b = random_rhs(rng, (2, 3, n), dtype)
    a_in = np.moveaxis(a, 1, 2)

    def inner(a, b):
        c = cho_factor(a, strategy=strategy)
        return cholesky(a, strategy=strategy), c[0], cho_solve(c, b, strategy=strategy)

    got = jax.vmap(jax.vmap(inner, in_axes=(1, 0)), in_axes=(0, 0))(a_in, b)
    ref = jax.vmap(jax.vmap(lambda a, b: (
        jnp.linalg.cholesky(a), jsl.cho_factor(a)[0], jsl.cho_solve(jsl.cho_factor(a), b))))(a, b)
    assert_trees_close(got, ref, dtype, n, "nested vmap")
    # vmap over an argument that already has batch dimensions; b mapped twice, c never.
    got = jax.vmap(lambda a: cholesky(a, upper=True, strategy=strategy))(a)
    assert_trees_close(got, jnp.linalg.cholesky(a, upper=True), dtype, n, "vmap over batched")
    c = cho_factor(a[0, 0])
    got = jax.vmap(jax.vmap(lambda b: cho_solve(c, b, strategy=strategy)))(b)
    with jax.numpy_rank_promotion("allow"):  # JAX's cho_solve broadcasts the batch of b
        ref = jsl.cho_solve(c, b[..., None])[..., 0]
    assert_trees_close(got, ref, dtype, n, "b-only nested")


# ---------------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------------


def _hermitian_from(a, lower):
    """The Hermitian matrix that a's `lower` (else upper) triangle defines: what cho_factor and
    cholesky(symmetrize_input=False) factor, so a reference whose derivative is known."""
    a = a if lower else jnp.conj(jnp.swapaxes(a, -1, -2))
    strict = jnp.tril(a, -1)
    h = strict + jnp.conj(jnp.swapaxes(strict, -1, -2)) + jnp.diag(jnp.real(jnp.diagonal(a)))
    return h if lower else jnp.conj(jnp.swapaxes(h, -1, -2))


def _grad_case(name, strategy, rng, dtype):
    """(our function, args, JAX reference function), small and well conditioned."""
    a = spd(rng, (2, 4, 4), dtype)
    b = random_rhs(rng, (2, 4, 2), dtype)
    s = dict(strategy=strategy)
    if name == "cholesky":
        return (lambda a: cholesky(a, **s)), (a,), jnp.linalg.cholesky
    if name == "cholesky_upper":
        return ((lambda a: cholesky(a, upper=True, **s)), (a,),
                lambda a: jnp.linalg.cholesky(a, upper=True))
    # These read one triangle only (and the real part of the diagonal), and take the tangent
    # as JAX does (the whole of it in JAX 0.10; tests/test_api.py compares with JAX's on a
    # matrix that is not Hermitian). Checked here as functions of the Hermitian matrix that
    # the triangle defines, where the derivative does not depend on that convention.
    herm = lambda a, lower: jax.vmap(_hermitian_from, (0, None))(a, lower)
    if name == "cholesky_unsymmetrized":
        return ((lambda a: cholesky(herm(a, True), symmetrize_input=False, **s)), (a,),
                lambda a: jnp.linalg.cholesky(herm(a, True)))
    if name.startswith("cho_factor"):
        lower = name.endswith("lower")
        return ((lambda a: cho_factor(herm(a, lower), lower, **s)[0]), (a,),
                lambda a: jsl.cho_factor(herm(a, lower), lower)[0])
    if name.startswith("cho_solve"):
        lower = "upper" not in name
        c = np.asarray(jsl.cho_factor(a, lower)[0])
        if name.endswith("vector"):
            b = b[0, :, 0]
        return ((lambda c, b: cho_solve((c, lower), b, **s)), (c, b),
                lambda c, b: jsl.cho_solve((c, lower), b))
    raise AssertionError(name)


# case -> (dtype, order of check_grads)
GRAD_CASES = {
    "cholesky": (np.float64, 2),
    "cholesky_upper": (np.complex128, 1),
    "cholesky_unsymmetrized": (np.complex128, 1),
    "cho_factor_lower": (np.complex128, 1),
    "cho_factor_upper": (np.float64, 1),
    "cho_solve_lower": (np.float64, 1),
    "cho_solve_upper": (np.complex128, 1),
    "cho_solve_vector": (np.float64, 1),
}


@pytest.mark.parametrize("name,strategy", strategy_grid(list(GRAD_CASES)))
def test_check_grads(rng, name, strategy):
    dtype, order = GRAD_CASES[name]
    fn, args, _ = _grad_case(name, strategy, rng, dtype)
    check_grads(jax.jit(fn), args, order=order, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "name,strategy",
    strategy_grid(["cholesky", "cholesky_unsymmetrized", "cho_factor_upper", "cho_solve_upper"]),
)
def test_jacobians_match_jax(rng, name, strategy):
    dtype = np.float64
    fn, args, ref_fn = _grad_case(name, strategy, rng, dtype)
    refs = [ref_fn]
    if JAX_VERSION >= (0, 11) and name == "cholesky_unsymmetrized":
        refs.append(lambda a: jnp.linalg.cholesky(a, symmetrize_input=False))
    if JAX_VERSION >= (0, 11) and name == "cho_factor_upper":
        refs.append(lambda a: jsl.cho_factor(a)[0])
    argnums = tuple(range(len(args)))
    for jac in (jax.jacfwd, jax.jacrev):
        got = jax.jit(jac(fn, argnums=argnums))(*args)
        for ref_fn in refs:
            ref = jax.jit(jac(ref_fn, argnums=argnums))(*args)
            assert_trees_close(got, ref, dtype, 4, f"{name}: {jac.__name__}")


def test_jit_grad_of_complex_loss_matches_jax(rng):
    a = spd(rng, (2, 4, 4), np.complex128)
    b = random_rhs(rng, (4, 3), np.complex128)

    def loss(chol, solve):
        def f(a, b):
            l = chol(a)
            return jnp.sum(jnp.abs(solve((l, True), b)) ** 2) + jnp.sum(jnp.abs(l) ** 2)

        return f

    got = jax.jit(jax.grad(loss(cholesky, cho_solve), argnums=(0, 1)))(a, b)
    with jax.numpy_rank_promotion("allow"):  # JAX's cho_solve broadcasts the unbatched b
        ref = jax.grad(loss(jnp.linalg.cholesky, jsl.cho_solve), argnums=(0, 1))(a, b)
    assert_trees_close(got, ref, np.complex128, 4, "jit(grad) of a complex loss")


# ---------------------------------------------------------------------------------------------
# FFI dispatch: the CUDA lowering (checked by exporting, no GPU needed) and the CPU one
# ---------------------------------------------------------------------------------------------

_TARGETS = ("jcm_potrf", "jcm_potrs", "jcm_potrf_small", "jcm_potrs_small")


def _cuda_module_text(fn, *args):
    return exported_module_text(fn, args, _TARGETS)


def _custom_calls(text, target):
    return [line for line in text.splitlines() if f"custom_call @{target}(" in line]


@strategy_param
def test_cuda_lowering_emits_ffi_targets(rng, claim_extension, strategy):
    # n = 80: above the small kernels' n. Under auto, these batches go to JAX's own lowering
    # (potrfBatched / trsm, as JAX): with a lane count given, auto keeps to the FFI.
    kw = dict(strategy=strategy, lanes=2 if strategy == "auto" else None)
    n = 80
    a = spd(rng, (4, n, n), np.float32)
    b1, b4, b16 = (random_rhs(rng, (4, n, k), np.float32) for k in (1, 4, 16))

    def f(a, b1, b4, b16):
        c = cho_factor(a, **kw)
        return (cholesky(a, **kw), cho_solve(c, b1, **kw),
                cho_solve(c, b4, **kw), cho_solve(c, b16, **kw))

    text = _cuda_module_text(f, a, b1, b4, b16)
    potrf, potrs = _custom_calls(text, "jcm_potrf"), _custom_calls(text, "jcm_potrs")
    assert len(potrf) == 2, potrf
    assert len(potrs) == 3, potrs
    for line in potrf + potrs:
        # Column-major matrices: minor-to-major (rows, cols, batch).
        assert "operand_layouts = [dense<[1, 2, 0]>" in line, line
        assert "output_operand_aliases" in line, line
    assert any("lower = 1 : i32" in line for line in potrf)  # cholesky
    assert any("lower = 0 : i32" in line for line in potrf)  # cho_factor's default upper
    assert all("lower = 0 : i32" in line for line in potrs)
    if strategy == "sequential":
        assert all("strategy = 1 : i32" in line for line in potrf + potrs)
    # JAX's own cuSOLVER Cholesky is not used next to ours.
    assert "cusolver_potrf" not in text


# ---------------------------------------------------------------------------------------------
# The small-matrix kernels (n <= 64: ffi/cholesky/cholesky_kernels.cu potrf_small / potrs_small)
# ---------------------------------------------------------------------------------------------

def test_auto_takes_the_small_cholesky_kernels_up_to_64(ours_measured_faster):
    for shape in [(16, 16), (1, 32, 32), (4, 64, 64), (256, 8, 8)]:
        for op, nrhs in (("cholesky", 1), ("cho_solve", 1), ("cho_solve", 64)):
            plan = jcm.explain(op, shape, np.float32, nrhs=nrhs)
            assert plan.runs_small_kernel and plan.lanes == 1, plan
    # A lane count given with auto: the kernel still (lanes do not apply to it).
    plan = jcm.explain("cholesky", (8, 32, 32), np.float32, lanes=4)
    assert plan.runs_small_kernel and plan.lanes == 1, plan
    assert jcm.explain("cholesky", (8, 32, 32), np.float32, strategy="batched",
                       lanes=4).lanes == 1
    # n > 64, or more than 64 right-hand sides: not the kernel's.
    assert not jcm.explain("cholesky", (4, 65, 65), np.float32,
                           strategy="batched").runs_small_kernel
    assert not jcm.explain("cho_solve", (4, 32, 32), np.float32, nrhs=65).runs_small_kernel


def test_the_small_cholesky_kernels_are_one_call_each(rng, claim_extension):
    a = spd(rng, (4, 16, 16), np.float32)
    b = random_rhs(rng, (4, 16, 3), np.float32)

    def f(a, b):
        c = cho_factor(a, strategy="batched")
        return cholesky(a, strategy="batched"), cho_solve(c, b, strategy="batched")

    text = _cuda_module_text(f, a, b)
    assert len(_custom_calls(text, "jcm_potrf_small")) == 2
    assert len(_custom_calls(text, "jcm_potrs_small")) == 1
    # Neither the generic targets nor the select / tril around them: the kernel writes both.
    assert not _custom_calls(text, "jcm_potrf") and not _custom_calls(text, "jcm_potrs")
    ops = [line for line in text.splitlines() if not line.lstrip().startswith("#loc")]
    assert not any("stablehlo.select" in line or "custom_call @cusolver" in line for line in ops)


@requires_gpu
@pytest.mark.parametrize("n,dtype", rotated_grid(DTYPES, SMALL_KERNEL_N))
def test_small_cholesky_kernel_matches_lapack(rng, dtype, n):
    a = spd(rng, (5, n, n), dtype)
    assert jcm.explain("cholesky", a.shape, dtype, strategy="batched").runs_small_kernel
    tol = rtol_for(dtype, n, condition_number(a))
    for lower in (True, False):
        garbage = with_garbage(rng, a, keep_lower=lower)  # the other triangle is never read
        c, _ = cho_factor(jnp.asarray(garbage), lower, strategy="batched")
        check_factor(a, c, lower, dtype)
        assert rel_err(c, reference_factor(a, lower)) <= tol, lower
        assert rel_err(c, jsl.cho_factor(garbage, lower)[0]) <= tol, lower


@requires_gpu
@pytest.mark.parametrize("n,nrhs,lower,dtype",
                         rotated_grid(DTYPES, [1, 2, 7, 32, 33, 64], [1, 3, 33, 64], [True, False]))
def test_small_cho_solve_kernel_matches_numpy(rng, dtype, n, nrhs, lower):
    a = spd(rng, (3, n, n), dtype)
    b = random_rhs(rng, (3, n, nrhs), dtype)
    assert jcm.explain("cho_solve", a.shape, dtype, strategy="batched",
                       nrhs=nrhs).runs_small_kernel
    c, _ = jsl.cho_factor(a, lower)
    c = with_garbage(rng, np.asarray(c), keep_lower=lower)  # the other triangle never read
    x = np.asarray(cho_solve((c, lower), jnp.asarray(b), strategy="batched"))
    assert x.dtype == dtype and x.shape == b.shape
    assert solve_residual(a, x, b, False) <= rtol_for(dtype, n)
    assert rel_err(x, numpy_solve(a, b, False)) <= rtol_for(dtype, n, condition_number(a))


@requires_gpu
@pytest.mark.parametrize("n", [5, 24, 64])
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_small_cholesky_kernels_on_many_matrices(rng, dtype, n):
    # More than two matrices per SM: potrf_small's other launch shape (the SM filled with
    # threads next to the blocks its shared memory holds); a failure among them stays its own.
    count = 700
    a = spd(rng, (count, n, n), dtype)
    a[count // 2, n - 1, n - 1] = -1
    b = random_rhs(rng, (count, n, 2), dtype)
    c, _ = cho_factor(jnp.asarray(a), True, strategy="batched")
    c = np.asarray(c)
    good = np.arange(count) != count // 2
    assert np.isnan(c[count // 2]).sum() == n * (n + 1) // 2
    check_factor(a[good], c[good], True, dtype)
    x = np.asarray(cho_solve((c, True), jnp.asarray(b), strategy="batched"))
    assert np.isnan(x[count // 2]).all()
    assert solve_residual(a[good], x[good], b[good], False) <= rtol_for(dtype, n)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_small_cholesky_kernel_failures_are_jax_s(rng, dtype):
    # Not positive definite at the first, a middle and the last column: NaN exactly where JAX
    # puts it. NaN or Inf in the triangle read: a NaN pivot follows, which LAPACK's test
    # (d <= 0 or NaN) makes a failure, so the kernel's whole triangle is NaN; JAX's (cuSOLVER
    # or LAPACK on the CPU; seen on an H100 and on a CPU) holds NaN where it spread, not
    # everywhere.
    # NaN in the triangle not read: no effect.
    n = 40
    clean = spd(rng, (7, n, n), dtype)
    a = clean.copy()
    a[0, 0, 0] = -1
    a[1, 17, 17] = 0
    a[2, n - 1, n - 1] = -a[2, n - 1, n - 1]
    a[3, 9, 4] = np.nan
    a[4, 30, 2] = np.inf
    a[5, 2, 30] = np.nan  # the upper triangle: never read by the lower factor
    for lower in (True, False):
        x = a if lower else herm(a)  # the same triangles, read as the upper one
        got = np.asarray(cho_factor(jnp.asarray(x), lower, strategy="batched")[0])
        ref = np.asarray(jsl.cho_factor(x, lower)[0])
        np.testing.assert_array_equal(np.isnan(got[:3]), np.isnan(ref[:3]), err_msg=str(lower))
        assert np.isnan(got[:5]).sum(axis=(-2, -1)).tolist() == [n * (n + 1) // 2] * 5
        assert np.isnan(ref[3:5]).any(axis=(-2, -1)).all()
        check_factor(clean[5:], got[5:], lower, dtype)


@requires_gpu
@pytest.mark.parametrize("n,nrhs,dtype", rotated_grid(DTYPES, TINY_KERNEL_N, [1, 4, 5]))
def test_tiny_cholesky_kernels_over_blocks_failures_and_non_finite(rng, dtype, n, nrhs):
    # A thread per matrix, 128 a block: failures at both edges of a block, each its own. nrhs
    # 5: past the tiny solve's right-hand sides, the block kernel at the same n.
    a = spd(rng, (TINY_KERNEL_BATCH, n, n), dtype)
    a[127, n - 1, n - 1] = -1                         # fails at the last column
    a[128, 0, 0] = 0                                  # at the first
    a[255, n - 1, 0] = np.nan                         # NaN in the lower triangle
    b = random_rhs(rng, (TINY_KERNEL_BATCH, n, nrhs), dtype)
    failed = np.array([127, 128, 255])
    good = np.setdiff1d(np.arange(len(a)), failed)
    tol = rtol_for(dtype, n, condition_number(a[good]))
    for lower in (True, False):
        x = a if lower else herm(a)  # the same triangles, read as the upper one
        garbage = with_garbage(rng, x, keep_lower=lower)  # the other triangle is never read
        c = np.asarray(cho_factor(jnp.asarray(garbage), lower, strategy="batched")[0])
        check_factor(x[good], c[good], lower, dtype)
        assert rel_err(c[good], reference_factor(x[good], lower)) <= tol, lower
        stored = np.tri(n, dtype=bool) if lower else np.tri(n, dtype=bool).T
        assert np.isnan(c[failed][:, stored]).all() and (c[failed][:, ~stored] == 0).all(), lower
        sol = np.asarray(cho_solve((c, lower), jnp.asarray(b), strategy="batched"))
        assert solve_residual(a[good], sol[good], b[good], False) <= rtol_for(dtype, n), lower
        assert np.isnan(sol[failed]).all(), lower


def test_cuda_lowering_without_extension_uses_jax(rng, monkeypatch):
    monkeypatch.setattr(jcm_ffi, "extension_loaded", lambda: False)
    a = spd(rng, (4, 8, 8), np.float64)
    text = jax.jit(lambda a: cholesky(a)).trace(a).lower(lowering_platforms=("cuda",)).as_text()
    assert "jcm_potrf" not in text and "potrf" in text


@strategy_param
def test_cpu_lowering_has_no_ffi_call(rng, strategy):
    a = spd(rng, (4, 16, 16), np.float64)
    b = random_rhs(rng, (4, 16, 2), np.float64)
    f = lambda a, b: cho_solve(cho_factor(a, strategy=strategy), b, strategy=strategy)
    text = jax.jit(f).trace(a, b).lower(lowering_platforms=("cpu",)).as_text()
    assert not any(t in text for t in _TARGETS)
    assert "potrf" in text  # JAX's own LAPACK factorization instead


# ---------------------------------------------------------------------------------------------
# The blocked strategy (potrf only): ffi kCholeskyBlock = 256 columns per block
# ---------------------------------------------------------------------------------------------

BLOCK = 256


@pytest.mark.parametrize("n", [1, 100, BLOCK, BLOCK + 1, 2 * BLOCK + 37], ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_blocked_across_block_edges(rng, dtype, n):
    # One block, exactly one, one plus a column, several with a ragged last one.
    a = spd(rng, (3, n, n), dtype)
    tol = rtol_for(dtype, n, condition_number(a))
    for upper in (False, True):
        c = cholesky(a, upper=upper, strategy="blocked")
        check_factor(a, c, not upper, dtype)
        assert rel_err(c, reference_factor(a, not upper)) <= tol, upper


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_blocked_not_positive_definite_in_a_later_block(rng, dtype):
    # Failures in the first block, in a later one and none: NaN exactly where JAX has it, and
    # the other matrices untouched by their neighbours' failures.
    n = BLOCK + 40
    a = spd(rng, (3, n, n), dtype)
    a[0, 3, 3] = -n
    a[2, BLOCK + 7, BLOCK + 7] = -n
    for upper in (False, True):
        got = np.asarray(cholesky(a, upper=upper, strategy="blocked"))
        ref = np.asarray(jnp.linalg.cholesky(a, upper=upper))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        assert np.all(np.isnan(got[[0, 2]]).sum(axis=(-2, -1)) == n * (n + 1) // 2)
        check_factor(a[1:2], got[1:2], not upper, dtype)


def test_blocked_lowers_to_potrf_strategy_3_and_only_for_potrf(rng, claim_extension):
    assert jcm.explain("cholesky", (4, 512, 512), np.float32, strategy="blocked").strategy == \
        "blocked"
    # A routine without a blocked algorithm refuses it, naming the op.
    for shape in ((4, 512, 512), (4, 2048, 2048)):
        with pytest.raises(ValueError, match="cho_solve: .*no blocked algorithm"):
            jcm.explain("cho_solve", shape, np.float32, strategy="blocked")
    # n = 80: above the small kernels' n, which take no lanes.
    a, b = spd(rng, (4, 80, 80), np.float32), random_rhs(rng, (4, 80, 1), np.float32)
    text = _cuda_module_text(lambda a, b: cho_solve(cho_factor(a, strategy="blocked"), b,
                                                    strategy="looped", lanes=2), a, b)
    (potrf,), (potrs,) = _custom_calls(text, "jcm_potrf"), _custom_calls(text, "jcm_potrs")
    assert "strategy = 3 : i32" in potrf and "strategy = 3 : i32" not in potrs, (potrf, potrs)


# ---------------------------------------------------------------------------------------------
# Bad input: clear errors
# ---------------------------------------------------------------------------------------------

# name -> call taking one matrix-like argument
_ONE_ARG_CALLS = {
    "cholesky": lambda a: cholesky(a),
    "cho_factor": lambda a: cho_factor(a),
    "cho_solve": lambda a: cho_solve((a, True), jnp.ones(np.shape(a)[-1:], jnp.asarray(a).dtype)),
}


@pytest.mark.parametrize(
    "bad_dtype", [np.float16, jnp.bfloat16], ids=ids
)
@pytest.mark.parametrize("op", sorted(_ONE_ARG_CALLS))
def test_unsupported_dtype_raises_type_error(op, bad_dtype):
    a = (np.arange(16).reshape(4, 4) % 3 + 4 * np.eye(4)).astype(bad_dtype)
    assert_rejects_dtype(_ONE_ARG_CALLS[op], a, (op,))


def test_integer_rhs_is_promoted_as_jax(rng):
    c = cho_factor(spd(rng, (4, 4), np.float32))
    x = cho_solve(c, np.ones(4, np.int32))
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x, cho_solve(c, np.ones(4, np.float32)))


@pytest.mark.parametrize("shape", [(4,), ()], ids=ids)
@pytest.mark.parametrize("op", sorted(_ONE_ARG_CALLS))
def test_wrong_rank_raises_value_error(rng, op, shape):
    v = random_rhs(rng, shape, np.float32)
    with pytest.raises(ValueError, match=op):
        _ONE_ARG_CALLS[op](v)


@pytest.mark.parametrize("shape", [(4, 5), (3, 6, 2)], ids=ids)
@pytest.mark.parametrize("op", sorted(_ONE_ARG_CALLS))
def test_non_square_raises_value_error(rng, op, shape):
    a = random_matrix(rng, shape, np.float64, "general")
    with pytest.raises(ValueError, match=op):
        _ONE_ARG_CALLS[op](a)
    with pytest.raises(ValueError):
        jax.jit(_ONE_ARG_CALLS[op])(a)


@pytest.mark.parametrize(
    "c_shape,b_shape",
    [((4, 4), (5,)), ((4, 4), (5, 2)), ((3, 4, 4), (3, 5, 1)), ((3, 4, 4), (2, 4, 1)),
     ((4, 4), ())],
    ids=ids,
)
def test_mismatched_b_raises_value_error(rng, c_shape, b_shape):
    c = cho_factor(spd(rng, c_shape, np.float64))
    b = random_rhs(rng, b_shape, np.float64)
    with pytest.raises(ValueError):
        cho_solve(c, b)


@pytest.mark.parametrize("kwargs", [dict(strategy="fastest"), dict(lanes=0), dict(lanes=99)],
                         ids=ids)
def test_bad_options_raise(rng, kwargs):
    a = spd(rng, (2, 4, 4), np.float32)
    for call in (lambda: cholesky(a, **kwargs), lambda: cho_factor(a, **kwargs),
                 lambda: cho_solve((a, True), a, **kwargs)):
        with pytest.raises(ValueError):
            call()
