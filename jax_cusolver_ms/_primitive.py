"""The one primitive factory: each op is declared by its core shape rule, a JAX implementation
(CPU and any platform without the extension) and a CUDA implementation (the FFI call), plus its
JVP. Abstract eval over leading batch dims, lowering registration and the batching rule (vmap
folds into the FFI batch dimension) are derived here.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import _compat, _ffi
from ._compat import NOT_MAPPED, ShapedArray, ad, batching, mlir

SOLVER_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64),
                 np.dtype(np.complex128))


def check_dtype(op: str, dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in SOLVER_DTYPES:
        raise TypeError(f"{op}: unsupported dtype {dtype.name}; expected one of "
                        f"{', '.join(d.name for d in SOLVER_DTYPES)}")
    return dtype


def column_major(ndim: int) -> tuple[int, ...]:
    """A batch of column-major matrices (what cuSOLVER expects), in ffi_call's major-to-minor
    order: the batch dims, then columns, then rows fastest."""
    return tuple(range(ndim - 2)) + (ndim - 1, ndim - 2)


def register_lowerings(prim, jax_impl: Callable, cuda_impl: Callable) -> None:
    """JAX's own implementation everywhere (CPU, and CUDA without the extension); the FFI call
    (`cuda_impl`, traced at lowering) on CUDA when the extension is loaded."""
    multiple_results = prim.multiple_results
    fallback = mlir.lower_fun(jax_impl, multiple_results=multiple_results)
    gpu_rule = mlir.lower_fun(cuda_impl, multiple_results=multiple_results)

    def cuda_rule(ctx, *args, **params):
        return (gpu_rule if _ffi.extension_loaded() else fallback)(ctx, *args, **params)

    mlir.register_lowering(prim, fallback)
    mlir.register_lowering(prim, cuda_rule, platform="cuda")


class SolverPrimitive:
    """A JAX primitive whose operands share leading batch dims (`core_ranks` trailing dims each).

    shape_rule(*core_avals, **params) -> list of (core_shape, dtype), one per output.
    jax_impl(*args, **params) -> outputs: JAX's own implementation (CPU lowering, fallback).
    cuda_impl(*args, **params) -> outputs: traced inside the CUDA lowering; calls the FFI target.
    """

    def __init__(self, name: str, *, core_ranks: Sequence[int], shape_rule: Callable,
                 jax_impl: Callable, cuda_impl: Callable, batch_rule: Callable | None = None):
        self.name = name
        self._special_batch_rule = batch_rule
        self.core_ranks = tuple(core_ranks)
        self.shape_rule = shape_rule
        # The CUDA implementation, traced at lowering: dropin.enable() lowers JAX's own
        # primitives through it.
        self.cuda_impl = cuda_impl
        self.prim = _compat.Primitive(name)
        self.prim.multiple_results = True
        self.prim.def_impl(functools.partial(_compat.apply_primitive, self.prim))
        self.prim.def_abstract_eval(self._abstract_eval)
        register_lowerings(self.prim, jax_impl, cuda_impl)
        batching.primitive_batchers[self.prim] = self._batch_rule

    def bind(self, *args, **params):
        return self.prim.bind(*args, **params)

    def defjvp(self, rule):
        ad.primitive_jvps[self.prim] = rule

    def deftranspose(self, rule):
        ad.primitive_transposes[self.prim] = rule

    def batch_shape(self, avals):
        shapes = [a.shape[:a.ndim - r] for a, r in zip(avals, self.core_ranks)]
        for a, r in zip(avals, self.core_ranks):
            if a.ndim < r:
                raise ValueError(f"{self.name}: operand of shape {a.shape} needs rank >= {r}")
        if any(s != shapes[0] for s in shapes):
            raise ValueError(f"{self.name}: operands must share batch dims, got {shapes}")
        return shapes[0]

    def _abstract_eval(self, *avals, **params):
        batch = self.batch_shape(avals)
        core = [ShapedArray(a.shape[len(batch):], a.dtype) for a in avals]
        return [ShapedArray(batch + tuple(s), np.dtype(d))
                for s, d in self.shape_rule(*core, **params)]

    def _batch_rule(self, args, dims, **params):
        """vmap adds one more leading batch dim: move it to the front of every operand."""
        if self._special_batch_rule is not None:
            special = self._special_batch_rule(args, dims, **params)
            if special is not None:
                return special
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not NOT_MAPPED)
        moved = [jnp.broadcast_to(a, (size,) + a.shape) if d is NOT_MAPPED
                 else jnp.moveaxis(a, d, 0) for a, d in zip(args, dims)]
        outs = self.prim.bind(*moved, **params)
        return outs, [0] * len(outs)


def ffi_solver_call(target: str, operands, results, *, matrix_operands, matrix_results,
                    aliases=None, choice=None, **attrs):
    """Calls an FFI solver target with column-major layouts on the matrix operands/results;
    `choice` (a strategy.Choice) gives its strategy and lanes attributes."""
    if choice is not None:
        attrs.update(choice.ffi_attributes())
    in_layouts = [column_major(x.ndim) if i in matrix_operands else None
                  for i, x in enumerate(operands)]
    out_layouts = [column_major(len(r.shape)) if i in matrix_results else None
                   for i, r in enumerate(results)]
    call = jax.ffi.ffi_call(target, results, input_layouts=in_layouts,
                            output_layouts=out_layouts, input_output_aliases=aliases)
    return call(*operands, **{k: np.int32(v) for k, v in attrs.items()})
