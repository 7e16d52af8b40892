"""Conventions every public function shares, checked against JAX's own functions:

- dtype promotion: integer, bool and mixed-dtype operands promote as jnp.linalg /
  jax.scipy.linalg promote them (promote_dtypes_inexact), with x64 off and on; matmul keeps
  jnp.matmul's rule (integer products stay integer);
- error messages name the function the user called;
- cho_factor's and cholesky(symmetrize_input=False)'s gradients are JAX's, for a parameter
  that is not symmetric;
- strategy= and lanes= are accepted by every op that runs a solver.

On CPU every op runs JAX's own implementation, so results match JAX's to rounding.
"""

import inspect

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax._src.numpy.util import promote_dtypes_inexact  # JAX's own rule: the reference

import jax_cusolver_ms as jcm
from conftest import lowered_text

# A symmetric positive definite, diagonally dominant integer matrix (every op is defined and
# well conditioned on it) and an integer right-hand side.
_SPD = np.array([[5, 1, 0, 1], [1, 4, 1, 0], [0, 1, 3, 1], [1, 0, 1, 4]])
_RHS = np.array([[1, 2], [0, 1], [2, 1], [1, 0]])
# bool matrices: nonsingular (unit upper triangular), symmetric with distinct eigenvalues
# (tridiagonal ones), and positive definite (the identity).
_BOOL = {"general": np.triu(np.ones((4, 4), bool)),
         "symmetric": np.abs(np.subtract.outer(np.arange(4), np.arange(4))) <= 1,
         "spd": np.eye(4, dtype=bool)}


def _matrix(dtype, kind="general"):
    if np.dtype(dtype) == np.bool_:
        return _BOOL[kind]
    return _SPD.astype(dtype)


def _rhs(dtype):
    return (_RHS > 0) if np.dtype(dtype) == np.bool_ else _RHS.astype(dtype)


def _promoted(*args):
    """The operands as JAX's linalg functions see them (for lax-style references, which do not
    promote, and for LDL, which JAX lacks)."""
    return promote_dtypes_inexact(*(jnp.asarray(x) for x in args))


def _lax_reference(fn):
    return lambda *args: fn(*_promoted(*args))


def _svd_invariants(usv):
    """What an SVD fixes: singular vectors are unique only up to sign (and within repeated
    values), so compare the values and U diag(s) V^H, whose dtypes are the vectors'."""
    u, sv, vh = usv
    return sv, (u * sv[..., None, :].astype(u.dtype)) @ vh


def _eigh_invariants(wv):
    w, v = wv
    return w, (v * w[..., None, :].astype(v.dtype)) @ jnp.swapaxes(v, -1, -2).conj()


