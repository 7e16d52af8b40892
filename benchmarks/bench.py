"""The square cells of a benchmark grid: one op x dtype x batch x n, timed for JAX's own function,
for jax_cusolver_ms under `auto` (and any other strategies asked for) and for PyTorch when it is
importable, every jax_cusolver_ms answer checked against the same error measure of JAX's.

`OPS` lists one `Op` per operation (our function, JAX's reference, the PyTorch function, how to
build inputs, how to measure the error of an answer); `run_cell` measures one cell, also of the
random part's shapes (rectangular m x n, complex, nrhs right-hand sides). The grids are in
benchmarks/grids.toml and the command that runs them is benchmarks.report.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import importlib
import importlib.metadata
import math
import os
import platform
import re
import subprocess
import sys
import time
from typing import Any, Callable, Sequence

# JAX would otherwise take 75% of the GPU's memory at start-up, leaving too little to PyTorch and
# to anything jax_cusolver_ms allocates outside XLA. Must be set before jax is imported.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from . import jax_lowering  # noqa: E402

jax.config.update("jax_enable_x64", True)  # float64 cells, and float64 error checks


def _import_package():
    """Import jax_cusolver_ms, an installed copy in preference to the source folder.

    `python -m benchmarks.report` puts the repository root first on sys.path, and the source
    folder jax_cusolver_ms/ there has no compiled extension (pip builds it into site-packages).
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]
    try:
        return importlib.import_module("jax_cusolver_ms")
    except ModuleNotFoundError as exc:
        if exc.name != "jax_cusolver_ms":
            raise
    finally:
        sys.path[:] = saved
    return importlib.import_module("jax_cusolver_ms")  # not installed: the source folder


try:  # The package may be missing or broken: the runner still times JAX (and PyTorch).
    jcm = _import_package()
    JCM_IMPORT_ERROR = None
except Exception as exc:  # noqa: BLE001
    jcm = None
    JCM_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"

try:
    from jax_cusolver_ms.timing import compiled_for_timing as compile_for_timing
    from jax_cusolver_ms.timing import device_time_ms

    TIMER = "jax_cusolver_ms.timing.device_time_ms"
except Exception:  # noqa: BLE001

    def compile_for_timing(fn, *args):
        return jax.jit(fn).lower(*args).compile()

    def device_time_ms(fn, *args, repeats=10, warmup=2):
        """Stand-in when the package is missing: wall clock around each blocked call."""
        jitted = jax.jit(fn)
        for _ in range(warmup):
            jax.block_until_ready(jitted(*args))
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(jitted(*args))
            times.append((time.perf_counter() - start) * 1e3)
        return times

    TIMER = "wall clock (jax_cusolver_ms.timing not importable)"


STRATEGIES = ("auto",)  # the strategies timed per cell unless told otherwise
HOST = "scipy_cpu"  # the impl name of an op's host peer (Op.host), timed on the CPU
# "enabled": JAX's own function (the reference) compiled under jax_cusolver_ms.enable(), the
# unchanged-code path, timed beside auto.
ENABLED = "enabled"
# Every strategy the package knows (each may carry a lane count: "looped:16"), and ENABLED.
KNOWN_STRATEGIES = (tuple(jcm.STRATEGIES) if jcm is not None else (
    "auto", "looped", "sequential", "batched", "blocked")) + (ENABLED,)
DTYPES = ("float32", "float64")
REPEATS = 10
SMOKE_REPEATS = 3  # no GPU: a check of the runner, not of the speed

# An answer is flagged wrong when its error is not finite or exceeds
# max(floor for its dtype, ERROR_RATIO x the error of JAX's answer to the same inputs).
ERROR_FLOOR = {"float32": 1e-3, "float64": 1e-8}
ERROR_RATIO = 20.0
# Cells faster than this (ms) are timed in --small-rounds pooled alternating rounds (H100: single
# qr 1x128 under the same lowering, one block of repeats each: JAX 0.71 ms, ours 0.91 ms).
SMALL_CELL_MS = 2.0
# Two runs of the same lowering further apart than this (|log ratio|) get --small-rounds too.
SAME_LOWERING_SPREAD = math.log(1 / 0.95)
# ... and where they still are after the rounds, this many calls of each, interleaved one by one.
INTERLEAVED_MIN_PAIRS = 15
# The rounds --small-rounds adds leave out an impl this many times behind the cell's fastest:
# launch gaps of microseconds cannot bridge that, and its calls would take most of the run (H200
# eig float32 10000x3x3: JAX 5.2 s a call, 133 s for the cell in five rounds).
ROUNDS_FAR_BEHIND = 20.0


# ---------------------------------------------------------------------------------------------
# Inputs. Each builder takes (key, batch, n, dtype, rows=None, nrhs=1) and returns (args, truth):
# the arguments of the call, and whatever the error measure needs beyond them (or None). `rows`
# is the matrix's row count where it may be rectangular (None: square n x n), `nrhs` the columns
# of a right-hand side. Complex dtypes get complex normal entries, Hermitian where the op needs
# symmetry. Fresh random data for every cell; never zeros.

_HIGHEST = jax.lax.Precision.HIGHEST


def _double(*xs):
    """xs in float64, or complex128 for complex ones: the precision of the truths and checks."""
    return [x.astype(jnp.complex128 if jnp.iscomplexobj(x) else jnp.float64) for x in xs]


