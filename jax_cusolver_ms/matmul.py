"""Matrix multiply through cuBLASLt, with fused bias and activation epilogues.

`matmul(a, b)` has the semantics of `jnp.matmul` (batch dims broadcast, vectors promoted) and of
`lax.dot_general`'s `precision` / `preferred_element_type`; on CUDA it is one call of the
project's cuBLASLt handler (plan cached per call shape, algorithm autotuned once per shape or
pinned), elsewhere XLA's own dot. Transposed and conjugate-transposed operands are cuBLAS op
flags, never copies. `jit`, `vmap` and `grad` work, bias and activation included.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _compat, _ffi
from ._compat import NOT_MAPPED, ad, batching
from ._primitive import batch_spec, batched_ffi_call, register_lowerings, result_aval

# Operand ops: the codes of the FFI attributes transpose_a/transpose_b (cuBLAS's N, T, C).
# _CONJ (conjugate, no transpose) has no cuBLAS flag; it only appears inside transpose rules.
_N, _T, _C, _CONJ = 0, 1, 2, 3
_TRANSPOSED = {_N: _T, _T: _N, _C: _CONJ}           # op(x)^T as an op on x
_CONJUGATED = {_N: _CONJ, _T: _C, _C: _T, _CONJ: _N}  # conj(op(x)) as an op on x

ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2}  # the FFI attribute's codes
# The FFI attribute `algorithm`: -1 autotune, -2 cuBLAS's own GEMM, i >= 0 cuBLASLt's i-th.
# The largest heuristic candidate index the handler accepts (ffi/core/limits.h); without a build
# of the extension XLA's dot runs and ignores it.
MAX_ALGORITHM = (_ffi.limits.constants()["matmul_max_algorithm"] if _ffi.limits is not None
                 else float("inf"))

# What cuBLASLt multiplies. Integer and bool products (jnp.matmul keeps their dtype) run XLA's
# own dot on every platform.
MATMUL_DTYPES = tuple(np.dtype(d) for d in (jnp.bfloat16, jnp.float16, np.float32, np.float64,
                                            np.complex64, np.complex128))


def _runs_xla_dot(dtype) -> bool:
    return not jnp.issubdtype(dtype, jnp.inexact)
_HALF = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16))


def _activate(name, z):
    if name == "relu":
        return jax.nn.relu(z)
    if name == "gelu":  # cuBLASLt's GELU epilogue is the tanh approximation
        return jax.nn.gelu(z, approximate=True)
    return z


def _epilogue_dtype(out_dtype):
    """Where bias and activation are computed: float32 for half results, as cuBLASLt does."""
    return np.dtype(np.float32) if np.dtype(out_dtype) in _HALF else np.dtype(out_dtype)


def _apply_op(x, op):
    if op in (_C, _CONJ):
        x = jnp.conj(x)
    return jnp.swapaxes(x, -1, -2) if op in (_T, _C) else x


def _core(shape, op):
    """(rows, cols) of op(x) for an operand of `shape`."""
    r, c = shape[-2:]
    return (c, r) if op in (_T, _C) else (r, c)


def _result_shape(a_shape, b_shape, transpose_a, transpose_b):
    (m, k), (k_b, n) = _core(a_shape, transpose_a), _core(b_shape, transpose_b)
    if k != k_b:
        raise ValueError(f"matmul: inner dimensions differ: op(a) is {m}x{k}, op(b) is "
                         f"{k_b}x{n} (a {a_shape}, b {b_shape})")
    try:
        batch = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    except ValueError:
        raise ValueError(f"matmul: batch dims {a_shape[:-2]} of a and {b_shape[:-2]} of b do "
                         "not broadcast") from None
    return tuple(batch) + (m, n), k


# --- The primitive -------------------------------------------------------------------------------
# matmul_p(a, b[, bias]; transpose_a, transpose_b, activation, allow_tf32, out_dtype, algorithm):
# act(op(a) @ op(b) + bias) with op in {N, T, C}; a and b share a dtype, bias has out_dtype and
# shape (n,). Batch dims broadcast as in jnp.matmul.

matmul_p = _compat.Primitive("jcm_matmul")
matmul_p.def_impl(functools.partial(_compat.apply_primitive, matmul_p))


def _abstract_eval(a, b, *bias, transpose_a, transpose_b, activation, allow_tf32, out_dtype,
                   algorithm):
    shape, _ = _result_shape(a.shape, b.shape, transpose_a, transpose_b)
    # Each operand's spec aligned to the broadcast batch; a sharded contraction dim is an error
    # under an Explicit mesh (XLA reshards it under an Auto one), see docs/design.md, Multi-GPU.
    batch_rank = len(shape) - 2
    specs = [(None,) * (batch_rank + 2 - x.ndim) + _compat.spec_of(x) for x in (a, b)]
    spec = batch_spec("matmul", (a, b), batch_rank, matrix_dims_unsharded=True, specs=specs)
    return result_aval((a, b), shape, out_dtype, spec)


matmul_p.def_abstract_eval(_abstract_eval)


def _matmul_jax(a, b, *bias, transpose_a, transpose_b, activation, allow_tf32, out_dtype,
                algorithm):
    """XLA's dot: the CPU lowering, and CUDA's without the extension."""
    fused = bool(bias) or activation is not None
    z = jnp.matmul(_apply_op(a, transpose_a), _apply_op(b, transpose_b),
                   precision=lax.Precision.DEFAULT if allow_tf32 else lax.Precision.HIGHEST,
                   preferred_element_type=_epilogue_dtype(out_dtype) if fused else out_dtype)
    if bias:
        z = z + jnp.broadcast_to(bias[0].astype(z.dtype), z.shape)
    return _activate(activation, z).astype(out_dtype)


def _expand_batches(a, b):
    """cuBLAS's strided batches take, per operand, one matrix for every item or one per item;
    batch dims that broadcast against each other (3x1 with 1x4) are expanded here."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    items = int(np.prod(batch, dtype=np.int64))

    def fits(x):
        return int(np.prod(x.shape[:-2], dtype=np.int64)) in (1, items)

    if fits(a) and fits(b):
        return a, b
    return (jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:]))


