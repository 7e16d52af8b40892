"""Triangular solves: the trsm primitive and solve_triangular.

Semantics follow jax.scipy.linalg.solve_triangular (and jax.lax.linalg.triangular_solve with
left_side=True), so imports can be swapped. On CUDA `auto` picks from the measured table: this
project's one-launch kernel for small matrices (triangular_kernels.h), cuBLAS trsm per matrix
on lanes, trsmBatched, or JAX's own (XLA's trsmBatched, which builds pointer arrays per call).
Under enable() JAX's own triangular_solve_p lowers here too (dropin.py): the two triangular
solves of jax.scipy.linalg.cho_solve and lu_solve, and so of jnp.linalg.solve and inv.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import strategy as _strategy
from ._common import (as_matrix, batch_size, broadcast_batch, factor_rhs, matmul, promote,
                      resolve_params, tril, triu)
from ._compat import NOT_MAPPED, ad
from ._primitive import SOLVER_DTYPES, SolverPrimitive, ffi_solver_call

# scipy.linalg.solve_triangular's `trans` -> (transpose_a, conjugate_a): op(A) = A, A^T, A^H.
TRANS = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
          2: (True, True), "C": (True, True)}


def _jax_solve(a, b, *, lower, transpose_a, conjugate_a, unit_diagonal):
    return lax.linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=transpose_a,
                                       conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)


def served(a_shape, b_shape, dtype) -> bool:
    """Whether trsm_cuda takes a left-side solve of these operands: one batch for both (JAX's
    triangular_solve_p may broadcast a against b), a solver dtype, nothing empty."""
    return (tuple(a_shape[:-2]) == tuple(b_shape[:-2]) and np.dtype(dtype) in SOLVER_DTYPES
            and 0 not in tuple(a_shape[-2:]) + tuple(b_shape[-2:]))


def trsm_cuda(a, b, *, lower, transpose_a=False, conjugate_a=False, unit_diagonal=False,
              strategy=None, lanes=None):
    """op(A) X = B on CUDA with A's `lower` (else upper) triangle, op(A) = A, A^T or A^H
    (transpose_a, with conjugate_a), or conj(A) (conjugate_a alone); traced where the FFI
    call is lowered (the primitive's CUDA rule, dropin's)."""
    kw = dict(lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a,
              unit_diagonal=unit_diagonal)
    n = a.shape[-1]
    choice = _strategy.choose("trsm", batch_size(a, 2), (n, n), a.dtype, strategy, lanes,
                              nrhs=b.shape[-1])
    if not choice.uses_ffi or not served(a.shape, b.shape, a.dtype):
        return _jax_solve(a, b, **kw)
    conj_only = conjugate_a and not transpose_a and jnp.iscomplexobj(a)
    if conj_only:  # conj(A) X = B is A conj(X) = conj(B): cuBLAS has no conj-only op
        b = jnp.conj(b)
    transpose = (2 if conjugate_a else 1) if transpose_a else 0
    attrs = dict(lower=lower, transpose=transpose, unit_diagonal=unit_diagonal)
    result = jax.ShapeDtypeStruct(b.shape, b.dtype)
    if choice.runs_small_kernel:  # one launch for the whole batch
        x, = ffi_solver_call("jcm_trsm_small", [a, b], [result], matrix_operands={0, 1},
                             matrix_results={0}, aliases={1: 0}, **attrs)
    else:
        x, _info = ffi_solver_call(
            "jcm_trsm", [a, b], [result, jax.ShapeDtypeStruct(a.shape[:-2], np.int32)],
            matrix_operands={0, 1}, matrix_results={0}, aliases={1: 0}, choice=choice,
            **attrs)
    return jnp.conj(x) if conj_only else x


# --- trsm -------------------------------------------------------------------------------------

def _trsm_shapes(a, b, **_):
    n = a.shape[-1]
    if a.shape != (n, n) or b.shape[0] != n or a.dtype != b.dtype:
        raise ValueError(f"trsm: a {a.shape} {a.dtype}, b {b.shape} {b.dtype} do not fit "
                         "a (n, n), b (n, k) of one dtype")
    return [(b.shape, b.dtype)]


def _trsm_jax(a, b, *, strategy, lanes, **kw):
    return [_jax_solve(a, b, **kw)]


def _trsm_cuda(a, b, **params):
    return [trsm_cuda(a, b, **params)]


def _trsm_batch_rule(args, dims, **params):
    """When only b is mapped, the mapped axis becomes more right-hand sides (no copies of a)."""
    (a, b), (a_dim, b_dim) = args, dims
    if a_dim is not NOT_MAPPED:
        return None
    b = jnp.moveaxis(b, b_dim, -1)
    shape = b.shape
    x, = trsm.bind(a, b.reshape(shape[:-2] + (shape[-2] * shape[-1],)), **params)
    return [x.reshape(shape)], [len(shape) - 1]


trsm = SolverPrimitive("jcm_trsm", core_ranks=(2, 2), shape_rule=_trsm_shapes,
                       jax_impl=_trsm_jax, cuda_impl=_trsm_cuda, batch_rule=_trsm_batch_rule)


def _trsm_jvp(primals, tangents, *, lower, transpose_a, conjugate_a, unit_diagonal, **params):
    # x = op(A)^-1 b: x' = op(A)^-1 (b' - op(A') x), A' the tangent's triangle that is read
    # (the strict one for a unit diagonal), as jax.lax.linalg.triangular_solve's rule.
    (a, b), (a_dot, b_dot) = primals, tangents
    params = dict(params, lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a,
                  unit_diagonal=unit_diagonal)
    x, = trsm.bind(a, b, **params)
    rhs = []
    if type(b_dot) is not ad.Zero:
        rhs.append(b_dot)
    if type(a_dot) is not ad.Zero:
        k = 1 if unit_diagonal else 0
        op_a_dot = tril(a_dot, -k) if lower else triu(a_dot, k)
        if transpose_a:
            op_a_dot = jnp.swapaxes(op_a_dot, -1, -2)
        if conjugate_a:
            op_a_dot = jnp.conj(op_a_dot)
        rhs.append(-matmul(op_a_dot, x))
    x_dot, = trsm.bind(a, sum(rhs[1:], rhs[0]), **params)
    return [x], [x_dot]


def _trsm_transpose(cts, a, b, *, transpose_a, **params):
    # x = op(A)^-1 b is linear in b; its transpose is op(A)^-T: op(A)^T flips the transpose
    # and keeps the conjugation (A^T <-> A, A^H <-> conj(A)).
    assert ad.is_undefined_primal(b) and not ad.is_undefined_primal(a)
    ct, = cts
    if type(ct) is ad.Zero:
        return [None, ad.Zero(b.aval)]
    x, = trsm.bind(a, ct, transpose_a=not transpose_a, **params)
    return [None, x]


trsm.defjvp(_trsm_jvp)
trsm.deftranspose(_trsm_transpose)


# --- public API -------------------------------------------------------------------------------

def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True, *, strategy=None, lanes=None):
    """Like jax.scipy.linalg.solve_triangular: x with op(a) x = b, op(a) = a, a^T or a^H for
    `trans` 0 ("N"), 1 ("T") or 2 ("C"), reading a's `lower` (else upper) triangle (not its
    diagonal if unit_diagonal). b is a vector (n,) or matrices (..., n, k) whose batch dims
    broadcast with a's (a batch of vectors a.shape[:-1] still accepted, with JAX's
    FutureWarning). overwrite_b, debug and check_finite are accepted and ignored, as JAX
    does."""
    del overwrite_b, debug, check_finite
    if trans not in TRANS:
        raise ValueError(f"solve_triangular: invalid trans {trans!r}; expected 0, 1, 2, 'N', "
                         "'T' or 'C'")
    transpose_a, conjugate_a = TRANS[trans]
    a, b = promote("solve_triangular", a, b)
    a = as_matrix("solve_triangular", a, square=True)
    b, vector = factor_rhs("solve_triangular", a, b, "a")
    a, b = broadcast_batch([a, b], [2, 2])
    x, = trsm.bind(a, b, lower=bool(lower), transpose_a=transpose_a, conjugate_a=conjugate_a,
                   unit_diagonal=bool(unit_diagonal), **resolve_params(strategy, lanes))
    return x[..., 0] if vector else x