def _mh(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _general(key, batch, n, dtype, rows=None, nrhs=1):
    return (jax.random.normal(key, (batch, rows or n, n), dtype),), None


def _with_solution(key, batch, n, dtype, rows=None, nrhs=1):
    """A x = b with x known: b = A x computed in double precision, x of nrhs columns."""
    ka, kx = jax.random.split(key)
    a = jax.random.normal(ka, (batch, n, n), dtype)
    x = jax.random.normal(kx, (batch, n, nrhs), dtype)
    b = jnp.matmul(*_double(a, x), precision=_HIGHEST)
    return (a, b.astype(dtype)), x


def _unit_det(key, batch, n, dtype, rows=None, nrhs=1):
    """Random matrices scaled so that |det| = 1 (det of a plain random matrix over- or
    underflows beyond n of a few hundred). The truth: the double-precision determinant, and each
    matrix's condition number for it, ||A||_F ||A^-1||_F / n (>= 1; _det_error says why)."""
    (a,), _ = _general(key, batch, n, dtype)
    _, logabsdet = jnp.linalg.slogdet(*_double(a))
    a = a * jnp.exp(-logabsdet / n).astype(dtype)[:, None, None]
    (a64,) = _double(a)
    sign, logabsdet = jnp.linalg.slogdet(a64)
    cond = _fro(a64) * _fro(jnp.linalg.inv(a64)) / n
    return (a,), (sign * jnp.exp(logabsdet), cond)


def _spd(key, batch, n, dtype, rows=None, nrhs=1):
    """Symmetric (Hermitian) positive definite: A A^H / n + I."""
    (a,), _ = _general(key, batch, n, dtype)
    spd = jnp.matmul(a, _mh(a), precision=_HIGHEST) / n + jnp.eye(n, dtype=dtype)
    return (spd,), None


def _symmetric(key, batch, n, dtype, rows=None, nrhs=1):
    """Symmetric (Hermitian) (A + A^H) / 2 of a random matrix: a spread-out real spectrum."""
    (a,), _ = _general(key, batch, n, dtype)
    return ((a + _mh(a)) / 2,), None


def _spd_with_solution(key, batch, n, dtype, rows=None, nrhs=1):
    ka, kx = jax.random.split(key)
    (a,), _ = _spd(ka, batch, n, dtype)
    x = jax.random.normal(kx, (batch, n, nrhs), dtype)
    b = jnp.matmul(*_double(a, x), precision=_HIGHEST)
    return (a, b.astype(dtype)), x


def _lower_with_solution(key, batch, n, dtype, rows=None, nrhs=1):
    """L x = b with x known: L the Cholesky factor of an SPD matrix (well conditioned)."""
    ka, kx = jax.random.split(key)
    (a,), _ = _spd(ka, batch, n, dtype)
    lower = jnp.linalg.cholesky(a)
    x = jax.random.normal(kx, (batch, n, nrhs), dtype)
    b = jnp.matmul(*_double(lower, x), precision=_HIGHEST)
    return (lower, b.astype(dtype)), x


def _conditioned_with_solution(cond: float):
    """A = U diag(s) V^T, s log-spaced from 1 to 1 / cond (U, V random orthogonal), and
    b = A x with x known: where mixed precision refines and where it falls back."""
    def build(key, batch, n, dtype, rows=None, nrhs=1):
        ku, kv, kx = jax.random.split(key, 3)
        u, _ = jnp.linalg.qr(jax.random.normal(ku, (batch, n, n), dtype))
        v, _ = jnp.linalg.qr(jax.random.normal(kv, (batch, n, n), dtype))
        s = jnp.logspace(0, -np.log10(cond), n, dtype=dtype)
        a = jnp.matmul(u * s[None, None, :], _mh(v), precision=_HIGHEST)
        x = jax.random.normal(kx, (batch, n, nrhs), dtype)
        b = jnp.matmul(*_double(a, x), precision=_HIGHEST)
        return (a, b.astype(dtype)), x

    return build


def _mixed_solve(a, b, **kw):
    return jcm.mixed_solve(a, b, **kw).x


def _symmetric_with_solution(key, batch, n, dtype, rows=None, nrhs=1):
    """Symmetric indefinite A (needs 2x2 pivots), b = A x with x known. Complex A is complex
    symmetric, not Hermitian: what ldl_factor factors by default."""
    (a, b), x = _with_solution(key, batch, n, dtype, nrhs=nrhs)
    sym = (a + jnp.swapaxes(a, -1, -2)) / 2
    b = jnp.matmul(*_double(sym, x), precision=_HIGHEST)
    return (sym, b.astype(dtype)), x


def _least_squares(key, batch, n, dtype, rows=None, nrhs=1):
    """A (rows x n) and b (rows x nrhs), independent: an inconsistent system where A is tall."""
    ka, kb = jax.random.split(key)
    a = jax.random.normal(ka, (batch, rows or n, n), dtype)
    return (a, jax.random.normal(kb, (batch, rows or n, nrhs), dtype)), None


# ---------------------------------------------------------------------------------------------
# Errors: (args, truth, output) -> the worst matrix's error, in double precision with
# full-precision products. Each is compared with the same measure of JAX's answer, so
# conditioning cancels out.


def _mm(x, y):
    return jnp.matmul(x, y, precision=_HIGHEST)


def _fro(x):
    return jnp.sqrt(jnp.sum(jnp.abs(x) ** 2, axis=(-2, -1)))


@jax.jit
def _lu_error(args, truth, out):
    """||P A - L U|| / ||A||."""
    (a,) = _double(*args)
    lu, piv = out
    (lu,) = _double(lu)
    n = a.shape[-1]
    perm = jax.lax.linalg.lu_pivots_to_permutation(piv.astype(jnp.int32), n)
    pa = jnp.take_along_axis(a, perm[..., :, None], axis=-2)
    lower = jnp.tril(lu, -1) + jnp.eye(n, dtype=lu.dtype)
    upper = jnp.triu(lu)
    return jnp.max(_fro(pa - _mm(lower, upper)) / _fro(a))


@jax.jit
def _solution_error(args, truth, x):
    """||x - x_true|| / ||x_true||."""
    x, x_true = _double(x, truth)
    return jnp.max(_fro(x - x_true) / _fro(x_true))


@jax.jit
def _inverse_error(args, truth, x):
    """||A X - I|| / ||I||."""
    a, x = _double(args[0], x)
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    return jnp.max(_fro(_mm(a, x) - eye) / _fro(eye))


@jax.jit
def _det_error(args, truth, d):
    """|det - det_true| / |det_true| per unit of the matrix's condition number for its
    determinant. To first order det(A + E) / det(A) - 1 = tr(A^-1 E), at most
    ||A^-1||_F ||E||_F = n cond ||E||_F / ||A||_F: an LU of backward error e gives a det error
    up to n cond e, so the plain relative error of the worst matrix of a batch is a draw from its
    conditioning (H100 float32 64x512: JAX 0.0041, the blocked LU 0.134, on matrices where the
    two have the same backward error, growth and pivots; JAX's own 0.64 at 256x2048), which a
    20x bar cannot judge. A well-conditioned matrix (cond ~ 1) keeps its plain relative error:
    a wrong sign there is an error of 2."""
    d_true, cond = truth
    d, d_true = _double(d, d_true)
    return jnp.max(jnp.abs(d - d_true) / jnp.abs(d_true) / cond)


@jax.jit
def _cholesky_error(args, truth, l):
    """||L L^H - A|| / ||A||."""
    a, l = _double(args[0], l)
    return jnp.max(_fro(_mm(l, _mh(l)) - a) / _fro(a))


@jax.jit
def _qr_error(args, truth, out):
    """||Q R - A|| / ||A||."""
    (a,) = _double(*args)
    q, r = _double(*out)
    return jnp.max(_fro(_mm(q, r) - a) / _fro(a))


@jax.jit
def _r_error(args, truth, r):
    """||R^H R - A^H A|| / ||A||^2 (R alone fixes A^H A)."""
    a, r = _double(args[0], r)
    return jnp.max(_fro(_mm(_mh(r), r) - _mm(_mh(a), a)) / _fro(a) ** 2)


@jax.jit
def _qr_multiply_error(args, truth, out):
    """||A^H (Q c) - R^H c|| / (||A|| ||c||): A = Q R with Q^H Q = I."""
    a, c = _double(*args)
    qc, r = _double(*out)
    return jnp.max(_fro(_mm(_mh(a), qc) - _mm(_mh(r), c)) / (_fro(a) * _fro(c)))


@jax.jit
def _backward_error(args, truth, x):
    """||A x - b|| / (||A|| ||x|| + ||b||): the solver alone. A forward error on an
    ill-conditioned matrix of the batch differs between two backward-stable solvers by chance
    (LDL^T next to JAX's LU; or LU with another blocking than JAX's)."""
    a, b = _double(*args)
    (x,) = _double(x)
    return jnp.max(_fro(_mm(a, x) - b) / (_fro(a) * _fro(x) + _fro(b)))


@jax.jit
def _factor_solution_error(args, truth, factors):
    """The factorization solves A x = b: the backward error of the solve taken by the
    factorization's own solver (LU for JAX's reference, LDL for ours)."""
    b = args[1]
    if "lu" in factors:
        x = jax.scipy.linalg.lu_solve((factors["lu"], factors["piv"]), b)
    else:
        x = jcm.ldl_solve(factors["ld"], factors["piv"], b)
    return _backward_error(args, truth, x)


def _qr_r(a, **kw):
    return jcm.qr(a, mode="r", **kw)


def _qr_multiply(a, c, **kw):
    return jcm.qr_multiply(a, c, mode="left", **kw)


def _ldl_factor(a, b, **kw):
    ld, piv = jcm.ldl_factor(a, **kw)
    return {"ld": ld, "piv": piv}


def _jax_lu_factor(a, b):
    lu, piv = jax.scipy.linalg.lu_factor(a)
    return {"lu": lu, "piv": piv}


@jax.jit
def _eigh_error(args, truth, out):
    """||A V - V diag(w)|| / ||A|| plus ||V^H V - I|| / sqrt(n) (both sign/phase-free)."""
    (a,) = _double(*args)
    w, v = out
    w, v = _double(w, v)
    n = a.shape[-1]
    residual = _fro(_mm(a, v) - v * w[..., None, :]) / _fro(a)
    orthogonality = _fro(_mm(_mh(v), v) - jnp.eye(n)) / jnp.sqrt(n)
    return jnp.max(residual + orthogonality)


def _definite_pair(key, batch, n, dtype, rows=None, nrhs=1):
    """A Hermitian (A + A^H) / 2 and a positive definite B, for the generalized problem."""
    ka, kb = jax.random.split(key)
    (a,), _ = _symmetric(ka, batch, n, dtype)
    (b,), _ = _spd(kb, batch, n, dtype)
    return (a, b), None


def _generalized_eigh_error(args, truth, out):
    """||A V - B V diag(w)|| / (||A|| + ||B||) plus ||V^H B V - I|| / sqrt(n)."""
    a, b = _double(*args)
    w, v = _double(*out)
    n = a.shape[-1]
    residual = _fro(_mm(a, v) - _mm(b, v) * w[..., None, :]) / (_fro(a) + _fro(b))
    orthogonality = _fro(_mm(_mh(v), _mm(b, v)) - jnp.eye(n)) / jnp.sqrt(n)
    return jnp.max(residual + orthogonality)


def _jnp_generalized_eigh(a, b):
    """The reduction to a standard problem written with jnp.linalg: what a JAX user has."""
    solve = functools.partial(jax.scipy.linalg.solve_triangular, lower=True)
    l = jnp.linalg.cholesky(b)
    w, y = jnp.linalg.eigh(solve(l, _mh(solve(l, a))))
    return w, solve(l, y, trans="C")


def _scipy_generalized_eigh(a, b):
    """SciPy's eigh(a, b) per matrix on the CPU: the only batched generalized eigh a user has
    besides the reduction by hand."""
    import scipy.linalg
    pairs = [scipy.linalg.eigh(x, y) for x, y in zip(a.reshape((-1,) + a.shape[-2:]),
                                                       b.reshape((-1,) + b.shape[-2:]))]
    n = a.shape[-1]
    w = np.stack([p[0] for p in pairs]).reshape(a.shape[:-2] + (n,))
    v = np.stack([p[1] for p in pairs]).reshape(a.shape)
    return w, v


def measure_host(fn, inputs, args, limit_s: float | None = None) -> dict:
    """Wall time of `fn` on the host (NumPy inputs): a call on the first matrix alone first,
    scaled to the batch; past `limit_s` not made ({"over_limit_ms": the estimate}), else timed
    min_repeats times after that probe. Returns the timing and the output."""
    batch = int(np.prod(inputs[0].shape[:-2], dtype=np.int64))
    first = [x.reshape((-1,) + x.shape[-2:])[:1] for x in inputs]
    start = time.perf_counter()
    fn(*first)
    estimate_ms = (time.perf_counter() - start) * 1e3 * batch
    if limit_s and estimate_ms > limit_s * 1e3:
        return {"over_limit_ms": estimate_ms, "estimated": True}, None
    times, out = [], None
    for _ in range(max(1, min(getattr(args, "min_repeats", 1), 3))):
        start = time.perf_counter()
        out = fn(*inputs)
        times.append((time.perf_counter() - start) * 1e3)
    return _summary(times), out


def _sorted_eigenvalues(a):
    return jnp.sort(jnp.linalg.eigvalsh(*_double(a)), axis=-1)


@jax.jit
def _eigvalsh_error(args, truth, w):
    """max |w - w_double| / ||A||_F, against double-precision eigenvalues of the same
    matrices."""
    (a,) = args
    ref = _sorted_eigenvalues(a)
    err = jnp.max(jnp.abs(w.astype(jnp.float64) - ref), axis=-1)
    return jnp.max(err / _fro(*_double(a)))


@jax.jit
def _eig_error(args, truth, out):
    """max_j ||A v_j - w_j v_j|| / ||A|| (columns of unit norm, so phase-free)."""
    a = args[0].astype(jnp.complex128)
    w, v = out
    w, v = w.astype(jnp.complex128), v.astype(jnp.complex128)
    residual = jnp.linalg.norm(_mm(a, v) - v * w[..., None, :], axis=-2)
    return jnp.max(jnp.max(residual, axis=-1) / _fro(a))


@jax.jit
def _eigvals_error(args, truth, w):
    """Eigenvalues as a set: the largest distance from one of them to the nearest of a
    double-precision reference (the order is the solver's), over ||A||_F."""
    a = args[0]
    ref = jnp.linalg.eigvals(*_double(a))
    d = jnp.abs(w.astype(jnp.complex128)[..., :, None] - ref[..., None, :])
    return jnp.max(jnp.max(jnp.min(d, axis=-1), axis=-1) / _fro(a.astype(jnp.complex128)))


@jax.jit
def _svd_error(args, truth, out):
    """max(||U diag(S) V^H - A|| / ||A||, ||U^H U - I|| / ||I||, ||V^H V - I|| / ||I||)."""
    (a,) = _double(*args)
    u, s, vh = out
    u, vh = _double(u, vh)
    k = s.shape[-1]
    recon = _mm(u[..., :, :k] * s[..., None, :].astype(u.dtype), vh[..., :k, :])
    eye_u, eye_v = jnp.eye(u.shape[-1]), jnp.eye(vh.shape[-2])
    orth_u = _fro(_mm(_mh(u), u) - eye_u) / _fro(eye_u)
    orth_v = _fro(_mm(vh, _mh(vh)) - eye_v) / _fro(eye_v)
    return jnp.max(jnp.maximum(_fro(recon - a) / _fro(a), jnp.maximum(orth_u, orth_v)))


def _with_singular_values(key, batch, n, dtype, rows=None, nrhs=1):
    """General matrices; the truth is their singular values, computed in double precision."""
    (a,), _ = _general(key, batch, n, dtype, rows)
    return (a,), jnp.linalg.svdvals(*_double(a))


@jax.jit
def _svdvals_error(args, truth, s):
    """||s - s_true|| / ||s_true||."""
    s, s_true = _double(s, truth)
    return jnp.max(jnp.linalg.norm(s - s_true, axis=-1) / jnp.linalg.norm(s_true, axis=-1))


@jax.jit
def _lstsq_error(args, truth, out):
    """The least-squares conditions, free of A's conditioning: the normal equations,
    ||A^H (b - A x)|| / (||A|| (||A|| ||x|| + ||b||)), which a backward-stable solver meets to
    about eps; and for a wide A (m < n, full row rank) the minimum norm: x's share outside A's
    row space, ||x - Q Q^H x|| / ||x|| with Q the orthonormal basis of A^H's columns."""
    a, b = _double(*args)
    (x,) = _double(out[0])
    error = _fro(_mm(_mh(a), b - _mm(a, x))) / (_fro(a) * (_fro(a) * _fro(x) + _fro(b)))
    if a.shape[-2] < a.shape[-1]:
        q = jnp.linalg.qr(_mh(a))[0]
        error += _fro(x - _mm(q, _mm(_mh(q), x))) / _fro(x)
    return jnp.max(error)


@jax.jit
def _pinv_error(args, truth, x):
    """The four Penrose conditions, the worst of: ||A X A - A|| / ||A||, ||X A X - X|| / ||X||,
    and A X and X A Hermitian (relative to their norms)."""
    a, x = _double(args[0], x)
    ax, xa = _mm(a, x), _mm(x, a)
    return jnp.max(jnp.maximum(
        jnp.maximum(_fro(_mm(ax, a) - a) / _fro(a), _fro(_mm(xa, x) - x) / _fro(x)),
        jnp.maximum(_fro(ax - _mh(ax)) / _fro(ax), _fro(xa - _mh(xa)) / _fro(xa))))


def _jax_lstsq(a, b):
    # jnp.linalg.lstsq takes one matrix (as jcm.lstsq): a batch is a vmap of it.
    return jax.vmap(jnp.linalg.lstsq)(a, b)


def _lstsq(a, b, **kw):
    return jcm.lstsq(a, b, **kw)  # any batch, one call


def _solution_of(lstsq_fn):
    """lstsq_fn keeping x alone (as a 1-tuple, the place the error function reads it from)."""
    def solution(a, b, **kw):
        return (lstsq_fn(a, b, **kw)[0],)
    return solution


_SVD_QR = jax.lax.linalg.SvdAlgorithm.QR


def _cho_solve(a, b, **kw):
    return jcm.cho_solve(jcm.cho_factor(a, lower=True, **kw), b, **kw)


def _ldl_solve(a, b, **kw):
    ld, piv = jcm.ldl_factor(a, **kw)
    return jcm.ldl_solve(ld, piv, b, **kw)


def _solve_lower(a, b, **kw):
    return jcm.solve_triangular(a, b, lower=True, **kw)


def _jax_solve_lower(a, b):
    return jax.scipy.linalg.solve_triangular(a, b, lower=True)


def _jax_cho_solve(a, b):
    return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a, lower=True), b)