def _assert_same(got, ref, what):
    got_leaves, ref_leaves = jax.tree.leaves(got), jax.tree.leaves(ref)
    assert len(got_leaves) == len(ref_leaves), what
    for g, r in zip(got_leaves, ref_leaves):
        g, r = np.asarray(g), np.asarray(r)
        assert (g.shape, g.dtype) == (r.shape, r.dtype), (what, g.shape, g.dtype, r.shape, r.dtype)
        if np.issubdtype(r.dtype, np.inexact):
            tol = 1e-4 if np.finfo(r.dtype).bits <= 32 else 1e-10
            np.testing.assert_allclose(g, r, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(g, r, err_msg=what)


# --- promotion: one operand -----------------------------------------------------------------

# name -> (ours, JAX's, kind of matrix)
ONE_OPERAND = {
    "det": (jcm.det, jnp.linalg.det, "general"),
    "slogdet": (lambda a: tuple(jcm.slogdet(a)), lambda a: tuple(jnp.linalg.slogdet(a)),
                "general"),
    "inv": (jcm.inv, jnp.linalg.inv, "general"),
    "lu_factor": (jcm.lu_factor, jsl.lu_factor, "general"),
    "lu": (jcm.lu, _lax_reference(jax.lax.linalg.lu), "general"),
    "cholesky": (jcm.cholesky, jnp.linalg.cholesky, "spd"),
    "cholesky_upper": (lambda a: jcm.cholesky(a, upper=True),
                       lambda a: jnp.linalg.cholesky(a, upper=True), "spd"),
    "cho_factor": (lambda a: jcm.cho_factor(a)[0], lambda a: jsl.cho_factor(a)[0], "spd"),
    "cho_factor_lower": (lambda a: jcm.cho_factor(a, True)[0],
                         lambda a: jsl.cho_factor(a, True)[0], "spd"),
    "qr": (lambda a: tuple(jcm.qr(a)), lambda a: tuple(jnp.linalg.qr(a)), "general"),
    "qr_complete": (lambda a: tuple(jcm.qr(a[:, :3], mode="complete")),
                    lambda a: tuple(jnp.linalg.qr(a[:, :3], mode="complete")), "general"),
    "qr_r": (lambda a: jcm.qr(a, mode="r"), lambda a: jnp.linalg.qr(a, mode="r"), "general"),
    "svd": (lambda a: _svd_invariants(jcm.svd(a)), lambda a: _svd_invariants(jnp.linalg.svd(a)),
            "general"),
    "svd_hermitian": (lambda a: _svd_invariants(jcm.svd(a, hermitian=True)),
                      lambda a: _svd_invariants(jnp.linalg.svd(a, hermitian=True)), "symmetric"),
    "svdvals": (jcm.svdvals, jnp.linalg.svdvals, "general"),
    "eigh": (lambda a: _eigh_invariants(jcm.eigh(a)),
             lambda a: _eigh_invariants(jnp.linalg.eigh(a)), "symmetric"),
    "eigvalsh": (jcm.eigvalsh, jnp.linalg.eigvalsh, "symmetric"),
    "lax_eigh": (lambda a: _eigh_invariants(jcm.lax_eigh(a)[::-1]),
                 lambda a: _eigh_invariants(_lax_reference(jax.lax.linalg.eigh)(a)[::-1]),
                 "symmetric"),
    "eig": (lambda a: tuple(jcm.eig(a)), lambda a: tuple(jnp.linalg.eig(a)), "general"),
    "eigvals": (jcm.eigvals, jnp.linalg.eigvals, "general"),
    "lax_eig": (lambda a: tuple(jcm.lax_eig(a)),
                lambda a: tuple(_lax_reference(jax.lax.linalg.eig)(a)), "general"),
    "pinv": (jcm.pinv, jnp.linalg.pinv, "general"),
    "matrix_rank": (jcm.matrix_rank, jnp.linalg.matrix_rank, "general"),
    "norm_2": (lambda a: jcm.norm(a, 2), lambda a: jnp.linalg.norm(a, 2), "general"),
    "norm_-2": (lambda a: jcm.norm(a, -2), lambda a: jnp.linalg.norm(a, -2), "general"),
    "norm_nuc": (lambda a: jcm.norm(a, "nuc"), lambda a: jnp.linalg.norm(a, "nuc"), "general"),
    "norm_fro": (jcm.norm, jnp.linalg.norm, "general"),
    "cond": (jcm.cond, jnp.linalg.cond, "general"),
    "cond_1": (lambda a: jcm.cond(a, 1), lambda a: jnp.linalg.cond(a, 1), "general"),
    "ldl_factor": (lambda a: tuple(jcm.ldl_factor(a)),
                   lambda a: tuple(jcm.ldl_factor(*_promoted(a))), "symmetric"),
}
# (dtype, x64): int32 is float32 with x64 too, int64 float64 (it is int32 without x64).
ONE_OPERAND_DTYPES = [(np.int32, False), (np.bool_, False), (np.int32, True), (np.int64, True)]


def _dtypes_id(case):
    *dtypes, x64 = case
    return "-".join(np.dtype(d).name for d in dtypes) + ("-x64" if x64 else "-x32")


@pytest.mark.parametrize("dtype,x64", ONE_OPERAND_DTYPES, ids=map(_dtypes_id, ONE_OPERAND_DTYPES))
@pytest.mark.parametrize("name", sorted(ONE_OPERAND))
def test_one_operand_promotes_as_jax(name, dtype, x64):
    ours, theirs, kind = ONE_OPERAND[name]
    with jax.enable_x64(x64):
        a = _matrix(dtype, kind)
        _assert_same(ours(a), theirs(a), f"{name}({np.dtype(dtype).name})")


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("name", ["inv", "lu_factor", "cholesky", "svd", "eigh", "eig"])
def test_promotion_under_jit(name, x64):
    ours, theirs, kind = ONE_OPERAND[name]
    with jax.enable_x64(x64):
        a = _matrix(np.int32, kind)
        _assert_same(jax.jit(ours)(a), theirs(a), f"jit({name})")


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_python_ints_follow_the_default_float(x64):
    # A nested list of Python ints is int64 with x64 (-> float64) and int32 without (float32).
    # jax.scipy.linalg's ops take lists; jnp.linalg's refuse them, and so do ours.
    with jax.enable_x64(x64):
        a = _SPD.tolist()
        lu, _ = jcm.lu_factor(a)
        assert lu.dtype == jax.scipy.linalg.lu_factor(a)[0].dtype
        assert lu.dtype == (np.float64 if x64 else np.float32)
        with pytest.raises(TypeError, match="^inv: requires ndarray"):
            jcm.inv(a)
        with pytest.raises(TypeError):
            jnp.linalg.inv(a)


# --- promotion: several operands --------------------------------------------------------------

def _lu_solve_case(trans):
    pivots = np.arange(4, dtype=np.int32)  # JAX's lu_solve takes int32 pivots only
    return (lambda a, b: jcm.lu_solve((a, pivots), b, trans),
            lambda a, b: jsl.lu_solve((a, pivots), b, trans))


# name -> (ours, JAX's, kind of the first operand); operands (a, b) with b (4, 2) or as noted.
TWO_OPERANDS = {
    "solve": (jcm.solve, jnp.linalg.solve, "general"),
    "solve_vector": (lambda a, b: jcm.solve(a, b[:, 0]),
                     lambda a, b: jnp.linalg.solve(a, b[:, 0]), "general"),
    "lu_solve": (*_lu_solve_case(0), "general"),
    "lu_solve_trans": (*_lu_solve_case(2), "general"),
    "cho_solve": (lambda a, b: jcm.cho_solve((a, True), b),
                  lambda a, b: jsl.cho_solve((a, True), b), "spd"),
    "cho_solve_upper": (lambda a, b: jcm.cho_solve((a, False), b[:, 0]),
                        lambda a, b: jsl.cho_solve((a, False), b[:, 0]), "spd"),
    "lstsq": (jcm.lstsq, jnp.linalg.lstsq, "general"),
    "qr_multiply": (lambda a, b: jcm.qr_multiply(a, b.T),
                    lambda a, b: jsl.qr_multiply(a, b.T), "general"),
    "qr_multiply_left": (lambda a, b: jcm.qr_multiply(a, b, mode="left"),
                         lambda a, b: jsl.qr_multiply(a, b, mode="left"), "general"),
    "householder_product": (lambda a, b: jcm.householder_product(a, b[:, 0]),
                            lambda a, b: jax.lax.linalg.householder_product(
                                *_promoted(a, b[:, 0])), "general"),
    "ormqr": (lambda a, b: jcm.ormqr(a[:, :2], b[:2, 0], b),
              lambda a, b: jax.lax.linalg.ormqr(*_promoted(a[:, :2], b[:2, 0], b)), "general"),
    "ldl_solve": (lambda a, b: jcm.ldl_solve(a, np.arange(1, 5), b),
                  lambda a, b: jcm.ldl_solve(_promoted(a, b)[0], np.arange(1, 5),
                                             _promoted(a, b)[1]), "spd"),
    "matmul": (jcm.matmul, jnp.matmul, "general"),
}
# (dtype of the first operand, of the second, x64)
MIXED = [(np.float32, np.int32, False), (np.int32, np.float32, True),
         (np.int32, np.int32, False), (np.bool_, np.int8, True), (np.int32, np.float64, False),
         (np.int32, np.float64, True), (np.uint8, np.complex64, False),
         (np.float64, np.bool_, True), (np.int64, np.int16, True)]


@pytest.mark.parametrize("dtype_a,dtype_b,x64", MIXED, ids=map(_dtypes_id, MIXED))
@pytest.mark.parametrize("name", sorted(TWO_OPERANDS))
def test_two_operands_promote_as_jax(name, dtype_a, dtype_b, x64):
    ours, theirs, kind = TWO_OPERANDS[name]
    with jax.enable_x64(x64):
        a, b = _matrix(dtype_a, kind), _rhs(dtype_b)
        _assert_same(ours(a, b), theirs(a, b), f"{name}({_dtypes_id((dtype_a, dtype_b, x64))})")


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.uint8])
def test_integer_matmul_keeps_jnp_matmul_dtype_with_bias_and_transposes(dtype):
    a, b = _matrix(dtype)[:, :3], _rhs(dtype)
    bias = np.ones(2, dtype)
    _assert_same(jcm.matmul(a, b, transpose_a=True, bias=bias),
                 jnp.matmul(a.T, b) + bias[None, :], "matmul with bias")
    _assert_same(jax.vmap(jcm.matmul, (0, None))(np.stack([a.T, a.T]), b),
                 jnp.matmul(np.stack([a.T, a.T]), b), "vmap(matmul)")


