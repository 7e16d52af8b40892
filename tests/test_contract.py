"""The contract every public op keeps, checked over one table of ops.

Each entry of OPS is a public op (or one mode of it) with an input builder, a reference (JAX's own
function, or NumPy/SciPy in float64 where JAX has none), the FFI targets its CUDA lowering calls
and its tolerance per dtype. The checks, each parametrised over the table:

  threads    8 Python threads call the op at once (shared jitted functions, every strategy on a
             GPU) and every result is right.
  pipeline   the op inside a jitted function with XLA work just before (a GEMM makes its inputs)
             and just after (a multiply reads its outputs), several calls in flight: a missing
             fork or join between XLA's stream and the op's gives wrong numbers.
  lowering   lowered for CUDA (no GPU needed: exported for platform cuda) every strategy reaches
             this project's FFI targets, and JAX's own cuSOLVER calls are not used next to them.
  vmap       jax.vmap of the op equals the op on the batched arguments.
  nan        a NaN in one matrix of a batch gives NaN in that matrix's outputs only; the other
             matrices come out as if computed alone.

Where outputs are not unique (the signs / phases of QR, eigen- and singular vectors, eigenvalue
order) both sides are compared through what is: an entry's `invariant`. On the CPU every strategy
runs JAX's own implementation, so each op meets one strategy (rotated over the table); on a GPU
every strategy runs, and the slow set adds the stress version of the pipeline (large batches,
1, 4 and 16 lanes, many calls in flight).
"""

import dataclasses
import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg

import jax_cusolver_ms as jcm
from jax_cusolver_ms import _ffi, strategy
from conftest import (
    ALL_STRATEGIES,
    DTYPES,
    FULL_GRID,
    conj_t,
    exported_module_text,
    is_complex,
    param_id,
    random_matrix,
    random_rhs,
    rel_err,
    requires_gpu,
    rtol_for,
    run_in_threads,
    unitary,
    widened,
)
from test_ldl import reconstruct

BF16, F16 = np.dtype(jnp.bfloat16), np.dtype(jnp.float16)
MATMUL_DTYPES = (BF16, F16) + tuple(np.dtype(d) for d in DTYPES)
THREADS = 8
DOUBLE_DTYPES = (np.float64, np.complex128)
GPU = jcm.gpu_available()

# (batch, n, calls) per context: "small" on the CPU (one JAX implementation behind every
# strategy); "full" with FULL_GRID (on a GPU, or with JCM_TEST_FULL_GRID=1), enough matrices to
# spread over the lanes; the stress pipeline, the slow set's.
SIZES = {
    "small": ((3,), 6, 2),
    "full": ((8,), 24, 6),
    "threads_full": ((16,), 32, 6),
    "stress": ((64,), 48, 20),
    "stress_blocked": ((16,), None, 12),  # n: the entry's blocked_n (more than one panel)
}
# Lanes the strategies other than auto and blocked run on (auto picks its own; blocked has none).
LANES = 4


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


