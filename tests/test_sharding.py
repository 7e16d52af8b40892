"""A sharded batch stays sharded: every FFI call of this package is batch partitionable
(_primitive.ffi_call_p), so XLA splits it along the batch instead of gathering the batch onto
every device.

On the CPU (four host devices, tests/conftest.py) the partitioning code itself runs through a
CPU target of JAX's (LAPACK getrf) called through ffi_call_p, and every public op runs on a
sharded batch; the CUDA lowering of every op is checked for the partitioning attributes. On a
host with two GPUs or more, the ops run sharded on the GPUs.
"""
import functools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import jax_cusolver_ms as jcm
from jax_cusolver_ms import _primitive

from conftest import requires_gpu
from test_contract import OPS, options, runs_at, strategies_of

COLLECTIVES = ("all-gather", "all-to-all", "all-reduce", "collective-permute", "reduce-scatter")


def mesh_of(platform, shape, names):
    devices = jax.devices(platform)
    if len(devices) < math.prod(shape):
        pytest.skip(f"needs {math.prod(shape)} {platform} devices, has {len(devices)}")
    return Mesh(np.array(devices[:math.prod(shape)]).reshape(shape), names)


def collectives(compiled_text):
    return [c for c in COLLECTIVES if c in compiled_text]


@pytest.fixture(params=[True, False], ids=["shardy", "gspmd"])
def partitioner(request):
    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", request.param)
    yield request.param
    jax.config.update("jax_use_shardy_partitioner", old)


@pytest.mark.parametrize("operands,results,rank,expect", [
    ([(8, 4, 4)], [(8, 4, 4), (8, 4), (8,)], 1, 1),
    ([(2, 3, 4, 4), (2, 3, 4, 1)], [(2, 3, 4, 1)], 2, 2),
    ([(8, 4, 4), (4, 4)], [(8, 4, 4)], 1, 0),  # a matrix shared by every item: no split
    ([(8, 4, 4)], [(7, 4, 4)], 1, 0),
    ([(4, 4)], [(4, 4)], 0, 0),
])
def test_batch_dims_are_those_every_operand_and_result_shares(operands, results, rank, expect):
    assert _primitive.batch_dims_shared(operands, results, rank) == expect


def lapack_getrf(a):
    """JAX's CPU LAPACK getrf target, called through this package's FFI primitive."""
    return _primitive.ffi_solver_call(
        "lapack_sgetrf_ffi", [a],
        [jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(a.shape[:-1], np.int32),
         jax.ShapeDtypeStruct(a.shape[:-2], np.int32)],
        matrix_operands={0}, matrix_results={0}, aliases={0: 0})


@pytest.mark.parametrize("partitionable", [True, False])
def test_the_ffi_call_runs_per_shard(rng, partitioner, monkeypatch, partitionable):
    mesh = mesh_of("cpu", (4,), ("b",))
    x = rng.standard_normal((8, 16, 16)).astype(np.float32)
    # JAX's own LU first: its lowering loads the LAPACK functions the target calls.
    ref_lu, ref_pivots, _ = jax.lax.linalg.lu(jax.device_put(x, jax.devices("cpu")[0]))
    a = jax.device_put(x, NamedSharding(mesh, P("b")))
    if not partitionable:  # the call as jax.ffi.ffi_call makes it: no partitioning attributes
        monkeypatch.setattr(_primitive, "batch_dims_shared", lambda *_: 0)
    f = jax.jit(lambda a: lapack_getrf(a))  # a function of its own: no trace cached before
    text = f.lower(a).compile().as_text()
    call = next(line for line in text.splitlines() if 'custom_call_target="lapack_sgetrf' in line)
    lu, pivots, info = f(a)
    np.testing.assert_array_equal(np.asarray(lu), np.asarray(ref_lu))
    np.testing.assert_array_equal(np.asarray(pivots) - 1, np.asarray(ref_pivots))
    if partitionable:
        assert not collectives(text), collectives(text)
        assert "f32[2,16,16]" in call  # each device factors its 2 of the 8 matrices
        assert all(o.sharding.spec[0] == "b" for o in (lu, pivots, info))
    else:
        assert "all-gather" in text and "f32[8,16,16]" in call


