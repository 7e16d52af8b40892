"""Triangular solves (trsm): solve_triangular and, under enable(), JAX's triangular_solve_p,
on every path of ours.

Derivatives and vmap are checked against JAX's on any machine, the lowering there too (the
extension built or claimed); the numbers on the GPU, against SciPy in float64 for every
combination of JAX's options.
"""
import importlib
import itertools
import re

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg

import jax_cusolver_ms as jcm
from jax_cusolver_ms import _tune, strategy
from conftest import (DTYPES, cuda_targets, is_complex, param_id, random_rhs, requires_gpu,
                      rel_err, rtol_for, strategy_grid)

# left_side is always True here: a right-side solve keeps JAX's rule (test below).
OPTIONS = [dict(lower=lower, transpose_a=transpose, conjugate_a=conjugate, unit_diagonal=unit)
           for lower, transpose, conjugate, unit in itertools.product((True, False), repeat=4)]
# (batch, n, nrhs): the tiny and small kernel's sizes (n <= 64, nrhs <= 64), past them
# (trsmBatched), one matrix.
SHAPES = [(5, 3, 1), (4, 40, 7), (3, 100, 2), (2, 9, 70), (1, 16, 3)]


def triangular(rng, batch, n, dtype):
    """Both triangles well conditioned: Gaussian entries over sqrt(n), a diagonal of 2."""
    shape = (batch, n, n)
    a = rng.standard_normal(shape) / np.sqrt(n)
    if is_complex(dtype):
        a = a + 1j * rng.standard_normal(shape) / np.sqrt(n)
    a = a + 2 * np.eye(n)
    return a.astype(dtype)


def scipy_solve(a, b, *, lower, transpose_a, conjugate_a, unit_diagonal):
    """op(A) X = B in float64 / complex128, matrix by matrix."""
    wide = np.complex128 if is_complex(a.dtype) else np.float64
    a, b = a.astype(wide), b.astype(wide)
    if conjugate_a and not transpose_a:
        a = np.conj(a)
    trans = (2 if conjugate_a else 1) if transpose_a else 0
    return np.stack([scipy.linalg.solve_triangular(ai, bi, trans=trans, lower=lower,
                                                   unit_diagonal=unit_diagonal)
                     for ai, bi in zip(a, b)])


def every_option(a, b):
    return [jax.lax.linalg.triangular_solve(a, b, left_side=True, **o) for o in OPTIONS]


# solve_triangular's trans for each (transpose_a, conjugate_a) it can ask for.
TRANS = {(False, False): 0, (True, False): 1, (True, True): 2}


def direct_every_option(a, b, **params):
    """Every option through solve_triangular (conj(A) alone, which it cannot ask for: A^H of A^T,
    the same triangle read the other way)."""
    out = []
    for o in OPTIONS:
        lower, transpose, conjugate = o["lower"], o["transpose_a"], o["conjugate_a"]
        if conjugate and not transpose:  # conj(A) X = B: (A^T)^H X = B
            a_t, trans, lower = jnp.swapaxes(a, -1, -2), 2, not lower
        else:
            a_t, trans = a, TRANS[(transpose, conjugate)]
        out.append(jcm.solve_triangular(a_t, b, trans, lower, o["unit_diagonal"], **params))
    return out


@requires_gpu
@pytest.mark.parametrize("shape,dtype,strategy_name", strategy_grid(SHAPES, DTYPES),
                         ids=param_id)
def test_every_option_on_every_path_is_scipys(rng, switched_off, ours_measured_faster, shape,
                                              dtype, strategy_name):
    batch, n, nrhs = shape
    a = triangular(rng, batch, n, dtype)
    b = random_rhs(rng, (batch, n, nrhs), dtype)
    poisoned = batch > 1  # a NaN in system 0 stays there; with one system, none is put in
    if poisoned:
        b[0, 0, 0] = np.nan
    clean = slice(int(poisoned), None)
    direct = jax.jit(lambda a, b: direct_every_option(a, b, strategy=strategy_name))(a, b)
    jcm.enable()
    with jcm.config(strategy=strategy_name):
        enabled = jax.jit(every_option)(a, b)
    for options, x in zip(OPTIONS * 2, direct + enabled):
        x = np.asarray(x)
        assert x.shape == b.shape and x.dtype == b.dtype
        assert np.isnan(x[0]).any() == poisoned and np.isfinite(x[clean]).all(), options
        ref = scipy_solve(a[clean], b[clean], **options)
        assert rel_err(x[clean], ref) <= rtol_for(dtype, n, 10), options