def rect(n):
    """Rows and columns of the tall matrices the QR and SVD entries take."""
    return n, max(1, 2 * n // 3)


def symmetric_indefinite(rng, shape, dtype, hermitian=False):
    """Q diag(d) Q^T (Q^H if hermitian) with Q unitary and |d| in [1, 2] of both signs: symmetric
    (complex symmetric) or Hermitian, indefinite, condition number at most 2."""
    *batch, n, _ = shape
    q = unitary(rng, shape, dtype)
    d = rng.uniform(1, 2, tuple(batch) + (n,)) * rng.choice([-1.0, 1.0], tuple(batch) + (n,))
    qt = conj_t(q) if hermitian else np.swapaxes(q, -1, -2)
    return ((q * d[..., None, :]) @ qt).astype(dtype)


def _general(rng, dtype, batch, shape):
    return random_matrix(rng, batch + shape, dtype, "general")


def _rhs(rng, dtype, batch, n, k=2):
    return random_rhs(rng, batch + (n, k), dtype)


def build_square(kind):
    def build(rng, dtype, batch, n):
        return (random_matrix(rng, batch + (n, n), dtype, kind),)

    return build


def build_solve(rng, dtype, batch, n):
    a = random_matrix(rng, batch + (n, n), dtype, "well_conditioned")
    return a, _rhs(rng, dtype, batch, n)


def build_spd_solve(rng, dtype, batch, n):
    a = random_matrix(rng, batch + (n, n), dtype, "spd")
    return a, _rhs(rng, dtype, batch, n)


def build_lu_solve(rng, dtype, batch, n):
    a = random_matrix(rng, batch + (n, n), dtype, "well_conditioned")
    lu, piv = jsl.lu_factor(a)
    return np.asarray(lu), np.asarray(piv), _rhs(rng, dtype, batch, n)


def build_cho_solve(rng, dtype, batch, n):
    a = random_matrix(rng, batch + (n, n), dtype, "spd")
    return np.linalg.cholesky(widened(a)).astype(dtype), _rhs(rng, dtype, batch, n)


def build_rect(rng, dtype, batch, n):
    return (_general(rng, dtype, batch, rect(n)),)


def build_reflectors(rng, dtype, batch, n):
    """geqrf's output (h, taus) for random tall matrices: valid Householder reflectors."""
    h, taus = jnp.linalg.qr(_general(rng, dtype, batch, rect(n)), mode="raw")
    return np.asarray(jnp.swapaxes(h, -1, -2)), np.asarray(taus)


def build_ormqr(rng, dtype, batch, n):
    return build_reflectors(rng, dtype, batch, n) + (_rhs(rng, dtype, batch, n, 3),)


def build_qr_multiply(rng, dtype, batch, n):
    m, _ = rect(n)
    return _general(rng, dtype, batch, rect(n)), random_rhs(rng, batch + (2, m), dtype)


def build_symmetric(rng, dtype, batch, n):
    return (symmetric_indefinite(rng, batch + (n, n), dtype),)


def build_ldl_solve(rng, dtype, batch, n):
    (a,) = build_symmetric(rng, dtype, batch, n)
    ld, pivots = lapack_sytrf(a)
    return ld.astype(dtype), pivots, _rhs(rng, dtype, batch, n)


def build_hermitian(rng, dtype, batch, n):
    return (symmetric_indefinite(rng, batch + (n, n), dtype, hermitian=True),)


def build_definite_pair(rng, dtype, batch, n):
    """A Hermitian indefinite A and a positive definite B."""
    return (symmetric_indefinite(rng, batch + (n, n), dtype, hermitian=True),
            random_matrix(rng, batch + (n, n), dtype, "spd"))


def generalized_eigh_reference(a, b):
    """The reduction written with jnp.linalg: what a JAX user has for A x = w B x."""
    l = jnp.linalg.cholesky(b)
    c = jsl.solve_triangular(l, jnp.conj(jnp.swapaxes(jsl.solve_triangular(l, a, lower=True),
                                                      -1, -2)), lower=True)
    w, y = jnp.linalg.eigh(c)
    return w, jsl.solve_triangular(l, y, lower=True, trans="C")


def build_rank_deficient(rng, dtype, batch, n):
    """Tall matrices, the first of the batch of rank 2."""
    a = _general(rng, dtype, batch, rect(n))
    m, k = rect(n)
    low = random_rhs(rng, batch + (m, 2), dtype) @ random_rhs(rng, batch + (2, k), dtype)
    a[(0,) * len(batch)] = low[(0,) * len(batch)]
    return (a,)


def build_lstsq(rng, dtype, batch, n):
    # lstsq takes one matrix (as jnp.linalg.lstsq): `batch` does not apply.
    m, k = rect(n)
    return _general(rng, dtype, (), (m, k)), random_rhs(rng, (m,), dtype)


def build_batched_lstsq(rng, dtype, batch, n):
    m, k = rect(n)
    return _general(rng, dtype, batch, (m, k)), random_rhs(rng, batch + (m, 2), dtype)


def build_matmul(rng, dtype, batch, n):
    m, k = rect(n)
    return random_rhs(rng, batch + (m, k), dtype), random_rhs(rng, batch + (k, n - 1), dtype)


# ---------------------------------------------------------------------------------------------
# References and invariants (NumPy, float64 / complex128)
# ---------------------------------------------------------------------------------------------


def _abs(x):
    return np.abs(widened(x))


def qr_invariant(args, out):
    """Q R, |R| and Q Q^H: the same for every Q D, D^H R with D a diagonal of unit phases."""
    q, r = (widened(x) for x in out)
    return q @ r, np.abs(r), q @ conj_t(q)


def qr_raw_invariant(args, out):
    h, taus = out
    k = taus.shape[-1]
    h = jnp.swapaxes(h, -1, -2)  # numpy.linalg.qr's raw layout: the transposed geqrf output
    q = jax.lax.linalg.householder_product(h[..., :, :k], taus)
    return qr_invariant(args, (q, jnp.triu(h[..., :k, :])))


def qr_multiply_invariant(args, out):
    """(C Q) R = C A and |R|, whatever the phases of Q's columns."""
    cq, r = (widened(x) for x in out)
    return cq @ r, np.abs(r)


def qr_multiply_reference(a, c):
    a, c = widened(a), widened(c)
    batch = a.shape[:-2]
    pairs = [scipy.linalg.qr_multiply(x, y) for x, y in
             zip(a.reshape((-1,) + a.shape[-2:]), c.reshape((-1,) + c.shape[-2:]))]
    return tuple(np.stack(v).reshape(batch + v[0].shape) for v in zip(*pairs))


def ldl_reconstruct(ld, pivots):
    """The matrices P L D L^T P^T that LAPACK-style compact factors stand for (float64)."""
    ld, pivots = np.asarray(ld), np.asarray(pivots)
    n = ld.shape[-1]
    flat = [reconstruct(f, p)[0] for f, p in zip(ld.reshape((-1, n, n)), pivots.reshape((-1, n)))]
    return np.stack(flat).reshape(ld.shape) if flat else np.zeros(ld.shape, np.complex128)


def lapack_sytrf(a):
    """LAPACK ?sytrf of each matrix, in float64 / complex128."""
    a = widened(a)
    n = a.shape[-1]
    sytrf = scipy.linalg.lapack.get_lapack_funcs(("sytrf",), dtype=a.dtype)[0]
    flat = [sytrf(m, lower=1)[:2] for m in a.reshape((-1, n, n))]
    ld = np.stack([np.tril(f) for f, _ in flat]).reshape(a.shape)
    return ld, np.stack([p for _, p in flat]).reshape(a.shape[:-1]).astype(np.int32)


def ldl_solve_reference(ld, pivots, b):
    return np.linalg.solve(ldl_reconstruct(ld, pivots), widened(b))


def eigh_invariant(args, out):
    """The eigenvalues and V diag(w^3) V^H = A^3: the same whatever basis of each eigenspace."""
    w, v = widened(out[0]), widened(out[1])
    return w, (v * w[..., None, :] ** 3) @ conj_t(v)


def eig_invariant(args, out):
    """Symmetric functions of the eigenvalues (sorted magnitudes, sums of w and w^2) and the
    eigenpairs' residual ||A V - V diag(w)|| / ||A|| (plus one: small for correct pairs)."""
    w, v = (widened(x) for x in out)
    a = widened(args[0]).astype(np.complex128)
    res = np.linalg.norm(a @ v - v * w[..., None, :], axis=(-2, -1))
    return eigvals_invariant(args, (w,)) + (1 + res / np.linalg.norm(a, axis=(-2, -1)),)


def eigvals_invariant(args, out):
    w = widened(out[0])
    return np.sort(np.abs(w), axis=-1), np.sum(w, -1), np.sum(w * w, -1)


def svd_invariant(args, out):
    """S, U_k diag(S) V_k^H (= A), U_k diag(sqrt(1 + S)) V_k^H (a function of A, unique for
    distinct singular values), and U U^H, V V^H (full: the identity; reduced: the projectors)."""
    u, s, vh = (widened(x) for x in out)
    k = s.shape[-1]
    uk, vk = u[..., :, :k], vh[..., :k, :]
    return (s, (uk * s[..., None, :]) @ vk, (uk * np.sqrt(1 + s)[..., None, :]) @ vk,
            u @ conj_t(u), conj_t(vh) @ vh)


def slogdet_invariant(args, out):
    sign, logabsdet = (widened(x) for x in out)
    return sign, np.exp(logabsdet)  # |det|: relative error = absolute error of log |det|


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    call: Callable  # call(*args, strategy=, lanes=): the op
    reference: Callable  # reference(*args): the same outputs, by JAX, or NumPy/SciPy (float64)
    build: Callable  # build(rng, dtype, batch, n) -> the arguments (NumPy), batch dims leading
    targets: tuple  # FFI targets of its CUDA lowering: jcm_<t> (or the kernel's jcm_<t>_small)
    cond: float = 10  # the inputs' conditioning margin: tolerance rtol_for(dtype, n, cond)
    tolerance: Optional[dict] = None  # or a fixed relative tolerance per dtype
    invariant: Optional[Callable] = None  # (args, outputs) -> what every correct result agrees on
    dtypes: tuple = DTYPES
    strategies: tuple = ALL_STRATEGIES  # () for an op without strategies (matmul)
    batched: bool = True  # takes batch dimensions (lstsq does not)
    nan_outputs: Optional[tuple] = ()  # NaN for a NaN matrix: () every floating one; None: none
    blocked_n: int = 0  # the stress size for strategy "blocked": more than one block
    host_callback: bool = False  # runs a host callback (jax.pure_callback) without a GPU

    def __str__(self):
        return self.name

    def tol(self, dtype, n):
        if self.tolerance is not None:
            return self.tolerance[np.dtype(dtype)]
        return rtol_for(dtype, n, self.cond)


WITH_BLOCKED = ALL_STRATEGIES + ("blocked",)
LU_BLOCK_N, CHOLESKY_BLOCK_N, LDL_BLOCK_N = 2 * 32 + 5, 256 + 64, 4 * 32 + 9
MATMUL_TOL = {BF16: 1e-2, F16: 2e-3, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12,
              np.dtype(np.complex64): 1e-5, np.dtype(np.complex128): 1e-12}
HIGHEST = jax.lax.Precision.HIGHEST
lu_blocked = dict(strategies=WITH_BLOCKED, blocked_n=LU_BLOCK_N)
cholesky_blocked = dict(strategies=WITH_BLOCKED, blocked_n=CHOLESKY_BLOCK_N)
ldl_blocked = dict(strategies=WITH_BLOCKED, blocked_n=LDL_BLOCK_N, host_callback=True)
square, spd = build_square("well_conditioned"), build_square("spd")

OPS = [
    # LU
    Op("lu_factor", jcm.lu_factor, jsl.lu_factor, square, ("getrf",), **lu_blocked),
    Op("lu", jcm.lu, jax.lax.linalg.lu, square, ("getrf",), **lu_blocked),
    Op("lu_solve", lambda lu, piv, b, **kw: jcm.lu_solve((lu, piv), b, **kw),
       lambda lu, piv, b: jsl.lu_solve((lu, piv), b), build_lu_solve, ("getrs",)),
    Op("lu_solve_trans", lambda lu, piv, b, **kw: jcm.lu_solve((lu, piv), b, 2, **kw),
       lambda lu, piv, b: jsl.lu_solve((lu, piv), b, 2), build_lu_solve, ("getrs",)),
    Op("solve", jcm.solve, jnp.linalg.solve, build_solve, ("getrf", "getrs"), **lu_blocked),
    Op("inv", jcm.inv, jnp.linalg.inv, square, ("getrf", "getrs"), **lu_blocked),
    # Mixed precision: a float32 / complex64 factor, refined to float64 accuracy
    Op("solve_mixed", lambda a, b, **kw: jcm.solve(a, b, precision="mixed", **kw),
       jnp.linalg.solve, build_solve, ("getrf", "getrs"), dtypes=DOUBLE_DTYPES, **lu_blocked),
    Op("mixed_solve_pos", lambda a, b, **kw: jcm.mixed_solve(a, b, assume_a="pos", **kw).x,
       jnp.linalg.solve, build_spd_solve, ("potrf", "potrs"),
       dtypes=DOUBLE_DTYPES, **cholesky_blocked),
    Op("det", jcm.det, jnp.linalg.det, square, ("getrf",), **lu_blocked),
    Op("slogdet", jcm.slogdet, jnp.linalg.slogdet, square, ("getrf",),
       invariant=slogdet_invariant, nan_outputs=(1,), **lu_blocked),  # the sign of NaN: 1, as JAX
    # Cholesky
    Op("cholesky", jcm.cholesky, jnp.linalg.cholesky, spd, ("potrf",), **cholesky_blocked),
    Op("cholesky_upper", lambda a, **kw: jcm.cholesky(a, upper=True, **kw),
       lambda a: jnp.linalg.cholesky(a, upper=True), spd, ("potrf",), **cholesky_blocked),
    Op("cho_factor", lambda a, **kw: jcm.cho_factor(a, **kw)[0], lambda a: jsl.cho_factor(a)[0],
       spd, ("potrf",), **cholesky_blocked),
    Op("cho_solve", lambda c, b, **kw: jcm.cho_solve((c, True), b, **kw),
       lambda c, b: jsl.cho_solve((c, True), b), build_cho_solve, ("potrs",)),
    # Triangular solve: op(A) = A^H of the lower triangle (the kernel reads the transpose)
    Op("solve_triangular", lambda a, b, **kw: jcm.solve_triangular(a, b, 2, True, **kw),
       lambda a, b: jsl.solve_triangular(a, b, 2, True), build_cho_solve, ("trsm",)),
    # QR
    Op("qr", jcm.qr, jnp.linalg.qr, build_rect, ("geqrf", "orgqr"), invariant=qr_invariant),
    Op("qr_complete", lambda a, **kw: jcm.qr(a, "complete", **kw),
       lambda a: jnp.linalg.qr(a, "complete"), build_rect, ("geqrf", "orgqr"),
       invariant=qr_invariant),
    Op("qr_r", lambda a, **kw: jcm.qr(a, "r", **kw), lambda a: jnp.linalg.qr(a, "r"),
       build_rect, ("geqrf",), invariant=lambda args, r: (_abs(r),)),
    Op("qr_raw", lambda a, **kw: jcm.qr(a, "raw", **kw), lambda a: jnp.linalg.qr(a, "raw"),
       build_rect, ("geqrf",), invariant=qr_raw_invariant,
       nan_outputs=(0,)),  # cuSOLVER's geqrf may leave a NaN column's tau finite, as JAX's

    Op("householder_product", jcm.householder_product, jax.lax.linalg.householder_product,
       build_reflectors, ("orgqr",)),
    Op("ormqr", jcm.ormqr, jax.lax.linalg.ormqr, build_ormqr, ("ormqr",)),
    Op("qr_multiply", jcm.qr_multiply, qr_multiply_reference, build_qr_multiply,
       ("geqrf", "ormqr"), invariant=qr_multiply_invariant),
    # LDL^T (JAX has none: LAPACK's ?sytrf and NumPy's solve in float64)
    Op("ldl_factor", jcm.ldl_factor, lapack_sytrf, build_symmetric, ("sytrf",),
       invariant=lambda args, out: (ldl_reconstruct(*out),), **ldl_blocked),
    Op("ldl_solve", jcm.ldl_solve, ldl_solve_reference, build_ldl_solve, ("sytrs",),
       **ldl_blocked),
    # Eigendecompositions
    Op("eigh", jcm.eigh, jnp.linalg.eigh, build_hermitian, ("syevd",), invariant=eigh_invariant),
    Op("eigvalsh", jcm.eigvalsh, jnp.linalg.eigvalsh, build_hermitian, ("syevd",)),
    Op("generalized_eigh", jcm.generalized_eigh, generalized_eigh_reference, build_definite_pair,
       ("sygvd",), invariant=eigh_invariant),
    Op("eig", jcm.eig, jnp.linalg.eig, build_square("general"), ("geev",), cond=100,
       invariant=eig_invariant),
    Op("eigvals", jcm.eigvals, jnp.linalg.eigvals, build_square("general"), ("geev",), cond=100,
       invariant=eigvals_invariant),
    # SVD
    Op("svd", jcm.svd, jnp.linalg.svd, build_rect, ("gesvdj",), invariant=svd_invariant),
    Op("svd_reduced", lambda a, **kw: jcm.svd(a, False, **kw),
       lambda a: jnp.linalg.svd(a, False), build_rect, ("gesvdj",), invariant=svd_invariant),
    Op("svd_qr", lambda a, **kw: jcm.svd(a, False, algorithm="qr", **kw),
       lambda a: jnp.linalg.svd(a, False), build_rect, ("gesvd",), invariant=svd_invariant),
    Op("svdvals", jcm.svdvals, jnp.linalg.svdvals, build_rect, ("gesvdj",)),
    Op("pinv", jcm.pinv, jnp.linalg.pinv, build_rect, ("gesvdj",), cond=100),
    Op("matrix_rank", jcm.matrix_rank, jnp.linalg.matrix_rank, build_rank_deficient,
       ("gesvdj",), nan_outputs=None),  # an integer: no NaN to hold
    Op("lstsq", jcm.lstsq, jnp.linalg.lstsq, build_lstsq, ("gesvdj",), cond=100, batched=False,
       nan_outputs=None),
    Op("lstsq_mixed", lambda a, b, **kw: jcm.lstsq(a, b, precision="mixed", **kw)[0],
       jnp.vectorize(lambda a, b: jnp.linalg.lstsq(a, b)[0], signature="(m,n),(m,k)->(n,k)"),
       build_batched_lstsq, ("geqrf", "orgqr"), cond=100, dtypes=DOUBLE_DTYPES),
    Op("norm", lambda a, **kw: jcm.norm(a, 2, (-2, -1), **kw),
       lambda a: jnp.linalg.norm(a, 2, (-2, -1)), build_rect, ("gesvdj",)),
    Op("cond", jcm.cond, jnp.linalg.cond, build_rect, ("gesvdj",), cond=100),
    # matmul (cuBLASLt): no strategies
    Op("matmul", lambda a, b: jcm.matmul(a, b, precision="highest"),
       lambda a, b: jnp.matmul(a, b, precision=HIGHEST), build_matmul, ("matmul",),
       tolerance=MATMUL_TOL, dtypes=MATMUL_DTYPES, strategies=()),
]
OPS_BY_NAME = {op.name: op for op in OPS}


def strategies_of(op):
    """The op's strategies that every routine it runs has (the extension's limits say which:
    eig has no batched one); auto always."""
    if not op.strategies:
        return (None,)
    limits = strategy.limits() if _ffi.limits is not None else {}
    return tuple(s for s in op.strategies if s == "auto" or all(
        s in limits.get(t, {}).get("strategies", (s,)) for t in op.targets))


def runs_at(op, opts, n):
    """Whether the strategy in `opts` runs every routine of `op` on n x n matrices (eig's batched
    path, the tiny-matrix kernel, stops at n = 4)."""
    s = opts.get("strategy")
    return s in (None, "auto") or _ffi.limits is None or all(
        strategy.infeasible(t, s, n, n) is None for t in op.targets)


def options(strategy, lanes=None):
    """The keywords of a call with `strategy`: none for an op without strategies."""
    if strategy is None:
        return {}
    return dict(strategy=strategy, lanes=lanes)


def run_options(strategy, lanes):
    """auto picks its lanes, blocked has none, the others run on `lanes`."""
    return options(strategy, None if strategy in ("auto", "blocked") else lanes)


def rotated_strategy(i, op):
    strategies = strategies_of(op)
    return i % len(strategies), strategies[i % len(strategies)]


def grid(every_strategy=True):
    """(op, dtype, strategy) params: on a GPU each op with each of its strategies (with
    every_strategy), else with one, rotated over the table; the dtype rotates with them, so
    every dtype meets every family."""
    params = []
    for i, op in enumerate(OPS):
        picked = (list(enumerate(strategies_of(op))) if every_strategy and FULL_GRID
                  else [rotated_strategy(i, op)])
        for j, s in picked:
            dtype = np.dtype(op.dtypes[(i + j) % len(op.dtypes)])
            params.append(pytest.param(op, dtype, s, id=f"{op.name}-{dtype.name}-{s or 'default'}"))
    return params


# ---------------------------------------------------------------------------------------------
# Comparing results
# ---------------------------------------------------------------------------------------------


def leaves(tree):
    """The array outputs, as NumPy arrays (JAX arrays and NumPy arrays alike)."""
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def tolerance_size(op, args):
    return max(np.shape(args[0])[-2:])


def assert_matches(op, args, got, ref, dtype, batch_ndim, what):
    """got agrees with ref (through the op's invariant where it has one): integers exactly,
    floating results within the op's tolerance for dtype, item by item."""
    if op.invariant is not None:
        got, ref = op.invariant(args, got), op.invariant(args, ref)
    got, ref = leaves(got), leaves(ref)
    assert len(got) == len(ref), (what, len(got), len(ref))
    tol = op.tol(dtype, tolerance_size(op, args))
    for k, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape, (what, k, g.shape, r.shape)
        if np.issubdtype(r.dtype, np.integer) or r.dtype == bool:
            np.testing.assert_array_equal(g, r, err_msg=f"{what}: output {k}")
            continue
        err = rel_err(g, r, core_ndim=min(2, g.ndim - batch_ndim))
        assert err <= tol, f"{what}: output {k} differs by {err:.3g} > {tol:.3g}"


def item(args, index):
    return tuple(np.asarray(x)[index] for x in args)


# ---------------------------------------------------------------------------------------------
# (a) threads
# ---------------------------------------------------------------------------------------------


def check_threads(op, dtype, strategies, rng, batch, n, calls):
    """THREADS threads call shared jitted functions at once (thread t the strategy
    strategies[t % len]), each on its own data; every result is right."""
    jitted = [jax.jit(functools.partial(op.call, **run_options(s, LANES))) for s in strategies]
    data = [[op.build(rng, dtype, batch, n) for _ in range(calls)] for _ in range(THREADS)]
    fns = [lambda args, f=jitted[t % len(jitted)]: f(*args) for t in range(THREADS)]
    results = run_in_threads(fns, data)
    batch_ndim = len(batch) if op.batched else 0
    for t in range(THREADS):
        for i, (out, args) in enumerate(zip(results[t], data[t])):
            assert_matches(op, args, out, op.reference(*args), dtype, batch_ndim,
                           f"{op}: thread {t}, call {i}")


@pytest.mark.parametrize("op,dtype", [
    pytest.param(op, np.dtype(op.dtypes[i % len(op.dtypes)]),
                 id=f"{op.name}-{np.dtype(op.dtypes[i % len(op.dtypes)]).name}")
    for i, op in enumerate(OPS)])
def test_threads(rng, op, dtype):
    if op.host_callback and not GPU:
        # jax.pure_callback called from 8 threads at once can hang on a CPU with few cores
        # (also without this package: a LAPACK loop in the callback is enough).
        pytest.skip("host callbacks from concurrent threads can deadlock JAX's CPU client")
    if FULL_GRID:  # the threads' strategies: every one of the op's that runs n, over the threads
        batch, n, calls = SIZES["threads_full"]
        strategies = [s for s in strategies_of(op) if runs_at(op, options(s), n)]
        check_threads(op, dtype, strategies, rng, batch, n, calls)
    else:
        check_threads(op, dtype, (rotated_strategy(OPS.index(op), op)[1],), rng, *SIZES["small"])


# ---------------------------------------------------------------------------------------------
# (b) pipeline: XLA work before and after, inside one jitted function
# ---------------------------------------------------------------------------------------------


def pipelined(op, opts):
    """jit of: each argument made by XLA right before the op (a matrix by a GEMM with the
    identity, the rest by a multiply by one, from runtime values XLA cannot fold), the op, and
    each output read by XLA right after (times two). Both are exact, so the result is twice the
    op's."""

    def before(x, one):
        if np.ndim(x) >= 2 and jnp.issubdtype(x.dtype, jnp.inexact):
            eye = jnp.eye(x.shape[-1], dtype=x.dtype) * one.astype(x.dtype)
            return jnp.matmul(x, eye, precision=HIGHEST)
        return x * one.astype(x.dtype)

    def f(one, *args):
        out = op.call(*(before(x, one) for x in args), **opts)
        return jax.tree.map(lambda y: y * (2 * one).astype(y.dtype), out)

    return jax.jit(f)


def check_pipeline(op, dtype, strategy, lanes, rng, batch, n, calls):
    f = pipelined(op, run_options(strategy, lanes))
    one = jnp.ones((), np.int32)
    inputs = [op.build(rng, dtype, batch, n) for _ in range(calls)]
    # Dispatch every call before looking at any result, so that consecutive calls overlap.
    got = [f(one, *(jax.device_put(x) for x in args)) for args in inputs]
    batch_ndim = len(batch) if op.batched else 0
    for i, (out, args) in enumerate(zip(got, inputs)):
        halved = [x // 2 if np.issubdtype(x.dtype, np.integer) else x / 2 for x in leaves(out)]
        assert_matches(op, args, jax.tree.unflatten(jax.tree.structure(out), halved),
                       op.reference(*args), dtype, batch_ndim, f"{op}: call {i}")


@pytest.mark.parametrize("op,dtype,strategy", grid())
def test_pipeline(rng, op, dtype, strategy):
    batch, n, calls = SIZES["full" if FULL_GRID else "small"]
    check_pipeline(op, dtype, strategy, LANES if FULL_GRID else 2, rng, batch, n, calls)


def stress_params():
    """(op, strategy, lanes, dtype): every strategy of every op, on 1, 4 and 16 lanes where the
    strategy takes lanes, in float32 and complex128 (rotated)."""
    params = []
    for op in OPS:
        dtypes = [d for d in (np.float32, np.complex128) if np.dtype(d) in op.dtypes]
        for j, s in enumerate(strategies_of(op)):
            for k, lanes in enumerate((None,) if s in ("auto", "blocked", None) else (1, 4, 16)):
                dtype = np.dtype(dtypes[(j + k) % len(dtypes)])
                params.append(pytest.param(op, s, lanes, dtype,
                                           id=f"{op.name}-{s or 'default'}-{lanes}-{dtype.name}"))
    return params


@requires_gpu
@pytest.mark.slow
@pytest.mark.parametrize("op,strategy,lanes,dtype", stress_params())
def test_pipeline_stress(rng, op, strategy, lanes, dtype):
    if strategy == "blocked":
        batch, _, calls = SIZES["stress_blocked"]
        n = op.blocked_n
    else:
        batch, n, calls = SIZES["stress"]
    check_pipeline(op, dtype, strategy, lanes, rng, batch, n, calls)


# ---------------------------------------------------------------------------------------------
# (c) lowering: this project's FFI targets on CUDA
# ---------------------------------------------------------------------------------------------

ALL_TARGETS = sorted({f"jcm_{t}{suffix}" for op in OPS for t in op.targets
                      for suffix in ("", "_small")})


def check_lowering(op, strategy, rng):
    # A lane count with auto keeps it to the FFI (without, small batches may go to JAX's own).
    opts = options(strategy, 2 if strategy == "auto" else None)
    batch, n, _ = SIZES["small"]
    args = op.build(rng, np.float32 if np.float32 in op.dtypes else op.dtypes[0], batch, n)
    text = exported_module_text(functools.partial(op.call, **opts), args, ALL_TARGETS)
    for target in op.targets:
        assert f"@jcm_{target}(" in text or f"@jcm_{target}_small(" in text, \
            f"{op} ({strategy}): no call of jcm_{target}"
    assert "@cusolver" not in text, f"{op} ({strategy}): JAX's own cuSOLVER call next to ours"


@pytest.mark.parametrize("op,strategy", [
    pytest.param(op, s, id=f"{op.name}-{s or 'default'}") for op in OPS for s in strategies_of(op)])
def test_cuda_lowering(rng, claim_extension, op, strategy):
    check_lowering(op, strategy, rng)


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in OPS])
def test_cuda_lowering_broadcasts_nothing_implicitly(rng, claim_extension, op):
    """Every path of the CUDA lowering (each strategy; auto with lanes, the FFI, and without,
    where small calls go to JAX's own) at sizes on both sides of the written-out small-matrix
    code, batch ranks 0 to 2: no implicit rank promotion (the suite runs with 'raise')."""
    assert jax.config.jax_numpy_rank_promotion == "raise"
    dtype = np.float32 if np.float32 in op.dtypes else op.dtypes[0]
    calls = [options(s, 2) for s in strategies_of(op)] + ([options("auto")] * bool(op.strategies))
    for opts in calls:
        for batch, n in [((), 3), ((2,), 3), ((2, 3), 9), ((2,), 20)]:
            if (not op.batched and batch) or not runs_at(op, opts, n):
                continue
            args = op.build(rng, dtype, batch, n)
            jax.jit(functools.partial(op.call, **opts)).trace(*args).lower(
                lowering_platforms=("cuda",))