def sharded_args(args, mesh, spec):
    """The op's arguments with their leading batch dims sharded as `spec`."""
    return [jax.device_put(x, NamedSharding(mesh, P(*spec))) if np.ndim(x) >= len(spec) else x
            for x in args]


BATCHED = [pytest.param(op, id=op.name) for op in OPS if op.batched]


@pytest.mark.parametrize("op", BATCHED)
def test_every_cuda_call_of_an_op_is_batch_partitionable(rng, claim_extension, partitioner, op):
    dtype = np.float32 if np.float32 in op.dtypes else op.dtypes[0]
    for strategy in strategies_of(op):
        # n 6, or 4 for a strategy that stops below it (eig's tiny-matrix kernel).
        n = 6 if runs_at(op, options(strategy, 2), 6) else 4
        args = op.build(rng, dtype, (4,), n)
        structs = [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype) for x in args]
        text = jax.jit(functools.partial(op.call, **options(strategy, 2))).trace(
            *structs).lower(lowering_platforms=("cuda",)).as_text()
        calls = [line for line in text.splitlines() if re.search(r"custom_call @jcm_", line)]
        for line in calls:
            assert 'num_batch_dims = "1"' in line, (op.name, strategy, line[:300])
            assert ("sdy.sharding_rule" in line) == partitioner, (op.name, strategy)


def jax_collectives(fn, args):
    """The collectives of JAX's own function `fn` on the same sharded arguments (what its own
    rules need, e.g. the scatter in the transpose of det's JVP), or () where `fn` is no JAX
    function (a NumPy reference)."""
    try:
        return set(collectives(jax.jit(fn).lower(*args).compile().as_text()))
    except Exception:  # noqa: BLE001
        return set()


# The CPU implementation of LDL^T is SciPy's LAPACK through a host callback, which XLA runs on
# one device (the batch gathered there); on the GPU its FFI call partitions as the others.
HOST_CALLBACK_ON_CPU = {"ldl_factor", "ldl_solve"}
# The mixed-precision solves and least squares refine until every matrix of the batch has
# converged and fall back to float64 if any has not (mixed.py): one all-reduce of a flag per
# refinement step, while the matrices stay on their devices.
BATCH_WIDE_FLAGS = {"solve_mixed": {"all-reduce"}, "mixed_solve_pos": {"all-reduce"},
                    "lstsq_mixed": {"all-reduce"}}


@pytest.mark.parametrize("op", BATCHED)
def test_a_sharded_batch_stays_sharded_on_the_cpu(rng, op):
    if op.name in HOST_CALLBACK_ON_CPU:
        pytest.skip("LDL^T on the CPU is a host callback: XLA runs it on one device")
    mesh = mesh_of("cpu", (4,), ("b",))
    dtype = np.float32 if np.float32 in op.dtypes else op.dtypes[0]
    args = op.build(rng, dtype, (8,), 6)
    f = jax.jit(op.call)
    cpu = jax.devices("cpu")[0]
    ref = f(*[jax.device_put(x, cpu) for x in args])
    sharded = sharded_args(args, mesh, ("b",))
    got = f(*sharded)
    assert set(collectives(f.lower(*sharded).compile().as_text())) <= jax_collectives(
        op.reference, sharded) | BATCH_WIDE_FLAGS.get(op.name, set()), op.name
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        if np.ndim(r) >= 1 and np.shape(r)[0] == 8:
            assert g.sharding.spec[0] == "b", (op.name, g.sharding)
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-5)


def total_square(fn):
    return lambda *xs: sum(jnp.sum(jnp.abs(y) ** 2) for y in jax.tree.leaves(fn(*xs))
                           if jnp.issubdtype(y.dtype, jnp.inexact))


