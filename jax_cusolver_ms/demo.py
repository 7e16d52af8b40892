"""`python -m jax_cusolver_ms.demo`: runs each op once on a small batch, checks it against
jax.numpy.linalg, and prints where it ran (GPU lanes or JAX's own CPU implementation)."""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_cusolver_ms as jcm


def _rel(x, y):
    x, y = np.asarray(x, np.complex128), np.asarray(y, np.complex128)
    return float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30))


def main():
    device = jax.devices()[0]
    on_gpu = jcm.gpu_available()
    where = (f"GPU ({device.device_kind}) through jax-cusolver-ms lanes" if on_gpu
             else f"{device.platform.upper()} through JAX's own implementation "
                  "(no CUDA GPU or extension)")
    print(f"jax {jax.__version__}, devices: {jax.devices()}")
    print(f"extension loaded: {jcm._ffi.extension_loaded()}, libraries: {jcm.library_versions()}")
    print(f"ops run on: {where}\n")

    rng = np.random.default_rng(0)
    batch, n = (64, 256) if on_gpu else (8, 64)
    a = jnp.asarray(rng.standard_normal((batch, n, n)) + n ** 0.5 * np.eye(n), jnp.float32)
    b = jnp.asarray(rng.standard_normal((batch, n, 4)), jnp.float32)

    cases = [
        ("lu_factor", lambda: jcm.lu_factor(a)[0], lambda: jax.scipy.linalg.lu_factor(a)[0]),
        ("solve", lambda: jcm.solve(a, b), lambda: jnp.linalg.solve(a, b)),
        ("inv", lambda: jcm.inv(a), lambda: jnp.linalg.inv(a)),
        ("det", lambda: jcm.slogdet(a)[1], lambda: jnp.linalg.slogdet(a)[1]),
        ("grad(solve)", lambda: jax.grad(lambda m: jnp.sum(jcm.solve(m, b)))(a),
         lambda: jax.grad(lambda m: jnp.sum(jnp.linalg.solve(m, b)))(a)),
    ]
    print(f"{'op':<12} {'shape':<14} {'strategy (auto)':<34} {'ms':>8}  rel. err vs jnp.linalg")
    for name, ours, theirs in cases:
        fn = jax.jit(ours)
        jax.block_until_ready(fn())
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        ms = (time.perf_counter() - t0) * 1e3
        op = "getrs" if name in ("solve", "inv", "grad(solve)") else "getrf"
        choice = jcm.explain(op, a.shape, a.dtype)
        ran = f"{choice.strategy} x{choice.lanes} lanes" if on_gpu else "JAX's CPU implementation"
        print(f"{name:<12} {str(a.shape):<14} {ran:<34} "
              f"{ms:8.2f}  {_rel(out, jax.jit(theirs)()):.1e}")
    if on_gpu:
        print(f"\nwhy: {jcm.explain('getrf', a.shape, a.dtype)}")


if __name__ == "__main__":
    main()
