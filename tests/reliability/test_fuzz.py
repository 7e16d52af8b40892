"""Property-based fuzzing: each public op against its jax.numpy.linalg / jax.scipy.linalg
counterpart on random inputs.

Inputs: rank 0 to 4 (batch dims of 0 to 3 items, zeros included), n from 0 to 300 (mostly small),
every dtype (the four the solvers take, and int32, int64, bool, float16, bfloat16), NaN and Inf
entries, transposed and strided (non-contiguous) NumPy views, JAX arrays, Python lists and Python
scalars. For every input both functions are called eagerly, and:

  - both raise, with the same exception type, or neither does;
  - the outputs have the same structure, shapes and dtypes;
  - each matrix of the batch holds NaN in an output of ours exactly where it does in JAX's;
  - where the input matrix and JAX's outputs are finite and the matrix is not singular to working
    precision, the values agree within the dtype's tolerance (through invariants where outputs are
    not unique: eigenvector phases, singular vectors, eigenvalue order, LU's pivots).

Examples per op: the "ci" profile (the default without a GPU) keeps the CPU run to a couple of
minutes, derandomized; on a GPU the "gpu" profile runs many more. HYPOTHESIS_PROFILE=ci|gpu
picks one explicitly.
"""
import dataclasses
import os
import tempfile
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
# Hypothesis caches what it collects under the working directory (.hypothesis/) unless told
# where: a test run writes nothing into the tree.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      os.path.join(tempfile.gettempdir(), "jcm-hypothesis"))
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import jax_cusolver_ms as jcm
from conftest import condition_number, rel_err, rtol_for, wide_dtype
from _util import GPU

settings.register_profile(
    "ci", max_examples=6, deadline=None, database=None, derandomize=True,
    suppress_health_check=list(HealthCheck), print_blob=True)
settings.register_profile(
    "gpu", max_examples=60, deadline=None, database=None,
    suppress_health_check=list(HealthCheck), print_blob=True)
# Every example compiles new shapes (a second or two each on both sides): the default keeps the
# fast set fast everywhere; HYPOTHESIS_PROFILE=gpu runs ten times as many.
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
# The largest n drawn: 300 on a GPU (and with JCM_FUZZ_MAX_N), smaller on a two-core CI machine.
MAX_N = int(os.environ.get("JCM_FUZZ_MAX_N", 300 if GPU else 64))

BF16, F16 = np.dtype(jnp.bfloat16), np.dtype(jnp.float16)
SUPPORTED = [np.dtype(d) for d in (np.float32, np.float64, np.complex64, np.complex128)]
UNSUPPORTED = [np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool), F16, BF16]


# ---------------------------------------------------------------------------------------------
# Invariants (NumPy, float64 / complex128): what every correct result agrees on
# ---------------------------------------------------------------------------------------------


def _w(x):
    x = np.asarray(x)
    return x.astype(wide_dtype(x.dtype)) if np.issubdtype(x.dtype, np.inexact) else x


def _ct(x):
    return np.conj(np.swapaxes(x, -1, -2))


def inv_lu(out):
    """P^T L U of (lu, pivots): the matrix factored, whatever the pivots chosen."""
    lu, piv = _w(out[0]), np.asarray(out[1])
    m, n = lu.shape[-2:]
    k = min(m, n)
    lower = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
    upper = np.triu(lu)[..., :k, :]
    prod = lower @ upper
    flat_p = piv.reshape(-1, piv.shape[-1])
    flat = prod.reshape((-1, m, n)).copy()
    for b in range(flat.shape[0]):
        perm = np.arange(m)
        for i, p in enumerate(flat_p[b]):
            perm[i], perm[p] = perm[p], perm[i]
        out_b = np.empty_like(flat[b])
        out_b[perm] = flat[b]
        flat[b] = out_b
    return (flat.reshape(prod.shape),)


def eigh_inv(out):
    w, v = _w(out[0]), _w(out[1])
    return w, (v * w[..., None, :]) @ _ct(v)


