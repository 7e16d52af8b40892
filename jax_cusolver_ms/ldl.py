"""LDL^T family: sytrf / sytrs primitives and ldl_factor, ldl_solve.

JAX has no LDL^T factorization; semantics, the compact storage and the pivot format follow
torch.linalg.ldl_factor / torch.linalg.ldl_solve (which follow LAPACK ?sytrf / ?sytrs):

  A = P L D L^T P^T  (symmetric; complex symmetric too)   or   A = P L D L^H P^T (hermitian=True)

read from A's LOWER triangle, with L unit lower triangular and D block diagonal with 1x1 and 2x2
blocks (Bunch-Kaufman pivoting). See ldl_factor's docstring for the layout of LD and pivots.

Where it runs:
  CUDA  the FFI targets jcm_sytrf / jcm_sytrs. Strategy "batched": this project's kernels
        (ffi/ldl/: LAPACK ?sytf2 / ?sytrs step by step, one launch per chunk of the batch;
        the factor one warp per matrix with its rows in registers up to n = 16, one thread
        block per matrix up to 1024, panels and GEMMs above; the solve one
        warp per right-hand side up to n = 128, a block per matrix above), the choice of
        `auto` wherever they apply, single matrices included. Otherwise cusolverDn<t>sytrf and
        cusolverDnXsytrs on lanes (cuSOLVER has no batched LDL^T, and both routines synchronise
        with the host).
        cuSOLVER 12.0 has no Hermitian (hetrf) routine: hermitian=True with a complex dtype
        runs the host path below on GPU as well.
  CPU   LAPACK ?sytrf / ?sytrs (?hetrf / ?hetrs for hermitian complex) from scipy.linalg.lapack,
        inside jax.pure_callback, one LAPACK call per matrix of the flattened batch. scipy is
        imported when such a call is lowered, so it is needed for this op only. Being a host
        callback, this path cannot be serialized with jax.export.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from . import _compat
from . import strategy as _strategy
from ._compat import NOT_MAPPED, ShapedArray, ad, mlir, zeros_like_tangent
from ._primitive import SolverPrimitive, ffi_solver_call
from ._common import as_matrix, batch_size, promote, resolve_params, tril, triu

# The LAPACK block size the host path offers ?sytrf as workspace (lwork = n * this): blocked.
_HOST_BLOCK = 64


def _is_complex(dtype):
    return jnp.issubdtype(dtype, jnp.complexfloating)


# --- host path (CPU; hermitian complex on GPU) ----------------------------------------------

def _lapack_routine(op, name, dtype):
    """scipy's LAPACK wrapper `name` ("sytrf", "hetrs", ...) for `dtype`; scipy is a dependency
    of this op only, so it is imported here, when the call is lowered."""
    try:
        from scipy.linalg import lapack
    except ImportError as exc:
        raise ImportError(f"{op} runs LAPACK ?{name} from scipy.linalg.lapack on this platform, "
                          "and scipy is not installed: pip install scipy") from exc
    return lapack.get_lapack_funcs((name,), dtype=np.dtype(dtype))[0]


def _sytrf_host(routine, lower, a):
    """Factors each matrix of the flattened batch: (ld, pivots, info), LAPACK's own outputs."""
    a = np.asarray(a)
    n = a.shape[-1]
    flat = a.reshape((-1, n, n))
    ld = flat.copy()
    pivots = np.zeros(flat.shape[:-1], np.int32)
    info = np.zeros(flat.shape[:1], np.int32)
    for i in range(flat.shape[0] if n else 0):
        ld[i], pivots[i], info[i] = routine(flat[i], lower=int(lower),
                                            lwork=max(1, n * _HOST_BLOCK))
    return ld.reshape(a.shape), pivots.reshape(a.shape[:-1]), info.reshape(a.shape[:-2])


def _sytrs_host(routine, lower, ld, pivots, b):
    ld, pivots, b = np.asarray(ld), np.asarray(pivots), np.asarray(b)
    n, nrhs = b.shape[-2:]
    flat_ld, flat_piv = ld.reshape((-1, n, n)), pivots.reshape((-1, n))
    x = b.reshape((-1, n, nrhs)).copy()
    for i in range(x.shape[0] if n and nrhs else 0):
        x[i], _ = routine(flat_ld[i], flat_piv[i], x[i], lower=int(lower))
    return x.reshape(b.shape)


def _host_call(fn, results, *args):
    # The primitive batches itself (vmap folds into its leading dims), so the callback always
    # sees the whole batch and is never vmapped; "sequential" only states what vmap would do.
    return jax.pure_callback(fn, results, *args, vmap_method="sequential")


# --- widening the pivots for the 64-bit cuSOLVER API ----------------------------------------
# cusolverDnXsytrs takes int64 pivots. A plain astype(int64) is int32 when jax_enable_x64 is
# off, so the CUDA lowering widens them with an explicit convert of its own.

