"""Tests for matmul: act(op(a) @ op(b) + bias) through cuBLASLt.

Every product is checked against float64 NumPy (computed from the same, already rounded, inputs)
with a per-dtype tolerance, and against jnp.matmul. On CPU the primitive runs XLA's dot, so the
CPU run checks the API, shape rules, promotion, precision plumbing and transformations; the CUDA
lowering is checked by exporting for CUDA (no GPU needed); the GPU run checks the cuBLASLt
handler (plan cache, autotuning, epilogues, fallback, strided and folded batches).
"""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jax_cusolver_ms as jcm
import jax_cusolver_ms._ffi as jcm_ffi
from conftest import exported_module_text, is_complex, param_id, rel_err, requires_gpu

ids = param_id
BF16, F16 = np.dtype(jnp.bfloat16), np.dtype(jnp.float16)
DTYPES = (BF16, F16, np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64),
          np.dtype(np.complex128))
REAL_DTYPES = DTYPES[:4]

# Relative Frobenius error allowed against float64 of the same inputs: half results are rounded
# once (2^-8 / 2^-11) after float32 accumulation; float32/complex64 at default precision may use
# TF32 on a GPU (10-bit mantissa products); "highest" is full float32.
TOL = {BF16: 1e-2, F16: 2e-3, np.dtype(np.float32): 5e-3, np.dtype(np.float64): 1e-12,
       np.dtype(np.complex64): 5e-3, np.dtype(np.complex128): 1e-12}
TOL_HIGHEST = {np.dtype(np.float32): 5e-6, np.dtype(np.complex64): 5e-6}
# cuBLASLt's fused float32 GELU (its own tanh) may differ from NumPy's in the last bits.
TOL_FUSED_F32 = 1e-4

# (a shape, b shape, transpose_a, transpose_b): 1x1, odd sizes (not multiples of 8/16),
# tall-skinny, a batch against one b (folded into one GEMM), transposes, conjugate transposes,
# a batch of 1 against a batch (stride 0), and batches that broadcast against each other.
CASES = [
    ((1, 1), (1, 1), False, False),
    ((37, 19), (19, 23), False, False),
    ((300, 64), (64, 5), False, False),
    ((4, 17, 9), (9, 13), False, False),
    ((9, 17), (13, 9), True, True),
    ((3, 9, 17), (3, 9, 13), "C", False),
    ((3, 17, 9), (13, 9), False, "C"),
    ((1, 6, 7), (3, 7, 2), False, False),
    ((2, 1, 5, 7), (3, 7, 4), False, False),
    ((2, 3, 7, 5), (3, 6, 7), True, True),
]


def case_id(case):
    a, b, ta, tb = case
    flags = {False: "", True: "T", "C": "C"}
    return f"{'x'.join(map(str, a))}{flags[ta]}@{'x'.join(map(str, b))}{flags[tb]}"


def random(rng, shape, dtype):
    """Standard normal entries in `dtype` (complex: both parts nonzero)."""
    x = rng.standard_normal(shape)
    if is_complex(dtype):
        x = (x + 1j * rng.standard_normal(shape)) / np.sqrt(2)
    return np.asarray(jnp.asarray(x).astype(dtype))


def wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if is_complex(x.dtype) else np.float64)


def op(x, flag):
    if flag == "C":
        return np.conj(np.swapaxes(x, -1, -2))
    return np.swapaxes(x, -1, -2) if flag else x


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def reference(a, b, ta=False, tb=False, bias=None, activation=None):
    """float64/complex128 NumPy from the same inputs."""
    z = op(wide(a), ta) @ op(wide(b), tb)
    if bias is not None:
        z = z + wide(bias)
    return {None: z, "relu": np.maximum(z, 0), "gelu": gelu_tanh(z)}[activation]