def eigvals_inv(out):
    w = _w(out[0] if isinstance(out, tuple) else out)
    return np.sort(np.abs(w), axis=-1), np.sum(w, -1)


def svd_inv(out):
    u, s, vh = (_w(x) for x in out)
    k = s.shape[-1]
    return s, (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]


def qr_inv(out):
    q, r = (_w(x) for x in out)
    return q @ r, np.abs(r)


def slogdet_inv(out):
    return _w(out[0]), _w(out[1])


@dataclasses.dataclass(frozen=True)
class Fuzzed:
    name: str
    ours: Callable
    ref: Callable
    kind: str  # "square", "any" (rectangular), "solve" (a, b), "lstsq" (2-D a, b)
    invariant: Optional[Callable] = None  # outputs -> invariants (None: the outputs themselves)
    cond_free: bool = False  # values do not depend on the conditioning (no cond cut-off)
    rank2_only: bool = False

    def __str__(self):
        return self.name


def _cho_solve(mod):
    def f(a, b):
        c = mod.cho_factor(a)
        return mod.cho_solve(c, b)
    return f


def _lu_solve(mod):
    def f(a, b):
        return mod.lu_solve(mod.lu_factor(a), b)
    return f


FUZZED = [
    Fuzzed("inv", jcm.inv, jnp.linalg.inv, "square"),
    Fuzzed("det", jcm.det, jnp.linalg.det, "square"),
    Fuzzed("slogdet", jcm.slogdet, jnp.linalg.slogdet, "square", slogdet_inv),
    Fuzzed("solve", jcm.solve, jnp.linalg.solve, "solve"),
    Fuzzed("lu_factor", jcm.lu_factor, jsl.lu_factor, "square", inv_lu, cond_free=True),
    Fuzzed("lu_solve", _lu_solve(jcm), _lu_solve(jsl), "solve"),
    Fuzzed("cholesky", jcm.cholesky, jnp.linalg.cholesky, "square", cond_free=True),
    Fuzzed("cho_solve", _cho_solve(jcm), _cho_solve(jsl), "solve"),
    Fuzzed("qr", jcm.qr, jnp.linalg.qr, "any", qr_inv, cond_free=True),
    Fuzzed("eigh", jcm.eigh, jnp.linalg.eigh, "square", eigh_inv, cond_free=True),
    Fuzzed("eigvalsh", jcm.eigvalsh, jnp.linalg.eigvalsh, "square", cond_free=True),
    Fuzzed("eig", jcm.eig, jnp.linalg.eig, "square", lambda out: eigvals_inv(out[0])),
    Fuzzed("eigvals", jcm.eigvals, jnp.linalg.eigvals, "square", eigvals_inv),
    Fuzzed("svd", jcm.svd, jnp.linalg.svd, "any", svd_inv, cond_free=True),
    Fuzzed("svdvals", jcm.svdvals, jnp.linalg.svdvals, "any", cond_free=True),
    Fuzzed("pinv", jcm.pinv, jnp.linalg.pinv, "any"),
    Fuzzed("matrix_rank", jcm.matrix_rank, jnp.linalg.matrix_rank, "any", cond_free=True),
    Fuzzed("norm2", lambda a: jcm.norm(a, 2, (-2, -1)), lambda a: jnp.linalg.norm(a, 2, (-2, -1)),
           "any", cond_free=True),
    Fuzzed("cond", jcm.cond, jnp.linalg.cond, "any"),
    Fuzzed("lstsq", lambda a, b: jcm.lstsq(a, b)[0], lambda a, b: jnp.linalg.lstsq(a, b)[0],
           "lstsq"),
]


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