def _matmul_cuda(a, b, *bias, transpose_a, transpose_b, activation, allow_tf32, out_dtype,
                 algorithm):
    params = dict(transpose_a=transpose_a, transpose_b=transpose_b, activation=activation,
                  allow_tf32=allow_tf32, out_dtype=out_dtype, algorithm=algorithm)
    shape, inner = _result_shape(a.shape, b.shape, transpose_a, transpose_b)
    if inner == 0 or 0 in shape or _runs_xla_dot(a.dtype):  # zeros (plus bias), or nothing
        return _matmul_jax(a, b, *bias, **params)
    a, b = _expand_batches(a, b)
    (out,) = batched_ffi_call(
        "jcm_matmul", [a, b, *bias], [jax.ShapeDtypeStruct(shape, np.dtype(out_dtype))],
        batch_rank=len(shape) - 2, transpose_a=transpose_a, transpose_b=transpose_b,
        activation=ACTIVATIONS[activation], allow_tf32=allow_tf32, algorithm=algorithm)
    return out


register_lowerings(matmul_p, _matmul_jax, _matmul_cuda)


def _product(x, y, op_x, op_y, *, operand_dtype, out_dtype, allow_tf32, algorithm):
    """op(x) @ op(y) through the primitive, operands in `operand_dtype` (a cotangent may come
    in the wider result dtype). A bare conjugate has no cuBLAS flag, so it is applied to the
    operand (only transposes of complex products need it)."""
    if op_x == _CONJ:
        x, op_x = jnp.conj(x), _N
    if op_y == _CONJ:
        y, op_y = jnp.conj(y), _N
    return matmul_p.bind(x.astype(operand_dtype), y.astype(operand_dtype), transpose_a=op_x,
                         transpose_b=op_y, activation=None, allow_tf32=allow_tf32,
                         out_dtype=np.dtype(out_dtype), algorithm=algorithm)