def test_the_kernel_serves_small_left_solves_and_jax_the_rest(rng, claim_extension, switched_off,
                                                              ours_measured_faster):
    a = triangular(rng, 3, 40, np.complex64)
    b = random_rhs(rng, (3, 40, 2), np.complex64)
    jcm.enable()
    assert "jcm_trsm_small" in cuda_targets(lambda a, b: jsl.solve_triangular(a, b), a, b)
    # conj(A) X = B: the kernel on A and conj(B), conjugated back.
    conj_only = lambda a, b: jax.lax.linalg.triangular_solve(a, b, left_side=True,
                                                             conjugate_a=True)
    assert "jcm_trsm_small" in cuda_targets(conj_only, a, b)
    # Past the kernel's n, the FFI target of lanes and trsmBatched.
    big = triangular(rng, 2, 100, np.float32)
    assert "jcm_trsm" in cuda_targets(lambda a, b: jsl.solve_triangular(a, b),
                                      big, random_rhs(rng, (2, 100, 2), np.float32))
    # X op(A) = B: no path of ours, JAX's own rule.
    right = lambda a, b: jax.lax.linalg.triangular_solve(a, b, left_side=False)
    jcm.disable()
    jax_own = cuda_targets(right, a, np.swapaxes(b, -1, -2))
    jcm.enable()
    assert cuda_targets(right, a, np.swapaxes(b, -1, -2)) == jax_own
    assert not any(t.startswith("jcm_") for t in jax_own)


def test_cho_solve_under_enable_runs_both_solves_here(rng, claim_extension, switched_off,
                                                      ours_measured_faster):
    # jax.scipy.linalg.cho_solve is two triangular solves: both ours, and no trsm of XLA's.
    c = np.tril(triangular(rng, 64, 4, np.float64))
    b = random_rhs(rng, (64, 4, 1), np.float64)
    text = jax.jit(lambda c, b: jsl.cho_solve((c, True), b)).trace(c, b).lower(
        lowering_platforms=("cuda",)).as_text()
    jcm.enable()
    enabled = jax.jit(lambda c, b: jsl.cho_solve((c, True), b)).trace(c, b).lower(
        lowering_platforms=("cuda",)).as_text()
    assert text.count("triangular_solve") == 2
    assert enabled.count("jcm_trsm_small") == 2 and "triangular_solve" not in enabled


def table_jax_solves_our_trsm():
    """getrf, getrs and potrs measured fastest as JAX's, every other routine (trsm too) as
    ours."""
    from conftest import table_where_ours_wins
    from jax_cusolver_ms import tables

    wins = table_where_ours_wins()
    jax_solves = {key: [tables.Point(p.batch, p.n, {"xla": 0.5, "batched:1": 100.0}, p.aspect,
                                     p.nrhs) for p in points]
                  for key, points in wins.entries.items()
                  if key[0] in ("getrf", "getrs", "potrs")}
    return tables.Table("any GPU", "test table: JAX's solves, our trsm",
                        {**wins.entries, **jax_solves})