def test_integer_matmul_lowers_to_xla_dot_on_cuda(claim_extension):
    floats = lowered_text(lambda a: jcm.matmul(a, a), (4, 4), np.float32, "cuda")
    ints = lowered_text(lambda a: jcm.matmul(a, a), (4, 4), np.int32, "cuda")
    assert "jcm_matmul" in floats
    assert "jcm_matmul" not in ints and "dot_general" in ints


# --- error messages name the function called --------------------------------------------------

def _square(dtype, n=4):
    return (np.eye(n) * 2).astype(dtype)


# name -> call(matrix, **keywords); each gets a float16 matrix (no solver's dtype) and a vector.
CALLS = {
    "lu": lambda a, **kw: jcm.lu(a, **kw),
    "lu_factor": lambda a, **kw: jcm.lu_factor(a, **kw),
    "lu_solve": lambda a, **kw: jcm.lu_solve((a, np.zeros(a.shape[-1:], np.int32)), a, **kw),
    "solve": lambda a, **kw: jcm.solve(a, a, **kw),
    "inv": lambda a, **kw: jcm.inv(a, **kw),
    "det": lambda a, **kw: jcm.det(a, **kw),
    "slogdet": lambda a, **kw: jcm.slogdet(a, **kw),
    "cholesky": lambda a, **kw: jcm.cholesky(a, **kw),
    "cho_factor": lambda a, **kw: jcm.cho_factor(a, **kw),
    "cho_solve": lambda a, **kw: jcm.cho_solve((a, True), a, **kw),
    "qr": lambda a, **kw: jcm.qr(a, **kw),
    "householder_product": lambda a, **kw: jcm.householder_product(a, a[..., 0], **kw),
    "ormqr": lambda a, **kw: jcm.ormqr(a, a[..., 0], a, **kw),
    "qr_multiply": lambda a, **kw: jcm.qr_multiply(a, a, **kw),
    "svd": lambda a, **kw: jcm.svd(a, **kw),
    "svdvals": lambda a, **kw: jcm.svdvals(a, **kw),
    "pinv": lambda a, **kw: jcm.pinv(a, **kw),
    "matrix_rank": lambda a, **kw: jcm.matrix_rank(a, **kw),
    "lstsq": lambda a, **kw: jcm.lstsq(a, a, **kw),
    "norm": lambda a, **kw: jcm.norm(a, 2, axis=(-2, -1), **kw),
    "cond": lambda a, **kw: jcm.cond(a, **kw),
    "eigh": lambda a, **kw: jcm.eigh(a, **kw),
    "eigvalsh": lambda a, **kw: jcm.eigvalsh(a, **kw),
    "lax_eigh": lambda a, **kw: jcm.lax_eigh(a, **kw),
    "eig": lambda a, **kw: jcm.eig(a, **kw),
    "eigvals": lambda a, **kw: jcm.eigvals(a, **kw),
    "lax_eig": lambda a, **kw: jcm.lax_eig(a, **kw),
    "ldl_factor": lambda a, **kw: jcm.ldl_factor(a, **kw),
    "ldl_solve": lambda a, **kw: jcm.ldl_solve(a, np.ones(a.shape[-1:], np.int32), a, **kw),
}
# These read a vector as something else (a vector norm, a rank-1 input) or raise JAX's
# own message for it (lstsq's "two-dimensional", as jnp).
_VECTOR_IS_VALID = {"norm", "matrix_rank", "lstsq"}


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_unsupported_dtype_names_the_function(name, dtype):
    with pytest.raises(TypeError) as info:
        CALLS[name](_square(dtype))
    message = str(info.value)
    assert message.startswith(f"{name}: "), message
    assert np.dtype(dtype).name in message, message