def _matmul_jvp(primals, tangents, *, transpose_a, transpose_b, activation, allow_tf32,
                out_dtype, algorithm):
    """Product rule; with an activation, z = op(a) op(b) + bias is computed (bias fused) in the
    epilogue's dtype and the activation is differentiated as JAX's own function."""
    a, b, *bias = primals
    da, db, *dbias = tangents
    acc = out_dtype if activation is None else _epilogue_dtype(out_dtype)
    common = dict(out_dtype=acc, allow_tf32=allow_tf32, algorithm=algorithm)
    z = matmul_p.bind(a, b, *(x.astype(acc) for x in bias), transpose_a=transpose_a,
                      transpose_b=transpose_b, activation=None, **common)
    terms = []
    if type(da) is not ad.Zero:
        terms.append(_product(da, b, transpose_a, transpose_b, operand_dtype=a.dtype, **common))
    if type(db) is not ad.Zero:
        terms.append(_product(a, db, transpose_a, transpose_b, operand_dtype=a.dtype, **common))
    if dbias and type(dbias[0]) is not ad.Zero:
        terms.append(jnp.broadcast_to(dbias[0].astype(acc), z.shape))
    dz = functools.reduce(jnp.add, terms) if terms else jnp.zeros(z.shape, acc)
    out, dout = jax.jvp(functools.partial(_activate, activation), (z,), (dz,))
    return out.astype(out_dtype), dout.astype(out_dtype)


def _unbroadcast(x, shape):
    """Sums the cotangent of a broadcast operand back to its shape."""
    extra = x.ndim - len(shape)
    if extra:
        x = jnp.sum(x, axis=tuple(range(extra)))
    axes = tuple(i for i, (want, got) in enumerate(zip(shape, x.shape)) if want == 1 != got)
    return jnp.sum(x, axis=axes, keepdims=True) if axes else x


def _matmul_transpose(ct, a, b, *bias, transpose_a, transpose_b, activation, allow_tf32,
                      out_dtype, algorithm):
    """C = X Y with X = op_a(a), Y = op_b(b) is linear in a and in b (conjugation is
    R-linear and transposes to itself): ct_X = ct Y^T, ct_Y = X^T ct, mapped back through the
    ops. Only the linear form (no bias, no activation) is ever transposed (see the JVP)."""
    if bias or activation is not None:
        raise NotImplementedError("matmul: only the product without bias and activation is "
                                  "linear")
    a_undefined, b_undefined = ad.is_undefined_primal(a), ad.is_undefined_primal(b)
    if a_undefined and b_undefined:
        raise NotImplementedError("matmul: a product of two linear inputs is not linear")
    a_aval = a.aval if a_undefined else a
    b_aval = b.aval if b_undefined else b
    if type(ct) is ad.Zero:
        return [ad.Zero(a.aval) if a_undefined else None, ad.Zero(b.aval) if b_undefined else None]
    # a and b share a dtype: the cotangents' dtype, and the products' operand dtype.
    options = dict(allow_tf32=allow_tf32, algorithm=algorithm, operand_dtype=a_aval.dtype,
                   out_dtype=a_aval.dtype)
    if a_undefined:
        ct_a = {_N: lambda: _product(ct, b, _N, _TRANSPOSED[transpose_b], **options),
                _T: lambda: _product(b, ct, transpose_b, _T, **options),
                _C: lambda: _product(b, ct, _CONJUGATED[transpose_b], _C, **options)}
        return [_unbroadcast(ct_a[transpose_a](), a_aval.shape), None]
    a_val, ct_val = a, ct
    # One b for a batch of a (weights applied to a batch): the batch folds into the
    # contraction, one GEMM instead of a batch of them and a sum.
    if (np.prod(b_aval.shape[:-2], dtype=np.int64) == 1 and transpose_a == _N
            and a.shape[:-2] == ct.shape[:-2] and a.ndim > 2):
        a_val = a.reshape((-1, a.shape[-1]))
        ct_val = ct.reshape((-1, ct.shape[-1]))
    ct_b = {_N: lambda: _product(a_val, ct_val, _TRANSPOSED[transpose_a], _N, **options),
            _T: lambda: _product(ct_val, a_val, _T, transpose_a, **options),
            _C: lambda: _product(ct_val, a_val, _C, _CONJUGATED[transpose_a], **options)}
    ct_b = ct_b[transpose_b]()
    if ct_b.ndim == 2 and b_aval.ndim > 2:
        ct_b = ct_b.reshape(b_aval.shape)
    return [None, _unbroadcast(ct_b, b_aval.shape)]