def check(out, ref, dtype, tol=None):
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    tol = TOL[np.dtype(dtype)] if tol is None else tol
    err = rel_err(out, ref, core_ndim=min(2, ref.ndim))
    assert err <= tol, err


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_matmul_against_float64_and_jax(rng, dtype, case):
    a_shape, b_shape, ta, tb = case
    a, b = random(rng, a_shape, dtype), random(rng, b_shape, dtype)
    out = jcm.matmul(a, b, transpose_a=ta, transpose_b=tb)
    check(out, reference(a, b, ta, tb), dtype)
    expect = jnp.matmul(jnp.asarray(op(a, ta)), jnp.asarray(op(b, tb)))
    assert out.dtype == expect.dtype
    check(out, np.asarray(expect).astype(wide(a).dtype), dtype, tol=2 * TOL[np.dtype(dtype)])


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_vectors_like_jnp_matmul(rng, dtype):
    a, b, m = random(rng, (7,), dtype), random(rng, (7,), dtype), random(rng, (2, 7, 3), dtype)
    for x, y in ((a, b), (a, m), (m.swapaxes(-1, -2), a)):
        out = jcm.matmul(x, y)
        ref = wide(x) @ wide(y)
        assert out.shape == ref.shape == jnp.matmul(x, y).shape
        np.testing.assert_allclose(np.asarray(out).astype(ref.dtype), ref,
                                   rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize(
    "a_shape,b_shape",
    [((0, 4), (4, 3)), ((2, 0), (0, 3)), ((0, 2, 3), (3, 4)), ((2, 3, 0), (2, 0, 5)),
     ((2, 3), (3, 0))], ids=ids)
def test_zero_size(rng, a_shape, b_shape, activation):
    dtype = np.float32
    a, b = random(rng, a_shape, dtype), random(rng, b_shape, dtype)
    bias = random(rng, b_shape[-1:], dtype)
    out = jcm.matmul(a, b, bias=bias, activation=activation)
    check(out, reference(a, b, bias=bias, activation=activation), dtype, tol=1e-6)
    assert jcm.matmul(a, b).shape == jnp.matmul(a, b).shape


# On the GPU: cuBLASLt's fused epilogue (autotuned) and cuBLAS's GEMM + the epilogue kernel.
ALGORITHMS = [None, "cublas"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("dtype", REAL_DTYPES, ids=ids)
def test_epilogues(rng, dtype, activation, bias, algorithm):
    a, b = random(rng, (3, 21, 33), dtype), random(rng, (33, 19), dtype)
    c = random(rng, (19,), dtype) if bias else None
    out = jcm.matmul(a, b, bias=c, activation=activation, algorithm=algorithm)
    check(out, reference(a, b, bias=c, activation=activation), dtype)
    # JAX's unfused version: the GELU is the tanh approximation.
    z = jnp.matmul(a, b, precision="highest")
    z = z + (0 if c is None else jnp.broadcast_to(c, z.shape))
    act = {None: lambda z: z, "relu": jax.nn.relu, "gelu": lambda z: jax.nn.gelu(z, True)}
    check(out, wide(act[activation](z)), dtype, tol=3 * TOL[dtype])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=ids)
def test_complex_bias(rng, dtype, algorithm):
    a, b, c = random(rng, (2, 5, 6), dtype), random(rng, (6, 4), dtype), random(rng, (4,), dtype)
    check(jcm.matmul(a, b, bias=c, algorithm=algorithm), reference(a, b, bias=c), dtype)


@pytest.mark.parametrize("dtype", [BF16, F16], ids=ids)
def test_preferred_element_type_float32(rng, dtype):
    a, b, c = (random(rng, shape, dtype) for shape in ((4, 40, 24), (24, 20), (20,)))
    out = jcm.matmul(a, b, preferred_element_type=np.float32)
    check(out, reference(a, b), np.float32, tol=1e-5)  # no rounding to the half type
    expect = jax.lax.dot_general(a, b, (((2,), (0,)), ((), ())),
                                 preferred_element_type=np.float32)
    check(out, wide(expect), np.float32, tol=1e-5)
    fused = jcm.matmul(a, b, bias=c, activation="gelu", preferred_element_type=np.float32)
    check(fused, reference(a, b, bias=c, activation="gelu"), np.float32, tol=TOL_FUSED_F32)


@pytest.mark.parametrize("x,y,expect", [
    (np.float32, jnp.bfloat16, np.float32), (jnp.bfloat16, jnp.float16, np.float32),
    (np.float32, np.complex64, np.complex64), (np.float64, np.float32, np.float64),
    (np.int32, np.float32, np.float32)], ids=ids)
def test_mixed_dtypes_promote_like_jnp_matmul(rng, x, y, expect):
    a, b = (rng.standard_normal((5, 6)) * 3).astype(x), (rng.standard_normal((6, 4))).astype(y)
    out = jcm.matmul(a, b)
    assert out.dtype == jnp.matmul(a, b).dtype == np.dtype(expect)
    check(out, reference(a, b), expect, tol=TOL[np.dtype(expect)] * 2)


# ---------------------------------------------------------------------------------------------
# Precision
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=ids)
def test_precision_highest_is_float32(rng, dtype):
    a, b = random(rng, (64, 512), dtype), random(rng, (512, 48), dtype)
    ref = reference(a, b)
    highest = jcm.matmul(a, b, precision="highest")
    check(highest, ref, dtype, tol=TOL_HIGHEST[np.dtype(dtype)])
    with jax.default_matmul_precision("float32"):
        check(jcm.matmul(a, b), ref, dtype, tol=TOL_HIGHEST[np.dtype(dtype)])
    check(jcm.matmul(a, b), ref, dtype)  # default: within TF32's tolerance


