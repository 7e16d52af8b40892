"""Shared test helpers: dtypes, strategies, tolerances, random matrices, GPU skip.

Every test family file imports what it needs from here (``from conftest import ...``) and
takes its random numbers from the ``rng`` fixture, which is seeded from the test's id so a
failure reproduces exactly and no two tests share data.
"""

import functools
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
import os
import re
import zlib

# Four CPU devices (the CPU platform only; a GPU stays one device): the sharding tests partition
# over them. Set before JAX creates its CPU client.
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=4").strip()

import jax

# Enable float64/complex128 before any array is created.
jax.config.update("jax_enable_x64", True)

import numpy as np
import pytest

import jax_cusolver_ms as jcm

DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
ALL_STRATEGIES = ("auto", "looped", "sequential", "batched")
MATRIX_KINDS = ("general", "well_conditioned", "singular", "ill_conditioned", "spd")

# Sizes for the one-launch small-matrix kernels (n <= 64): both edges of a warp's rows (a lane
# holds rows l and l + 32), odd sizes, and the largest.
SMALL_KERNEL_N = [1, 2, 3, 4, 7, 8, 16, 31, 32, 33, 48, 63, 64]
# The tiny kernels' orders (a thread per matrix, in registers: the limits *_tiny_max_n of LU,
# Cholesky, syevj and gesvdj, checked in test_strategy), and a batch over two blocks of 128 and
# part of a third.
TINY_KERNEL_N = [1, 2, 3, 4]
TINY_KERNEL_BATCH = 300

# Condition number of the "ill_conditioned" kind, per precision.
ILL_CONDITION = {"single": 1e3, "double": 1e6}

# Smallest relative tolerance we ask for, per precision: below this we would be testing the
# summation order of BLAS rather than the package.
_RTOL_FLOOR = {"single": 1e-4, "double": 1e-10}

requires_gpu = pytest.mark.skipif(
    not jcm.gpu_available(),
    reason="needs a CUDA GPU and the jax_cusolver_ms CUDA extension",
)
# The extension can be built (and its CUDA lowering checked) on a machine without a GPU.
requires_extension = pytest.mark.skipif(
    not jcm.library_versions(), reason="the jax_cusolver_ms CUDA extension is not built"
)

@pytest.fixture(autouse=True)
def rank_promotion_raises():
    """As JAX's own tests and careful users run: an implicit rank promotion inside the package
    is an error, not a silent broadcast (for these tests only: the benchmarks' own code is
    not held to it)."""
    with jax.numpy_rank_promotion("raise"):
        yield


@pytest.fixture
def claim_extension(monkeypatch):
    """The CUDA lowering needs only the extension's presence (it picks the FFI call), not a GPU:
    where the extension is not built, claim it is, so the lowering can be exported anyway."""
    from jax_cusolver_ms import _ffi
    if not _ffi.extension_loaded():
        monkeypatch.setattr(_ffi, "extension_loaded", lambda: True)


# On CPU every strategy runs the same JAX code, so the dtype x shape x strategy grids rotate
# the strategy instead of multiplying by it (each strategy still meets every dtype and every
# shape). On a GPU, or with JCM_TEST_FULL_GRID=1, the full product runs.
FULL_GRID = jcm.gpu_available() or os.environ.get("JCM_TEST_FULL_GRID") == "1"


@pytest.fixture(autouse=True)
def _auto_reads_no_table():
    """`auto` reads no measured table in any test (JAX's lowering, or the hand-written rules where
    JAX has none): what a test asserts about the lowering `auto` picks must not depend on the
    table of the GPU it runs on. Tests install their own tables (tables.using, the
    ours_measured_faster fixture) on top of this."""
    from jax_cusolver_ms import tables

    with tables.using():
        yield