def _matmul_batch(args, dims, *, transpose_a, transpose_b, activation, allow_tf32, out_dtype,
                  algorithm):
    """vmap's axis becomes the leading batch dim; the batch dims of the two operands are padded
    to one rank first so that it lines up. A per-item bias is added outside the product."""
    a, b, *bias = args
    a_dim, b_dim, *bias_dim = dims
    rank = max(a.ndim - (a_dim is not NOT_MAPPED), b.ndim - (b_dim is not NOT_MAPPED)) - 2

    def lead(x, d):
        if d is NOT_MAPPED:
            return x
        x = jnp.moveaxis(x, d, 0)
        pad = rank - (x.ndim - 3)
        return x.reshape(x.shape[:1] + (1,) * pad + x.shape[1:])

    a, b = lead(a, a_dim), lead(b, b_dim)
    params = dict(transpose_a=transpose_a, transpose_b=transpose_b, allow_tf32=allow_tf32,
                  algorithm=algorithm)
    if not bias or bias_dim[0] is NOT_MAPPED:
        return matmul_p.bind(a, b, *bias, activation=activation, out_dtype=out_dtype,
                             **params), 0
    acc = _epilogue_dtype(out_dtype)
    z = matmul_p.bind(a, b, activation=None, out_dtype=acc, **params)
    if a_dim is NOT_MAPPED and b_dim is NOT_MAPPED:
        z = z[None]
    per_item = jnp.moveaxis(bias[0], bias_dim[0], 0).astype(acc)
    z = z + per_item.reshape(per_item.shape[:1] + (1,) * (z.ndim - 2) + per_item.shape[1:])
    return _activate(activation, z).astype(out_dtype), 0


ad.primitive_jvps[matmul_p] = _matmul_jvp
ad.primitive_transposes[matmul_p] = _matmul_transpose
batching.primitive_batchers[matmul_p] = _matmul_batch


# --- The public function -------------------------------------------------------------------------

def _op_code(flag, name, dtype):
    codes = {False: _N, True: _T, "N": _N, "T": _T, "C": _C, "H": _C}
    if isinstance(flag, (bool, np.bool_)) or flag in codes:
        code = codes[bool(flag) if isinstance(flag, (bool, np.bool_)) else flag]
    else:
        raise ValueError(f"matmul: {name} must be False, True (transpose), 'T' or 'C' "
                         f"(conjugate transpose), got {flag!r}")
    # For real dtypes the conjugate transpose is the transpose.
    return _T if code == _C and not jnp.issubdtype(dtype, jnp.complexfloating) else code


def tf32_allowed(precision, dtype) -> bool:
    """Whether float32/complex64 products may use TF32 tensor cores, as XLA decides on a GPU:
    yes below Precision.HIGHEST. `precision=None` reads jax.default_matmul_precision (at trace
    time). A pair (as lax.dot_general takes) allows TF32 only when both entries do."""
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.complex64)):
        return False
    if precision is None:
        precision = jax.config.jax_default_matmul_precision
    entries = precision if isinstance(precision, (tuple, list)) else (precision,)
    levels = []
    for p in entries:
        if p is None:
            levels.append(lax.Precision.DEFAULT)
            continue
        try:
            levels.append(p if isinstance(p, lax.Precision) else lax.Precision(p))
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"matmul: unsupported precision {p!r}; expected None, a "
                             "lax.Precision or one of 'default', 'high', 'highest', "
                             "'bfloat16', 'tensorfloat32', 'float32'") from None
    return all(level != lax.Precision.HIGHEST for level in levels)


def _result_dtype(dtype, preferred_element_type):
    if preferred_element_type is None:
        return dtype
    out = np.dtype(preferred_element_type)
    allowed = (dtype, np.dtype(np.float32)) if dtype in _HALF else (dtype,)
    if out not in allowed:
        raise TypeError(f"matmul: preferred_element_type {out.name} is not supported for "
                        f"{dtype.name} operands; expected one of "
                        f"{', '.join(d.name for d in allowed)}")
    return out