@st.composite
def inputs(draw, kind):
    """(args, description): the operands of one call and a line that reproduces them."""
    dtype = draw(st.sampled_from(SUPPORTED + UNSUPPORTED))
    rank2 = kind == "lstsq"
    batch = () if rank2 else tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    n = draw(st.one_of(st.integers(0, 6), st.integers(0, 24), st.integers(0, MAX_N)))
    m = n if kind in ("square", "solve") else draw(st.one_of(st.integers(0, 6),
                                                             st.integers(0, MAX_N)))
    matrix_kind = draw(st.sampled_from(["general", "spd", "hermitian"]))
    special = draw(st.sampled_from([None, None, None, "nan", "inf"]))
    layout = draw(st.sampled_from(["numpy", "jax", "transposed", "strided", "list"]))
    seed = draw(st.integers(0, 2**31 - 1))
    nrhs = draw(st.sampled_from([None, 1, 3])) if kind in ("solve", "lstsq") else None
    scalar = draw(st.integers(0, 15)) == 0  # now and then a Python scalar instead of a matrix

    rng = np.random.default_rng(seed)
    shape = batch + (m, n)
    if scalar:
        return (2.5,) + ((1.0,) if kind in ("solve", "lstsq") else ()), "python scalars"
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    if m == n and matrix_kind != "general":
        a = (a + _ct(a)) / 2
        if matrix_kind == "spd":
            a = a @ _ct(a) / max(n, 1) + np.eye(n)
    if dtype == bool:
        a = a > 0
    elif np.issubdtype(dtype, np.integer):
        a = np.round(3 * a.real)
    if special and a.size and dtype.kind in "fc":
        idx = tuple(rng.integers(0, d) for d in shape)
        a[idx] = np.nan if special == "nan" else np.inf
    a = np.asarray(a).astype(dtype)
    args = [a]
    if kind in ("solve", "lstsq"):
        bshape = batch + (m,) + (() if nrhs is None else (nrhs,))
        if kind == "solve" and nrhs is None:
            bshape = batch + (m,) if not batch else batch + (m, 1)
        args.append(rng.standard_normal(bshape).astype(dtype))
    args = [_laid_out(x, layout) for x in args]
    what = (f"dtype={dtype.name} batch={batch} m={m} n={n} kind={matrix_kind} "
            f"special={special} layout={layout} seed={seed} nrhs={nrhs}")
    return tuple(args), what


def _laid_out(x, layout):
    if layout == "jax":
        return jnp.asarray(x)
    if layout == "transposed" and x.ndim >= 2:
        # The same values, as a non-contiguous (Fortran-ordered) view.
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
    if layout == "strided" and x.ndim >= 1:
        wide = np.repeat(x, 2, axis=-1)
        return wide[..., ::2]
    if layout == "list" and x.dtype not in (BF16, F16):
        return x.tolist()
    return x


# ---------------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------------


def _refused_dtype(exc, args):
    """Ours refused float16 / bfloat16 with the TypeError docs/guarantees.md promises (JAX's
    CPU backend raises NotImplementedError from inside LAPACK's dispatch, or returns for empty
    operands)."""
    dtype = getattr(args[0], "dtype", None)
    return (isinstance(exc, TypeError) and "unsupported dtype" in str(exc)
            and dtype is not None and np.dtype(dtype) in (F16, BF16))


def _call(fn, args):
    try:
        return jax.tree.map(np.asarray, fn(*args)), None
    except Exception as exc:  # noqa: BLE001 - compared with JAX's exception below
        return None, exc


def _leaves(out):
    return [np.asarray(x) for x in jax.tree.leaves(out)]


def _fields(out):
    return getattr(type(out), "_fields", type(out).__name__)


def _items_nan(x, batch_ndim):
    """Per matrix of the batch: does this output hold a NaN?"""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.inexact):
        return np.zeros(x.shape[:batch_ndim], bool)
    core = tuple(range(batch_ndim, x.ndim))
    return np.isnan(x).any(axis=core) if core else np.isnan(x)


