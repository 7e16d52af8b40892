"""Small helpers every op family shares: operand checks, dtype promotion, option resolution,
triangles and conjugate transposes, failure masking."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

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


def as_matrix(op, a, square=False, name="a"):
    a = jnp.asarray(a)
    check_dtype(op, a.dtype)
    if a.ndim < 2:
        raise ValueError(f"{op}: {name} must have rank >= 2 (a batch of matrices), "
                         f"got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{op}: {name} must be square in its last two dims, got shape {a.shape}")
    return a


def resolve_params(strategy, lanes):
    strategy, lanes = _config.resolve(strategy, lanes)
    return dict(strategy=strategy, lanes=lanes)


def promote(op, *arrays):
    arrays = [jnp.asarray(x) for x in arrays]
    for x in arrays:
        check_dtype(op, x.dtype)
    dtype = jnp.result_type(*arrays)
    return [x.astype(dtype) for x in arrays]


def mh(x):
    """Conjugate transpose of the last two dims."""
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def nan_where_failed(x, info):
    """NaN in every item whose info says an illegal argument (< 0), as JAX's lowerings do."""
    return jnp.where((info < 0).reshape(info.shape + (1,) * (x.ndim - info.ndim)),
                     jnp.array(np.nan, x.dtype), x)


def info_result(x, core):
    """The int32 info result of an FFI call over x's batch dims."""
    return jax.ShapeDtypeStruct(x.shape[:x.ndim - core], np.int32)


def nan_unless_ok(x, info):
    """NaN in every item whose info is not 0 (an illegal argument, or an iterative solver that
    did not converge), as JAX's eigen and SVD lowerings do."""
    return jnp.where((info == 0).reshape(info.shape + (1,) * (x.ndim - info.ndim)), x,
                     jnp.array(np.nan, x.dtype))


def nan_for_nonfinite_input(cuda_impl, substitute: bool = True):
    """Wraps a CUDA implementation whose first operand is a stack of matrices: a matrix holding
    NaN or Inf comes out as NaN in every floating output (and, with `substitute`, goes in as
    the identity).

    Why: on the H100 (cuSOLVER 12.0) getrf returns finite factors for NaN input (JAX's own
    lowering too: lu_factor, solve and inv of a 300 x 300 matrix with one NaN are finite,
    benchmarks/diag/guard_probe.py), and the iterative routines (XsyevBatched, gesvdjBatched,
    Xgeev) neither give NaN nor set info for it; in a batched call such a matrix must not touch
    its neighbours either. LAPACK on the CPU gives NaN, and so does every path here, JAX's own
    lowering included (it has the same routines under it). `substitute=False` where every path
    factors each matrix on its own and cannot loop on NaN (LU): masking the outputs is then
    enough, one pass less (H100 float32 det 64x16 under JAX's lowering: 0.88x -> 1.06x)."""
    def guarded(a, *args, **params):
        bad = ~jnp.all(jnp.isfinite(a), axis=(-2, -1))
        if substitute:
            a = jnp.where(bad[..., None, None], jnp.eye(a.shape[-2], a.shape[-1], dtype=a.dtype), a)
        outs = cuda_impl(a, *args, **params)
        return type(outs)(
            jnp.where(bad.reshape(bad.shape + (1,) * (x.ndim - bad.ndim)),
                      jnp.array(np.nan, x.dtype), x)
            if jnp.issubdtype(x.dtype, jnp.inexact) else x
            for x in outs)

    guarded.__name__ = guarded.__qualname__ = getattr(cuda_impl, "__name__", "cuda_impl")
    guarded.__doc__ = cuda_impl.__doc__
    return guarded