def matmul(a, b, *, bias=None, activation=None, precision=None, preferred_element_type=None,
           transpose_a=False, transpose_b=False, algorithm=None):
    """act(op(a) @ op(b) + bias) through cuBLASLt, with the semantics of jnp.matmul.

    a, b: arrays of bfloat16, float16, float32, float64, complex64 or complex128 (cuBLASLt),
      or of integers or bool (XLA's own dot, the result in their dtype, as jnp.matmul); mixed
      dtypes promote as jnp.matmul does. Batch dims broadcast; a 1-D a (b) is a row (column)
      vector.
    bias: shape (n,), the result's column count; added to every row (cast to the result dtype).
    activation: None, "relu" or "gelu" (the tanh approximation, jax.nn.gelu(approximate=True)),
      fused with the bias into cuBLASLt's epilogue (computed in float32 for half results).
    precision: as lax.dot_general; None follows jax.default_matmul_precision. float32 and
      complex64 use TF32 tensor cores below "highest", as XLA does on the GPU.
    preferred_element_type: the result dtype; float32 is allowed for half operands.
    transpose_a, transpose_b: False, True / "T" (transpose) or "C" (conjugate transpose): the
      operand is used as op(x), folded into cuBLAS's op flags (no copy).
    algorithm: None autotunes once per call shape: the first call times cuBLASLt's heuristic
      candidates and cuBLAS's own GEMM and keeps the fastest. An int i pins the i-th candidate
      of cuBLASLt's heuristic (0 = its first choice); "cublas" pins cublasGemmStridedBatchedEx
      (bias and activation then run as a separate kernel).
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    dtype = np.dtype(jnp.result_type(a, b))
    if dtype not in MATMUL_DTYPES and not _runs_xla_dot(dtype):
        raise TypeError(f"matmul: unsupported dtype {dtype.name} (from {a.dtype.name} and "
                        f"{b.dtype.name}); expected one of "
                        f"{', '.join(d.name for d in MATMUL_DTYPES)}, an integer type or bool")
    a, b = a.astype(dtype), b.astype(dtype)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must have rank >= 1, got shapes {a.shape} and "
                         f"{b.shape}")
    op_a = _op_code(transpose_a, "transpose_a", dtype)
    op_b = _op_code(transpose_b, "transpose_b", dtype)
    for x, op, name in ((a, op_a, "transpose_a"), (b, op_b, "transpose_b")):
        if x.ndim == 1 and op != _N:
            raise ValueError(f"matmul: {name} needs an operand of rank >= 2, got a vector")
    a_vector, b_vector = a.ndim == 1, b.ndim == 1
    if a_vector:
        a = a[None, :]
    if b_vector:
        b = b[:, None]
    shape, _ = _result_shape(a.shape, b.shape, op_a, op_b)
    out_dtype = _result_dtype(dtype, preferred_element_type)
    if activation not in ACTIVATIONS:
        raise ValueError(f"matmul: activation must be None, 'relu' or 'gelu', got {activation!r}")
    if activation is not None and not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"matmul: activation {activation!r} is not defined for {dtype.name} "
                         "operands (real floating dtypes only)")
    operands = [a, b]
    if bias is not None:
        bias = jnp.asarray(bias)
        if bias.shape != shape[-1:]:
            raise ValueError(f"matmul: bias must have shape ({shape[-1]},) (the result's "
                             f"columns), got {bias.shape}")
        operands.append(bias.astype(out_dtype))
    if algorithm is None or algorithm == "cublas":
        algorithm = {None: -1, "cublas": -2}[algorithm]
    elif not isinstance(algorithm, (int, np.integer)) or not 0 <= algorithm <= MAX_ALGORITHM:
        raise ValueError(f"matmul: algorithm must be None (autotune), 'cublas' or an int in "
                         f"0..{MAX_ALGORITHM}, got {algorithm!r}")
    out = matmul_p.bind(*operands, transpose_a=op_a, transpose_b=op_b, activation=activation,
                        allow_tf32=tf32_allowed(precision, dtype), out_dtype=out_dtype,
                        algorithm=int(algorithm))
    if a_vector:
        out = out[..., 0, :]
    if b_vector:
        out = out[..., 0]
    return out