def _to_int64_lowering(ctx, x):
    shape = ir.RankedTensorType(x.type).shape
    return [stablehlo.convert(ir.RankedTensorType.get(shape, ir.IntegerType.get_signless(64)), x)]


_to_int64_p = _compat.Primitive("jcm_pivots_to_int64")
_to_int64_p.def_abstract_eval(lambda x: ShapedArray(x.shape, np.dtype(np.int64)))
mlir.register_lowering(_to_int64_p, _to_int64_lowering)


# --- sytrf ------------------------------------------------------------------------------------
# Outputs (ld, pivots): the compact factor with the triangle not read set to zero (as torch),
# and LAPACK's int32 pivots. info > 0 (D exactly singular) keeps the completed factor, as LAPACK
# and torch do; info < 0 (an illegal argument) makes it NaN.

def _sytrf_shapes(a, *, lower, hermitian, strategy, lanes):
    n = a.shape[-1]
    if a.shape != (n, n):
        raise ValueError(f"sytrf: a must be square, got shape {a.shape}")
    return [(a.shape, a.dtype), ((n,), np.int32)]


def _finish_factor(ld, pivots, info, lower):
    ld = jnp.where((info < 0)[..., None, None], jnp.array(np.nan, ld.dtype), ld)
    return [tril(ld) if lower else triu(ld), pivots]


def _sytrf_jax(a, *, lower, hermitian, strategy, lanes):
    name = "hetrf" if hermitian else "sytrf"
    routine = _lapack_routine("ldl_factor", name, a.dtype)
    ld, pivots, info = _host_call(
        functools.partial(_sytrf_host, routine, lower),
        (jax.ShapeDtypeStruct(a.shape, a.dtype),
         jax.ShapeDtypeStruct(a.shape[:-1], np.int32),
         jax.ShapeDtypeStruct(a.shape[:-2], np.int32)),
        a)
    return _finish_factor(ld, pivots, info, lower)


def _sytrf_cuda(a, *, lower, hermitian, strategy, lanes):
    n = a.shape[-1]
    choice = _strategy.choose("sytrf", batch_size(a, 2), (n, n), a.dtype, strategy, lanes,
                              lower=lower)
    if hermitian or not choice.uses_ffi:  # no hetrf in cuSOLVER 12.0
        return _sytrf_jax(a, lower=lower, hermitian=hermitian, strategy=strategy, lanes=lanes)
    ld, pivots, info = ffi_solver_call(
        "jcm_sytrf", [a],
        [jax.ShapeDtypeStruct(a.shape, a.dtype),
         jax.ShapeDtypeStruct(a.shape[:-1], np.int32),
         jax.ShapeDtypeStruct(a.shape[:-2], np.int32)],
        matrix_operands={0}, matrix_results={0}, aliases={0: 0},
        lower=lower, choice=choice)
    return _finish_factor(ld, pivots, info, lower)


sytrf = SolverPrimitive("jcm_sytrf", core_ranks=(2,), shape_rule=_sytrf_shapes,
                        jax_impl=_sytrf_jax, cuda_impl=_sytrf_cuda)


def _sytrf_jvp(primals, tangents, **params):
    raise NotImplementedError(
        "ldl_factor is not differentiable: the pivoting makes the compact factor piecewise, and "
        "no JVP rule is defined. Differentiate ldl_solve with respect to B (with the factor held "
        "constant), or use solve / cholesky for derivatives with respect to A.")


sytrf.defjvp(_sytrf_jvp)


# --- sytrs ------------------------------------------------------------------------------------

def _sytrs_shapes(ld, pivots, b, *, lower, hermitian, strategy, lanes):
    n = ld.shape[-1]
    if ld.shape != (n, n) or pivots.shape != (n,) or b.shape[0] != n or ld.dtype != b.dtype:
        raise ValueError(f"sytrs: ld {ld.shape} {ld.dtype}, pivots {pivots.shape}, b {b.shape} "
                         f"{b.dtype} do not fit ld (n, n), pivots (n,), b (n, k) of one dtype")
    return [(b.shape, b.dtype)]


def _sytrs_jax(ld, pivots, b, *, lower, hermitian, strategy, lanes):
    name = "hetrs" if hermitian else "sytrs"
    routine = _lapack_routine("ldl_solve", name, ld.dtype)
    return [_host_call(functools.partial(_sytrs_host, routine, lower),
                       jax.ShapeDtypeStruct(b.shape, b.dtype), ld, pivots, b)]