# ---------------------------------------------------------------------------------------------
# The grid: one entry per operation. To add an op, add an entry (and, if its inputs or its error
# are new, a builder and an error function above).


# log10 of the condition numbers of the mixed-precision sweep (the solve_mixed_cond ops).
MIXED_CONDITIONS = (2, 4, 6, 8, 10, 12)


@dataclasses.dataclass(frozen=True)
class Op:
    name: str  # also the jax_cusolver_ms function's name, unless `ours` is given
    reference: Callable[..., Any]  # JAX's function on the same inputs
    torch: str | None  # dotted attribute of the torch module, called on the same inputs
    build: Callable[..., tuple]  # (key, batch, n, dtype, rows=None, nrhs=1) -> (args, truth)
    error: Callable[[tuple, Any, Any], Any]  # (args, truth, output) -> scalar error
    ours: str | Callable | None = None  # jax_cusolver_ms attribute or a function of ours
    routine: str | None = None  # the name jcm.explain() knows the op's main routine by
    error_floor: dict | None = None  # per dtype, where the op's error is not ERROR_FLOOR's scale
    mixed: bool = False  # ours in mixed precision against JAX's in the dtype's own
    # Where no GPU library has the op: what a user would call instead on the CPU, one matrix
    # at a time on NumPy inputs (SciPy), returning what the op returns; timed on the host.
    host: Callable[..., Any] | None = None

    def floor(self, dtype: str) -> float:
        """The error floor of `dtype`; a complex dtype has its real counterpart's precision."""
        return (self.error_floor or ERROR_FLOOR)[np.finfo(np.dtype(dtype)).dtype.name]

    def our_fn(self, strategy: str, lanes: int | None) -> Callable[..., Any]:
        fn = self.ours if callable(self.ours) else getattr(jcm, self.ours or self.name)
        kwargs = {"strategy": strategy}
        if lanes is not None:
            kwargs["lanes"] = lanes
        return functools.partial(fn, **kwargs)