@requires_gpu
def test_default_precision_uses_tf32_on_gpu(rng):
    # TF32 keeps 10 mantissa bits: its error is orders of magnitude above float32's.
    a, b = random(rng, (256, 1024), np.float32), random(rng, (1024, 256), np.float32)
    ref = reference(a, b)
    err_default, err_highest = (rel_err(jcm.matmul(a, b, precision=p), ref)
                                for p in (None, "highest"))
    assert err_highest <= TOL_HIGHEST[np.dtype(np.float32)]
    assert 1e-5 < err_default <= TOL[np.dtype(np.float32)]
    # As XLA's own dot on this GPU.
    err_xla = rel_err(jnp.matmul(a, b), ref)
    assert err_default <= 3 * err_xla


@pytest.mark.parametrize("precision,context,dtype,expect", [
    (None, None, np.float32, 1), ("highest", None, np.float32, 0),
    (jax.lax.Precision.HIGH, None, np.float32, 1), (None, "float32", np.float32, 0),
    (None, "tensorfloat32", np.complex64, 1), (("highest", "default"), None, np.float32, 0),
    (None, None, np.float64, 0), (None, None, jnp.bfloat16, 0)], ids=ids)
def test_precision_lowers_to_allow_tf32(claim_extension, precision, context, dtype, expect):
    a = jax.ShapeDtypeStruct((8, 8), dtype)
    f = lambda a: jcm.matmul(a, a, precision=precision)
    if context is None:
        text = _cuda_module_text(f, a)
    else:
        with jax.default_matmul_precision(context):
            text = _cuda_module_text(f, a)
    (line,) = _custom_calls(text)
    assert f"allow_tf32 = {expect} : i32" in line, line


# ---------------------------------------------------------------------------------------------
# Transformations
# ---------------------------------------------------------------------------------------------

GRAD_CASES = [
    dict(a=(5, 4), b=(4, 3)),
    dict(a=(2, 5, 4), b=(4, 3), bias=True),
    dict(a=(2, 5, 4), b=(4, 3), bias=True, activation="gelu"),
    dict(a=(5, 4), b=(4, 3), bias=True, activation="relu"),
    dict(a=(2, 4, 5), b=(2, 3, 4), transpose_a=True, transpose_b=True),
    dict(a=(2, 4, 5), b=(4, 3), transpose_a="C"),
    dict(a=(2, 5, 4), b=(1, 3, 4), transpose_b="C"),
    dict(a=(2, 1, 5, 4), b=(3, 4, 2)),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: "-".join(
    f"{k}={v}" for k, v in c.items()).replace(" ", ""))
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=ids)
def test_check_grads(rng, dtype, case):
    case = dict(case)
    if case.get("activation") and is_complex(dtype):
        pytest.skip("activations are real")
    a, b = random(rng, case.pop("a"), dtype), random(rng, case.pop("b"), dtype)
    args = [a, b]
    if case.pop("bias", False):
        args.append(random(rng, (b.shape[-2] if case.get("transpose_b") else b.shape[-1],),
                           dtype))
    f = lambda a, b, *c: jcm.matmul(a, b, bias=c[0] if c else None, **case)
    check_grads(f, args, order=2, modes=["fwd", "rev"], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=ids)
def test_grad_with_half_and_float32_results(rng, dtype):
    """grad through bias + gelu compares with JAX's unfused version."""
    a, b, c = (random(rng, s, dtype) for s in ((3, 8, 16), (16, 12), (12,)))

    def ours(a, b, c):
        return jnp.sum(jcm.matmul(a, b, bias=c, activation="gelu", precision="highest",
                                  preferred_element_type=np.float32) ** 2)

    def theirs(a, b, c):
        z = jnp.matmul(a, b, precision="highest", preferred_element_type=np.float32)
        z = z + jnp.broadcast_to(c.astype(np.float32), z.shape)
        return jnp.sum(jax.nn.gelu(z, approximate=True) ** 2)

    for got, want in zip(jax.grad(ours, (0, 1, 2))(a, b, c), jax.grad(theirs, (0, 1, 2))(a, b, c)):
        assert got.dtype == want.dtype == np.dtype(dtype)
        check(got, wide(want), dtype, tol=2 * TOL[np.dtype(dtype)])