def table_where_ours_wins():
    """A table spanning every coordinate far beyond any call, in which each candidate of ours
    measures 100x faster than JAX's lowering everywhere (the one-launch kernels or batched API
    fastest): `auto` then takes our FFI path wherever one can run the call. For tests of what
    that path lowers to, independent of any GPU's measurements."""
    from jax_cusolver_ms import strategy, tables

    single = {"xla": 100.0, "sequential": 1.0, "blocked": 1.0, "batched:1": 0.5}
    many = dict(single, **{f"{kind}:{count}": 1.0 for kind in ("looped", "batched")
                           for count in (2, 4, 8, 16)})
    entries = {}
    for routine in strategy.limits():
        for dtype in ("float32", "float64", "complex64", "complex128"):
            entries[(routine, dtype)] = [
                tables.Point(batch, n, single if batch == 1 else many, aspect, nrhs)
                for batch in (1, 2**24) for n in (1, 2**16) for aspect in (2.0**-16, 2.0**16, 1.0)
                for nrhs in (1, 2**16)]
    return tables.Table("any GPU", "test table: ours 100x faster", entries)


@pytest.fixture
def ours_measured_faster():
    """`auto` inside the test reads table_where_ours_wins()."""
    from jax_cusolver_ms import tables

    with tables.using(table_where_ours_wins()):
        yield


INFEASIBLE = "cannot run a"  # the start of the reason an infeasible strategy is rejected with


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test parametrised over strategies skips the combinations the extension rejects as
    infeasible for its shape (ffi/core/limits.h decides; test_strategy.py tests the rejection
    itself): a strategy that cannot run a shape is no case of the op to check."""
    try:
        return (yield)
    except ValueError as exc:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "strategy" in params and INFEASIBLE in str(exc):
            pytest.skip(f"infeasible here: {str(exc).splitlines()[0]}")
        raise


def pytest_runtest_logreport(report):
    """With JCM_FAILURES_LOG set, each failure's traceback is appended to that file as it
    happens (once, from the xdist controller), so a run cut short by a time limit still says
    what failed and why."""
    path = os.environ.get("JCM_FAILURES_LOG")
    if not path or not report.failed or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    with open(path, "a") as f:
        f.write(f"=== FAILED {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


@pytest.fixture
def rng(request):
    """A NumPy Generator seeded from the test id: reproducible, different for every test."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def param_id(value):
    """Readable test ids: dtype names, shapes as tuples."""
    if isinstance(value, type):
        return value.__name__
    return str(value).replace(" ", "")


def rotated_grid(rotated, *axes):
    """pytest params for the product of ``axes`` with a value of ``rotated`` appended to each
    combination.

    Combination (i, j, ...) (indices into the axes) takes rotated[(i + j + ...) mod len(rotated)]:
    for any axis with at least len(rotated) values, every value of ``rotated`` meets every value
    of the other axes. With FULL_GRID (a GPU, or JCM_TEST_FULL_GRID=1) every combination also
    runs with the other values of ``rotated``, marked slow: `pytest -m "not slow"` runs the
    rotated grid, `pytest` the whole product.
    """
    params = []
    for combo in itertools.product(*(list(enumerate(axis)) for axis in axes)):
        values = [value for _, value in combo]
        pick = sum(i for i, _ in combo) % len(rotated)
        for k, last in enumerate(rotated):
            if k != pick and not FULL_GRID:
                continue
            test_id = "-".join(param_id(v) for v in values + [last])
            marks = () if k == pick else (pytest.mark.slow,)
            params.append(pytest.param(*values, last, id=test_id, marks=marks))
    return params


def strategy_grid(*axes):
    """rotated_grid over the strategies: each combination of ``axes`` with a strategy appended
    (on the CPU one, rotated; on a GPU every strategy, those beyond the rotated one slow)."""
    return rotated_grid(ALL_STRATEGIES, *axes)


def is_complex(dtype):
    return np.issubdtype(np.dtype(dtype), np.complexfloating)


def precision(dtype):
    """'single' for float32/complex64, 'double' for float64/complex128."""
    return "single" if np.finfo(np.dtype(dtype)).bits == 32 else "double"