OPS = {
    op.name: op
    for op in [
        Op("lu_factor", jax.scipy.linalg.lu_factor, "linalg.lu_factor", _general, _lu_error,
           routine="getrf"),
        # The residual, as inv's: a single solution's forward error is a draw from the matrix's
        # conditioning (H100 float32 16x2048, the same LU algorithm class: JAX 0.010, ours 0.197,
        # while inv's residuals agree within 10% cell by cell), which a 20x bar cannot judge.
        Op("solve", jnp.linalg.solve, "linalg.solve", _with_solution, _backward_error,
           routine="getrf"),
        Op("inv", jnp.linalg.inv, "linalg.inv", _general, _inverse_error, routine="getrf"),
        # Mixed precision (float64 only): a float32 factor refined to float64, against JAX's
        # float64 solve; "solve" in the same run is this project's float64 solve. The _cond
        # ops: where refinement converges and where it falls back to float64.
        Op("solve_mixed", jnp.linalg.solve, None, _with_solution, _backward_error,
           ours=_mixed_solve, routine="getrf", mixed=True),
        Op("solve_mixed_pos", _jax_cho_solve, None, _spd_with_solution, _backward_error,
           ours=functools.partial(_mixed_solve, assume_a="pos"), routine="potrf", mixed=True),
        *(Op(f"solve_mixed_cond1e{e}", jnp.linalg.solve, None,
             _conditioned_with_solution(10.0 ** e), _backward_error, ours=_mixed_solve,
             routine="getrf", mixed=True) for e in MIXED_CONDITIONS),
        # The error per unit of condition (_det_error): about eps x n, so a floor of its own
        # (float32 16x512 on the CPU: JAX 3.7e-6; 1% off everywhere 5.8e-4, one sign flipped 0.03).
        # routine "det", not getrf: up to n 3 auto runs the closed form, not getrf's choice.
        Op("det", jnp.linalg.det, "linalg.det", _unit_det, _det_error, routine="det",
           error_floor={"float32": 1e-5, "float64": 1e-12}),
        Op("cholesky", jnp.linalg.cholesky, "linalg.cholesky", _spd, _cholesky_error,
           routine="potrf"),
        Op("cho_solve", _jax_cho_solve, None, _spd_with_solution, _solution_error,
           ours=_cho_solve, routine="potrf"),
        Op("solve_triangular", _jax_solve_lower, None, _lower_with_solution, _solution_error,
           ours=_solve_lower, routine="trsm"),
        Op("qr", jnp.linalg.qr, "linalg.qr", _general, _qr_error, routine="geqrf"),
        Op("qr_r", lambda a: jnp.linalg.qr(a, mode="r"), None, _general, _r_error, ours=_qr_r,
           routine="geqrf"),
        Op("qr_multiply", lambda a, c: jax.scipy.linalg.qr_multiply(a, c, mode="left"), None,
           _with_solution, _qr_multiply_error, ours=_qr_multiply, routine="geqrf"),
        # JAX has no LDL: the references are its LU factorization and solve of the same system.
        Op("ldl_factor", _jax_lu_factor, None, _symmetric_with_solution,
           _factor_solution_error, ours=_ldl_factor, routine="sytrf"),
        Op("ldl_solve", jnp.linalg.solve, None, _symmetric_with_solution, _backward_error,
           ours=_ldl_solve, routine="sytrf"),
        Op("eigh", jnp.linalg.eigh, "linalg.eigh", _symmetric, _eigh_error, routine="eigh"),
        Op("eigvalsh", jnp.linalg.eigvalsh, "linalg.eigvalsh", _symmetric, _eigvalsh_error,
           routine="eigh"),
        Op("generalized_eigh", _jnp_generalized_eigh, None, _definite_pair,
           _generalized_eigh_error, routine="sygvd", host=_scipy_generalized_eigh),
        Op("eig", jnp.linalg.eig, "linalg.eig", _general, _eig_error, routine="geev"),
        Op("eigvals", jnp.linalg.eigvals, "linalg.eigvals", _general, _eigvals_error,
           routine="geev"),
        # Square inputs: full and reduced SVD are the same shapes for all three libraries.
        Op("svd", jnp.linalg.svd, "linalg.svd", _general, _svd_error, routine="svd"),
        Op("svdvals", jnp.linalg.svdvals, "linalg.svdvals", _with_singular_values,
           _svdvals_error, routine="svdvals"),
        # The QR-iteration SVD (gesvd) against JAX's: where it crosses over Jacobi (default).
        Op("svd_qr", functools.partial(jax.lax.linalg.svd, algorithm=_SVD_QR), None, _general,
           _svd_error, ours=lambda a, **kw: jcm.svd(a, algorithm="qr", **kw), routine="gesvd"),
        # Both through an SVD; the whole result is timed (lstsq's residuals, rank and s too).
        Op("lstsq", _jax_lstsq, "linalg.lstsq", _least_squares, _lstsq_error, ours=_lstsq,
           routine="lstsq"),
        # lstsq(method="auto"): QR and a triangular solve where every matrix has full rank (the
        # inputs' do), against JAX's SVD and PyTorch's QR (gels, its only CUDA driver).
        Op("lstsq_auto", _jax_lstsq, "linalg.lstsq", _least_squares, _lstsq_error,
           ours=functools.partial(_lstsq, method="auto"), routine="lstsq"),
        # The solution alone, as PyTorch's gels gives it: "auto" decides from R without its
        # SVD, which XLA then drops (JAX's lstsq solves through the SVD whatever is kept).
        Op("lstsq_auto_x", _solution_of(_jax_lstsq), "linalg.lstsq", _least_squares,
           _lstsq_error, ours=_solution_of(functools.partial(_lstsq, method="auto")),
           routine="lstsq"),
        # lstsq(precision="mixed") (float64 only): a float32 QR refined to float64 accuracy,
        # against JAX's float64 SVD least squares.
        Op("lstsq_mixed", _jax_lstsq, "linalg.lstsq", _least_squares, _lstsq_error,
           ours=functools.partial(_lstsq, precision="mixed"), routine="lstsq", mixed=True),
        Op("pinv", jnp.linalg.pinv, "linalg.pinv", _general, _pinv_error),
    ]
}


