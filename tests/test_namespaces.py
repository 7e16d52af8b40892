"""Tests for the mirrors of JAX's linalg namespaces: jax_cusolver_ms.numpy.linalg,
jax_cusolver_ms.scipy.linalg and jax_cusolver_ms.lax.linalg.

A mirror is a literal import swap for its JAX module: the same public names, the functions the
package implements defined with JAX's signatures, every other name JAX's very object. A call
returns what JAX's returns (values within the per-dtype tolerance, shapes, dtypes, container
types and NamedTuple classes), eagerly, under jit and under grad; a call the package does not
serve is JAX's own (the package is not called; the answer, or the exception, is JAX's); a bad
call raises what JAX's raises. A spy on the package's functions (the mirrors' `_jcm_*` names)
tells which calls the package served.

On CPU the package runs JAX's own implementations under its wrappers, so this checks the
wrappers: argument mapping, fallbacks, result conventions. Dtypes rotate over the cases (all of
them on a GPU or with JCM_TEST_FULL_GRID=1).
"""

import dataclasses
import inspect
import warnings
from typing import Callable

import jax
import jax.lax.linalg as jax_lax_linalg
import jax.numpy as jnp
import jax.numpy.linalg as jax_numpy_linalg
import jax.scipy.linalg as jax_scipy_linalg
import numpy as np
import pytest

import jax_cusolver_ms as jcm
import jax_cusolver_ms.lax.linalg as lax_mirror
import jax_cusolver_ms.numpy.linalg as numpy_mirror
import jax_cusolver_ms.scipy.linalg as scipy_mirror
from conftest import DTYPES, FULL_GRID, conj_t, param_id, random_matrix, random_rhs, rtol_for
from jax_cusolver_ms._compat import backend_has_gpu

# namespace -> (the mirror, JAX's module)
MIRRORS = {
    "numpy": (numpy_mirror, jax_numpy_linalg),
    "scipy": (scipy_mirror, jax_scipy_linalg),
    "lax": (lax_mirror, jax_lax_linalg),
}

IMPLEMENTED = {
    "numpy": {"cholesky", "cond", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
              "matrix_rank", "norm", "pinv", "qr", "slogdet", "solve", "svd", "svdvals"},
    "scipy": {"cho_factor", "cho_solve", "cholesky", "det", "eigh", "inv", "lu", "lu_factor",
              "lu_solve", "qr", "qr_multiply", "solve", "solve_triangular", "svd"},
    "lax": {"cholesky", "eig", "eigh", "householder_product", "lu", "ormqr", "qr", "svd"},
}

REAL_DTYPES = (np.float32, np.float64)


def _public(names):
    return {name for name in names if not name.startswith("_")}


# --- the namespaces ---------------------------------------------------------------------------

@pytest.mark.parametrize("namespace", MIRRORS)
def test_every_public_name_of_jax_is_reachable(namespace):
    mirror, jax_module = MIRRORS[namespace]
    names = _public(dir(jax_module))
    assert _public(dir(mirror)) == names
    assert set(mirror.__all__) == names
    for name in names:
        getattr(mirror, name)
    star = {}
    exec(f"from {mirror.__name__} import *", star)
    assert _public(star) == names


@pytest.mark.parametrize("namespace", MIRRORS)
def test_the_mirror_defines_the_implemented_functions_only(namespace):
    mirror, jax_module = MIRRORS[namespace]
    defined = _public(vars(mirror))
    assert defined == IMPLEMENTED[namespace]
    for name in defined:
        assert vars(mirror)[name].__module__ == mirror.__name__
        assert vars(mirror)[name] is not getattr(jax_module, name)


def _parameters(function):
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("namespace,name", [(namespace, name) for namespace in MIRRORS
                                            for name in sorted(IMPLEMENTED[namespace])])
def test_signature_is_jax_s(namespace, name):
    mirror, jax_module = MIRRORS[namespace]
    assert _parameters(vars(mirror)[name]) == _parameters(getattr(jax_module, name))


@pytest.mark.parametrize("namespace", MIRRORS)
def test_other_names_are_jax_s_own_objects(namespace):
    mirror, jax_module = MIRRORS[namespace]
    others = _public(dir(jax_module)) - IMPLEMENTED[namespace]
    assert others
    for name in others:
        assert name not in vars(mirror), f"{name} is copied, not looked up"
        assert getattr(mirror, name) is getattr(jax_module, name), name
    with pytest.raises(AttributeError, match="no_such_function"):
        mirror.no_such_function  # noqa: B018


def test_matmul_is_jax_s_not_the_package_s():
    assert numpy_mirror.matmul is jax_numpy_linalg.matmul
    assert numpy_mirror.matmul is not jcm.matmul


def test_result_types_and_enums_are_jax_s():
    for name in ("EighImplementation", "SvdAlgorithm", "EigImplementation"):
        assert getattr(lax_mirror, name) is getattr(jax_lax_linalg, name)
    a = np.eye(2)
    for name in ("eigh", "eig", "svd", "qr", "slogdet"):
        ours, theirs = getattr(numpy_mirror, name)(a), getattr(jax_numpy_linalg, name)(a)
        assert type(ours) is type(theirs), name
        assert type(ours).__module__.startswith("jax"), name


# --- operands ---------------------------------------------------------------------------------

def _weights(shape):
    """Fixed, uneven weights: a loss made with them has no symmetry that hides a wrong
    gradient."""
    return jnp.cos(1.0 + jnp.arange(int(np.prod(shape)), dtype=np.float32)).reshape(shape)