def _sytrs_cuda(ld, pivots, b, *, lower, hermitian, strategy, lanes):
    n = ld.shape[-1]
    choice = _strategy.choose("sytrs", batch_size(ld, 2), (n, n), ld.dtype, strategy, lanes,
                              nrhs=b.shape[-1], lower=lower)
    if hermitian or not choice.uses_ffi:  # no hetrs in cuSOLVER 12.0
        return _sytrs_jax(ld, pivots, b, lower=lower, hermitian=hermitian, strategy=strategy,
                          lanes=lanes)
    x, _info = ffi_solver_call(
        "jcm_sytrs", [ld, _to_int64_p.bind(pivots), b],
        [jax.ShapeDtypeStruct(b.shape, b.dtype), jax.ShapeDtypeStruct(ld.shape[:-2], np.int32)],
        matrix_operands={0, 2}, matrix_results={0}, aliases={2: 0},
        lower=lower, choice=choice)
    # Xsytrs reports only illegal arguments in info; a singular D gives inf/NaN in x, as LAPACK.
    return [x]


def _sytrs_batch_rule(args, dims, **params):
    """When only b is mapped, the mapped axis becomes more right-hand sides (no copies of ld)."""
    (ld, pivots, b), (ld_dim, piv_dim, b_dim) = args, dims
    if ld_dim is not NOT_MAPPED or piv_dim is not NOT_MAPPED:
        return None
    b = jnp.moveaxis(b, b_dim, -1)
    shape = b.shape
    x, = sytrs.bind(ld, pivots, b.reshape(shape[:-2] + (shape[-2] * shape[-1],)), **params)
    return [x.reshape(shape)], [len(shape) - 1]


sytrs = SolverPrimitive("jcm_sytrs", core_ranks=(2, 1, 2), shape_rule=_sytrs_shapes,
                        jax_impl=_sytrs_jax, cuda_impl=_sytrs_cuda, batch_rule=_sytrs_batch_rule)


def _sytrs_jvp(primals, tangents, **params):
    # x = A^-1 b is linear in b; the factor itself has no derivative rule (see ldl_factor).
    ld, pivots, b = primals
    ld_dot, _, b_dot = tangents
    if type(ld_dot) is not ad.Zero:
        raise NotImplementedError(
            "ldl_solve: differentiation with respect to LD is not supported (ldl_factor has no "
            "derivative rule); only the derivative with respect to B is.")
    x, = sytrs.bind(ld, pivots, b, **params)
    if type(b_dot) is ad.Zero:
        return [x], [zeros_like_tangent(x)]
    x_dot, = sytrs.bind(ld, pivots, b_dot, **params)
    return [x], [x_dot]


def _sytrs_transpose(cts, ld, pivots, b, *, hermitian, **params):
    # The linear map b -> A^-1 b transposes to c -> A^-T c. Symmetric A (real or complex):
    # A^T = A, the same solve, no conjugation. Hermitian A: A^T = conj(A), so conj(A^-1 conj(c)).
    assert ad.is_undefined_primal(b) and not ad.is_undefined_primal(ld)
    ct, = cts
    if type(ct) is ad.Zero:
        return [None, None, ad.Zero(b.aval)]
    if hermitian:
        b_bar = jnp.conj(sytrs.bind(ld, pivots, jnp.conj(ct), hermitian=True, **params)[0])
    else:
        b_bar = sytrs.bind(ld, pivots, ct, hermitian=False, **params)[0]
    return [None, None, b_bar]


sytrs.defjvp(_sytrs_jvp)
sytrs.deftranspose(_sytrs_transpose)


# --- public API -------------------------------------------------------------------------------

class LdlFactorResult(NamedTuple):
    """As torch.linalg.ldl_factor's result."""
    LD: jax.Array
    pivots: jax.Array


def _hermitian(op, hermitian, dtype):
    if not isinstance(hermitian, (bool, np.bool_)):
        raise TypeError(f"{op}: hermitian must be a bool, got {hermitian!r}")
    return bool(hermitian) and _is_complex(dtype)  # no effect for real dtypes


def ldl_factor(a, hermitian=False, *, strategy=None, lanes=None):
    """LDL^T factorization with Bunch-Kaufman pivoting, like torch.linalg.ldl_factor.

    a: (..., n, n) of float32/float64/complex64/complex128; only its LOWER triangle is read.
    hermitian: for complex a, factor A = P L D L^H P^T (a Hermitian) instead of the complex
      symmetric A = P L D L^T P^T; no effect for real dtypes. cuSOLVER 12.0 has no Hermitian
      routine, so hermitian complex runs LAPACK ?hetrf on the host on GPU as well.

    Returns (LD, pivots), the compact LAPACK form (uplo = 'L'), as torch:
      LD (..., n, n): D's diagonal and, for each 2x2 block, its subdiagonal entry; below that,
        the multipliers of L (L's unit diagonal is not stored). The strict upper triangle is 0.
      pivots (..., n) int32, LAPACK's 1-based format: pivots[k] = p > 0 means rows/columns k and
        p - 1 (0-based) were swapped and D[k, k] is a 1x1 block; pivots[k] = pivots[k+1] = -p < 0
        means rows/columns k+1 and p - 1 were swapped and D[k:k+2, k:k+2] is a 2x2 block.
      The swaps interleave with the elimination steps, as in LAPACK: A = M D M^T (M^H if
      hermitian) with M = P_1 L_1 P_2 L_2 ... over the blocks in order, P_j the swap of block j
      and L_j the identity plus block j's multipliers (LD's entries below the block).
    A singular D (LAPACK info > 0) raises nothing: the factor is returned, and ldl_solve with it
    gives inf/NaN. Not differentiable (its JVP raises NotImplementedError); ldl_solve is, in B.
    """
    a = as_matrix("ldl_factor", a, square=True, name="A")
    hermitian = _hermitian("ldl_factor", hermitian, a.dtype)
    ld, pivots = sytrf.bind(a, lower=True, hermitian=hermitian, **resolve_params(strategy, lanes))
    return LdlFactorResult(ld, pivots)