def _solver_failed_on_nonfinite(exc, args):
    """JAX's own solver raised at run time (not a trace-time check) on an input holding NaN or
    Inf."""
    a = np.asarray(args[0]) if args else None
    return (a is not None and a.dtype.kind in "fc" and not np.isfinite(a).all()
            and "solver" in str(exc) and type(exc).__name__ in ("JaxRuntimeError",
                                                                 "XlaRuntimeError"))


def check(op, args, what):
    got, got_exc = _call(op.ours, args)
    ref, ref_exc = _call(op.ref, args)
    repro = f"{op}: {what}"
    if _refused_dtype(got_exc, args):
        return  # documented: a dtype no solver takes is a TypeError naming the op, at trace time
    if ref_exc is not None and got_exc is None and _solver_failed_on_nonfinite(ref_exc, args):
        # JAX's own cuSOLVER call fails on a matrix holding NaN or Inf (Xgeev on the H200):
        # ours follows the NaN convention instead: every output NaN for such a matrix.
        a = np.asarray(args[0])
        bad = ~np.isfinite(a).all(axis=(-2, -1))
        for k, g in enumerate(_leaves(got)):
            g = np.asarray(g)
            if g.dtype.kind in "fc" and g.shape[:bad.ndim] == bad.shape:
                nan = _items_nan(g, bad.ndim)
                assert (nan[bad]).all(), f"{repro}: output {k} not NaN for a non-finite matrix"
        return
    if ref_exc is not None or got_exc is not None:
        assert ref_exc is not None, f"{repro}: ours raised {got_exc!r}, JAX returned"
        assert got_exc is not None, f"{repro}: JAX raised {ref_exc!r}, ours returned"
        # JAX's lstsq indexes a.shape[0] before checking a's rank: an IndexError for a scalar
        # a. Ours says what is wrong (its TypeError for any a that is not 2-D).
        internal = isinstance(ref_exc, IndexError) and isinstance(got_exc, TypeError) \
            and str(got_exc).startswith(f"{op.name}: ")
        assert internal or isinstance(got_exc, type(ref_exc)), \
            f"{repro}: ours raised {type(got_exc).__name__} ({got_exc}), JAX " \
            f"{type(ref_exc).__name__} ({ref_exc})"
        return
    # The same outputs under the same names (our result namedtuples are our own classes).
    assert _fields(got) == _fields(ref) and len(_leaves(got)) == len(_leaves(ref)), \
        f"{repro}: outputs {_fields(got)} ({len(_leaves(got))}) != JAX's {_fields(ref)} " \
        f"({len(_leaves(ref))})"
    g_leaves, r_leaves = _leaves(got), _leaves(ref)
    for k, (g, r) in enumerate(zip(g_leaves, r_leaves)):
        assert g.shape == r.shape and g.dtype == r.dtype, \
            f"{repro}: output {k} is {g.dtype}{g.shape}, JAX's {r.dtype}{r.shape}"

    a = np.asarray(args[0])
    if a.ndim < 2:
        return
    batch_ndim = a.ndim - 2
    batch = a.shape[:-2]
    finite_items = np.isfinite(a).all(axis=(-2, -1)) if a.dtype.kind in "fc" else \
        np.ones(batch, bool)
    for k, (g, r) in enumerate(zip(g_leaves, r_leaves)):
        if g.ndim < batch_ndim or g.shape[:batch_ndim] != batch:
            continue
        g_nan, r_nan = _items_nan(g, batch_ndim), _items_nan(r, batch_ndim)
        # A matrix holding NaN or Inf comes out NaN (docs/design.md "Failures and NaN"), where
        # JAX may return finite or infinite values: there ours must hold NaN wherever JAX's does.
        if g_nan.shape == finite_items.shape:
            r_nan = np.where(finite_items, r_nan, r_nan | g_nan)
        bad = np.argwhere(g_nan != r_nan)
        assert bad.size == 0, (f"{repro}: output {k}: NaN in ours / JAX's at matrix "
                               f"{tuple(bad[0])}: {bool(g_nan[tuple(bad[0])])} / "
                               f"{bool(r_nan[tuple(bad[0])])}")

    if a.size == 0 or a.dtype.kind not in "fc":
        return  # empty: shapes and dtypes say it all; promoted inputs: compared as dtype below
    dtype = g_leaves[0].dtype if g_leaves[0].dtype.kind in "fc" else a.dtype
    if dtype not in SUPPORTED:
        return
    n = max(a.shape[-2:])
    flat_a = a.reshape((-1,) + a.shape[-2:])
    finite_in = np.isfinite(flat_a).all(axis=(-2, -1))
    finite_out = np.ones(len(flat_a), bool)
    for r in r_leaves:
        if r.ndim >= batch_ndim and r.shape[:batch_ndim] == batch and r.dtype.kind in "fc":
            finite_out &= np.isfinite(r.reshape((len(flat_a), -1))).all(-1)
    keep = finite_in & finite_out
    if not keep.any():
        return
    cond = condition_number(flat_a[keep]) if not op.cond_free else 1.0
    eps = np.finfo(dtype).eps
    if not np.isfinite(cond) or cond * eps > 1e-3:
        return  # singular to working precision: the outputs are not determined by the input
    tol = 10 * rtol_for(dtype, n, cond)
    inv = op.invariant or (lambda out: tuple(_leaves(out)))
    g_inv, r_inv = inv(got), inv(ref)
    for k, (g, r) in enumerate(zip(jax.tree.leaves(g_inv), jax.tree.leaves(r_inv))):
        g, r = np.asarray(g), np.asarray(r)
        if g.ndim < batch_ndim or g.shape[:batch_ndim] != batch:
            continue
        g = g.reshape((len(flat_a),) + g.shape[batch_ndim:])[keep]
        r = r.reshape((len(flat_a),) + r.shape[batch_ndim:])[keep]
        if np.issubdtype(r.dtype, np.integer) or r.dtype == bool:
            np.testing.assert_array_equal(g, r, err_msg=f"{repro}: invariant {k}")
            continue
        both = np.isfinite(g) & np.isfinite(r)
        np.testing.assert_array_equal(np.isfinite(g), np.isfinite(r),
                                      err_msg=f"{repro}: invariant {k}: infinities")
        g, r = np.where(both, g, 0), np.where(both, r, 0)
        core = min(2, g.ndim - 1)
        if core <= 0:
            err = float(np.max(np.abs(g - r) / np.maximum(np.abs(r), 1))) if g.size else 0.0
        else:
            err = rel_err(g, r, core_ndim=core)
        assert err <= tol, f"{repro}: invariant {k} differs by {err:.3g} > {tol:.3g}"