# ---------------------------------------------------------------------------------------------
# (d) vmap equals the batched call
# ---------------------------------------------------------------------------------------------


def check_vmap(op, dtype, strategy, rng, n):
    f = functools.partial(op.call, **run_options(strategy, 2))
    if op.batched:
        # Mapped over the leading axis of arguments that keep a batch axis of their own.
        args = op.build(rng, dtype, (2, 3), n)
        got, ref = jax.jit(jax.vmap(f))(*args), jax.jit(f)(*args)
    else:
        items = [op.build(rng, dtype, (), n) for _ in range(3)]
        args = tuple(np.stack(xs) for xs in zip(*items))
        got = jax.jit(jax.vmap(f))(*args)
        ref = jax.tree.map(lambda *ys: np.stack(ys), *[jax.jit(f)(*x) for x in items])
    identity = dataclasses.replace(op, invariant=None)  # the same implementation: raw outputs
    assert_matches(identity, args, got, ref, dtype, 2 if op.batched else 1, f"{op}: vmap")


@pytest.mark.parametrize("op,dtype,strategy", grid(every_strategy=False))
def test_vmap(rng, op, dtype, strategy):
    check_vmap(op, dtype, strategy, rng, SIZES["small"][1])


# ---------------------------------------------------------------------------------------------
# (e) NaN stays in its matrix
# ---------------------------------------------------------------------------------------------

