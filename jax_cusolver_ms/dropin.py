"""enable() / disable() / enabled(): unchanged JAX code takes this package's CUDA path.

While enabled, the CUDA lowerings of JAX's own linalg primitives (lax.linalg's lu, cholesky,
eigh, svd, eig, geqrf, householder_product, ormqr, triangular_solve: what jax.numpy.linalg and
jax.scipy.linalg lower through) emit this package's calls, chosen by `auto` (or the strategy a
jax_cusolver_ms.config block in force at lowering sets). Only the CUDA lowering changes:
JAX's JVP, batching and transpose rules, and its CPU/TPU lowerings, stay JAX's. A parameter
combination this package does not implement (eigh/svd subset_by_index, svd's POLAR algorithm,
a right-side triangular solve, ...) lowers through JAX's original rule, kept from before the
switch; so does every call `auto` hands to JAX.

Switching clears JAX's caches (jax.clear_caches()): a function jitted before the switch is
traced and lowered again at its next call, under the lowerings then in force. Process-wide;
switching is serialised by a lock, and lowering in other threads sees either table whole.
"""
from __future__ import annotations

import threading
import warnings
from typing import Callable, NamedTuple

import jax

from . import _compat, _ffi, _primitive
from ._common import resolve_params
from ._compat import mlir
from .cholesky import potrf
from .eig import geev
from .eigh import syevd
from .lu import getrf
from .qr import geqrf, orgqr, ormqr_p
from .strategy import EIGH_JACOBI_MAX_N
from .svd import _algorithm_name, svd_p
from .triangular import served as _trsm_fits, trsm_cuda



def _params():
    """The strategy and lanes in force where the lowering runs: `auto` unless a
    jax_cusolver_ms.config block (or JCM_STRATEGY) says otherwise."""
    return resolve_params(None, None)


class _Redirect(NamedTuple):
    """How one of JAX's primitives lowers to this package: `served(avals_in, **params)` says
    whether this call can be (else JAX's original rule runs), `impl(*args, **params)` is traced
    in its place (JAX's operands, parameters and outputs)."""
    served: Callable
    impl: Callable


def _full_range(subset_by_index, size):
    return subset_by_index is None or tuple(subset_by_index) == (0, size)


def _single(outs):
    return outs[0]


def _lu(a):
    return getrf.cuda_impl(a, **_params())


def _cholesky(a, **_):
    # JAX's cholesky_p: the lower factor (its symmetrize_input happens before the primitive).
    return _single(potrf.cuda_impl(a, lower=True, **_params()))


def _eigh_served(avals, *, lower, sort_eigenvalues, subset_by_index, algorithm, **_):
    name = getattr(algorithm, "name", algorithm)
    return _full_range(subset_by_index, avals[0].shape[-1]) and name in (None, "QR", "JACOBI")


def _eigh(a, *, lower, sort_eigenvalues, subset_by_index, algorithm, **_):
    # Eigenvalues come ascending from every path here, as from JAX's CUDA lowering (which
    # ignores sort_eigenvalues too).
    name = getattr(algorithm, "name", algorithm)
    jacobi = a.shape[-1] <= EIGH_JACOBI_MAX_N if name is None else name == "JACOBI"
    return syevd.cuda_impl(a, lower=lower, jacobi=jacobi, **_params())


def _svd_served(avals, *, full_matrices, compute_uv, subset_by_index, algorithm, **_):
    try:
        _algorithm_name("svd", algorithm)
    except ValueError:  # POLAR (QDWH): no such path here
        return False
    return _full_range(subset_by_index, min(avals[0].shape[-2:]))


def _svd(a, *, full_matrices, compute_uv, subset_by_index, algorithm, **_):
    return svd_p.cuda_impl(a, full_matrices=full_matrices, compute_uv=compute_uv,
                           algorithm=_algorithm_name("svd", algorithm), **_params())


def _eig(a, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs=False,
         **_):
    # Left eigenvectors (no cuSOLVER routine) go to JAX's own inside geev's implementation.
    return geev.cuda_impl(a, compute_left_eigenvectors=compute_left_eigenvectors,
                          compute_right_eigenvectors=compute_right_eigenvectors,
                          enable_eigvec_derivs=enable_eigvec_derivs, **_params())


def _geqrf(a):
    return list(geqrf.cuda_impl(a, **_params()))


def _householder_product(a, taus):
    return _single(orgqr.cuda_impl(a, taus, **_params()))


def _ormqr(a, taus, c, *, left, transpose):
    return _single(ormqr_p.cuda_impl(a, taus, c, left=left, transpose=transpose, **_params()))


