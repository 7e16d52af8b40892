"""Small helpers every op family shares: dtype promotion and operand checks, right-hand sides
and batch broadcasting, option resolution, triangles and conjugate transposes, failure masking."""
from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _compat
from . import settings as _config
from ._primitive import check_dtype

_HIGHEST = lax.Precision.HIGHEST


def matmul(a, b):
    return jnp.matmul(a, b, precision=_HIGHEST)


def tril(x, k=0):
    return jnp.tril(x, k)


def triu(x, k=0):
    return jnp.triu(x, k)


def batch_size(x, core):
    return int(np.prod(x.shape[:x.ndim - core], dtype=np.int64))


def inexact_dtype(dtype) -> np.dtype:
    """The dtype jnp.linalg computes in for operands of `dtype` (JAX's promote_dtypes_inexact):
    bool and integers up to 32 bits -> float32, 64-bit integers -> float64 (float32 without
    x64); floating and complex dtypes unchanged."""
    dtype = np.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.inexact):
        return dtype
    return np.dtype(jax.dtypes.canonicalize_dtype(np.float64 if dtype.itemsize == 8
                                                  else np.float32))


class RankError(TypeError, ValueError):
    """An operand of too low a rank. jnp.linalg raises a TypeError for some ops (lu, qr, svd,
    cholesky, eigh, eig) and a ValueError for others (inv, det, slogdet, solve): this is both, so
    code written against either catches it."""


# The ops only jax.scipy.linalg has: its functions take Python sequences (jnp.asarray), while
# jnp.linalg's refuse them. (Where both have an op, this package follows jnp.linalg.)
_TAKES_SEQUENCES = frozenset({"lu", "lu_factor", "lu_solve", "cho_factor", "cho_solve",
                              "ldl_factor", "ldl_solve", "qr_multiply"})


def as_arrays(op, *operands):
    """The operands as JAX arrays, refusing what JAX refuses with the same kind of error: for
    jnp.linalg's ops, a Python list or tuple is not an array (a TypeError naming `op`)."""
    for i, x in enumerate(operands):
        if isinstance(x, (list, tuple)) and op not in _TAKES_SEQUENCES:
            raise TypeError(f"{op}: requires ndarray or scalar arguments, got {type(x)} at "
                            f"position {i}")
    return [jnp.asarray(x) for x in operands]


def promote(op, *arrays):
    """The operands of `op` as jnp.linalg / jax.scipy.linalg promote them: one dtype for all
    (JAX's promotion lattice: float32 with int32 is float32), bool and integers made floating
    (inexact_dtype). A dtype no solver takes (float16, ...) raises a TypeError naming `op`."""
    arrays = as_arrays(op, *arrays)
    dtype = inexact_dtype(jnp.result_type(*arrays))
    check_dtype(op, dtype)
    return [x.astype(dtype) for x in arrays]


def as_matrix(op, a, square=False, name="a"):
    """a promoted (see promote) and checked to be a stack of (square) matrices."""
    a, = promote(op, a)
    if a.ndim < 2:
        raise RankError(f"{op}: {name} must have rank >= 2 (a batch of matrices), "
                         f"got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{op}: {name} must be square in its last two dims, got shape {a.shape}")
    return a


def factor_rhs(op, factor, b, factor_name):
    """b against a factor (..., n, n) as jax.scipy.linalg.lu_solve / cho_solve take it: a
    vector (n,), matrices (..., n, k), or (deprecated there too: a FutureWarning) a batch of
    vectors of shape factor.shape[:-1]. Returns (b as matrices, whether it was vectors)."""
    n = factor.shape[-1]
    vector = b.ndim == 1 or (factor.ndim == b.ndim + 1 and b.shape[-1] == n)
    if vector and b.ndim > 1:
        warnings.warn(f"{op}: batched 1D solves with b.ndim > 1 are deprecated (as in "
                      f"jax.scipy.linalg.{op}); use {op}(..., b[..., None])[..., 0]",
                      FutureWarning, stacklevel=3)
    if (b.shape[-1] != n) if vector else (b.ndim < 2 or b.shape[-2] != n):
        raise ValueError(f"{op}: b of shape {b.shape} does not fit {factor_name} of shape "
                         f"{factor.shape} (b's {'last' if vector else 'second-to-last'} "
                         "axis must match)")
    return (b[..., None] if vector else b), vector


def broadcast_batch(arrays, cores):
    """The arrays with their leading batch dims broadcast against each other; array i keeps its
    last cores[i] dims."""
    batch = jnp.broadcast_shapes(*(x.shape[:x.ndim - c] for x, c in zip(arrays, cores)))
    return [jnp.broadcast_to(x, batch + x.shape[x.ndim - c:]) for x, c in zip(arrays, cores)]


def resolve_params(strategy, lanes):
    strategy, lanes = _config.resolve(strategy, lanes)
    return dict(strategy=strategy, lanes=lanes)


