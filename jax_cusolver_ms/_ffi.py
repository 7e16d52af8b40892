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
        # Each call takes any number of matrices (a shard of the batch as well as all of it):
        # XLA may split a call with a sharded batch (_primitive.ffi_call_p).
        _compat.register_batch_partitionable(_name)
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


_RESOURCE_KEYS = ("lanes", "leased_lanes", "workspace_cache_entries", "host_workspace_bytes",
                  "matmul_plans", "matmul_handles", "timer_events")


def resource_counts(device: int = 0) -> dict:
    """What the extension holds for `device`, for leak tests (counts must stay flat over calls).

    Keys: lanes (in the pool), leased_lanes (in use by calls now), workspace_cache_entries
    (cached workspace queries), host_workspace_bytes (summed over the lanes), matmul_plans,
    matmul_handles (cuBLASLt and cuBLAS), timer_events (timing.py's stamps), shut_down (bool:
    shutdown() has run). All zero, and shut_down False, without the extension.
    """
    if _ext is None:
        return {**{key: 0 for key in _RESOURCE_KEYS}, "shut_down": False}
    return dict(_ext.resource_counts(device))


def inject_failure(name: str, count: int = 1) -> None:
    """Test hook: the next `count` library status checks whose routine name contains `name` fail.

    `name` is matched as a substring of the checked routine, e.g. "getrf", "cusolverDnXgesvd",
    "cublas", "cudaMemcpyAsync". A matching cuSOLVER check reports CUSOLVER_STATUS_INTERNAL_ERROR,
    a cuBLAS one CUBLAS_STATUS_INTERNAL_ERROR, a CUDA one cudaErrorUnknown; the error raised in
    Python names the routine and says "(injected)". The call really ran; only its status is
    replaced. count=0 disarms. Process-wide (every thread and device). Raises RuntimeError
    without the extension.
    """
    if _ext is None:
        raise RuntimeError("jax_cusolver_ms: the CUDA extension is not loaded") from import_error
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    _ext.inject_failure(name, int(count))