@pytest.mark.parametrize("name,transform", [
    ("solve", "vmap"), ("solve", "grad"), ("eigh", "vmap"), ("eigh", "grad"),
    ("svd", "vmap"), ("det", "vmap"), ("det", "grad"), ("qr", "vmap"), ("qr", "grad"),
    ("cholesky", "grad"), ("inv", "grad")])
def test_two_mesh_axes_vmap_and_grad_stay_sharded_on_the_cpu(rng, name, transform):
    # Over two mesh axes at once; a vmap on top, or the derivative (its JVP and transpose
    # partition too: no collective JAX's own function does not also have).
    mesh = mesh_of("cpu", (2, 2), ("x", "y"))
    op = next(o for o in OPS if o.name == name)
    args = op.build(rng, np.float32, (2, 4), 5)
    wrap = {"vmap": jax.vmap, "grad": lambda fn: jax.grad(total_square(fn))}[transform]
    f, f_jax = jax.jit(wrap(op.call)), wrap(op.reference)
    ref = f(*[jax.device_put(x, jax.devices("cpu")[0]) for x in args])
    sharded = sharded_args(args, mesh, ("x", "y"))
    got = f(*sharded)
    assert set(collectives(f.lower(*sharded).compile().as_text())) <= jax_collectives(
        f_jax, sharded), (name, transform)
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        assert tuple(g.sharding.spec[:2]) == ("x", "y"), (name, transform, g.sharding)
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-4)


def gpu_count():
    try:
        return len(jax.devices("gpu"))
    except RuntimeError:
        return 0


@requires_gpu
@pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("axis_type", ["Auto", "Explicit"])
@pytest.mark.parametrize("name", ["lu_factor", "solve", "inv", "cholesky", "qr", "svd", "eigh",
                                  "eig", "generalized_eigh", "matmul"])
def test_a_sharded_batch_stays_sharded_on_the_gpus(rng, name, axis_type):
    mesh = jax.make_mesh((gpu_count(),), ("b",), devices=jax.devices("gpu"),
                         axis_types=(getattr(jax.sharding.AxisType, axis_type),))
    op = next(o for o in OPS if o.name == name)
    dtype = np.float32 if np.float32 in op.dtypes else op.dtypes[0]
    batch = 4 * gpu_count()
    args = op.build(rng, dtype, (batch,), 32)
    f = jax.jit(op.call)
    ref = f(*[jax.device_put(x, jax.devices("gpu")[0]) for x in args])
    sharded = sharded_args(args, mesh, ("b",))
    with jax.sharding.set_mesh(mesh):
        text = f.lower(*sharded).compile().as_text()
        got = f(*sharded)
    assert not collectives(text), (name, collectives(text))
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        if np.ndim(r) >= 1 and np.shape(r)[0] == batch:
            assert g.sharding.spec[0] == "b", (name, g.sharding)
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-4)


def shard_map(f, mesh, in_specs, out_specs):
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    from jax.experimental.shard_map import shard_map as experimental  # pragma: no cover
    return experimental(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)  # pragma: no cover


@pytest.mark.parametrize("name", ["solve", "eigh", "lu_factor"])
def test_inside_shard_map_each_device_calls_on_its_shard(rng, claim_extension, name):
    # On the CPU it runs (JAX's path); for CUDA it lowers to our call on the local shard.
    mesh = mesh_of("cpu", (4,), ("b",))
    op = next(o for o in OPS if o.name == name)
    args = op.build(rng, np.float32, (8,), 6)
    out_specs = jax.tree.map(lambda _: P("b"), jax.eval_shape(op.call, *args))
    f = jax.jit(shard_map(op.call, mesh, tuple(P("b") for _ in args), out_specs))
    # The reference on the mesh's platform too: on a GPU machine the default device's solver
    # is another algorithm, whose eigenvectors differ by more than float32's rounding.
    on_mesh_platform = jax.device_put(args, mesh.devices.flat[0])
    got, ref = f(*sharded_args(args, mesh, ("b",))), jax.jit(op.call)(*on_mesh_platform)
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-5)
    structs = [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype,
                                    sharding=NamedSharding(mesh, P("b"))) for x in args]
    g = jax.jit(shard_map(functools.partial(op.call, strategy="looped", lanes=2), mesh,
                          tuple(P("b") for _ in args), out_specs))
    text = g.trace(*structs).lower(lowering_platforms=("cuda",)).as_text()
    assert re.search(r"custom_call @jcm_\w+\(.*tensor<2x6x6xf32>", text), name