def _always(avals, **_):
    return True


def _trsm_served(avals, *, left_side, **_):
    a, b = avals
    return left_side and _trsm_fits(a.shape, b.shape, a.dtype)


def _trsm(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    # jax.scipy.linalg.cho_solve and lu_solve are two of these each, which dominate tiny systems
    # under XLA's trsmBatched: cho_solve float64 of 2225 4 x 4 systems, 0.061 ms unchanged and
    # enabled against 0.023 ms called directly (H200 report, random shapes).
    return trsm_cuda(a, b, lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a,
                     unit_diagonal=unit_diagonal, **_params())


REDIRECTS = {
    "lu_p": _Redirect(_always, _lu),
    "cholesky_p": _Redirect(_always, _cholesky),
    "eigh_p": _Redirect(_eigh_served, _eigh),
    "svd_p": _Redirect(_svd_served, _svd),
    "eig_p": _Redirect(_always, _eig),
    "geqrf_p": _Redirect(_always, _geqrf),
    "householder_product_p": _Redirect(_always, _householder_product),
    "ormqr_p": _Redirect(_always, _ormqr),
    "triangular_solve_p": _Redirect(_trsm_served, _trsm),
}

_lock = threading.Lock()
# primitive -> (rule, inline, own) of JAX's lowering on CUDA (own: a CUDA rule, not the rule of
# every platform), while enabled
_originals: dict = {}
_lowering = threading.local()  # depth of our rules on this thread's lowering stack


def _calls_ours(jaxpr) -> bool:
    """Whether a jaxpr (its sub-jaxprs included) binds one of this package's primitives: an FFI
    call, or a primitive a composite strategy binds (the QR-first SVD's QR and SVD of R), which
    lowers to this package's code even where each step then chooses JAX's."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name.startswith(_primitive.NAME_PREFIX):
            return True
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr's jaxpr, or a Jaxpr
                if hasattr(inner, "eqns") and _calls_ours(inner):
                    return True
    return False


def _rule(prim, redirect: _Redirect, original):
    ours = mlir.lower_fun(redirect.impl, multiple_results=prim.multiple_results)

    def rule(ctx, *args, **params):
        # Inside one of our rules, JAX's primitives are the JAX paths our implementations
        # chose (auto's "xla", left eigenvectors, ...): they lower as JAX's.
        if (getattr(_lowering, "depth", 0) or not _ffi.extension_loaded()
                or not redirect.served(ctx.avals_in, **params)):
            return original(ctx, *args, **params)
        _lowering.depth = getattr(_lowering, "depth", 0) + 1
        try:
            # Where `auto` hands the whole call to JAX, JAX's rule itself: the same kernels
            # without the NaN guard around them, which costs a pass of its own on small calls
            # (JAX's det of thousands of 8x8 matrices lost a quarter of its speed to it).
            # Unchanged code then keeps JAX's results exactly wherever none of ours runs.
            structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in ctx.avals_in]
            traced = jax.make_jaxpr(lambda *xs: redirect.impl(*xs, **params))(*structs)
            if not _calls_ours(traced.jaxpr):
                return original(ctx, *args, **params)
            return ours(ctx, *args, **params)
        finally:
            _lowering.depth -= 1

    return rule


def enable() -> None:
    """JAX's linalg primitives lower to this package on CUDA, from the next trace on."""
    with _lock:
        if _originals:
            return
        for name, redirect in REDIRECTS.items():
            prim = _compat.jax_linalg_primitive(name)
            original = _compat.cuda_lowering(prim) if prim is not None else None
            if original is None:
                warnings.warn(f"jax_cusolver_ms.enable(): JAX {jax.__version__} has no CUDA "
                              f"lowering of lax.linalg.{name}; it stays JAX's", stacklevel=2)
                continue
            _originals[prim] = original
            mlir.register_lowering(prim, _rule(prim, redirect, original[0]), platform="cuda",
                                   inline=original[1])
        jax.clear_caches()


def disable() -> None:
    """JAX's own CUDA lowerings again, from the next trace on."""
    with _lock:
        if not _originals:
            return
        for prim, (rule, inline, own) in _originals.items():
            if own:
                mlir.register_lowering(prim, rule, platform="cuda", inline=inline)
            else:
                _compat.drop_cuda_lowering(prim)
        _originals.clear()
        jax.clear_caches()


def enabled() -> bool:
    """Whether JAX's linalg primitives lower to this package on CUDA."""
    return bool(_originals)
