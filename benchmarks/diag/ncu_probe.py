"""One op on the GPU, called a fixed number of times, for Nsight Compute (ncu) to profile: its
kernels are launched once per call, so `--launch-skip 1 --launch-count 1` with a kernel-name
filter takes the second call's (the first may include one-time work).

  ncu --clock-control none --kernel-name regex:syevj_small --launch-skip 1 --launch-count 1 \
      python3 benchmarks/diag/ncu_probe.py eigh float64 4 32

OP: eigh, ldl_factor, lu (this project's, strategy --strategy, default batched) or jax_eigh /
jax_lu (JAX's own lowering).
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jax_cusolver_ms as jcm


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("op", choices=["eigh", "ldl_factor", "lu", "jax_eigh", "jax_lu"])
    parser.add_argument("dtype")
    parser.add_argument("batch", type=int)
    parser.add_argument("n", type=int)
    parser.add_argument("--strategy", default="batched")
    parser.add_argument("--calls", type=int, default=2)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.batch, args.n, args.n))
    a = jnp.asarray((a + np.swapaxes(a, -1, -2)) / 2, dtype=args.dtype)
    ops = {
        "eigh": lambda x: jcm.eigh(x, strategy=args.strategy),
        "ldl_factor": lambda x: jcm.ldl_factor(x, strategy=args.strategy),
        "lu": lambda x: jcm.lu(x, strategy=args.strategy),
        "jax_eigh": jnp.linalg.eigh,
        "jax_lu": jax.scipy.linalg.lu_factor,
    }
    fn = jax.jit(ops[args.op])
    for _ in range(args.calls):
        jax.block_until_ready(fn(a))
    print(f"{args.op} {args.dtype} {args.batch}x{args.n}: {args.calls} calls done")


if __name__ == "__main__":
    main()