@pytest.mark.parametrize("name", sorted(set(CALLS) - _VECTOR_IS_VALID))
def test_wrong_rank_names_the_function(name):
    with pytest.raises(ValueError) as info:  # also a TypeError (_common.RankError)
        CALLS[name](np.ones(4, np.float32))
    assert str(info.value).startswith(f"{name}: "), str(info.value)


@pytest.mark.parametrize("name,call", [
    ("svdvals", lambda: jcm.svdvals(_square(np.float32), algorithm="fast")),
    ("norm", lambda: jcm.norm(_square(np.float16), 2)),
    ("eigvalsh", lambda: jcm.eigvalsh(_square(np.float32), "X")),
    ("eigvalsh", lambda: jcm.eigvalsh(_square(np.float32), implementation="qdwh")),
    ("lax_eigh", lambda: jcm.lax_eigh(_square(np.float32), implementation="qdwh")),
    ("lax_eigh", lambda: jcm.lax_eigh(np.ones((3, 4), np.float32))),
    ("eigvals", lambda: jcm.eigvals(np.ones((3, 4), np.float32))),
    ("lu_factor", lambda: jcm.lu_factor(np.ones((2, 2), np.float16))),
    ("cond", lambda: jcm.cond(_square(np.float16), 1)),
    ("matmul", lambda: jcm.matmul(_square(jnp.float8_e4m3fn), _square(jnp.float8_e4m3fn))),
], ids=lambda x: x if isinstance(x, str) else "")
def test_option_and_shape_errors_name_the_function(name, call):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert str(info.value).startswith(f"{name}: "), str(info.value)


