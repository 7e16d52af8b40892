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

    spd = jnp.matmul(a, jnp.swapaxes(a, -1, -2)) / n + jnp.eye(n, dtype=a.dtype)
    sym = (a + jnp.swapaxes(a, -1, -2)) / 2
    small = a[:8, :64, :64]  # eig and the SVD: fewer, smaller matrices keep the demo short

    def sorted_eigvals(w):
        return jnp.sort_complex(w.astype(jnp.complex64))

    # (name, routine explain() knows, operand, ours, JAX's): compared through invariants
    # (factors' products, eigenvalues, singular values) where the factors are not unique.
    cases = [
        ("lu_factor", "getrf", a, lambda: jcm.lu_factor(a)[0],
         lambda: jax.scipy.linalg.lu_factor(a)[0]),
        ("solve", "getrs", a, lambda: jcm.solve(a, b), lambda: jnp.linalg.solve(a, b)),
        ("inv", "getrs", a, lambda: jcm.inv(a), lambda: jnp.linalg.inv(a)),
        ("slogdet", "getrf", a, lambda: jcm.slogdet(a)[1], lambda: jnp.linalg.slogdet(a)[1]),
        ("grad(solve)", "getrs", a, lambda: jax.grad(lambda m: jnp.sum(jcm.solve(m, b)))(a),
         lambda: jax.grad(lambda m: jnp.sum(jnp.linalg.solve(m, b)))(a)),
        ("cholesky", "potrf", spd, lambda: jcm.cholesky(spd), lambda: jnp.linalg.cholesky(spd)),
        ("qr (|R|)", "geqrf", a, lambda: jnp.abs(jcm.qr(a, mode="r")),
         lambda: jnp.abs(jnp.linalg.qr(a, mode="r"))),
        ("ldl_solve", "sytrs", sym, lambda: jcm.ldl_solve(*jcm.ldl_factor(sym), b),
         lambda: jnp.linalg.solve(sym, b)),
        ("eigvalsh", "syevd", sym, lambda: jcm.eigvalsh(sym), lambda: jnp.linalg.eigvalsh(sym)),
        ("svdvals", "gesvdj", small, lambda: jcm.svdvals(small),
         lambda: jnp.linalg.svdvals(small)),
        ("eigvals", "geev", small, lambda: sorted_eigvals(jcm.eigvals(small)),
         lambda: sorted_eigvals(jnp.linalg.eigvals(small))),
        ("matmul", None, a, lambda: jcm.matmul(a, b, precision="highest"),
         lambda: jnp.matmul(a, b, precision="highest")),
    ]
    print(f"{'op':<12} {'shape':<16} {'strategy (auto)':<34} {'ms':>8}  rel. err vs JAX")
    for name, routine, operand, ours, theirs in cases:
        fn = jax.jit(ours)
        jax.block_until_ready(fn())
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        ms = (time.perf_counter() - t0) * 1e3
        if not on_gpu:
            ran = "JAX's CPU implementation"
        elif routine is None:
            ran = "cuBLASLt on XLA's stream"
        else:
            choice = jcm.explain(routine, operand.shape, operand.dtype)
            ran = (f"{choice.strategy} x{choice.lanes} lanes" if choice.uses_ffi
                   else "JAX's own lowering (faster here)")
        print(f"{name:<12} {str(operand.shape):<16} {ran:<34} "
              f"{ms:8.2f}  {_rel(out, jax.jit(theirs)()):.1e}")
    if on_gpu:
        print(f"\nwhy: {jcm.explain('getrf', a.shape, a.dtype)}")


if __name__ == "__main__":
    main()
