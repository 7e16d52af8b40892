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

# The prefix of every primitive and FFI target of this package: dropin tells ours from JAX's by it.
NAME_PREFIX = "jcm_"

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
    fallback = _compat.lowered_untyped(
        mlir.lower_fun(jax_impl, multiple_results=multiple_results))
    gpu_rule = _compat.lowered_untyped(
        mlir.lower_fun(cuda_impl, multiple_results=multiple_results))

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
        if not name.startswith(NAME_PREFIX):
            raise ValueError(f"primitive {name!r}: this package's names start with {NAME_PREFIX}")
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
        spec = batch_spec(self.name, avals, len(batch), matrix_dims_unsharded=True)
        return [result_aval(avals, batch + tuple(s), d, spec)
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
    in_layouts = tuple(_minor_to_major(np.ndim(x)) if i in matrix_operands else None
                       for i, x in enumerate(operands))
    out_layouts = tuple(_minor_to_major(len(r.shape)) if i in matrix_results else None
                        for i, r in enumerate(results))
    first = min(matrix_operands, default=None)
    batch_rank = np.ndim(operands[first]) - 2 if first is not None else 0
    return batched_ffi_call(target, operands, results, in_layouts=in_layouts,
                            out_layouts=out_layouts, aliases=aliases, batch_rank=batch_rank,
                            **attrs)


def batched_ffi_call(target: str, operands, results, *, batch_rank: int, in_layouts=None,
                     out_layouts=None, aliases=None, **attrs):
    """jax.ffi.ffi_call's call (layouts minor-to-major, None: row-major; int32 attributes),
    batch partitionable along its `batch_rank` leading dims where every operand and result has
    them (batch_dims_shared): under a sharded batch each device runs its own shard."""
    num_batch_dims = batch_dims_shared([np.shape(x) for x in operands],
                                       [tuple(r.shape) for r in results], batch_rank)
    return ffi_call_p.bind(
        *operands, target=target,
        results=tuple((tuple(r.shape), np.dtype(r.dtype).name) for r in results),
        in_layouts=tuple(in_layouts or (None,) * len(operands)),
        out_layouts=tuple(out_layouts or (None,) * len(results)),
        aliases=tuple(sorted((aliases or {}).items())),
        attrs=tuple(sorted((k, int(v)) for k, v in attrs.items())),
        num_batch_dims=num_batch_dims)


def _minor_to_major(ndim: int) -> tuple[int, ...]:
    """column_major() in the custom call's own (minor-to-major) order."""
    return tuple(reversed(column_major(ndim)))


def batch_dims_shared(operand_shapes, result_shapes, batch_rank: int) -> int:
    """`batch_rank` where every operand and result starts with the same `batch_rank` dims (the
    batch), else 0: XLA's partitioner may then split the call along them, each device calling
    the target on its own matrices (an operand shared by every item cannot be split)."""
    shapes = [tuple(s) for s in (*operand_shapes, *result_shapes)]
    if batch_rank <= 0 or not shapes or len(shapes[0]) < batch_rank:
        return 0
    batch = shapes[0][:batch_rank]
    return batch_rank if all(s[:batch_rank] == batch for s in shapes) else 0


# One primitive for every FFI call of this package: ffi_call's, with the attributes that make
# the call batch partitionable (jaxlib's solvers carry the same): the number of batch dims for
# XLA's partitioner, and under Shardy the rule that the batch dims are shared and each other
# dim is the call's own (replicated). With jax.ffi.ffi_call, which attaches neither, XLA
# gathered a sharded batch onto every device.
ffi_call_p = _compat.Primitive(NAME_PREFIX + "ffi_call")
ffi_call_p.multiple_results = True


@ffi_call_p.def_abstract_eval
def _ffi_call_abstract_eval(*avals, results, target, num_batch_dims, **_):
    spec = batch_spec(target, avals, num_batch_dims, matrix_dims_unsharded=False)
    return [result_aval(avals, shape, dtype, spec) for shape, dtype in results]


def batch_spec(name: str, avals, batch_rank: int, *, matrix_dims_unsharded: bool,
               specs=None):
    """The partition spec the operands' shardings give the batch dims (None: not sharded), as
    JAX's own linalg primitives do under an Explicit mesh, where each result's type carries its
    sharding: the batch stays sharded, the matrix dims are replicated. A matrix dim sharded in
    the type, or two operands sharding one batch dim differently, is an error naming the op.
    `specs`: the operands' specs aligned to the batch (broadcast operands), else the avals'."""
    spec = [None] * batch_rank
    for i, aval in enumerate(avals):
        dims = _compat.spec_of(aval) if specs is None else specs[i]
        if matrix_dims_unsharded and any(d is not None for d in dims[batch_rank:]):
            raise _compat.ShardingTypeError(
                f"{name}: operand {i} of shape {aval.shape} is sharded on its matrix dims "
                f"({dims}); the solver needs whole matrices: reshard them replicated "
                f"(jax.sharding.reshard) and shard the batch dims only")
        for k, d in enumerate(dims[:batch_rank]):
            if d is not None and spec[k] not in (None, d):
                raise _compat.ShardingTypeError(
                    f"{name}: operands shard batch dim {k} differently ({spec[k]} and {d})")
            spec[k] = d if d is not None else spec[k]
    return tuple(spec)


def result_aval(avals, shape, dtype, batch_dims: tuple):
    """A result's abstract value: its leading dims sharded as `batch_dims` (batch_spec's), the
    rest replicated, on the operands' mesh (the first operand's, which also gives shard_map's
    varying axes)."""
    shape = tuple(shape)
    spec = batch_dims[:len(shape)] + (None,) * (len(shape) - len(batch_dims))
    return _compat.aval_with_spec(avals[0] if avals else None, shape, np.dtype(dtype), spec)


def _ffi_call_lowering(ctx, *operands, target, results, in_layouts, out_layouts, aliases,
                       attrs, num_batch_dims):
    extra = {}
    if num_batch_dims:
        extra["mhlo.frontend_attributes"] = mlir.ir_attribute(
            {"num_batch_dims": str(num_batch_dims)})
        if _compat.use_shardy():
            rule = _compat.batch_sharding_rule(ctx.module_context, num_batch_dims,
                                               ctx.avals_in, ctx.avals_out)
            if rule is not None:
                extra["sdy.sharding_rule"] = rule
    lowering = jax.ffi.ffi_lowering(target, operand_layouts=in_layouts,
                                    result_layouts=out_layouts,
                                    operand_output_aliases=dict(aliases) or None,
                                    extra_attributes=extra or None)
    return lowering(ctx, *operands, **{k: np.int32(v) for k, v in attrs})


# Any platform: the CUDA targets are this package's; tests call a CPU target through it too.
mlir.register_lowering(ffi_call_p, _ffi_call_lowering)