@pytest.mark.parametrize("in_axes", [(0, None, None), (None, 0, None), (0, 0, None),
                                     (None, None, 0), (1, 0, 0), (0, None, 0)], ids=ids)
def test_vmap(rng, in_axes):
    dtype = np.float64
    a, b, c = random(rng, (4, 6, 5), dtype), random(rng, (5, 3), dtype), random(rng, (3,), dtype)
    shapes = {0: a, 1: b, 2: c}
    stacked = []
    for i, axis in enumerate(in_axes):
        x = shapes[i]
        stacked.append(x if axis is None else
                       np.stack([x * (k + 1) for k in range(2)], axis=axis))
    f = lambda a, b, c: jcm.matmul(a, b, bias=c, activation="relu")
    out = jax.vmap(f, in_axes=in_axes)(*stacked)

    def item(k, i):
        return stacked[i] if in_axes[i] is None else np.take(stacked[i], k, axis=in_axes[i])

    ref = np.stack([reference(item(k, 0), item(k, 1), bias=item(k, 2), activation="relu")
                    for k in range(2)])
    check(out, ref, dtype)


def test_vmap_nested_and_batched_operands(rng):
    dtype = np.float64
    a, b = random(rng, (2, 3, 4, 6, 5), dtype), random(rng, (4, 5, 7), dtype)
    f = jax.vmap(jax.vmap(lambda a, b: jcm.matmul(a, b), in_axes=(0, None)), in_axes=(0, None))
    check(f(a, b), reference(a, b), dtype)
    # The unmapped operand has more batch dims than the mapped one's items.
    x, y = random(rng, (2, 6, 5), dtype), random(rng, (3, 5, 7), dtype)
    check(jax.vmap(jcm.matmul, in_axes=(0, None))(x, y), reference(x[:, None], y), dtype)
    # Mapped over a trailing axis.
    ys = random(rng, (5, 7, 2), dtype)
    check(jax.vmap(lambda y: jcm.matmul(x[0], y), in_axes=2)(ys),
          np.stack([reference(x[0], ys[..., k]) for k in range(2)]), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_jit(rng, dtype):
    a, b = random(rng, (3, 11, 7), dtype), random(rng, (7, 5), dtype)
    c = random(rng, (5,), dtype)
    f = lambda a, b, c: jcm.matmul(a, b, bias=c, transpose_a=False)
    jitted = jax.jit(f)(a, b, c)
    check(jitted, reference(a, b, bias=c), dtype)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(f(a, b, c)))


# ---------------------------------------------------------------------------------------------
# The GPU handler: algorithms, fallback, larger shapes
# ---------------------------------------------------------------------------------------------


@requires_gpu
@pytest.mark.parametrize("algorithm", [None, 0, 1, "cublas"])
def test_pinned_algorithms_agree(rng, algorithm):
    a, b = random(rng, (2, 96, 80), np.float32), random(rng, (80, 72), np.float32)
    c = random(rng, (72,), np.float32)
    try:
        out = jax.block_until_ready(jcm.matmul(a, b, bias=c, activation="gelu",
                                               precision="highest", algorithm=algorithm))
    except Exception as exc:  # noqa: BLE001
        if "heuristic offers" in str(exc) and isinstance(algorithm, int) and algorithm > 0:
            pytest.skip(f"cuBLASLt offers fewer candidates here: {exc}")
        raise
    check(out, reference(a, b, bias=c, activation="gelu"), np.float32, tol=TOL_FUSED_F32)


@requires_gpu
def test_algorithm_out_of_range_is_a_clear_error(rng):
    a = random(rng, (16, 16), np.float32)
    with pytest.raises(Exception, match="algorithm 200 requested"):
        jax.block_until_ready(jcm.matmul(a, a, algorithm=200))


@requires_gpu
@pytest.mark.parametrize("dtype", [BF16, np.float32, np.float64, np.complex128], ids=ids)
def test_odd_large(rng, dtype):
    a, b = random(rng, (1000, 1000), dtype), random(rng, (1000, 1000), dtype)
    check(jcm.matmul(a, b, precision="highest"), reference(a, b), dtype,
          tol=TOL_HIGHEST.get(np.dtype(dtype), TOL[np.dtype(dtype)]))