def mh(x):
    """Conjugate transpose of the last two dims."""
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def forwarding_to(jax_module, module_name, module_globals):
    """(__getattr__, __dir__) for a mirror of one of JAX's modules: the names the mirror does
    not define are `jax_module`'s own objects, looked up on use; dir() lists both."""
    def __getattr__(name):
        if not name.startswith("__"):
            try:
                return getattr(jax_module, name)
            except AttributeError:
                pass
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(module_globals) | set(dir(jax_module)))

    return __getattr__, __dir__


def batch_sharding(like, ndim):
    """The sharding for a new array of rank `ndim` that shares `like`'s batch (all but its last
    two dims): like's spec there, replicated after. None unless an Explicit mesh types like's
    batch as sharded: only then must an array made here (an identity, zeros) carry it, as next
    to a sharded operand a replicated one is a type error."""
    aval = jax.typeof(like)
    spec = _compat.spec_of(aval)[:max(aval.ndim - 2, 0)]
    if all(d is None for d in spec):
        return None
    return aval.sharding.update(
        spec=jax.sharding.PartitionSpec(*spec, *(None,) * (ndim - len(spec))))


def eye_like(a):
    """The identity broadcast to a's shape (..., n, m), sharded as a's batch."""
    return jnp.broadcast_to(jnp.eye(*a.shape[-2:], dtype=a.dtype), a.shape,
                            out_sharding=batch_sharding(a, a.ndim))


def batched_eye(n, dtype, ndim, m=None):
    """The n x m identity (m = n by default) with leading 1s up to rank `ndim`: it broadcasts
    against a stack of matrices without an implicit rank promotion (an error under
    jax_numpy_rank_promotion='raise', as JAX's tests and careful users run)."""
    eye = jnp.eye(n, n if m is None else m, dtype=dtype)
    return eye.reshape((1,) * (ndim - 2) + eye.shape)


def nan_where(bad, x):
    """x with NaN in every item (x's leading dims are bad's) where bad is true."""
    return jnp.where(bad.reshape(bad.shape + (1,) * (x.ndim - bad.ndim)),
                     jnp.array(np.nan, x.dtype), x)


def nan_where_failed(x, info):
    """NaN in every item whose info says an illegal argument (< 0), as JAX's lowerings do."""
    return nan_where(info < 0, x)


def info_result(x, core):
    """The int32 info result of an FFI call over x's batch dims."""
    return jax.ShapeDtypeStruct(x.shape[:x.ndim - core], np.int32)


def nan_unless_ok(x, info):
    """NaN in every item whose info is not 0 (an illegal argument, or an iterative solver that
    did not converge), as JAX's eigen and SVD lowerings do."""
    return nan_where(info != 0, x)


# Up to this many entries a matrix is checked entry by entry (elementwise ops on slices) rather
# than by a reduction: XLA can fuse elementwise ops into the pass that uses the flag, where a
# reduction is a kernel of its own, a launch as long as the whole call of a tiny matrix.
ELEMENTWISE_CHECK_MAX_ENTRIES = 64


def nonfinite_matrices(a):
    """Per matrix of the stack a (..., m, n): whether it holds a NaN or an Inf."""
    m, n = a.shape[-2:]
    if 0 < m * n <= ELEMENTWISE_CHECK_MAX_ENTRIES:
        finite = [jnp.isfinite(a[..., i, j]) for i in range(m) for j in range(n)]
        return ~functools.reduce(jnp.logical_and, finite)
    return ~jnp.all(jnp.isfinite(a), axis=(-2, -1))


def nan_for_nonfinite_input(cuda_impl, substitute: bool = True, matrices: int = 1):
    """Wraps a CUDA implementation whose first `matrices` operands are stacks of matrices of one
    batch: where one of them holds NaN or Inf, that item comes out as NaN in every floating
    output (and, with `substitute`, each of them goes in as the identity).

    Why: on the H100 (cuSOLVER 12.0) getrf returns finite factors for NaN input (JAX's own
    lowering too: lu_factor, solve and inv of a 300 x 300 matrix with one NaN are finite), and
    the iterative routines (XsyevBatched, gesvdjBatched, Xgeev) neither give NaN nor set info
    for it; in a batched call such a matrix must not touch its neighbours either. LAPACK on
    the CPU gives NaN, and so does every path here, JAX's own lowering included (it has the
    same routines under it). `substitute=False` where every path factors each matrix on its
    own and cannot loop on NaN (LU): masking the outputs is then enough, one pass less (the
    H100 report: float32 det 64 x 16 under JAX's lowering went from 0.88x to 1.06x)."""
    def guarded(*args, **params):
        stacks, rest = args[:matrices], args[matrices:]
        bad = functools.reduce(jnp.logical_or, [nonfinite_matrices(x) for x in stacks])
        if substitute:
            stacks = [jnp.where(bad[..., None, None],
                                jnp.eye(x.shape[-2], x.shape[-1], dtype=x.dtype), x)
                      for x in stacks]
        outs = cuda_impl(*stacks, *rest, **params)
        return type(outs)(nan_where(bad, x) if jnp.issubdtype(x.dtype, jnp.inexact) else x
                          for x in outs)

    guarded.__name__ = guarded.__qualname__ = getattr(cuda_impl, "__name__", "cuda_impl")
    guarded.__doc__ = cuda_impl.__doc__
    return guarded