def ldl_solve(LD, pivots, B, hermitian=False, *, strategy=None, lanes=None):  # noqa: N803
    """Solves A X = B from ldl_factor's (LD, pivots), like torch.linalg.ldl_solve.

    LD (..., n, n) and pivots (..., n) as returned by ldl_factor (pivots are cast to int32);
    B (..., n, k) (a matrix: as torch, no vector form). Batch dims broadcast; LD and B are
    promoted to a common dtype. hermitian must be the value given to ldl_factor (no effect for
    real dtypes). Differentiable with respect to B (a linear map); not with respect to LD.
    A singular D gives inf/NaN (no exception, as torch); so do pivots that are not a valid
    LAPACK pivot array (0-based ones, say), which are never handed to LAPACK/cuSOLVER as such.
    """
    LD, B = promote("ldl_solve", LD, B)
    LD = as_matrix("ldl_solve", LD, square=True, name="LD")
    B = as_matrix("ldl_solve", B, name="B")
    pivots = jnp.asarray(pivots)
    if not jnp.issubdtype(pivots.dtype, jnp.integer):
        raise TypeError(f"ldl_solve: pivots must be integers, got {pivots.dtype}")
    n = LD.shape[-1]
    if pivots.ndim < 1 or pivots.shape[-1] != n:
        raise ValueError(f"ldl_solve: pivots of shape {pivots.shape} do not fit LD of shape "
                         f"{LD.shape}")
    if B.shape[-2] != n:
        raise ValueError(f"ldl_solve: B of shape {B.shape} does not fit LD of shape {LD.shape} "
                         "(B's second-to-last axis must match)")
    hermitian = _hermitian("ldl_solve", hermitian, LD.dtype)
    batch = jnp.broadcast_shapes(LD.shape[:-2], pivots.shape[:-1], B.shape[:-2])
    return _ldl_solve(LD, pivots, B, batch, hermitian=hermitian, **resolve_params(strategy, lanes))


# One jitted body: eager calls compile once per shape instead of dispatching op by op.
@functools.partial(jax.jit, static_argnums=3, static_argnames=("hermitian", "strategy", "lanes"))
def _ldl_solve(ld, pivots, b, batch, *, hermitian, strategy, lanes):
    n = ld.shape[-1]
    ld = jnp.broadcast_to(ld, batch + ld.shape[-2:])
    pivots = jnp.broadcast_to(pivots.astype(np.int32), batch + (n,))
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    # Neither LAPACK nor cuSOLVER checks the pivots: a malformed array would read and write out
    # of bounds. Such items are solved with harmless pivots and come out NaN.
    valid = _valid_pivots(pivots)
    pivots = jnp.where(valid[..., None], pivots, jnp.arange(1, n + 1, dtype=np.int32))
    x, = sytrs.bind(ld, pivots, b, lower=True, hermitian=hermitian, strategy=strategy,
                    lanes=lanes)
    return jnp.where(valid[..., None, None], x, jnp.array(np.nan, x.dtype))


def _valid_pivots(pivots):
    """Per matrix: pivots is a lower-form LAPACK pivot array, 1 <= |p| <= n, with the negative
    entries of every run in equal pairs (the 2x2 blocks), counted from the run's start."""
    n = pivots.shape[-1]
    index = lax.broadcasted_iota(np.int32, pivots.shape, pivots.ndim - 1)
    negative = pivots < 0
    run_start = lax.cummax(jnp.where(negative, -1, index), axis=pivots.ndim - 1) + 1
    opens_block = negative & ((index - run_start) % 2 == 0)
    following = jnp.concatenate([pivots[..., 1:], jnp.zeros_like(pivots[..., :1])], axis=-1)
    ok = (pivots != 0) & (jnp.abs(pivots) <= n) & (~opens_block | (following == pivots))
    return jnp.all(ok, axis=-1)