@pytest.mark.parametrize("axis_type", ["Explicit", "Auto"])
@pytest.mark.parametrize("name", ["lu_factor", "solve", "inv", "cholesky", "qr", "eigh", "svd",
                                  "det", "lstsq_mixed", "generalized_eigh", "matmul"])
def test_a_mesh_of_either_axis_type_keeps_the_batch_sharded(rng, name, axis_type):
    # jax.make_mesh's axes are Explicit by default (sharding in types: every primitive's
    # abstract value carries the sharding), Auto the older way; the mesh set as a user of
    # jax.make_mesh sets it. Under an Explicit one JAX's own cholesky fails here (jax 0.10: it
    # masks its result with a replicated triangle); ours, lowering it untyped, runs.
    if len(jax.devices("cpu")) < 4 or jax.default_backend() != "cpu":
        pytest.skip("needs four CPU devices as the default backend")
    kind = getattr(jax.sharding.AxisType, axis_type)
    mesh = jax.make_mesh((4,), ("b",), axis_types=(kind,))
    op = next(o for o in OPS if o.name == name)
    args = op.build(rng, np.float32 if np.float32 in op.dtypes else op.dtypes[0], (8,), 6)
    ref = jax.jit(op.call)(*args)
    with jax.sharding.set_mesh(mesh):
        got = jax.jit(op.call)(*sharded_args(args, mesh, ("b",)))
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        assert g.sharding.spec[0] == "b", (name, axis_type, g.sharding)
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-5)


def explicit_mesh():
    if len(jax.devices("cpu")) < 4:
        pytest.skip("needs four CPU devices")
    return jax.make_mesh((4,), ("b",), axis_types=(jax.sharding.AxisType.Explicit,),
                         devices=jax.devices("cpu")[:4])


def typed_structs(args, mesh):
    return [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype,
                                 sharding=NamedSharding(mesh, P("b") if np.ndim(x) else P()))
            for x in args]


def assert_batch_typed_sharded(traced, batch, where):
    for out in jax.tree.leaves(traced.out_info):
        if len(out.shape) and out.shape[0] == batch:
            assert out.sharding.spec[0] == "b", (where, out)


@pytest.mark.parametrize("op", BATCHED)
def test_under_an_explicit_mesh_every_result_is_typed_batch_sharded(rng, claim_extension, op):
    # Each result's type carries the batch sharding, for every strategy, and the CUDA lowering
    # (traced with those types) reaches this package's calls: no type error inside it.
    mesh = explicit_mesh()
    dtype = np.float32 if np.float32 in op.dtypes else op.dtypes[0]
    for strategy in strategies_of(op):
        n = 6 if runs_at(op, options(strategy, 2), 6) else 4
        structs = typed_structs(op.build(rng, dtype, (8,), n), mesh)
        with jax.sharding.set_mesh(mesh):
            traced = jax.jit(functools.partial(op.call, **options(strategy, 2))).trace(*structs)
            text = traced.lower(lowering_platforms=("cuda",)).as_text()
        assert_batch_typed_sharded(traced, 8, (op.name, strategy))
        assert re.search(r"custom_call @jcm_", text), (op.name, strategy)