def test_solves_handed_to_jax_take_the_kernel_for_their_triangular_solves(rng, claim_extension):
    # Where `auto` hands getrs / potrs to JAX, their two triangular solves are JAX's lu_solve /
    # cho_solve pieces, each by solve_triangular's own choice (here the kernel, measured
    # faster).
    from jax_cusolver_ms import tables

    table = table_jax_solves_our_trsm()
    a = triangular(rng, 64, 4, np.complex64)
    b = random_rhs(rng, (64, 4, 2), np.complex64)
    pivots = np.zeros((64, 4), np.int32)

    def ours(op, **params):  # a fresh function each time: no lowering cached from another table
        fn = {"lu_solve": lambda lu, b: jcm.lu_solve((lu, pivots), b, **params),
              "cho_solve": lambda c, b: jcm.cho_solve((c, True), b),
              "solve": lambda a, b: jcm.solve(a, b),
              "inv": lambda a, b: jcm.inv(a)}[op]
        text = jax.jit(fn).trace(a, b).lower(lowering_platforms=("cuda",)).as_text()
        return re.findall(r"custom_call @(jcm_\w+)", text)

    with tables.using(table):
        for trans in (0, 1, 2):
            assert ours("lu_solve", trans=trans) == ["jcm_trsm_small"] * 2, trans
        for op in ("cho_solve", "solve", "inv"):  # solve and inv: JAX's LU, then the pieces
            assert ours(op) == ["jcm_trsm_small"] * 2, op
    # Nothing measured: JAX's solves.
    for op in ("cho_solve", "lu_solve", "solve", "inv"):
        assert not ours(op), op


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=param_id)
def test_solves_in_pieces_on_the_kernel_are_numpys(rng, dtype):
    from jax_cusolver_ms import tables

    a = random_rhs(rng, (300, 5, 5), dtype) + 5 * np.eye(5, dtype=dtype)
    spd = a @ np.conj(np.swapaxes(a, -1, -2))
    b = random_rhs(rng, (300, 5, 3), dtype)
    with tables.using(table_jax_solves_our_trsm()):
        lu_and_piv = jcm.lu_factor(a)
        for trans in (0, 1, 2):
            x = np.asarray(jax.jit(lambda f, b: jcm.lu_solve(f, b, trans=trans))(lu_and_piv, b))
            op = {0: a, 1: np.swapaxes(a, -1, -2), 2: np.conj(np.swapaxes(a, -1, -2))}[trans]
            assert rel_err(x, np.linalg.solve(op, b)) <= rtol_for(dtype, 5, 100), trans
        x = np.asarray(jax.jit(lambda c, b: jcm.cho_solve((c, True), b))(
            jcm.cholesky(spd), b))
        assert rel_err(x, np.linalg.solve(spd, b)) <= rtol_for(dtype, 5, 1000)
        x = np.asarray(jax.jit(jcm.solve)(a, b))
        assert rel_err(x, np.linalg.solve(a, b)) <= rtol_for(dtype, 5, 100)
        x = np.asarray(jax.jit(jcm.inv)(a))
        assert rel_err(x, np.linalg.inv(a)) <= rtol_for(dtype, 5, 100)


@pytest.mark.parametrize("dtype", DTYPES, ids=param_id)
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_solve_in_pieces_is_jaxs_lu_solve(rng, dtype, trans):
    # The pieces themselves (JAX's solves with no table, so they run here): permutation and
    # triangle read as jax.scipy.linalg.lu_solve does, over batch dims.
    from jax_cusolver_ms import tables

    lu_module = importlib.import_module("jax_cusolver_ms.lu")  # the package's `lu` is the function

    a = random_rhs(rng, (2, 3, 7, 7), dtype) + 7 * np.eye(7, dtype=dtype)
    b = random_rhs(rng, (2, 3, 7, 4), dtype)
    lu, pivots = jsl.lu_factor(a)
    permutation = jax.lax.linalg.lu_pivots_to_permutation(pivots, 7)
    with tables.using():
        x = lu_module._lu_solve_in_pieces(lu, permutation, b, trans)
    ref = jax.vmap(jax.vmap(lambda l, p, b: jsl.lu_solve((l, p), b, trans=trans)))(lu, pivots, b)
    assert rel_err(np.asarray(x), np.asarray(ref)) <= rtol_for(dtype, 7, 10)


def test_auto_takes_jaxs_trsm_where_nothing_was_measured(claim_extension):
    choice = strategy.choose("solve_triangular", 64, (8, 8), "float32", nrhs=1)
    assert choice.strategy == "xla" and "no table has trsm" in choice.reason