def make_matrix(rng, shape, dtype, kind="general"):
    """A random operand: conftest's random_matrix kinds, plus
    hermitian         (A + A^H) / 2 of a general A;
    spd_upper_noise   Hermitian positive definite in its lower triangle, noise above it (what a
                      reader of the lower triangle only must not see);
    spd_lower_noise   likewise, noise below the diagonal;
    zeros.
    Empty shapes are zeros of every kind."""
    if kind == "zeros" or 0 in shape:
        return np.zeros(shape, dtype)
    if kind == "hermitian":
        a = random_matrix(rng, shape, dtype)
        return ((a + conj_t(a)) / 2).astype(dtype)
    if kind in ("spd_upper_noise", "spd_lower_noise"):
        spd = random_matrix(rng, shape, dtype, "spd")
        noise = random_matrix(rng, shape, dtype)
        keep = np.tril(np.ones(shape[-2:], bool)) if kind == "spd_upper_noise" else \
            np.triu(np.ones(shape[-2:], bool))
        return np.where(keep, spd, noise).astype(dtype)
    return random_matrix(rng, shape, dtype, kind)


def matrix(kind="general"):
    return lambda rng, shape, dtype: (make_matrix(rng, shape, dtype, kind),)


def matrix_and_rhs(kind, rhs):
    """(a, b): b a vector of a's rows ("vector"), a batch of them ("vectors": a.shape[:-1]),
    rhs matrices with `rhs` columns (an int), or a tuple: b's shape itself."""
    def make(rng, shape, dtype):
        a = make_matrix(rng, shape, dtype, kind)
        if rhs == "vector":
            b_shape = shape[-2:-1]
        elif rhs == "vectors":
            b_shape = shape[:-1]
        elif isinstance(rhs, tuple):
            b_shape = rhs
        else:
            b_shape = shape[:-1] + (rhs,)
        return a, random_rhs(rng, b_shape, dtype)
    make.label = f"b_{param_id(rhs)}"
    return make


def qr_multiply_operands(mode, vector=False):
    """(a, c): c (..., 2, m) or (m,) for mode "right", (..., k, 2) or (k,) for "left"."""
    def make(rng, shape, dtype):
        *batch, m, n = shape
        k = min(m, n)
        a = make_matrix(rng, shape, dtype)
        if vector:
            c_shape = (m,) if mode == "right" else (k,)
        else:
            c_shape = tuple(batch) + ((2, m) if mode == "right" else (k, 2))
        return a, random_rhs(rng, c_shape, dtype)
    make.label = "c_vector" if vector else ""
    return make


def reflectors(taus_count=None, c_side=None):
    """(h, taus) of a's QR in geqrf's layout (the first `taus_count` reflectors), and c for
    ormqr: (..., m, 2) for the left side, (..., 2, m) for the right."""
    def make(rng, shape, dtype):
        h, taus = jax_numpy_linalg.qr(make_matrix(rng, shape, dtype), mode="raw")
        h, taus = np.swapaxes(np.asarray(h), -1, -2), np.asarray(taus)
        if taus_count is not None:
            taus = taus[..., :taus_count]
        if c_side is None:
            return h, taus
        m = shape[-2]
        c_shape = shape[:-2] + ((m, 2) if c_side == "left" else (2, m))
        return h, taus, random_rhs(rng, c_shape, dtype)
    return make


# --- cases ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Case:
    """One call of a mirrored function: `name` in both modules of `namespace` on the operands
    `operands(rng, shape, dtype)` makes, with `kwargs`; or `call(module, *operands, **kwargs)`
    for a call that chains functions of the module. `grad`: its gradient is compared too;
    `same_warnings`: the mirror gives JAX's warnings; `rank_promotion`: the
    jax_numpy_rank_promotion option it runs under; `served`: the package computes it."""
    namespace: str
    name: str
    operands: Callable
    shapes: tuple
    kwargs: dict = dataclasses.field(default_factory=dict)
    call: Callable | None = None
    dtypes: tuple = DTYPES
    jit: bool = True
    grad: bool = False
    same_warnings: bool = True
    rank_promotion: str = "raise"
    served: bool = True
    label: str = ""

    def run(self, module, operands):
        if self.call is not None:
            return self.call(module, *operands, **self.kwargs)
        return getattr(module, self.name)(*operands, **self.kwargs)

    def modules(self):
        return MIRRORS[self.namespace]

    @property
    def gauge(self):
        """The kind of gauge freedom its vectors have (_GAUGES), or None."""
        return _GAUGES.get((self.namespace, self.name))

    def __str__(self):
        options = ",".join(f"{k}={param_id(v)}" for k, v in self.kwargs.items())
        return ".".join([self.namespace, self.name] + [x for x in (self.label, options) if x])


# A function's first case runs on every shape it takes of SQUARE or ANY_SHAPE, or of their
# short forms where another namespace's function runs the same package function on them all;
# its option variants run on one or two shapes (the dtype rotates all the same).
SQUARE = ((2, 3, 4, 4), (1, 1), (0, 0))
ANY_SHAPE = ((4, 4), (3, 5), (2, 5, 3), (1, 1), (0, 0))
SHORT_SQUARE = ((2, 4, 4), (1, 1), (0, 0))
SHORT_ANY = ((2, 4, 3), (3, 5), (1, 1), (0, 0))
TWO_SQUARE = ((4, 4), (2, 4, 4))
TWO_ANY = ((5, 3), (2, 3, 5))


def _case(namespace, name, operands, shapes, **options):
    """A Case: the options named as its fields set them, the others are the call's."""
    fields = {f.name for f in dataclasses.fields(Case)}
    own = {k: options.pop(k) for k in list(options) if k in fields}
    own.setdefault("label", getattr(operands, "label", ""))
    return Case(namespace, name, operands, shapes, kwargs=options, **own)


def _cho_solve(module, c, b, lower):
    return module.cho_solve(module.cho_factor(c, lower), b)


def _lu_solve(module, a, b, trans):
    return module.lu_solve(module.lu_factor(a), b, trans)


N, S, L = "numpy", "scipy", "lax"
_ALLOW = "allow"  # a case broadcasting a vector b over a batch: JAX rank-promotes it