# --- cho_factor's gradient is JAX's -------------------------------------------------------------

def _unsymmetric_parameter(dtype, n=5, seed=0):
    """An SPD matrix plus a perturbation that is not Hermitian: the two triangles differ."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((2, n, n))
    w = rng.standard_normal((2, n, n))
    if np.issubdtype(dtype, np.complexfloating):
        g, w = g + 1j * rng.standard_normal(g.shape), w + 1j * rng.standard_normal(w.shape)
    spd = g @ np.conj(np.swapaxes(g, -1, -2)) / n + np.eye(n)
    return (spd + 0.3 * w).astype(dtype), rng.standard_normal((2, n, n)).astype(dtype)


def _loss(factor, weights):
    def loss(p):
        c = factor(p)
        return jnp.sum(jnp.real(weights * c)) + jnp.sum(jnp.abs(c) ** 2)
    return loss


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
def test_cho_factor_grad_matches_jax(dtype, lower):
    p, weights = _unsymmetric_parameter(dtype)
    got = jax.grad(_loss(lambda x: jcm.cho_factor(x, lower)[0], weights))(p)
    ref = jax.grad(_loss(lambda x: jsl.cho_factor(x, lower)[0], weights))(p)
    _assert_same(got, ref, f"grad cho_factor lower={lower}")
    got = jax.jit(jax.grad(_loss(lambda x: jcm.cho_factor(x, lower)[0], weights)))(p)
    _assert_same(got, ref, f"jit(grad) cho_factor lower={lower}")


@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_unsymmetrized_cholesky_grad_matches_jax(upper):
    p, weights = _unsymmetric_parameter(np.float64, seed=1)
    ours = lambda x: jcm.cholesky(x, upper, symmetrize_input=False)
    theirs = lambda x: jnp.linalg.cholesky(x, upper=upper, symmetrize_input=False)
    _assert_same(jax.grad(_loss(ours, weights))(p), jax.grad(_loss(theirs, weights))(p),
                 "grad cholesky(symmetrize_input=False)")
    _assert_same(jax.jacfwd(ours)(p[0]), jax.jacfwd(theirs)(p[0]),
                 "jacfwd cholesky(symmetrize_input=False)")


# --- strategy= and lanes= ---------------------------------------------------------------------

# matmul is one cuBLASLt call on XLA's stream: no lanes and no strategy to choose.
_NO_STRATEGY = {"matmul"}


@pytest.mark.parametrize("name", sorted(set(CALLS) | _NO_STRATEGY))
def test_ops_take_strategy_and_lanes(name):
    params = inspect.signature(getattr(jcm, name)).parameters
    has = {"strategy", "lanes"} <= set(params)
    assert has != (name in _NO_STRATEGY), name
    if has:
        assert all(params[k].kind is inspect.Parameter.KEYWORD_ONLY for k in ("strategy", "lanes"))
        CALLS[name](_square(np.float32), strategy="looped", lanes=2)
        with pytest.raises(ValueError, match="strategy"):  # read, not swallowed
            CALLS[name](_square(np.float32), strategy="fastest")