def test_the_tune_times_the_kernel_lanes_and_jax(claim_extension):
    cell = _tune.Cell("solve_triangular", "float32", 64, 8, 8, 4)
    assert cell.routine == "trsm"
    found = _tune.candidates(cell, lanes=(1, 4))
    assert {"xla", "sequential", "batched:1", "looped:4"} <= set(found), found
    big = _tune.candidates(_tune.Cell("solve_triangular", "float32", 64, 128, 128, 1), (1, 4))
    assert "batched:4" in big  # trsmBatched past the kernel, on lanes too


@pytest.mark.parametrize("dtype", DTYPES, ids=param_id)
def test_the_tune_workload_solves_what_jax_solves(rng, dtype):
    # On the CPU both are JAX's own; on the GPU, ours by `auto` against JAX's.
    work = _tune.WORKLOADS["solve_triangular"]
    c, b = work.build(jax.random.key(0), 4, 6, 6, 3, np.dtype(dtype).name)
    x = np.asarray(jax.jit(work.ours)(c, b))
    ref = np.asarray(work.reference(c, b))
    assert rel_err(x, ref) <= rtol_for(dtype, 6, 10)
    assert np.allclose(np.triu(np.asarray(c), 1), 0)  # a lower triangle: what ours reads


@pytest.mark.parametrize("dtype,trans,lower,unit",
                         [(DTYPES[i % 4], t, lo, u) for i, (t, lo, u) in enumerate(
                             itertools.product((0, 1, 2), (True, False), (False, True)))],
                         ids=param_id)
def test_derivatives_are_jaxs(rng, dtype, trans, lower, unit):
    # The JVP (both operands, the unread triangle's tangent ignored) and, through the transpose
    # rule, the VJP.
    a = triangular(rng, 2, 5, dtype)
    b = random_rhs(rng, (2, 5, 3), dtype)
    a_dot = triangular(rng, 2, 5, dtype)
    b_dot = random_rhs(rng, (2, 5, 3), dtype)
    ours = lambda a, b: jcm.solve_triangular(a, b, trans, lower, unit)
    theirs = lambda a, b: jsl.solve_triangular(a, b, trans, lower, unit)
    tol = rtol_for(dtype, 5, 10)
    for got, ref in zip(jax.jvp(ours, (a, b), (a_dot, b_dot)),
                        jax.jvp(theirs, (a, b), (a_dot, b_dot))):
        assert rel_err(got, ref) <= tol
    x, ct = ours(a, b), random_rhs(rng, (2, 5, 3), dtype)
    got = jax.vjp(ours, a, b)[1](ct)
    ref = jax.vjp(theirs, a, b)[1](ct)
    for g, r in zip(got, ref):
        assert rel_err(g, r) <= tol
    assert rel_err(x, theirs(a, b)) <= tol


def test_vmap_of_b_alone_solves_one_batch_of_more_columns(rng):
    a = triangular(rng, 3, 6, np.float64)
    bs = random_rhs(rng, (4, 3, 6, 2), np.float64)
    f = lambda b: jcm.solve_triangular(a, b, lower=True)
    calls = [e for e in jax.make_jaxpr(jax.vmap(f))(bs).jaxpr.eqns
             if e.primitive.name == "jcm_trsm"]
    assert len(calls) == 1 and calls[0].invars[0].aval.shape == (3, 6, 6)  # a, not 4 copies
    assert calls[0].invars[1].aval.shape == (3, 6, 8)
    got = jax.jit(jax.vmap(f))(bs)
    ref = np.stack([f(b) for b in bs])
    assert rel_err(got, ref) <= rtol_for(np.float64, 6)


@pytest.mark.parametrize("trans", [3, "X", -1])
def test_bad_input_is_a_clear_error_naming_the_op(trans):
    a, b = np.eye(3, dtype=np.float32), np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="solve_triangular: invalid trans"):
        jcm.solve_triangular(a, b, trans)
    with pytest.raises(ValueError, match="solve_triangular: b of shape"):
        jcm.solve_triangular(a, np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="solve_triangular: a must be square"):
        jcm.solve_triangular(np.ones((3, 4), np.float32), b)
    with pytest.raises(TypeError, match="solve_triangular: unsupported dtype float16"):
        jcm.solve_triangular(a.astype(np.float16), b.astype(np.float16))