CASES = [
    # jax.numpy.linalg
    _case(N, "cholesky", matrix("spd"), SQUARE, grad=True),
    _case(N, "cholesky", matrix("spd"), ((2, 4, 4),), upper=True),
    _case(N, "cholesky", matrix("spd_upper_noise"), ((4, 4),), symmetrize_input=False,
          grad=True),
    _case(N, "cond", matrix(), ((2, 3, 4, 4), (1, 1), (3, 5)), grad=True),
    _case(N, "cond", matrix(), ((5, 3),), p=-2),
    _case(N, "cond", matrix("zeros"), ((2, 2),), label="zero"),
    *[_case(N, "cond", matrix("well_conditioned"), (shape,), p=p, grad=p == 1)
      for p, shape in ((2, (4, 4)), (1, (2, 4, 4)), (np.inf, (4, 4)), ("fro", (4, 4)))],
    _case(N, "det", matrix(), SQUARE + ((2, 2), (2, 3, 3)), grad=True),
    _case(N, "eig", matrix(), SQUARE),
    _case(N, "eigh", matrix("hermitian"), SQUARE, grad=True),
    _case(N, "eigh", matrix(), TWO_SQUARE, UPLO="U", symmetrize_input=False),
    _case(N, "eigvals", matrix(), SHORT_SQUARE, grad=True),
    _case(N, "eigvalsh", matrix("hermitian"), SQUARE, grad=True),
    _case(N, "eigvalsh", matrix(), ((2, 4, 4),), UPLO="U", symmetrize_input=False),
    _case(N, "inv", matrix("well_conditioned"), SQUARE, grad=True),
    _case(N, "lstsq", matrix_and_rhs("general", "vector"), ((5, 3), (3, 5), (4, 4), (1, 1)),
          grad=True),
    _case(N, "lstsq", matrix_and_rhs("general", 2), ((5, 3),), rcond=0.3),
    _case(N, "lstsq", matrix_and_rhs("singular", 2), ((4, 4),), numpy_resid=True, jit=False),
    _case(N, "matrix_rank", matrix("singular"), ((2, 3, 4, 4), (3, 5), (1, 1))),
    _case(N, "matrix_rank", matrix(), ((3, 5),), rtol=0.3),
    _case(N, "matrix_rank", matrix("hermitian"), ((2, 4, 4),), hermitian=True),
    _case(N, "matrix_rank", matrix("hermitian"), ((4, 4),), hermitian=True, tol=0.3),
    _case(N, "norm", matrix(), ((4, 4), (3, 5), (1, 1), (0, 0)), ord=2),
    _case(N, "norm", matrix(), ((5, 3),), ord=-2),
    _case(N, "norm", matrix(), ((4, 4),), ord="nuc"),
    _case(N, "norm", matrix(), ((2, 4, 3),), ord="nuc", axis=(-1, 0), keepdims=True,
          grad=True),
    _case(N, "norm", matrix(), ((2, 4, 3),), ord=2, axis=(2, 1)),
    _case(N, "pinv", matrix(), ANY_SHAPE, grad=True),
    _case(N, "pinv", matrix(), ((3, 5),), rtol=0.3),
    _case(N, "pinv", matrix(), ((5, 3),), rcond=1e-3),
    _case(N, "pinv", matrix("hermitian"), ((2, 4, 4),), hermitian=True, grad=True),
    _case(N, "qr", matrix(), ANY_SHAPE, grad=True),
    *[_case(N, "qr", matrix(), (shape,), mode=mode, grad=mode == "complete")
      for mode, shape in (("complete", (5, 3)), ("r", (2, 5, 3)), ("raw", (3, 5)))],
    _case(N, "slogdet", matrix(), SQUARE, grad=True),
    _case(N, "slogdet", matrix(), ((4, 4),), method="lu"),
    _case(N, "slogdet", matrix(), ((4, 4), (2, 3, 4, 4)), method="qr", dtypes=REAL_DTYPES),
    _case(N, "solve", matrix_and_rhs("well_conditioned", 2), SQUARE, grad=True),
    _case(N, "solve", matrix_and_rhs("well_conditioned", "vector"), ((4, 4),)),
    _case(N, "solve", matrix_and_rhs("well_conditioned", "vector"), ((2, 3, 4, 4),),
          rank_promotion=_ALLOW),
    _case(N, "solve", matrix_and_rhs("well_conditioned", (2, 1, 4, 3)), ((2, 3, 4, 4),)),
    _case(N, "svd", matrix(), ANY_SHAPE, grad=True),
    _case(N, "svd", matrix(), ((5, 3),), full_matrices=False, grad=True),
    _case(N, "svd", matrix(), ((3, 5),), compute_uv=False),
    _case(N, "svd", matrix("hermitian"), ((2, 4, 4),), hermitian=True),
    _case(N, "svdvals", matrix(), SHORT_ANY),
    # jax.scipy.linalg
    _case(S, "cho_factor", matrix("spd_lower_noise"), SQUARE, grad=True),
    _case(S, "cho_factor", matrix("spd_upper_noise"), ((2, 4, 4),), lower=True),
    _case(S, "cholesky", matrix("spd_lower_noise"), SHORT_SQUARE),
    _case(S, "cholesky", matrix("spd_upper_noise"), ((4, 4),), lower=True),
    *[_case(S, "cho_solve", matrix_and_rhs(kind, rhs), shapes, call=_cho_solve, lower=lower,
            rank_promotion=promotion, grad=rhs == 2 and not lower)
      for lower, kind in ((False, "spd_lower_noise"), (True, "spd_upper_noise"))
      for rhs, shapes, promotion in ((2, SQUARE if lower else ((2, 4, 4),), "raise"),
                                     ("vector", ((4, 4),), "raise"),
                                     ("vector", ((2, 4, 4),), _ALLOW))
      if promotion == "raise" or not lower],
    _case(S, "cho_solve", matrix_and_rhs("spd", "vectors"), ((2, 4, 4),), call=_cho_solve,
          lower=True),
    _case(S, "det", matrix(), ((2, 4, 4),)),
    _case(S, "eigh", matrix("hermitian"), SHORT_SQUARE),
    _case(S, "eigh", matrix("hermitian"), ((2, 4, 4),), eigvals_only=True),
    _case(S, "eigh", matrix("hermitian"), ((4, 4),), lower=False, turbo=False,
          check_finite=False),
    _case(S, "inv", matrix("well_conditioned"), ((2, 4, 4),), overwrite_a=True),
    _case(S, "lu", matrix(), ((4, 4), (3, 5), (5, 3), (1, 1), (0, 0), (3, 0)), grad=True),
    _case(S, "lu", matrix(), ((4, 4), (3, 5), (5, 3)), permute_l=True),
    _case(S, "lu_factor", matrix(), SHORT_ANY),
    *[_case(S, "lu_solve", matrix_and_rhs("well_conditioned", rhs), shapes, call=_lu_solve,
            trans=trans, rank_promotion=promotion, grad=rhs == 2 and trans == 1)
      for trans in (0, 1, 2)
      for rhs, shapes, promotion in ((2, SQUARE if trans == 0 else ((2, 4, 4),), "raise"),
                                     ("vector", ((4, 4),), "raise"),
                                     ("vector", ((2, 4, 4),), _ALLOW))
      if trans == 0 or rhs == 2],
    _case(S, "lu_solve", matrix_and_rhs("well_conditioned", "vectors"), ((2, 4, 4),),
          call=_lu_solve, trans=0),
    _case(S, "qr", matrix(), ANY_SHAPE),
    _case(S, "qr", matrix(), ((5, 3),), mode="economic"),
    _case(S, "qr", matrix(), ((5, 3), (2, 3, 5)), mode="r", grad=True),
    _case(S, "qr", matrix(), ((4, 4),), overwrite_a=True, lwork=8, check_finite=False),
    _case(S, "qr_multiply", qr_multiply_operands("right"), ((4, 4), (5, 3), (2, 3, 5))),
    _case(S, "qr_multiply", qr_multiply_operands("left"), ((5, 3), (2, 3, 5)), mode="left"),
    *[_case(S, "qr_multiply", qr_multiply_operands(mode, vector), (shape,), mode=mode,
            conjugate=conjugate)
      for mode in ("right", "left")
      for vector, conjugate, shape in ((False, True, (3, 5)), (True, False, (5, 3)))],
    *[_case(S, "solve", matrix_and_rhs("well_conditioned", 2), ((2, 3, 4, 4),),
            assume_a=assume_a)
      for assume_a in ("gen", "sym", "her")],
    _case(S, "solve", matrix_and_rhs("well_conditioned", "vector"), ((4, 4),)),
    _case(S, "solve", matrix_and_rhs("well_conditioned", "vector"), ((2, 4, 4),),
          rank_promotion=_ALLOW),
    # JAX's own 'pos' solve of a batch warns that its internal cho_solve call is deprecated;
    # the call itself is not.
    _case(S, "solve", matrix_and_rhs("spd_lower_noise", 2), ((4, 4), (2, 3, 4, 4), (1, 1)),
          assume_a="pos", same_warnings=False, grad=True),
    _case(S, "solve", matrix_and_rhs("spd_upper_noise", "vectors"), ((4, 4), (2, 3, 4, 4)),
          assume_a="pos", lower=True, same_warnings=False),
    *[_case(S, "solve_triangular", matrix_and_rhs("spd", 2), shapes, trans=trans, lower=lower,
            unit_diagonal=unit, grad=True)
      for shapes, trans, lower, unit in ((SQUARE, 0, False, False), (((2, 4, 4),), 1, True, False),
                                         (((4, 4),), 2, False, True), (((2, 4, 4),), "C", True,
                                                                       True))],
    _case(S, "solve_triangular", matrix_and_rhs("spd", "vector"), ((4, 4),), trans="T"),
    _case(S, "solve_triangular", matrix_and_rhs("spd", "vector"), ((2, 4, 4),), lower=True,
          rank_promotion=_ALLOW),
    _case(S, "solve_triangular", matrix_and_rhs("spd", "vectors"), ((2, 4, 4),), trans=2),
    _case(S, "svd", matrix(), SHORT_ANY),
    _case(S, "svd", matrix(), TWO_ANY, full_matrices=False),
    _case(S, "svd", matrix(), ((3, 5),), compute_uv=False, lapack_driver="gesvd"),
    # jax.lax.linalg
    _case(L, "cholesky", matrix("spd"), SHORT_SQUARE),
    _case(L, "cholesky", matrix("spd_upper_noise"), TWO_SQUARE, symmetrize_input=False,
          grad=True),
    _case(L, "eig", matrix(), SHORT_SQUARE, compute_left_eigenvectors=False),
    _case(L, "eig", matrix(), TWO_SQUARE, compute_left_eigenvectors=False,
          compute_right_eigenvectors=False),
    _case(L, "eig", matrix(), ((4, 4),), compute_left_eigenvectors=False,
          enable_eigvec_derivs=True, grad=True),
    _case(L, "eigh", matrix("hermitian"), SHORT_SQUARE),
    _case(L, "eigh", matrix(), TWO_SQUARE, lower=False, symmetrize_input=False, grad=True),
    _case(L, "eigh", matrix("hermitian"), ((4, 4),), sort_eigenvalues=False,
          implementation=jax_lax_linalg.EighImplementation.QR),
    # householder_product and ormqr: the package differentiates them, JAX does not.
    _case(L, "householder_product", reflectors(), ((4, 4), (2, 5, 3), (1, 1), (0, 0))),
    _case(L, "householder_product", reflectors(taus_count=2), ((2, 4, 4),),
          label="fewer_taus"),
    _case(L, "lu", matrix(), SHORT_ANY),
    *[_case(L, "ormqr", reflectors(c_side="left" if left else "right"),
            ((5, 3) if left == transpose else (2, 4, 4),), left=left, transpose=transpose)
      for left in (True, False) for transpose in (False, True)],
    _case(L, "qr", matrix(), SHORT_ANY),
    _case(L, "qr", matrix(), ((2, 5, 3),), full_matrices=False),
    _case(L, "qr", matrix(), ((4, 4),), use_magma=False),
    _case(L, "svd", matrix(), SHORT_ANY),
    _case(L, "svd", matrix(), ((2, 3, 5),), full_matrices=False),
    _case(L, "svd", matrix(), ((3, 5),), compute_uv=False),
    _case(L, "svd", matrix(), ((5, 3),), full_matrices=False,
          algorithm=jax_lax_linalg.SvdAlgorithm.QR),
    _case(L, "svd", matrix(), ((4, 4),), algorithm=jax_lax_linalg.SvdAlgorithm.DEFAULT),
]


