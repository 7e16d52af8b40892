"""GPU probe for the batched QR and LDL kernels (ffi/qr_kernels.cu, ffi/ldl_kernels.cu): each
cell's residual first (a gross error shows before any timing), then device times of the kernels
(strategy="batched") next to cuSOLVER on lanes and JAX's own lowering, on the same inputs.

  python benchmarks/diag/kernel_probe.py [--dtypes float32,float64] [--repeats 5]
"""
import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_cusolver_ms as jcm
from jax_cusolver_ms.timing import device_time_ms

QR_SHAPES = [(64, 64, 64), (64, 128, 128), (256, 64, 64), (64, 256, 256), (16, 512, 512),
             (64, 256, 64)]
LDL_SHAPES = [(64, 64), (64, 128), (3, 257), (64, 256), (16, 512)]


def rel(x, y):
    x, y = np.asarray(x, np.complex128), np.asarray(y, np.complex128)
    return float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-300))


def timed(fn, *args, repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(jax.jit(fn)(*args))  # compile and first run, wall clock
    first = time.perf_counter() - t0
    return float(np.median(device_time_ms(fn, *args, repeats=repeats, warmup=1))), first


def probe_qr(rng, dtype, repeats):
    for batch, m, n in QR_SHAPES:
        a = jnp.asarray(rng.standard_normal((batch, m, n)).astype(dtype))
        q, r = jcm.qr(a, strategy="batched")
        err = rel(q @ r, a)
        row = {"residual": err}
        cands = {
            "jnp": lambda x: jnp.linalg.qr(x),
            "batched": lambda x: jcm.qr(x, strategy="batched"),
            "looped": lambda x: jcm.qr(x, strategy="looped"),
            "auto": lambda x: jcm.qr(x),
            "jnp r": lambda x: jnp.linalg.qr(x, mode="r"),
            "batched r": lambda x: jcm.qr(x, mode="r", strategy="batched"),
        }
        for name, fn in cands.items():
            ms, first = timed(fn, a, repeats=repeats)
            row[name] = ms
        print(f"qr {np.dtype(dtype).name} {batch}x{m}x{n}: " +
              ", ".join(f"{k} {v:.3g}" for k, v in row.items()) +
              f" | batched vs jnp {row['jnp'] / row['batched']:.2f}x", flush=True)


def probe_ldl(rng, dtype, repeats):
    for batch, n in LDL_SHAPES:
        x = rng.standard_normal((batch, n, n)).astype(dtype)
        a = jnp.asarray(x + np.swapaxes(x, -1, -2))
        b = jnp.asarray(rng.standard_normal((batch, n, 8)).astype(dtype))
        t0 = time.perf_counter()
        ld, piv = jax.block_until_ready(jcm.ldl_factor(a, strategy="batched"))
        first = time.perf_counter() - t0
        xs = jcm.ldl_solve(ld, piv, b, strategy="batched")
        err = rel(a @ xs, b)
        row = {"residual": err, "first call s": first}
        cands = {
            "lu solve (jnp)": lambda a, b: jnp.linalg.solve(a, b),
            "factor batched": lambda a, b: jcm.ldl_factor(a, strategy="batched"),
            "factor looped": lambda a, b: jcm.ldl_factor(a, strategy="looped"),
            "solve batched": lambda a, b: jcm.ldl_solve(ld, piv, b, strategy="batched"),
            "solve looped": lambda a, b: jcm.ldl_solve(ld, piv, b, strategy="looped"),
        }
        for name, fn in cands.items():
            if "looped" in name and n > 256:
                continue  # cuSOLVER sytrf/sytrs synchronise with the host: slow, known
            ms, _ = timed(fn, a, b, repeats=repeats)
            row[name] = ms
        print(f"ldl {np.dtype(dtype).name} {batch}x{n}: " +
              ", ".join(f"{k} {v:.3g}" for k, v in row.items()), flush=True)


def main():
    jax.config.update("jax_enable_x64", True)  # float64 inputs stay float64
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--only", default="qr,ldl")
    opts = p.parse_args()
    rng = np.random.default_rng(0)
    print(jax.devices()[0].device_kind, jax.__version__)
    for dtype in opts.dtypes.split(","):
        if "qr" in opts.only:
            probe_qr(rng, np.dtype(dtype), opts.repeats)
        if "ldl" in opts.only:
            probe_ldl(rng, np.dtype(dtype), opts.repeats)


if __name__ == "__main__":
    main()