# Ops whose JAX column runs another algorithm (JAX has none of this one's): said beside their
# cells in the report.
REFERENCE_IS_OTHER = {
    "ldl_factor": "JAX has no LDL^T: the JAX column is its LU of the same matrix",
    "ldl_solve": "JAX has no LDL^T: the JAX column is its LU solve of the same system",
    "generalized_eigh": "JAX has no generalized eigh: the JAX column is the reduction written "
                        "with jnp.linalg (Cholesky, triangular solves, eigh), the SciPy column "
                        "scipy.linalg.eigh(a, b) per matrix on the host CPU",
}


def strategy_against_jax(op: str) -> bool:
    """Whether op's cells compare only the strategy with JAX's lowering of the same computation:
    not where JAX's column is another algorithm (REFERENCE_IS_OTHER) nor where ours runs in mixed
    precision."""
    known = OPS.get(op)
    return known is not None and not known.mixed and op not in REFERENCE_IS_OTHER


# ---------------------------------------------------------------------------------------------
# Timing.


def _summary(times: Sequence[float]) -> dict:
    return {
        "times_ms": [float(t) for t in times],
        "median_ms": float(np.median(times)),
        "min_ms": float(np.min(times)),
    }


def _counts(args, probe_ms: float) -> tuple[int, int]:
    """Repeats and warm-ups for one measurement, fitted into --budget-s from one probe call."""
    fit = int(args.budget_s * 1e3 / max(probe_ms, 1e-3))
    repeats = max(args.min_repeats, min(args.repeats, fit))
    # A call of a second or more: the probe was the warm-up (H100 eig 16x2048: JAX 8.4 s a call).
    warmup = args.warmup if repeats == args.repeats else 0 if probe_ms >= 1e3 else 1
    return repeats, warmup


def _wall_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return (time.perf_counter() - start) * 1e3


class TooSlow(Exception):
    """One call took longer than the limit: the cell is skipped, not timed."""

    def __init__(self, call_ms: float, limit_s: float):
        super().__init__(f"one call took {call_ms / 1e3:.0f} s (> {limit_s:g} s)")
        self.call_ms = call_ms


def measure_jax(fn, inputs, args, limit_s: float | None = None) -> tuple[dict, Any]:
    """Compile, run once (the output is checked; the run is the probe), then time on the
    device. A first run over `limit_s` raises TooSlow instead of being timed again."""
    compiled = compile_for_timing(fn, *inputs)  # what device_time_ms runs: one compile
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(*inputs))
    probe_ms = (time.perf_counter() - start) * 1e3
    if limit_s and probe_ms > limit_s * 1e3:
        raise TooSlow(probe_ms, limit_s)
    if probe_ms < 100:  # a first run may still allocate: probe again where it is cheap
        probe_ms = _wall_ms(lambda: compiled(*inputs))
    repeats, warmup = _counts(args, probe_ms)
    times = device_time_ms(fn, *inputs, repeats=repeats, warmup=warmup)
    return {**_summary(times), "warmup": warmup, "probe_ms": probe_ms}, out


def compile_enabled(reference, inputs) -> Callable[..., Any]:
    """JAX's own function compiled while jax_cusolver_ms.enable() is on: the function the timer
    knows that compiled program by (timed, and timed again by --rounds, as it was compiled,
    whatever is switched on later)."""
    @functools.wraps(reference)  # its parameters' names, which the compiled program carries
    def unchanged_code(*xs):  # a function of its own: its own compiled program in the timer
        return reference(*xs)

    jcm.enable()
    try:
        compile_for_timing(unchanged_code, *inputs)
    finally:
        jcm.disable()
    return unchanged_code


def measure_torch(torch, fn, inputs, args, limit_s: float | None = None) -> dict:
    """CUDA events on torch's current stream around each call, after warm-up. A first call over
    `limit_s` is not timed again: {"over_limit_ms": its wall time} (PyTorch loops per matrix
    where JAX and we do not: qr 1000000x4x4 float32 took 47 s a call on the H200)."""
    start = time.perf_counter()
    fn(*inputs)
    torch.cuda.synchronize()
    first_ms = (time.perf_counter() - start) * 1e3
    if limit_s and first_ms > limit_s * 1e3:
        return {"over_limit_ms": first_ms}
    start = time.perf_counter()
    fn(*inputs)
    torch.cuda.synchronize()
    repeats, warmup = _counts(args, (time.perf_counter() - start) * 1e3)
    for _ in range(warmup):
        fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return {**_summary(times), "warmup": warmup}


def _torch_estimate_ms(seen: dict, key: tuple, batch: int) -> float | None:
    """PyTorch's time per call at `batch`, scaled from the largest smaller batch of the same
    shape timed in this run (`seen`: key -> {batch: ms}): linear in the batch, as a loop."""
    smaller = [b for b in seen.get(key, {}) if b < batch]
    if not smaller:
        return None
    b = max(smaller)
    return seen[key][b] * batch / b


def remember_torch(seen: dict, cells) -> None:
    """Adds PyTorch's times of earlier cells (a resumed report's) to `seen`, as run_cell adds
    its own: a run of a larger batch alone (--batches 10000000) then scales from them and skips
    a call past the limit (PyTorch's qr of 10^7 4 x 4 matrices, a loop: minutes)."""
    for cell in cells:
        result = cell.get("impls", {}).get("torch", {})
        ms = result.get("median_ms", result.get("over_limit_ms"))
        if ms:
            key = (cell["op"], cell["dtype"], cell["n"], cell.get("m"), cell.get("nrhs"))
            seen.setdefault(key, {}).setdefault(cell["batch"], ms)


def program_signature(fn, *inputs) -> str:
    """The optimized program XLA compiles fn to, without what names or locates it (instruction
    and computation names, metadata, the source tables): equal signatures mean the same kernels
    in the same order, so a time difference between them is the timer's noise."""
    return text_signature(compile_for_timing(fn, *inputs).as_text())


def _drop_attribute(text: str, name: str) -> str:
    """text without every `, name={...}` (braces balanced, quoted strings skipped: a GPU
    program's metadata may nest braces, which a regex up to the first `}` would cut short)."""
    out, i, key = [], 0, name + "={"
    while (j := text.find(key, i)) >= 0:
        start = j
        while start > i and text[start - 1] in " ,":
            start -= 1
        out.append(text[i:start])
        k, depth, quoted = j + len(key), 1, False
        while k < len(text) and depth:
            ch = text[k]
            if ch == "\\" and quoted:
                k += 1
            elif ch == '"':
                quoted = not quoted
            elif not quoted:
                depth += {"{": 1, "}": -1}.get(ch, 0)
            k += 1
        i = k
    return "".join(out) + text[i:]