@pytest.mark.parametrize("op", FUZZED, ids=str)
def test_fuzz_against_jax(op):
    @settings(settings.get_profile(PROFILE))
    @given(inputs(op.kind))
    def run(case):
        args, what = case
        check(op, args, what)

    run()


def test_the_comparison_fails_for_a_wrong_op():
    """The check catches wrong values, a missing NaN, a different error type and a wrong dtype."""
    a = np.random.default_rng(0).standard_normal((2, 4, 4)) + 4 * np.eye(4)
    ref = FUZZED[0]  # inv
    with pytest.raises(AssertionError, match="differs"):
        check(dataclasses.replace(ref, ours=lambda x: jcm.inv(x) * 1.01), (a,), "scaled")
    nan = a.copy()
    nan[1, 0, 0] = np.nan
    with pytest.raises(AssertionError, match="NaN in ours"):
        check(dataclasses.replace(ref, ours=lambda x: jcm.inv(jnp.nan_to_num(x))), (nan,), "nan")
    with pytest.raises(AssertionError, match="raised"):
        check(dataclasses.replace(ref, ours=lambda x: (_ for _ in ()).throw(TypeError("x"))),
              (a,), "raises")
    with pytest.raises(AssertionError, match="output 0 is"):
        check(dataclasses.replace(ref, ours=lambda x: jcm.inv(x).astype(np.float32)), (a,), "dt")