@requires_gpu
def test_handler_checks_its_contract(rng):
    a = jnp.asarray(random(rng, (4, 3), np.float32))
    call = jax.ffi.ffi_call("jcm_matmul", jax.ShapeDtypeStruct((4, 5), np.float32))
    attrs = dict(transpose_a=np.int32(0), transpose_b=np.int32(0), activation=np.int32(0),
                 allow_tf32=np.int32(0), algorithm=np.int32(-1))
    with pytest.raises(Exception, match="result's last two dims"):
        jax.block_until_ready(jax.jit(lambda a: call(a, a.T, **attrs))(a))
    with pytest.raises(Exception, match="inner dimensions differ"):
        jax.block_until_ready(jax.jit(lambda a: call(a, a, **attrs))(a))
    with pytest.raises(Exception, match="transpose_a must be"):
        jax.block_until_ready(jax.jit(lambda a: call(a, a.T, **{**attrs,
                                                                "transpose_a": np.int32(7)}))(a))


@requires_gpu
def test_handler_edge_cases_called_directly(rng):
    """What the Python wrapper never sends: an empty inner dimension, unexpanded batches."""
    attrs = dict(transpose_a=np.int32(0), transpose_b=np.int32(0), activation=np.int32(1),
                 allow_tf32=np.int32(0), algorithm=np.int32(-1))
    bias = jnp.asarray(random(rng, (5,), np.float32))
    call = jax.ffi.ffi_call("jcm_matmul", jax.ShapeDtypeStruct((2, 4, 5), np.float32))
    out = jax.jit(lambda a, b, c: call(a, b, c, **attrs))(
        jnp.zeros((2, 4, 0), np.float32), jnp.zeros((0, 5), np.float32), bias)
    np.testing.assert_array_equal(out, np.broadcast_to(np.maximum(bias, 0), (2, 4, 5)))
    call = jax.ffi.ffi_call("jcm_matmul", jax.ShapeDtypeStruct((2, 3, 4, 5), np.float32))
    with pytest.raises(Exception, match="must be expanded"):
        jax.block_until_ready(jax.jit(lambda a, b: call(a, b, **attrs))(
            jnp.zeros((2, 1, 4, 6), np.float32), jnp.zeros((3, 6, 5), np.float32)))


# ---------------------------------------------------------------------------------------------
# Lowering: the FFI call on CUDA (checked by exporting, no GPU needed), XLA's dot on CPU
# ---------------------------------------------------------------------------------------------


def _cuda_module_text(fn, *args):
    return exported_module_text(fn, args, ("jcm_matmul",))


def _custom_calls(text):
    return [line for line in text.splitlines() if "custom_call @jcm_matmul(" in line]


def test_cuda_lowering_emits_one_call_per_product(claim_extension):
    s = jax.ShapeDtypeStruct
    a, b, c = s((4, 16, 8), np.float32), s((8, 12), np.float32), s((12,), np.float32)
    z = s((3, 4, 8, 16), np.complex64)

    def f(a, b, c, z):
        return (jcm.matmul(a, b, bias=c, activation="gelu"),       # fused epilogue
                jcm.matmul(a, b, transpose_b=False, transpose_a=False),
                jcm.matmul(b, a, transpose_a="C", transpose_b="C"),  # real: C is T
                jcm.matmul(z, z, transpose_a="C", algorithm=2),
                jcm.matmul(a, b, algorithm="cublas"))

    lines = _custom_calls(_cuda_module_text(f, a, b, c, z))
    assert len(lines) == 5, lines
    assert "activation = 2 : i32" in lines[0] and "tensor<12xf32>" in lines[0]
    assert "transpose_a = 1 : i32, transpose_b = 1 : i32" in lines[2]
    assert "transpose_a = 2 : i32" in lines[3] and "algorithm = 2 : i32" in lines[3]
    assert "algorithm = -1 : i32" in lines[0] and "algorithm = -2 : i32" in lines[4]
    # Row-major operands: no layout change, no transposed copies.
    assert all("transpose" not in l.split("custom_call")[0] for l in lines)