def text_signature(text: str) -> str:
    """program_signature of an optimized HLO module's text."""
    lines = [line for line in text.splitlines() if line.startswith(("%", "ENTRY", "  ", "}"))]
    text = _drop_attribute("\n".join(lines), "metadata")
    # The timing stamps' slots are numbered per compiled program (jnp.linalg.cholesky's stamps
    # may sit in slots 3 and 4 where jcm.cholesky's sit in 1 and 2): not a difference.
    text = re.sub(r"slot = \d+", "slot = #", text)
    return re.sub(r"%[\w.\-]+", "%", text)


def same_program(fn_a, fn_b, inputs) -> bool | None:
    """Whether fn_a and fn_b compile to the same program on these inputs (None: not known)."""
    try:
        return program_signature(fn_a, *inputs) == program_signature(fn_b, *inputs)
    except Exception:  # noqa: BLE001  (a diagnostic: never fails a cell)
        return None


def extra_rounds(impls: dict, timed: dict, inputs, args, same_lowering: bool = False) -> None:
    """--rounds R > 1: time every JAX-side impl R - 1 more times, in alternating order, and pool
    the repeats: a GPU state that changes between blocks of repeats (H100 eigh 16x1024: 60 or
    69 ms per call from one block to the next, whoever calls) then falls on every impl alike.
    Cells where an impl takes under SMALL_CELL_MS get at least --small-rounds: there the host's
    launch gaps are most of the time, and one block of repeats each put the same lowering at
    +-30% of itself (H100 float32 solve 4x16, both JAX's lowering: 0.088 vs 0.141 ms). So do
    cells where `auto` runs JAX's own lowering (`same_lowering`) and the first round put the two
    more than 5% apart either way (H100 eigh 16x512, XsyevBatched both: 26.9 vs 32.6 ms). The
    rounds beyond --rounds leave out an impl ROUNDS_FAR_BEHIND times behind the fastest."""
    names = [name for name in timed if "failed" not in impls[name]]
    rounds = args.rounds
    medians = [impls[name].get("median_ms", math.inf) for name in names]
    if any(m < SMALL_CELL_MS for m in medians):
        rounds = max(rounds, args.small_rounds)
    ours, jax_ms = impls.get("jcm:auto", {}).get("median_ms"), impls.get("jax", {}).get("median_ms")
    if same_lowering and ours and jax_ms and abs(math.log(jax_ms / ours)) > SAME_LOWERING_SPREAD:
        rounds = max(rounds, args.small_rounds)
    per_round = {name: len(impls[name]["times_ms"]) for name in names}
    fastest = min(medians, default=math.inf)
    far = {name for name, m in zip(names, medians) if m > ROUNDS_FAR_BEHIND * fastest}
    for r in range(1, rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            if r >= args.rounds and name in far:
                continue
            result = impls[name]
            times = device_time_ms(timed[name], *inputs, repeats=per_round[name], warmup=1)
            pooled = result["times_ms"] + [float(t) for t in times]
            result.update(_summary(pooled), rounds=r + 1)
    ours, jax_ms = impls.get("jcm:auto", {}).get("median_ms"), impls.get("jax", {}).get("median_ms")
    if (same_lowering and ours and jax_ms and "jcm:auto" in names and "jax" in names
            and abs(math.log(jax_ms / ours)) > SAME_LOWERING_SPREAD):
        interleave(impls, timed, inputs, ["jax", "jcm:auto"],
                   max(INTERLEAVED_MIN_PAIRS, per_round["jax"], per_round["jcm:auto"]))


def interleave(impls: dict, timed: dict, inputs, names: list, pairs: int) -> None:
    """Times `names` one call each in turn, `pairs` times (the order alternating), and replaces
    their times with these: the same kernels still apart after the pooled rounds (H200 eigh
    complex128 2x278, both JAX's lowering: medians 19.3 vs 22.8 ms, minima 17.8 vs 18.2) meet
    the GPU's state of each moment alike, not one block each."""
    series = {name: [] for name in names}
    for i in range(pairs):
        for name in names if i % 2 == 0 else names[::-1]:
            series[name] += [float(t) for t in device_time_ms(timed[name], *inputs, repeats=1,
                                                               warmup=0)]
    for name in names:
        impls[name].update(_summary(series[name]), interleaved=pairs)


def _to_torch(torch, x):
    try:
        return torch.from_dlpack(x).clone()
    except Exception:  # noqa: BLE001
        return torch.from_numpy(np.asarray(x)).to("cuda")


def _resolve(module, dotted: str):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) < 2000 else text[:2000] + " ..."


# ---------------------------------------------------------------------------------------------
# One cell.


def auto_plan(op: Op, shape, dtype: str, args, nrhs: int = 1) -> dict:
    """What `auto` runs for the op's first operand of `shape` (jcm.explain), as JSON."""
    try:
        plan = jcm.explain(op.routine or op.ours or op.name, tuple(shape), np.dtype(dtype),
                           strategy="auto", lanes=args.lanes, nrhs=nrhs)
    except Exception as exc:  # noqa: BLE001
        return {"failed": short(exc)}
    found = {k: _jsonable(getattr(plan, k, None)) for k in ("strategy", "lanes", "reason",
                                                             "source")}
    found["text"] = str(plan)
    return found


def _shape_kw(rows: int | None, nrhs: int | None) -> dict:
    """The builder's keywords for a rectangular matrix or other right-hand sides (none for the
    grid's square cells)."""
    return {k: v for k, v in (("rows", rows), ("nrhs", nrhs)) if v is not None}


def first_operand_shape(op: Op, dtype: str, batch: int, n: int, rows: int | None = None,
                        nrhs: int | None = None) -> tuple:
    build = functools.partial(op.build, jax.random.key(0), batch, n, dtype,
                              **_shape_kw(rows, nrhs))
    return tuple(jax.eval_shape(lambda: build()[0])[0].shape)


# Where JAX loops over a batch of at least ESTIMATE_MIN_BATCH matrices, --estimate-first probes
# JAX at 1 / ESTIMATE_FRACTION of the batch and skips the cell if that time scaled up exceeds
# the limit ESTIMATE_SKIP_FACTOR times: a full probe of such a call takes its whole time to
# learn it is too slow (the H100 random part, seed 1: eigvals float32 21766x15x15, 21 s).
ESTIMATE_MIN_BATCH = 16
ESTIMATE_FRACTION = 16
ESTIMATE_SKIP_FACTOR = 2.0