def _rotated(cases, shapes_of):
    """pytest params (case, shape, dtype): each case with each of its shapes, the dtype
    rotating over the case's dtypes (every dtype with FULL_GRID)."""
    params, turn = [], 0
    for case in cases:
        for shape in shapes_of(case):
            dtypes = case.dtypes if FULL_GRID else (case.dtypes[turn % len(case.dtypes)],)
            turn += 1
            for dtype in dtypes:
                params.append(pytest.param(case, shape, dtype,
                                           id=f"{case}-{param_id(shape)}-{param_id(dtype)}"))
    return params


# --- comparing with JAX -----------------------------------------------------------------------

def _outcome(thunk):
    """(result, None, warning categories) or (None, exception, warning categories).

    A warning JAX gives while tracing comes once per trace: a call that hits JAX's cache of
    traced functions repeats none. So a mirror's call comes first, and gives every warning
    JAX's gives (it may give one JAX's cached call does not repeat)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, error = thunk(), None
        except Exception as exc:  # noqa: BLE001  (any exception of JAX's is a valid outcome)
            result, error = None, exc
    return result, error, sorted({w.category.__name__ for w in caught})


def _column_phases(x):
    """The unit phase (the sign, if real) of each column's largest entry in magnitude."""
    top = np.take_along_axis(x, np.argmax(np.abs(x), axis=-2)[..., None, :], axis=-2)[..., 0, :]
    return np.where(top == 0, 1, top / np.where(top == 0, 1, np.abs(top)))