def wide_dtype(dtype):
    """The float64/complex128 dtype used for reference computations."""
    return np.complex128 if is_complex(dtype) else np.float64


def rtol_for(dtype, n, cond=1.0):
    """Relative tolerance for an n x n problem with condition number ``cond``.

    LU with partial pivoting is backward stable with an error that grows like n * eps
    (reconstruction, residuals: pass cond=1); forward errors (a solution compared with a
    float64 reference) also pick up the condition number.
    """
    eps = np.finfo(np.dtype(dtype)).eps
    return max(_RTOL_FLOOR[precision(dtype)], 50.0 * eps * max(n, 1) * max(cond, 1.0))


def condition_number(a):
    """Largest 2-norm condition number over the batch, computed in float64 (1 if empty)."""
    a = np.asarray(a, dtype=wide_dtype(a.dtype))
    if a.size == 0:
        return 1.0
    return float(np.max(np.linalg.cond(a)))


def rel_err(x, ref, core_ndim=2):
    """Largest relative Frobenius error over the batch (the last ``core_ndim`` axes are one item).

    Computed in float64/complex128. An all-zero reference item is compared absolutely.
    """
    x = np.asarray(x)
    ref = np.asarray(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    if ref.size == 0:
        return 0.0
    wide = np.complex128 if (is_complex(x.dtype) or is_complex(ref.dtype)) else np.float64
    axes = tuple(range(ref.ndim - core_ndim, ref.ndim))
    diff = np.sqrt(np.sum(np.abs(x.astype(wide) - ref.astype(wide)) ** 2, axis=axes))
    scale = np.sqrt(np.sum(np.abs(ref.astype(wide)) ** 2, axis=axes))
    return float(np.max(diff / np.where(scale > 0, scale, 1.0)))


def _gaussian(rng, shape, dtype):
    """Standard normal entries; complex ones have independent real and imaginary parts."""
    if is_complex(dtype):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / np.sqrt(2)
    return rng.standard_normal(shape)


def unitary(rng, shape, dtype):
    """Random orthogonal (real) or unitary (complex) matrices of a square batched ``shape``."""
    q, r = np.linalg.qr(_gaussian(rng, shape, dtype))
    d = np.diagonal(r, axis1=-2, axis2=-1)
    return q * (d / np.abs(d))[..., None, :]


def random_matrix(rng, shape, dtype, kind="general"):
    """A random (batched) matrix of ``shape`` = batch + (m, n) and ``dtype``.

    kinds:
      general           standard normal entries (complex: nonzero real and imaginary parts).
      well_conditioned  row- and column-diagonally dominant (condition number of order 1,
                        entries of order 1), then its rows shuffled so that partial pivoting
                        has to find the dominant entries; its pivots are far from ties.
      singular          general with one random column set to exactly zero, so every LU
                        algorithm meets an exactly zero pivot.
      ill_conditioned   U diag(s) V^H with s log-spaced from 1 down to 1/ILL_CONDITION.
      spd               Hermitian positive definite, B B^H / n + I.
    Only "general" and "singular" accept rectangular shapes.
    """
    shape = tuple(shape)
    dtype = np.dtype(dtype)
    wide = wide_dtype(dtype)
    *batch, m, n = shape
    batch = tuple(batch)

    if kind == "general":
        a = _gaussian(rng, shape, wide)
    elif kind == "singular":
        a = _gaussian(rng, shape, wide)
        zero_col = rng.integers(0, n, size=batch) if n else np.zeros(batch, int)
        cols = np.arange(n)
        a = np.where(cols == np.asarray(zero_col)[..., None, None], 0, a)
    else:
        assert m == n, f"kind {kind!r} needs square matrices, got {shape}"
        if kind == "well_conditioned":
            a = _gaussian(rng, shape, wide)
            off = np.abs(a)
            eye = np.eye(n, dtype=bool)
            off[..., eye] = 0
            margin = max(1.0, n / 2)
            dominance = np.maximum(off.sum(-1), off.sum(-2)) + margin
            phase = a[..., eye] / np.abs(a[..., eye])
            a[..., eye] = dominance * phase
            if n:  # (an empty matrix has no entries to scale)
                a /= np.mean(dominance, axis=-1)[..., None, None]
            shuffle = np.argsort(rng.random(batch + (n,)), axis=-1)
            a = np.take_along_axis(a, shuffle[..., :, None], axis=-2)
        elif kind == "ill_conditioned":
            cond = ILL_CONDITION[precision(dtype)]
            s = np.logspace(0, -np.log10(cond), n) if n > 1 else np.ones(n)
            u = unitary(rng, shape, wide)
            v = unitary(rng, shape, wide)
            a = (u * s) @ np.conj(np.swapaxes(v, -1, -2))
        elif kind == "spd":
            b = _gaussian(rng, shape, wide)
            a = b @ np.conj(np.swapaxes(b, -1, -2)) / max(n, 1) + np.eye(n)
        else:
            raise ValueError(f"unknown matrix kind {kind!r}; expected one of {MATRIX_KINDS}")
    return np.ascontiguousarray(a).astype(dtype)


def random_rhs(rng, shape, dtype):
    """A random right-hand side (vector or matrix) with nonzero imaginary part if complex."""
    return _gaussian(rng, tuple(shape), wide_dtype(dtype)).astype(dtype)


@functools.lru_cache(maxsize=None)
def _jitted(fn, static):
    return jax.jit(functools.partial(fn, **dict(static)))


def jit_call(fn, *args, **static):
    """fn(*args, **static) through one cached jit per (fn, static): one compile per shape."""
    return _jitted(fn, tuple(sorted(static.items())))(*args)


def conj_t(x):
    """The conjugate transpose of a (batch of) NumPy matrices."""
    return np.conj(np.swapaxes(x, -1, -2))


def widened(x):
    """x as a NumPy array in its float64 / complex128 counterpart."""
    x = np.asarray(x)
    return x.astype(wide_dtype(x.dtype))


def run_in_threads(fns, inputs):
    """Thread t applies fns[t] to each of inputs[t]; all threads start together (a barrier), so
    their calls overlap. Returns the results, results[t][i] = fns[t](inputs[t][i])."""
    start = threading.Barrier(len(fns))

    def worker(t):
        start.wait()
        return [fns[t](x) for x in inputs[t]]

    with ThreadPoolExecutor(len(fns)) as pool:
        return list(pool.map(worker, range(len(fns))))


@pytest.fixture
def switched_off():
    """A test of enable() leaves the process as it found it: disabled."""
    jcm.disable()
    yield
    jcm.disable()


def cuda_targets(fn, *args):
    """The custom-call targets of jit(fn)'s CUDA lowering for operands shaped as `args`."""
    structs = [jax.ShapeDtypeStruct(np.shape(a), np.dtype(a.dtype)) for a in args]
    text = jax.jit(fn).trace(*structs).lower(lowering_platforms=("cuda",)).as_text()
    return set(re.findall(r"custom_call @(\w+)", text))


def lowered_text(fn, shapes, dtype, platform=None):
    """The StableHLO text of jit(fn) on operands of `shapes` (one shape, or a list of them) and
    `dtype`, lowered for `platform` ("cuda" works on any machine: lowering needs no GPU; None:
    the backend at hand)."""
    shapes = [shapes] if isinstance(shapes, tuple) else shapes
    traced = jax.jit(fn).trace(*(jax.ShapeDtypeStruct(s, dtype) for s in shapes))
    lowered = traced.lower(lowering_platforms=(platform,)) if platform else traced.lower()
    return lowered.as_text()


def assert_trees_close(got, ref, dtype, n, what):
    """Same structure, shapes and dtypes; integers equal; floats within rtol_for (cond 10)."""
    got_leaves, ref_leaves = jax.tree.leaves(got), jax.tree.leaves(ref)
    assert len(got_leaves) == len(ref_leaves), what
    tol = rtol_for(dtype, n, 10)
    for g, r in zip(got_leaves, ref_leaves):
        g, r = np.asarray(g), np.asarray(r)
        assert g.shape == r.shape and g.dtype == r.dtype, (what, g.shape, r.shape, g.dtype, r.dtype)
        if np.issubdtype(r.dtype, np.integer):
            np.testing.assert_array_equal(g, r, err_msg=what)
        else:
            np.testing.assert_allclose(g, r, rtol=tol, atol=tol, err_msg=what)


def assert_vmap_in_axis(call, reference, args, in_axis, dtype, n, what):
    """jax.vmap(call) over arguments whose mapped axis (their leading one in `args`) is moved to
    `in_axis` equals reference(*args) (assert_trees_close for an n x n problem)."""
    moved = tuple(np.moveaxis(np.asarray(x), 0, in_axis) for x in args)
    got = jax.vmap(call, in_axes=in_axis)(*moved)
    assert_trees_close(got, reference(*args), dtype, n, f"{what}: vmap in_axes={in_axis}")


def exported_module_text(fn, args, targets, platform="cuda"):
    """The module jax.export makes of jit(fn) for `platform` (on any machine) on operands shaped
    as `args` (arrays or jax.ShapeDtypeStruct), allowing the custom calls `targets` (ours are
    not on JAX's list of stable targets)."""
    structs = [jax.ShapeDtypeStruct(np.shape(x), np.dtype(x.dtype)) for x in args]
    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in targets]
    exported = jax.export.export(jax.jit(fn), platforms=[platform], disabled_checks=checks)
    return exported(*structs).mlir_module()