def _probe_inputs(op: Op, dtype: str, batch: int, n: int, seed: int, rows: int | None,
                  nrhs: int | None) -> tuple[int, Any]:
    """(batch // ESTIMATE_FRACTION, the cell's inputs at that batch): what a probe times."""
    small = max(1, batch // ESTIMATE_FRACTION)
    build = functools.partial(op.build, jax.random.key(seed), small, n, dtype,
                              **_shape_kw(rows, nrhs))
    inputs, _ = jax.block_until_ready(jax.jit(build)())
    return small, inputs


def estimated_jax_ms(op: Op, dtype: str, batch: int, n: int, seed: int,
                     rows: int | None = None, nrhs: int | None = None) -> tuple[float, int]:
    """JAX's time per call of a cell where it loops per matrix, from one call (after a first)
    at a fraction of the batch, scaled by the batch: (the estimate in ms, the batch probed)."""
    small, inputs = _probe_inputs(op, dtype, batch, n, seed, rows, nrhs)
    compiled = compile_for_timing(op.reference, *inputs)
    jax.block_until_ready(compiled(*inputs))
    return _wall_ms(lambda: compiled(*inputs)) * batch / small, small


def estimated_torch_ms(torch, op: Op, dtype: str, batch: int, n: int, seed: int,
                       rows: int | None = None, nrhs: int | None = None) -> float:
    """PyTorch's time per call of a cell from one call (after a first) at 1 / ESTIMATE_FRACTION
    of the batch, scaled by the batch: PyTorch loops per matrix where JAX and we do not (qr of
    10^7 4 x 4 float64 matrices ran past 5 minutes on the H200), and a full first call takes
    its whole time to learn it is too slow."""
    small, inputs = _probe_inputs(op, dtype, batch, n, seed, rows, nrhs)
    fn, torch_inputs = _resolve(torch, op.torch), [_to_torch(torch, x) for x in inputs]
    fn(*torch_inputs)
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn(*torch_inputs)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3 * batch / small


def _estimated_too_slow(op: Op, dtype: str, batch: int, n: int, args, seed: int,
                        rows: int | None, nrhs: int | None) -> str | None:
    """With args.estimate_first, why JAX's call of this cell is too slow to time, from
    estimated_jax_ms where JAX loops per matrix over a large batch; else None."""
    limit_s = getattr(args, "jax_limit_s", None)
    if not (getattr(args, "estimate_first", False) and limit_s and op.reference is not None
            and batch >= ESTIMATE_MIN_BATCH
            and jax_lowering.jax_loops(op.name, dtype, batch, max(n, rows or n))):
        return None
    ms, probed = estimated_jax_ms(op, dtype, batch, n, seed, rows, nrhs)
    if ms <= ESTIMATE_SKIP_FACTOR * limit_s * 1e3:
        return None
    return (f"JAX: one call estimated at {ms / 1e3:.0f} s from a batch of {probed} "
            f"(> {ESTIMATE_SKIP_FACTOR:g} x {limit_s:g} s)")


def built_with(jcm, routine: str | None, strategy: str) -> bool:
    """Whether this build of the extension has `strategy` for `routine` at all (limits.h: e.g.
    XsygvStridedBatched only where the cuSOLVER built against has it); True where unknown."""
    if routine is None or strategy == "auto" or not hasattr(jcm, "strategy"):
        return True
    try:
        known = jcm.strategy.limits().get(routine)
    except RuntimeError:  # no extension: every strategy runs JAX's implementation
        return True
    return known is None or strategy in known["strategies"]


def drop_unbuilt(cells) -> None:
    """Removes from cells of an earlier run (--resume) the times or failures of strategies this
    build does not have (built_with): an earlier build's, which this run neither measures nor
    can compare (sygvd's batched strategy, where the cuSOLVER built against lacks it)."""
    for cell in cells:
        op = OPS.get(cell.get("op"))
        impls = cell.get("impls") or {}
        for name in [k for k in impls if k.startswith("jcm:")]:
            strategy = name[len("jcm:"):].partition(":")[0]
            if op is not None and name != f"jcm:{ENABLED}" and \
                    not built_with(jcm, op.routine, strategy):
                del impls[name]


def run_cell(op: Op, dtype: str, batch: int, n: int, args, torch, seed: int,
             rows: int | None = None, nrhs: int | None = None) -> dict:
    """One cell: batch matrices n x n, or rows x n with `rows`, and right-hand sides of `nrhs`
    columns for the ops that take them (recorded as "m" and "nrhs" where given)."""
    cell: dict[str, Any] = {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "impls": {}}
    if rows is not None:
        cell["m"] = rows
    if nrhs is not None:
        cell["nrhs"] = nrhs
    key = jax.random.key(seed)
    build = functools.partial(op.build, key, batch, n, dtype, **_shape_kw(rows, nrhs))
    shapes = jax.eval_shape(lambda: build()[0])
    cell["input_bytes"] = int(sum(s.size * s.dtype.itemsize for s in shapes))
    if cell["input_bytes"] > args.max_input_gb * 1e9:
        cell["status"] = "skipped"
        cell["note"] = f"inputs {cell['input_bytes'] / 1e9:.3g} GB > {args.max_input_gb:g} GB"
        return cell
    try:
        too_slow = _estimated_too_slow(op, dtype, batch, n, args, seed, rows, nrhs)
    except Exception as exc:  # noqa: BLE001  (the full probe below decides then)
        too_slow = None
        cell["estimate_failed"] = short(exc)
    if too_slow:
        cell["status"] = "skipped"
        cell["note"] = too_slow
        return cell
    try:
        # One program: built eagerly, each of the builder's ops compiles on its own at every
        # new shape, seconds per cell that the random part (a new shape each) pays.
        inputs, truth = jax.block_until_ready(jax.jit(build)())
    except Exception as exc:  # noqa: BLE001
        cell["status"] = "error"
        cell["note"] = "building inputs: " + short(exc)
        return cell
    impls = cell["impls"]
    floor = op.floor(dtype)
    timed = {}  # impl name -> its function, for the extra --rounds

    # What a call must read and write at the least, JAX's call failing or not: the memory-bound
    # yardstick of tiny matrices (render.tiny_markdown).
    try:
        outs = jax.eval_shape(op.reference, *inputs)
        cell["bytes"] = cell["input_bytes"] + int(
            sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(outs)))
    except Exception:  # noqa: BLE001  (JAX's own call then fails below, and says why)
        pass
    # JAX's reference: its time, and its error, which sets the bar for ours.
    jax_error = math.nan
    try:
        impls["jax"], out = measure_jax(op.reference, inputs, args,
                                        getattr(args, "jax_limit_s", None))
        timed["jax"] = op.reference
        jax_error = float(op.error(inputs, truth, out))
        impls["jax"]["error"] = jax_error
        del out
    except TooSlow as slow:
        # The grid's rule: a cell where JAX takes over the limit per call is skipped and said.
        impls["jax"] = {"probe_ms": slow.call_ms}
        cell["status"] = "skipped"
        cell["note"] = f"JAX: {slow}"
        return cell
    except Exception as exc:  # noqa: BLE001
        impls["jax"] = {"failed": short(exc)}
    bar = max(floor, ERROR_RATIO * jax_error) if math.isfinite(jax_error) else floor
    cell["error_bar"] = bar

    same_as_jax = []  # the impls whose program is JAX's very one: timed once, as JAX's
    if jcm is not None and hasattr(jcm, "explain"):
        cell["explain"] = auto_plan(op, inputs[0].shape, dtype, args, nrhs=nrhs or 1)
    same_lowering = (cell.get("explain") or {}).get("strategy") == "xla"
    if jcm is None:
        cell["note"] = "jax_cusolver_ms not importable: " + JCM_IMPORT_ERROR
    else:
        for spec in args.strategies:
            # "batched:8" = the batched strategy with the batch split over 8 lanes.
            strategy, _, lanes = spec.partition(":")
            name = f"jcm:{spec}"
            if spec != ENABLED and not built_with(jcm, op.routine, strategy):
                continue  # this build has no such path for the op (sygvd's batched one)
            try:
                if spec == ENABLED:
                    fn = compile_enabled(op.reference, inputs)
                    # Where auto hands every call to JAX, enable() leaves JAX's program as it is.
                    same = "jax" in timed and bool(same_program(op.reference, fn, inputs))
                else:
                    fn = op.our_fn(strategy, int(lanes) if lanes else args.lanes)
                    if spec == "auto" and same_lowering and "jax" in timed:
                        # auto runs JAX's own lowering; with no guard of ours around it, it is
                        # the very program JAX compiles, whose time a second timing would only
                        # blur.
                        cell["same_program"] = same_program(op.reference, fn, inputs)
                    same = spec == "auto" and bool(cell.get("same_program"))
                if same:
                    # JAX's very program gives JAX's output: neither run nor timed again (a
                    # call of a random shape can take JAX 17 s: H200 svdvals 187x1007x1007).
                    impls[name] = {}
                    same_as_jax.append(name)
                    error = jax_error
                else:
                    impls[name], out = measure_jax(fn, inputs, args)
                    timed[name] = fn
                    error = float(op.error(inputs, truth, out))
                    del out
                impls[name].update(error=error, ok=bool(math.isfinite(error) and error <= bar))
            except Exception as exc:  # noqa: BLE001
                impls[name] = {"failed": short(exc)}

    extra_rounds(impls, timed, inputs, args, same_lowering=same_lowering)
    timing = {k: v for k, v in impls["jax"].items() if k not in ("error", "probe_ms")}
    for name in same_as_jax:
        if "failed" not in impls[name]:
            impls[name].update(timing, same_program_as="jax")

    if torch is not None and op.torch:
        limit_s = getattr(args, "jax_limit_s", None)
        # Shapes timed earlier in this run (args.torch_seen, where the caller keeps one): a
        # call scaled from a smaller batch to over the limit is not made at all.
        seen = getattr(args, "torch_seen", None)
        shape_key = (op.name, dtype, n, rows, nrhs)
        estimate = _torch_estimate_ms(seen, shape_key, batch) if seen is not None else None
        try:
            if limit_s and estimate is None and batch >= ESTIMATE_MIN_BATCH:
                # Nothing smaller timed (a run of 10^7 matrices alone): a probe, as for JAX.
                probed = estimated_torch_ms(torch, op, dtype, batch, n, seed, rows, nrhs)
                estimate = probed if probed > ESTIMATE_SKIP_FACTOR * limit_s * 1e3 else None
            if limit_s and estimate and estimate > limit_s * 1e3:
                impls["torch"] = {"over_limit_ms": estimate, "estimated": True}
            else:
                fn = _resolve(torch, op.torch)
                torch_inputs = [_to_torch(torch, x) for x in inputs]
                impls["torch"] = measure_torch(torch, fn, torch_inputs, args, limit_s)
                if seen is not None:
                    ms = impls["torch"].get("median_ms", impls["torch"].get("over_limit_ms"))
                    seen.setdefault(shape_key, {})[batch] = ms
        except Exception as exc:  # noqa: BLE001
            impls["torch"] = {"failed": short(exc)}
        finally:
            torch_inputs = None
            torch.cuda.empty_cache()

    if op.host is not None and not getattr(args, "no_host", False):
        try:
            host_inputs = [np.asarray(x) for x in inputs]
            impls[HOST], out = measure_host(op.host, host_inputs, args,
                                            getattr(args, "jax_limit_s", None))
            if out is not None:
                impls[HOST]["error"] = float(op.error(inputs, truth, out))
            del out
        except Exception as exc:  # noqa: BLE001
            impls[HOST] = {"failed": short(exc)}

    cell["status"] = "ok" if all("failed" not in r for r in impls.values()) else "error"
    return cell


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


