"""Loads the extension: the CUDA module (its FFI targets registered with XLA once, at import)
and the CUDA-free module of its limits.

`limits` is `_jcm_limits` (ffi/core/limits_module.cc): the strategies, each routine's limits and
the JCM_* settings, defined once in C++ (ffi/core/limits.h). It imports wherever the package was
built, also without the CUDA libraries; None in a source checkout without a build, where every op
runs JAX's own implementation.
"""
from __future__ import annotations

import atexit

import jax

from . import _compat

try:
    from . import _jcm_limits as limits
except ImportError:  # a source checkout without a build
    limits = None

try:
    from . import _jcm_ffi as _ext
    import_error: Exception | None = None
except ImportError as exc:  # no extension build, or its CUDA libraries are missing
    _ext = None
    import_error = exc

if _ext is not None:
    for _name, _capsule in _ext.registrations().items():
        jax.ffi.register_ffi_target(_name, _capsule, platform="CUDA")
    # Join the lane workers while the CUDA runtime is still alive. Safe with calls in flight on
    # other threads: it waits a bounded time for them, and frees nothing they still use.
    atexit.register(_ext.shutdown)


def extension_loaded() -> bool:
    return _ext is not None


def gpu_available() -> bool:
    """True when the CUDA extension loaded and JAX has a GPU backend: ops run through lanes."""
    return _ext is not None and _compat.backend_has_gpu()


def library_versions() -> dict:
    """cuSOLVER / cuBLAS / CUDA runtime / driver versions the extension sees ({} without it)."""
    return dict(_ext.library_versions()) if _ext is not None else {}


def lane_count(device: int = 0) -> int:
    """Lanes created so far in the pool of `device` (0 before its first call)."""
    return _ext.lane_count(device) if _ext is not None else 0


def shutdown() -> None:
    """Closes the lane pools: later calls fail with "lanes are shut down (interpreter exit)".

    Waits a few seconds at most for calls in flight to return their lanes, then destroys the
    idle lanes' worker threads, streams and handles; lanes still in use are left alone. Runs at
    interpreter exit; calling it again is harmless. A no-op without the extension.
    """
    if _ext is not None:
        _ext.shutdown()
