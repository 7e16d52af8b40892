"""Everything that differs between the supported JAX releases (0.10.x, 0.11.x) lives here."""
from __future__ import annotations

import jax
from jax.extend.core import Primitive  # noqa: F401  (public since 0.4.36)
from jax.interpreters import mlir  # noqa: F401
# The rule tables (primitive_jvps, primitive_batchers, ...) and helpers (Zero, not_mapped) are only
# complete in the private modules; the public re-exports lost names across releases.
from jax._src.interpreters import ad, batching  # noqa: F401

# vmap marks an operand that is not mapped with None (older releases called it not_mapped).
NOT_MAPPED = getattr(batching, "not_mapped", None)

try:
    from jax.core import ShapedArray
except ImportError:  # pragma: no cover  (dropped from jax.core in later releases)
    from jax._src.core import ShapedArray  # type: ignore

try:  # the public home of apply_primitive moved over releases
    from jax._src.dispatch import apply_primitive
except ImportError:  # pragma: no cover
    from jax._src.interpreters.xla import apply_primitive  # type: ignore

JAX_VERSION = tuple(int(p) for p in jax.__version__.split(".")[:2])


def zeros_like_tangent(primal):
    """A symbolic zero tangent for an integer/auxiliary output (pivots, permutation)."""
    from jax._src import ad_util
    if hasattr(ad_util, "p2tz"):
        return ad_util.p2tz(primal)
    return ad.Zero.from_primal_value(primal)  # pragma: no cover


def backend_has_gpu() -> bool:
    try:
        return any(d.platform == "gpu" for d in jax.devices())
    except RuntimeError:
        return False


def geqrf(a):
    """JAX's geqrf, (h, taus) in LAPACK's layout: private in every supported release; where it
    is missing, jnp's raw QR (geqrf's output transposed, which costs a transpose back)."""
    from jax._src.lax import linalg as lax_linalg
    if hasattr(lax_linalg, "geqrf"):
        return lax_linalg.geqrf(a)
    import jax.numpy as jnp  # pragma: no cover
    h, taus = jnp.linalg.qr(a, mode="raw")  # pragma: no cover
    return jnp.swapaxes(h, -1, -2), taus  # pragma: no cover


def cuda_lowering(prim):
    """(rule, inline, own) of the lowering `prim` gets on CUDA, or None: its CUDA rule (own), or
    else the rule it has on every platform (triangular_solve_p's). The registries are private in
    every supported release."""
    from jax._src.interpreters import mlir as mlir_internal
    entry = mlir_internal._platform_specific_lowerings["cuda"].get(prim)
    if entry is not None:
        return entry.rule, entry.inline, True
    entry = mlir_internal._lowerings.get(prim)
    return None if entry is None else (entry.rule, entry.inline, False)


def drop_cuda_lowering(prim) -> None:
    """Removes `prim`'s CUDA rule: it lowers by its rule for every platform again."""
    from jax._src.interpreters import mlir as mlir_internal
    mlir_internal._platform_specific_lowerings["cuda"].pop(prim, None)


def jax_linalg_primitive(name):
    """One of JAX's linalg primitives (lu_p, eigh_p, ...) by name, or None where a release
    renamed or removed it: they are private in every supported release."""
    from jax._src.lax import linalg as lax_linalg
    return getattr(lax_linalg, name, None)


def batch_sharding_rule(module_context, num_batch_dims, avals_in, avals_out):
    """Shardy's rule for a call whose operands and results share `num_batch_dims` leading batch
    dims and nothing else (each other dim its own factor): jaxlib's own, built for its solvers
    (private in every supported release); None where a release lacks it, and the partitioner
    then gathers the batch (tests/test_sharding.py fails on that)."""
    from jax._src.lax import linalg as lax_linalg
    build = getattr(lax_linalg, "_build_sdy_sharding_rule", None)
    return None if build is None else build(module_context, num_batch_dims, avals_in, avals_out)


def register_batch_partitionable(target: str) -> None:
    """XLA may split calls of `target` along their batch (public in jax.ffi in the supported
    releases; where a release lacks it, such calls are gathered, not split)."""
    register = getattr(jax.ffi, "register_ffi_target_as_batch_partitionable", None)
    if register is not None:
        register(target)


def use_shardy() -> bool:
    return bool(getattr(jax.config, "jax_use_shardy_partitioner", False))


try:
    from jax._src.core import ShardingTypeError
except ImportError:  # pragma: no cover  (releases before sharding in types)
    class ShardingTypeError(ValueError):
        pass


def spec_of(aval) -> tuple:
    """The aval's partition spec, one entry per dim (None: replicated or not in the type)."""
    sharding = getattr(aval, "sharding", None)
    spec = tuple(getattr(sharding, "spec", ()) or ())
    return spec + (None,) * (len(aval.shape) - len(spec))


def aval_with_spec(like, shape, dtype, spec):
    """A ShapedArray of `shape`/`dtype` on `like`'s mesh with partition spec `spec`, keeping
    `like`'s manual axes and memory space; a plain one where `like` has no sharding."""
    sharding = getattr(like, "sharding", None)
    if sharding is None or not hasattr(sharding, "update"):
        return ShapedArray(shape, dtype)
    return like.update(shape=shape, dtype=dtype, weak_type=False,
                       sharding=sharding.update(spec=jax.sharding.PartitionSpec(*spec)))


def _explicit_mesh(mesh) -> bool:
    """Whether `mesh` types arrays by their sharding: an Explicit axis, and none Manual (inside
    shard_map the types are left as they are)."""
    types = tuple(getattr(mesh, "axis_types", None) or ())
    axis = jax.sharding.AxisType
    return axis.Explicit in types and axis.Manual not in types


def _typed_by_explicit_mesh(aval) -> bool:
    return _explicit_mesh(getattr(getattr(aval, "sharding", None), "mesh", None))


def lowered_untyped(rule):
    """`rule` (a lowering of an implementation, mlir.lower_fun's) run with plain avals and no
    abstract mesh where an Explicit mesh typed the call. The outer equation keeps its typed
    results (their sharding constraints: the batch sharded); inside, the implementation is
    lowered as under an Auto mesh, Shardy carrying the batch sharding through the FFI calls'
    rules. Typed inside, JAX's own functions can reject what they build themselves (jax 0.10's
    lax.linalg.cholesky masks its result with a replicated triangle next to the sharded batch:
    jnp.linalg.cholesky itself is a ShardingTypeError there), and arrays made inside (an iota
    for a permutation) get the mesh's replicated type, whose constraint gathers the batch."""
    def plain(aval):
        return ShapedArray(aval.shape, aval.dtype, aval.weak_type) if _typed_by_explicit_mesh(
            aval) else aval

    def lower(ctx, *args, **params):
        avals = (*ctx.avals_in, *(ctx.avals_out or ()))
        if not (any(map(_typed_by_explicit_mesh, avals))
                or _explicit_mesh(jax.sharding.get_abstract_mesh())):
            return rule(ctx, *args, **params)
        ctx = ctx.replace(avals_in=[plain(a) for a in ctx.avals_in],
                          avals_out=None if ctx.avals_out is None else
                          [plain(a) for a in ctx.avals_out])
        with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((), ())):
            return rule(ctx, *args, **params)
    return lower
