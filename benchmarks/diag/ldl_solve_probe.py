"""The LDL^T solve alone, unblocked kernel against the blocked solve (session 10, issue 7).

    python3 -m benchmarks.diag.ldl_solve_probe [--dtypes float32,float64] [--shapes 1x64,...]

For each shape: one factor (auto), then device-side times (jax_cusolver_ms.timing, median of
pooled alternating rounds) of ldl_solve with strategy "batched" (the unblocked kernel: n
dependent steps over the whole right-hand side) and "blocked" (ffi/ldl_ops.cc sytrs_blocked),
next to JAX's lu_solve on JAX's LU factors of the same matrix, and the blocked solve's
difference from the unblocked one. Used to set strategy.BLOCKED_MIN_N["sytrs"].
"""
from __future__ import annotations

import argparse
import statistics

from benchmarks import bench  # first: the installed package, not this source folder

import jax
import jax.numpy as jnp
import numpy as np

jcm = bench.jcm
SHAPES = "1x32,1x64,1x128,1x256,1x512,1x1024,1x2048,4x2048,16x256,16x1024,64x64,64x256,64x1024,256x64,256x512"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--nrhs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    print("| dtype | BxN | unblocked ms | blocked ms | JAX lu_solve ms | unblocked/blocked | "
          "JAX/blocked | max rel diff |")
    print("|---|---|---|---|---|---|---|---|")
    for dtype in args.dtypes.split(","):
        for shape in args.shapes.split(","):
            batch, n = (int(v) for v in shape.split("x"))
            key = jax.random.key(batch * 7919 + n)
            x = jax.random.normal(key, (batch, n, n), dtype)
            a = (x + jnp.swapaxes(x, -1, -2)) / 2
            b = jax.random.normal(jax.random.key(n), (batch, n, args.nrhs), dtype)
            ld, piv = jcm.ldl_factor(a)
            lu, lpiv = jax.scipy.linalg.lu_factor(a)
            fns = {
                "unblocked": lambda ld, piv, b: jcm.ldl_solve(ld, piv, b, strategy="batched"),
                "blocked": lambda ld, piv, b: jcm.ldl_solve(ld, piv, b, strategy="blocked"),
                "jax": lambda lu, piv, b: jax.scipy.linalg.lu_solve((lu, piv), b),
            }
            operands = {"unblocked": (ld, piv, b), "blocked": (ld, piv, b), "jax": (lu, lpiv, b)}
            pooled = {name: [] for name in fns}
            names = list(fns)
            for r in range(args.rounds):
                for name in (names if r % 2 == 0 else names[::-1]):
                    pooled[name] += bench.device_time_ms(fns[name], *operands[name], repeats=10,
                                                         warmup=2)
            med = {name: statistics.median(t) for name, t in pooled.items()}
            x_u = np.asarray(fns["unblocked"](ld, piv, b), np.float64)
            x_b = np.asarray(fns["blocked"](ld, piv, b), np.float64)
            diff = float(np.max(np.linalg.norm(x_b - x_u, axis=(-2, -1))
                                / np.linalg.norm(x_u, axis=(-2, -1))))
            print(f"| {dtype} | {shape} | {med['unblocked']:.4f} | {med['blocked']:.4f} | "
                  f"{med['jax']:.4f} | {med['unblocked'] / med['blocked']:.2f}x | "
                  f"{med['jax'] / med['blocked']:.2f}x | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