BAD, GOOD = 1, [0, 2]


def check_nan_isolation(op, dtype, strategy, rng, n):
    args = list(op.build(rng, dtype, (3,), n))
    # A symmetric pair below and above the diagonal: read whichever triangle the op reads.
    args[0] = np.array(args[0])
    args[0][BAD, 2, 1] = args[0][BAD, 1, 2] = np.nan
    out = leaves(jax.jit(functools.partial(op.call, **run_options(strategy, 2)))(*args))
    floating = [k for k, y in enumerate(out) if np.issubdtype(y.dtype, np.inexact)]
    for k in op.nan_outputs or floating:
        assert np.isnan(out[k][BAD]).any(), f"{op}: output {k} of the NaN matrix holds no NaN"
    good_args = item(args, GOOD)
    good = [y[GOOD] for y in out]
    for k in floating:
        assert np.isfinite(good[k]).all(), f"{op}: NaN spread to other matrices (output {k})"
    structure = jax.tree.structure(op.reference(*good_args))
    assert_matches(op, good_args, jax.tree.unflatten(structure, good),
                   op.reference(*good_args), dtype, 1, f"{op}: the matrices beside the NaN one")


@pytest.mark.parametrize("op,dtype,strategy", [
    p for p in grid() if p.values[0].nan_outputs is not None])