def test_cuda_lowering_expands_only_mutually_broadcast_batches(claim_extension):
    s = jax.ShapeDtypeStruct
    text = _cuda_module_text(lambda a, b: jcm.matmul(a, b), s((2, 1, 5, 7), np.float32),
                             s((3, 7, 4), np.float32))
    (line,) = _custom_calls(text)
    assert "tensor<2x3x5x7xf32>" in line and "tensor<2x3x7x4xf32>" in line, line
    text = _cuda_module_text(lambda a, b: jcm.matmul(a, b), s((1, 5, 7), np.float32),
                             s((3, 7, 4), np.float32))
    (line,) = _custom_calls(text)
    assert "tensor<1x5x7xf32>" in line, line  # a batch of 1: stride 0, no copy


def test_cuda_lowering_zero_size_makes_no_call(claim_extension):
    s = jax.ShapeDtypeStruct
    for a, b in (((0, 4), (4, 3)), ((2, 0), (0, 3)), ((2, 3), (3, 0))):
        text = _cuda_module_text(lambda a, b: jcm.matmul(a, b), s(a, np.float32),
                                 s(b, np.float32))
        assert not _custom_calls(text)


def test_cuda_lowering_of_grad_uses_the_ffi(claim_extension):
    s = jax.ShapeDtypeStruct
    loss = lambda a, b, c: jnp.sum(jcm.matmul(a, b, bias=c, activation="gelu"))
    text = _cuda_module_text(jax.grad(loss, (0, 1, 2)), s((4, 16, 8), np.float32),
                             s((8, 12), np.float32), s((12,), np.float32))
    lines = _custom_calls(text)
    assert len(lines) == 3, lines  # z, then the cotangents of a and of b
    # The weight's cotangent folds the batch into the contraction: one 2-D product.
    assert any("(tensor<64x8xf32>, tensor<64x12xf32>) -> tensor<8x12xf32>" in l for l in lines)


def test_cuda_lowering_without_extension_uses_xla(monkeypatch):
    monkeypatch.setattr(jcm_ffi, "extension_loaded", lambda: False)
    a = jax.ShapeDtypeStruct((8, 8), np.float32)
    text = jax.jit(lambda a: jcm.matmul(a, a)).trace(a).lower(
        lowering_platforms=("cuda",)).as_text()
    assert "jcm_matmul" not in text and "dot_general" in text


def test_cpu_lowering_is_xla_dot():
    a = jax.ShapeDtypeStruct((8, 8), np.float32)
    text = jax.jit(lambda a: jcm.matmul(a, a)).trace(a).lower(
        lowering_platforms=("cpu",)).as_text()
    assert "jcm_matmul" not in text and "dot_general" in text


# ---------------------------------------------------------------------------------------------
# Bad input: clear errors
# ---------------------------------------------------------------------------------------------

_F = np.ones((3, 4), np.float32)
_G = np.ones((4, 5), np.float32)


@pytest.mark.parametrize("call,error,match", [
    (lambda: jcm.matmul(np.ones((3, 4), jnp.float8_e4m3fn), np.ones((4, 2), jnp.float8_e4m3fn)),
     TypeError, "unsupported dtype float8_e4m3fn"),
    (lambda: jcm.matmul(np.float32(1), _G), ValueError, "rank >= 1"),
    (lambda: jcm.matmul(_F, _F), ValueError, "inner dimensions differ"),
    (lambda: jcm.matmul(np.ones((2, 3, 4)), np.ones((3, 4, 5))), ValueError,
     "do not broadcast"),
    (lambda: jcm.matmul(_F, _G, bias=np.ones(4, np.float32)), ValueError,
     r"bias must have shape \(5,\)"),
    (lambda: jcm.matmul(_F, _G, activation="tanh"), ValueError, "activation must be"),
    (lambda: jcm.matmul(_F.astype(np.complex64), _G, activation="relu"), ValueError,
     "not defined for complex"),
    (lambda: jcm.matmul(_F, _G, preferred_element_type=np.float16), TypeError,
     "preferred_element_type float16"),
    (lambda: jcm.matmul(_F, _G, transpose_a="X"), ValueError, "transpose_a must be"),
    (lambda: jcm.matmul(np.ones(4, np.float32), _G, transpose_a=True), ValueError,
     "vector"),
    (lambda: jcm.matmul(_F, _G, precision="ultra"), ValueError, "unsupported precision"),
    (lambda: jcm.matmul(_F, _G, algorithm=-2), ValueError, "algorithm must be"),
    (lambda: jcm.matmul(_F, _G, algorithm=256), ValueError, "algorithm must be"),
    (lambda: jcm.matmul(_F, _G, algorithm="fast"), ValueError, "algorithm must be"),
], ids=lambda x: "" if callable(x) or isinstance(x, type) else x)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