@pytest.mark.parametrize("name,transform", [
    ("solve", "vmap"), ("solve", "grad"), ("inv", "grad"), ("cholesky", "vmap"),
    ("cholesky", "grad"), ("eigh", "vmap"), ("eigh", "grad"), ("svd_reduced", "grad"),
    ("qr", "grad"),
    ("pinv", "vmap"), ("generalized_eigh", "vmap"), ("generalized_eigh", "grad"),
    ("mixed_solve_pos", "grad"), ("matmul", "grad")])
def test_under_an_explicit_mesh_vmap_and_grad_keep_the_types(rng, claim_extension, name,
                                                           transform):
    # Not listed, as JAX's own fails the same way under an Explicit mesh (jax 0.10): inv under
    # vmap (jnp.linalg.solve's vmap with an unbatched identity), det's grad (jnp.linalg.det's
    # JVP), and the mixed-precision solves under vmap (vmap of lax.while_loop).
    mesh = explicit_mesh()
    op = next(o for o in OPS if o.name == name)
    dtype = np.float32 if np.float32 in op.dtypes else op.dtypes[0]
    structs = typed_structs(op.build(rng, dtype, (8,), 6), mesh)
    wrap = {"vmap": jax.vmap, "grad": lambda fn: jax.grad(total_square(fn))}[transform]
    # A strategy of this package's own: auto hands these small shapes to JAX's lowering.
    call = functools.partial(op.call, **options("looped" if op.strategies else None, 2))
    with jax.sharding.set_mesh(mesh):
        traced = jax.jit(wrap(call)).trace(*structs)
        text = traced.lower(lowering_platforms=("cuda",)).as_text()
        cpu = jax.jit(wrap(call)).trace(*structs).lower().compile()
        # On the CPU the implementation is JAX's own: no collective JAX's function lacks.
        own = jax_collectives(wrap(op.reference), structs)
    assert_batch_typed_sharded(traced, 8, (name, transform))
    assert re.search(r"custom_call @jcm_", text), (name, transform)
    assert set(collectives(cpu.as_text())) <= own | BATCH_WIDE_FLAGS.get(name, set()), name


@pytest.mark.parametrize("spec", [P("b", None, None), P(None, "b", None), P(None, None, "b")])
def test_under_an_explicit_mesh_a_sharded_matrix_dim_is_an_error_naming_the_op(rng, spec):
    mesh = explicit_mesh()
    a = jax.ShapeDtypeStruct((4, 8, 8), np.float32, sharding=NamedSharding(mesh, spec))
    with jax.sharding.set_mesh(mesh):
        if spec[0] == "b":
            jax.jit(jcm.lu_factor).trace(a)  # the batch may be sharded
            return
        with pytest.raises(Exception, match=r"jcm_getrf: operand 0 .* sharded on its matrix"):
            jax.jit(jcm.lu_factor).trace(a)


@pytest.mark.parametrize("name", ["solve", "lu_factor", "eigh", "svd", "eig",
                                  "solve_triangular"])
def test_under_an_explicit_mesh_enable_lowers_jax_code_to_ours(rng, claim_extension,
                                                               switched_off, name):
    # Unchanged JAX code (JAX's own cholesky, qr and inv fail under an Explicit mesh before
    # any lowering, jax 0.10): typed batch sharded as JAX types it, lowered to this package's
    # calls, no type error inside them.
    from test_dropin import PROGRAMS, operands
    fn, kind, target = PROGRAMS[name]
    mesh = explicit_mesh()
    structs = typed_structs(operands(rng, kind, np.float32, batch=(8,), n=12), mesh)
    jcm.enable()
    with jax.sharding.set_mesh(mesh), jcm.config(strategy="looped", lanes=2):
        traced = jax.jit(fn).trace(*structs)
        text = traced.lower(lowering_platforms=("cuda",)).as_text()
    assert_batch_typed_sharded(traced, 8, name)
    assert re.search(rf"custom_call @{target}\b", text), name