def _without_gauge(kind, leaves):
    """Eigen- and singular vectors are unique up to a phase each (a sign, if real), which two
    correct solvers (JAX's and the package's on a GPU) may choose differently: each vector
    is divided by the phase of its largest entry (a singular pair's right vector follows its
    left one), and the columns beyond min(m, n) of a full U (rows of Vh), a basis of the
    complement only, give way to their projector."""
    if kind in ("eigh", "lax_eigh"):
        w, v = leaves if kind == "eigh" else leaves[::-1]
        return [w, v / _column_phases(v)[..., None, :] if v.size else v]
    u, s, vh = leaves
    k = s.shape[-1]
    if s.size == 0:
        return leaves
    phases = _column_phases(u[..., :, :k])
    parts = [u[..., :, :k] / phases[..., None, :], s, vh[..., :k, :] * phases[..., :, None]]
    if u.shape[-1] > k:
        parts.append(u[..., :, k:] @ conj_t(u[..., :, k:]))
    if vh.shape[-2] > k:
        parts.append(conj_t(vh[..., k:, :]) @ vh[..., k:, :])
    return parts


# (namespace, name) -> the kind of its vectors' gauge, for _without_gauge
_GAUGES = {("numpy", "eigh"): "eigh", ("scipy", "eigh"): "eigh", ("lax", "eigh"): "lax_eigh",
           ("numpy", "svd"): "svd", ("scipy", "svd"): "svd", ("lax", "svd"): "svd"}