def test_nan_isolation(rng, op, dtype, strategy):
    check_nan_isolation(op, dtype, strategy, rng, SIZES["full" if FULL_GRID else "small"][1])


@pytest.mark.parametrize("shape", [(7, 1, 1), (7, 2, 2), (7, 3, 5), (7, 8, 8), (7, 9, 9),
                                   (2, 7, 40, 3), (7, 0, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=param_id)
def test_the_nonfinite_check_flags_exactly_the_matrices_holding_nan_or_inf(rng, shape, dtype):
    # Small matrices are checked entry by entry (fused with the pass that uses the flag),
    # larger ones by a reduction: both say the same.
    from jax_cusolver_ms._common import ELEMENTWISE_CHECK_MAX_ENTRIES, nonfinite_matrices
    a = random_matrix(rng, shape, dtype, "general")
    flat = a.reshape((int(np.prod(shape[:-2])), shape[-2] * shape[-1]))
    if flat.shape[1]:
        flat[1, -1] = np.nan
        flat[3, rng.integers(flat.shape[1])] = -np.inf
        flat[4, 0] = np.inf * (1j if is_complex(dtype) else 1)
    expected = ~np.isfinite(a).all(axis=(-2, -1))
    np.testing.assert_array_equal(nonfinite_matrices(jnp.asarray(a)), expected)
    np.testing.assert_array_equal(jax.jit(nonfinite_matrices)(a), expected)
    text = jax.jit(nonfinite_matrices).lower(a).as_text()
    if flat.shape[1]:  # (an empty matrix is finite: no check to lower)
        small = flat.shape[1] <= ELEMENTWISE_CHECK_MAX_ENTRIES
        assert ("reduce" in text) != small, text


# ---------------------------------------------------------------------------------------------
# Each check fails for an op that breaks its contract
# ---------------------------------------------------------------------------------------------


def broken(name, call):
    return dataclasses.replace(OPS_BY_NAME["inv"], name=name, call=call)


def test_the_checks_fail_for_broken_ops(rng, claim_extension):
    dtype, batch, n = np.dtype(np.float64), (3,), 6
    wrong = broken("inv_wrong", lambda a, **kw: jcm.inv(a, **kw) * 1.001)
    with pytest.raises(AssertionError):
        check_threads(wrong, dtype, ("looped",), rng, batch, n, 1)
    with pytest.raises(AssertionError):
        check_pipeline(wrong, dtype, "looped", 2, rng, batch, n, 1)
    # Lowering: JAX's own inverse calls none of this project's targets.
    with pytest.raises(AssertionError, match="no call of jcm_getrf"):
        check_lowering(broken("jnp_inv", lambda a, **kw: jnp.linalg.inv(a)), "looped", rng)
    # vmap: a result that depends on how many batch dimensions the op sees.
    with pytest.raises(AssertionError):
        check_vmap(broken("inv_by_rank", lambda a, **kw: jcm.inv(a, **kw) * a.ndim), dtype,
                   "looped", rng, n)
    # NaN isolation: NaN spread over the batch (0 * NaN), and a NaN matrix without NaN out.
    spread = lambda a, **kw: jcm.inv(a, **kw) + 0 * jnp.sum(a, axis=0, keepdims=True)
    with pytest.raises(AssertionError, match="spread"):
        check_nan_isolation(broken("inv_spread", spread), dtype, "looped", rng, n)
    cleaned = lambda a, **kw: jcm.inv(jnp.nan_to_num(a), **kw)
    with pytest.raises(AssertionError, match="holds no NaN"):
        check_nan_isolation(broken("inv_cleaned", cleaned), dtype, "looped", rng, n)