# ---------------------------------------------------------------------------------------------
# Environment.


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(torch) -> dict:
    env: dict[str, Any] = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "jax_backend": jax.default_backend(),
        "device_kind": jax.devices()[0].device_kind,
        "device_count": jax.device_count(),
        "timer": TIMER,
        "xla_client_preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
    }
    try:
        line = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip().splitlines()[0]
        env["gpu"], env["driver"] = (s.strip() for s in line.split(",", 1))
    except Exception:  # noqa: BLE001
        env["gpu"] = env["device_kind"] if env["jax_backend"] == "gpu" else "cpu"
        env["driver"] = None
    if env["jax_backend"] != "gpu" and env["gpu"] != "cpu":  # JAX_PLATFORMS=cpu on a GPU machine
        env["idle_gpu"], env["gpu"] = env["gpu"], "cpu"
    versions = {"numpy": np.__version__, "jax": jax.__version__}
    try:
        import jaxlib

        versions["jaxlib"] = getattr(jaxlib, "__version__", None) or _version("jaxlib")
    except ImportError:
        versions["jaxlib"] = None
    for dist in ("jax-cuda13-plugin", "jax-cuda12-plugin", "nvidia-cusolver",
                 "nvidia-cusolver-cu12", "nvidia-cublas", "nvidia-cublas-cu12", "scipy",
                 "jax-cusolver-ms"):
        if (v := _version(dist)) is not None:
            versions[dist] = v
    if torch is not None:
        versions["torch"] = torch.__version__
        versions["torch_cuda"] = torch.version.cuda
    if jcm is not None:
        versions["jax_cusolver_ms"] = getattr(jcm, "__version__", None)
        env["jcm_file"] = getattr(jcm, "__file__", None)
        if hasattr(jcm, "library_versions"):
            try:
                versions["jax_cusolver_ms_libraries"] = {
                    str(k): _jsonable(v) for k, v in dict(jcm.library_versions()).items()}
            except Exception as exc:  # noqa: BLE001
                versions["jax_cusolver_ms_libraries"] = {"failed": short(exc)}
        if hasattr(jcm, "gpu_available"):
            try:
                env["jcm_gpu_available"] = bool(jcm.gpu_available())
            except Exception as exc:  # noqa: BLE001
                env["jcm_gpu_available"] = short(exc)
    else:
        env["jcm_import_error"] = JCM_IMPORT_ERROR
    env["versions"] = versions
    return env


# ---------------------------------------------------------------------------------------------
# Measurement options (benchmarks.report takes them on its command line and passes them on).


def _list(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def parse_args(argv=None):
    """The options `run_cell` reads, checked; benchmarks.report builds them from its own."""
    p = argparse.ArgumentParser(prog="benchmarks.bench",
                                description="measurement options of one square cell")
    p.add_argument("--strategies", type=_list, default=list(STRATEGIES),
                   help="comma-separated jax_cusolver_ms strategies, each optionally "
                        "STRATEGY:LANES, e.g. 'auto,looped:16,batched:4' (default: "
                        + ",".join(STRATEGIES) + ")")
    p.add_argument("--lanes", type=int, default=None,
                   help="pass lanes=N to jax_cusolver_ms (default: its own choice)")
    p.add_argument("--repeats", type=int, default=None,
                   help=f"timed calls per measurement (default {REPEATS}; {SMOKE_REPEATS} "
                        "with --cpu-smoke)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls first (default 2)")
    p.add_argument("--budget-s", type=float, default=4.0,
                   help="seconds one measurement may take: slow calls get fewer repeats, "
                        "never fewer than --min-repeats")
    p.add_argument("--min-repeats", type=int, default=3, help="(default 3)")
    p.add_argument("--jax-limit-s", type=float, default=None,
                   help="skip a cell (and say so) where one call of JAX's takes longer")
    p.add_argument("--estimate-first", action="store_true",
                   help=f"with --jax-limit-s, where JAX loops per matrix over a batch of "
                        f"{ESTIMATE_MIN_BATCH} or more: skip the cell if JAX's time at "
                        f"1/{ESTIMATE_FRACTION} of the batch, scaled up, exceeds "
                        f"{ESTIMATE_SKIP_FACTOR:g} x the limit (no full call to learn it)")
    p.add_argument("--small-rounds", type=int, default=5,
                   help=f"at least this many rounds where an impl takes < {SMALL_CELL_MS} ms "
                        "(default 5)")
    p.add_argument("--rounds", type=int, default=1,
                   help="time JAX and ours this many times each, alternating, repeats pooled "
                        "(for cells whose GPU state drifts between blocks of repeats)")
    p.add_argument("--cpu-smoke", action="store_true",
                   help=f"no GPU: {SMOKE_REPEATS} repeats unless --repeats says otherwise")
    p.add_argument("--no-torch", action="store_true", help="do not time PyTorch")
    p.add_argument("--no-host", action="store_true",
                   help="do not time an op's CPU peer (SciPy per matrix, where no GPU library "
                        "has the op)")
    p.add_argument("--max-input-gb", type=float, default=8.0,
                   help="skip cells whose inputs exceed this (default 8)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for name in args.strategies:
        if name.partition(":")[0] not in KNOWN_STRATEGIES:
            p.error(f"unknown strategy {name!r}; known: {', '.join(KNOWN_STRATEGIES)}")
    if args.repeats is None:
        args.repeats = SMOKE_REPEATS if args.cpu_smoke else REPEATS
    args.min_repeats = min(args.min_repeats, args.repeats)
    args.torch_seen = {}  # run_cell: PyTorch's times so far, to skip calls scaled past the limit
    return args


def _import_torch(args):
    if args.no_torch:
        return None, "--no-torch"
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return None, f"not importable ({type(exc).__name__}: {exc})"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA device"
    if jax.default_backend() != "gpu":
        return None, "JAX has no GPU"
    return torch, None