def assert_same_result(got, ref, dtype, shape, cond=10.0, gauge=None):
    """Same containers (NamedTuple classes, tuple or list), shapes and dtypes; integers and
    booleans equal; floats within the tolerance of the problem's size (vectors compared
    without their `gauge`, a _GAUGES kind)."""
    assert jax.tree.structure(got) == jax.tree.structure(ref)
    got, ref = ([np.asarray(x) for x in jax.tree.leaves(out)] for out in (got, ref))
    for g, r in zip(got, ref):
        assert (g.shape, g.dtype) == (r.shape, r.dtype)
    if gauge is not None and len(ref) > 1:
        got, ref = _without_gauge(gauge, got), _without_gauge(gauge, ref)
    tol = rtol_for(dtype, max(shape[-2:], default=1), cond)
    for g, r in zip(got, ref):
        if np.issubdtype(r.dtype, np.inexact):
            np.testing.assert_allclose(g, r, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(g, r)


def assert_same_outcome(ours, theirs, dtype, shape, cond=10.0, gauge=None):
    """JAX's answer, or an exception of the type JAX's raises; and JAX's warnings."""
    (got, error, got_warnings), (ref, ref_error, ref_warnings) = ours, theirs
    if ref_error is not None:
        assert error is not None, f"JAX raises {ref_error!r}, the mirror does not"
        assert isinstance(error, type(ref_error)), (error, ref_error)
    else:
        assert error is None, f"the mirror raises {error!r}, JAX does not"
        assert_same_result(got, ref, dtype, shape, cond, gauge)
    assert set(ref_warnings) <= set(got_warnings)


@pytest.fixture
def package_calls(monkeypatch):
    """The package's functions the mirrors call during the test (their `_jcm_*` names)."""
    calls = []

    def recording(name, function):
        def record(*args, **kwargs):
            calls.append(name)
            return function(*args, **kwargs)
        return record

    for mirror, _ in MIRRORS.values():
        for name, function in list(vars(mirror).items()):
            if name.startswith("_jcm_"):
                monkeypatch.setattr(mirror, name, recording(name, function))
    return calls


# --- results ----------------------------------------------------------------------------------

@pytest.mark.parametrize("case,shape,dtype", _rotated(CASES, lambda case: case.shapes))
def test_result_is_jax_s(case, shape, dtype, rng, package_calls):
    """Eagerly on every shape of a case, under jit on its first (an eager call compiles its
    operations one by one, and a later test of that shape and dtype finds them compiled; a jit
    compiles its whole function anew)."""
    mirror, jax_module = case.modules()
    operands = case.operands(rng, shape, dtype)
    with jax.numpy_rank_promotion(case.rank_promotion):
        calls = [lambda: case.run(mirror, operands)]
        if case.jit and shape == case.shapes[0]:
            calls.append(lambda: jax.jit(lambda *ops: case.run(mirror, ops))(*operands))
        outcomes = [_outcome(call) for call in calls]
        ref, ref_error, ref_warnings = _outcome(lambda: case.run(jax_module, operands))
    assert ref_error is None, f"not a case: JAX raises {ref_error!r}"
    assert package_calls, "the package served no part of the call"
    for got, error, got_warnings in outcomes:
        assert error is None, error
        assert_same_result(got, ref, dtype, shape, gauge=case.gauge)
        if case.same_warnings:
            assert set(ref_warnings) <= set(got_warnings)


def _loss(case, module):
    """A real scalar of every floating output: sum of |x|^2 with fixed weights (invariant
    under the sign and phase choices of eigen- and singular vectors)."""
    def loss(*operands):
        out = case.run(module, operands)
        floating = [x for x in jax.tree.leaves(out)
                    if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
        return sum(jnp.sum(jnp.abs(x) ** 2 * _weights(jnp.shape(x))) for x in floating)
    return loss


def _grad_shapes(case):
    return [next(s for s in case.shapes if 0 not in s)] if case.grad else []


def _agree(ours, theirs, dtype, shape):
    try:
        assert_same_outcome(ours, theirs, dtype, shape, cond=100.0)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("case,shape,dtype", _rotated(CASES, _grad_shapes))
def test_grad_is_jax_s(case, shape, dtype, rng, package_calls):
    """JAX's gradient where JAX has one; where it raises, the exception JAX's raises."""
    mirror, jax_module = case.modules()
    operands = case.operands(rng, shape, dtype)
    argnums = tuple(range(len(operands)))
    gradient = lambda module: jax.jit(jax.grad(_loss(case, module), argnums))(*operands)
    with jax.numpy_rank_promotion(case.rank_promotion):
        ours = _outcome(lambda: gradient(mirror))
        theirs = _outcome(lambda: gradient(jax_module))
        if theirs[1] is None and not _agree(ours, theirs, dtype, shape):
            # JAX's jitted gradient of cond(x, 1) has come out inf in one column, or without the
            # norm's term, on a GPU (its max's JVP matches entries of sums XLA may recompute;
            # svd._matrix_norm). Where JAX's differs from its own op-by-op gradient, the latter
            # is the reference.
            with jax.disable_jit():
                eager = _outcome(lambda: gradient(jax_module))
            if not _agree(eager, theirs, dtype, shape):
                theirs = eager
    assert package_calls, "the package served no part of the call"
    assert_same_outcome(ours, theirs, dtype, shape, cond=100.0)


def _finite(tree):
    return tree is not None and all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(tree)
                                    if np.issubdtype(np.asarray(x).dtype, np.inexact))


def test_lax_eigh_returns_vectors_then_values(rng):
    a = make_matrix(rng, (4, 4), np.float64, "hermitian")
    v, w = lax_mirror.eigh(a)
    assert v.shape == (4, 4) and w.shape == (4,)
    np.testing.assert_allclose((np.asarray(v) * np.asarray(w)) @ conj_t(np.asarray(v)), a,
                               atol=1e-12)


def test_scipy_lu_reconstructs_rectangular_input(rng):
    for shape in ((4, 4), (3, 5), (5, 3)):
        a = make_matrix(rng, shape, np.float64)
        p, l, u = scipy_mirror.lu(a)
        np.testing.assert_allclose(p @ l @ u, a, atol=1e-12)
        pl, u2 = scipy_mirror.lu(a, permute_l=True)
        np.testing.assert_allclose(pl @ u2, a, atol=1e-12)


def test_scipy_functions_take_sequences_where_jax_s_do(package_calls):
    spd = [[4.0, 1.0], [1.0, 3.0]]
    for name, args in [("lu", (spd,)), ("lu_factor", (spd,)), ("qr", (spd,)), ("svd", (spd,)),
                       ("eigh", (spd,)), ("cholesky", (spd,)), ("cho_factor", (spd,)),
                       ("qr_multiply", (spd, spd)),
                       ("solve", (spd, [1.0, 2.0], False, False, False, False, True, "pos"))]:
        package_calls.clear()
        ours = getattr(scipy_mirror, name)(*args)
        assert package_calls, name
        assert_same_result(ours, getattr(jax_scipy_linalg, name)(*args), np.float64, (2, 2))


# --- calls the package does not serve ---------------------------------------------------------

_JACOBI_SERVED = backend_has_gpu()  # JAX has Jacobi eigh and SVD on GPUs only


def _lu_solve_of_jax_s_factor(module, a, b, trans):
    return module.lu_solve(jax_scipy_linalg.lu_factor(a), b, trans)


def _cho_solve_of_jax_s_factor(module, c, b, lower):
    return module.cho_solve(jax_scipy_linalg.cho_factor(c, lower), b)


def _unserved(namespace, name, operands, shapes, served=False, **options):
    """A Case the package does not serve (unless `served`: where JAX serves it too)."""
    return _case(namespace, name, operands, shapes, served=served, **options)


UNSERVED = [
    _unserved(N, "svd", matrix(), ((4, 4),), full_matrices=False, subset_by_index=(0, 2)),
    _unserved(N, "svd", matrix("hermitian"), ((4, 4),), hermitian=True, subset_by_index=(0, 2)),
    _unserved(N, "det", matrix(), ((2, 2), (4, 4)), dtypes=(np.float16,)),
    _unserved(N, "slogdet", matrix(), ((2, 2), (4, 4)), dtypes=(np.float16,)),
    _unserved(N, "eigh", matrix("hermitian"), ((4, 4),), dtypes=(np.float16,)),
    *[_unserved(N, "norm", matrix(), ((4, 4), (2, 4, 3)), ord=ord, axis=axis)
      for ord, axis in ((None, None), ("fro", (0, 1)), (1, None), (-np.inf, None), (2, 1),
                        (-2, (0,)))],
    _unserved(N, "norm", matrix(), ((2, 4, 3),), ord=2),
    _unserved(N, "norm", matrix(), ((4, 4),), ord=2, axis=(0, 2)),
    _unserved(N, "norm", matrix(), ((4, 4),), ord="nuc", axis=(1, -1)),
    _unserved(N, "lstsq", matrix_and_rhs("general", (4, 2)), ((2, 4, 3),)),
    _unserved(N, "lstsq", matrix_and_rhs("general", "vector"), ((0, 3),)),
    # b broadcast over a batch of more dimensions: JAX refuses (raise) or warns.
    *[_unserved(N, "solve", matrix_and_rhs("well_conditioned", rhs), ((2, 4, 4),),
                rank_promotion=promotion)
      for rhs, promotion in (("vector", "raise"), ((4, 2), "warn"))],
    _unserved(S, "lu_solve", matrix_and_rhs("well_conditioned", "vector"), ((2, 4, 4),),
              call=_lu_solve_of_jax_s_factor, trans=1, rank_promotion="warn"),
    _unserved(S, "cho_solve", matrix_and_rhs("spd", "vector"), ((2, 4, 4),),
              call=_cho_solve_of_jax_s_factor, lower=True),
    _unserved(S, "solve", matrix_and_rhs("spd", "vector"), ((2, 4, 4),), assume_a="pos"),
    _unserved(S, "eigh", matrix("hermitian"), ((4, 4),), type=2),
    *[_unserved(S, "qr", matrix(), ((4, 4), (5, 3)), mode=mode, pivoting=True)
      for mode in ("full", "economic", "r")],
    _unserved(S, "qr", matrix(), ((4, 4),), mode="raw"),
    _unserved(S, "qr_multiply", qr_multiply_operands("right"), ((4, 4), (5, 3)), pivoting=True),
    _unserved(S, "lu", matrix(), ((2, 4, 4),)),
    _unserved(L, "qr", matrix(), ((4, 4), (5, 3)), pivoting=True),
    _unserved(L, "eig", matrix(), ((4, 4),)),
    _unserved(L, "eig", matrix(), ((4, 4),), compute_left_eigenvectors=False, use_magma=False),
    _unserved(L, "eig", matrix(), ((4, 4),), compute_left_eigenvectors=False,
              implementation=jax_lax_linalg.EigImplementation.LAPACK),
    _unserved(L, "eigh", matrix("hermitian"), ((4, 4),), subset_by_index=(1, 3)),
    _unserved(L, "eigh", matrix("hermitian"), ((4, 4),), served=_JACOBI_SERVED,
              implementation=jax_lax_linalg.EighImplementation.JACOBI),
    _unserved(L, "eigh", matrix("hermitian"), ((4, 4),),
              implementation=jax_lax_linalg.EighImplementation.QDWH),
    _unserved(L, "svd", matrix(), ((4, 4),), full_matrices=False, subset_by_index=(0, 2)),
    *[_unserved(L, "svd", matrix(), ((4, 4), (5, 3)), algorithm=algorithm,
                served=algorithm == jax_lax_linalg.SvdAlgorithm.JACOBI and _JACOBI_SERVED)
      for algorithm in (jax_lax_linalg.SvdAlgorithm.JACOBI, jax_lax_linalg.SvdAlgorithm.POLAR,
                        jax_lax_linalg.SvdAlgorithm.DIVIDE_AND_CONQUER)],
    _unserved(L, "lu", lambda rng, shape, dtype: (np.arange(16).reshape(shape),), ((4, 4),),
              label="int"),
    _unserved(L, "cholesky", lambda rng, shape, dtype: (np.array([[2, 1], [1, 2]]),),
              ((2, 2),), label="int"),
    _unserved(L, "householder_product", reflectors(), ((3, 5),), label="wide"),
]


@pytest.mark.parametrize("case,shape,dtype", _rotated(UNSERVED, lambda case: case.shapes))
def test_unserved_call_is_jax_s(case, shape, dtype, rng, package_calls):
    mirror, jax_module = case.modules()
    operands = case.operands(rng, shape, dtype)
    with jax.numpy_rank_promotion(case.rank_promotion):
        ours = _outcome(lambda: case.run(mirror, operands))
        theirs = _outcome(lambda: case.run(jax_module, operands))
    assert_same_outcome(ours, theirs, dtype, shape, gauge=case.gauge)
    assert bool(package_calls) == case.served, package_calls


# --- bad calls --------------------------------------------------------------------------------

_SQUARE = np.eye(3) + 0.1
_WIDE = np.ones((2, 3))
_VECTOR = np.ones(3)

# (namespace, label, call(module)): every one raises in JAX's module.
BAD_CALLS = [
    (N, "det_vector", lambda m: m.det(_VECTOR)),
    (N, "det_wide", lambda m: m.det(_WIDE)),
    (N, "det_list", lambda m: m.det(_SQUARE.tolist())),
    (N, "inv_wide", lambda m: m.inv(_WIDE)),
    (N, "slogdet_wide", lambda m: m.slogdet(_WIDE)),
    (N, "slogdet_method", lambda m: m.slogdet(_SQUARE, method="cholesky")),
    (N, "slogdet_qr_complex", lambda m: m.slogdet(_SQUARE + 1j, method="qr")),
    (N, "solve_shapes", lambda m: m.solve(_SQUARE, np.ones(4))),
    (N, "solve_batched_vector", lambda m: m.solve(np.stack([_SQUARE] * 2), np.ones((2, 3)))),
    (N, "solve_scalar_b", lambda m: m.solve(_SQUARE, 1.0)),
    (N, "cholesky_vector", lambda m: m.cholesky(_VECTOR)),
    (N, "cholesky_wide", lambda m: m.cholesky(_WIDE)),
    (N, "eigh_uplo", lambda m: m.eigh(_SQUARE, UPLO="X")),
    (N, "eigvalsh_uplo", lambda m: m.eigvalsh(_SQUARE, UPLO="X")),
    (N, "eig_wide", lambda m: m.eig(_WIDE)),
    (N, "eigvals_list", lambda m: m.eigvals(_SQUARE.tolist())),
    (N, "qr_mode", lambda m: m.qr(_SQUARE, mode="economic")),
    (N, "qr_vector", lambda m: m.qr(_VECTOR)),
    (N, "svd_list", lambda m: m.svd(_SQUARE.tolist())),
    (N, "svd_vector", lambda m: m.svd(_VECTOR)),
    (N, "svdvals_vector", lambda m: m.svdvals(_VECTOR)),
    (N, "cond_vector", lambda m: m.cond(_VECTOR)),
    (N, "cond_empty", lambda m: m.cond(np.ones((0, 0)))),
    (N, "cond_wide_p1", lambda m: m.cond(_WIDE, 1)),
    (N, "cond_p", lambda m: m.cond(_SQUARE, 3)),
    (N, "norm_ord", lambda m: m.norm(_SQUARE, "spectral")),
    (N, "norm_axes", lambda m: m.norm(np.ones((2, 2, 2)), 2)),
    (N, "norm_axis_range", lambda m: m.norm(_SQUARE, 2, (0, 2))),
    (N, "lstsq_rows", lambda m: m.lstsq(_SQUARE, np.ones(4))),
    (N, "lstsq_3d", lambda m: m.lstsq(np.ones((2, 3, 3)), np.ones(2))),
    (N, "lstsq_scalar", lambda m: m.lstsq(np.float64(1.0), np.ones(1))),
    (N, "pinv_rtol_and_rcond", lambda m: m.pinv(_SQUARE, 0.1, rcond=0.1)),
    (N, "matrix_rank_rtol_and_tol", lambda m: m.matrix_rank(_SQUARE, 0.1, tol=0.1)),
    (N, "matrix_rank_empty", lambda m: m.matrix_rank(np.ones((0, 0)))),
    (S, "solve_assume_a", lambda m: m.solve(_SQUARE, _VECTOR, assume_a="tri")),
    (S, "solve_pos_shapes", lambda m: m.solve(_SQUARE, np.ones(4), assume_a="pos")),
    (S, "solve_list", lambda m: m.solve(_SQUARE.tolist(), _VECTOR)),
    (S, "det_list", lambda m: m.det(_SQUARE.tolist())),
    (S, "lu_batch", lambda m: m.lu(np.stack([_SQUARE] * 2))),
    (S, "lu_vector", lambda m: m.lu(_VECTOR)),
    (S, "lu_factor_vector", lambda m: m.lu_factor(_VECTOR)),
    (S, "lu_solve_trans", lambda m: m.lu_solve(m.lu_factor(_SQUARE), _VECTOR, trans=3)),
    (S, "lu_solve_rows", lambda m: m.lu_solve(m.lu_factor(_SQUARE), np.ones(4))),
    (S, "lu_solve_float_pivots", lambda m: m.lu_solve((_SQUARE, np.zeros(3)), _VECTOR)),
    (S, "cho_solve_rows", lambda m: m.cho_solve((_SQUARE, False), np.ones((4, 2)))),
    (S, "cholesky_wide", lambda m: m.cholesky(_WIDE)),
    (S, "qr_mode", lambda m: m.qr(_SQUARE, mode="reduced")),
    (S, "qr_multiply_mode", lambda m: m.qr_multiply(_SQUARE, _SQUARE, mode="both")),
    (S, "qr_multiply_shapes", lambda m: m.qr_multiply(_SQUARE, np.ones((2, 4)))),
    (S, "qr_multiply_left_shapes", lambda m: m.qr_multiply(_SQUARE, np.ones((4, 2)),
                                                            mode="left")),
    (S, "eigh_wide", lambda m: m.eigh(_WIDE)),
    (S, "svd_vector", lambda m: m.svd(_VECTOR)),
    (L, "lu_vector", lambda m: m.lu(_VECTOR)),
    (L, "lu_list", lambda m: m.lu(_SQUARE.tolist())),
    (L, "lu_int", lambda m: m.lu(np.eye(3, dtype=np.int32))),
    (L, "qr_vector", lambda m: m.qr(_VECTOR)),
    (L, "qr_int", lambda m: m.qr(np.eye(3, dtype=np.int32))),
    (L, "eigh_wide", lambda m: m.eigh(_WIDE)),
    (L, "eigh_wide_unsymmetrized", lambda m: m.eigh(_WIDE, symmetrize_input=False)),
    (L, "eig_wide", lambda m: m.eig(_WIDE, compute_left_eigenvectors=False)),
    (L, "eig_list", lambda m: m.eig(_SQUARE.tolist(), compute_left_eigenvectors=False)),
    (L, "svd_vector", lambda m: m.svd(_VECTOR)),
    (L, "svd_int", lambda m: m.svd(np.eye(3, dtype=np.int32))),
    (L, "cholesky_wide", lambda m: m.cholesky(_WIDE)),
    (L, "cholesky_list", lambda m: m.cholesky(_SQUARE.tolist())),
    (L, "householder_product_wide", lambda m: m.householder_product(_WIDE, np.ones(2))),
    (L, "householder_product_taus", lambda m: m.householder_product(_SQUARE, np.ones(4))),
    (L, "householder_product_mixed", lambda m: m.householder_product(
        _SQUARE.astype(np.float32), np.ones(2))),
    (L, "ormqr_rows", lambda m: m.ormqr(_SQUARE, np.ones(2), np.ones((4, 2)))),
    (L, "ormqr_columns", lambda m: m.ormqr(_SQUARE, np.ones(2), np.ones((2, 4)), left=False)),
    (L, "ormqr_batch_ranks", lambda m: m.ormqr(_SQUARE, np.ones(2), np.ones((2, 3, 2)))),
]


@pytest.mark.parametrize("namespace,call", [pytest.param(ns, call, id=f"{ns}.{label}")
                                            for ns, label, call in BAD_CALLS])
def test_bad_call_raises_jax_s_exception(namespace, call):
    mirror, jax_module = MIRRORS[namespace]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as theirs:
            call(jax_module)
        with pytest.raises(type(theirs.value)):
            call(mirror)