def exported_text(fn, shapes, dtype, platform, targets):
    """exported_module_text on operands of `shapes`, all of `dtype`."""
    return exported_module_text(fn, [jax.ShapeDtypeStruct(s, dtype) for s in shapes], targets,
                                platform)


def assert_rejects_dtype(call, a, names):
    """call(a), eagerly and under jit, raises a TypeError whose message names a's dtype and one
    of `names` (the op, or the routine it runs)."""
    with pytest.raises(TypeError) as info:
        call(a)
    message = str(info.value)
    assert a.dtype.name in message, f"the message does not name dtype {a.dtype.name}: {message!r}"
    assert any(name in message for name in names), f"none of {names} named in {message!r}"
    with pytest.raises(TypeError):
        jax.jit(call)(a)


def numpy_solve(a, b, vector):
    """float64 NumPy reference for A x = b with jnp.linalg.solve's (and cho_solve's) shape rules:
    b a vector for every matrix (vector=True) or matrices, batch dimensions broadcast."""
    a = np.asarray(a).astype(wide_dtype(a.dtype))
    b = np.asarray(b).astype(wide_dtype(b.dtype))
    bm = b[..., None] if vector else b
    batch = np.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    bm = np.broadcast_to(bm, batch + bm.shape[-2:])
    x = np.linalg.solve(a, bm) if a.size and bm.size else np.zeros(bm.shape, a.dtype)
    return x[..., 0] if vector else x


def solve_residual(a, x, b, vector):
    """Normwise backward error ||A x - b|| / (||A|| ||x|| + ||b||), worst over the batch."""
    a, x, b = (np.asarray(v).astype(np.complex128) for v in (a, x, b))
    if vector:
        x, b = x[..., None], b[..., None]
    if x.size == 0:
        return 0.0
    a = np.broadcast_to(a, x.shape[:-2] + a.shape[-2:])
    r = np.linalg.norm(a @ x - b, axis=(-2, -1))
    scale = np.linalg.norm(a, axis=(-2, -1)) * np.linalg.norm(x, axis=(-2, -1))
    scale = scale + np.linalg.norm(b, axis=(-2, -1))
    return float(np.max(r / np.where(scale > 0, scale, 1.0)))
