"""One op on the GPU, called a fixed number of times, for Nsight Compute (ncu) to profile: its
kernels are launched once per call, so `--launch-skip 1 --launch-count 1` with a kernel-name
filter takes the second call's (the first may include one-time work).

  ncu --clock-control none --kernel-name regex:syevj_small --launch-skip 1 --launch-count 1 \
      python3 benchmarks/diag/ncu_probe.py eigh float64 4 32

OP: eigh, ldl_factor, ldl_solve (the solve alone, one right-hand side, on a factor made before),
lu (this project's, strategy --strategy, default batched) or jax_eigh / jax_lu / jax_lu_solve
(JAX's own lowering; jax_lu_solve the solve alone).
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

import jax_cusolver_ms as jcm


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("op", choices=["eigh", "ldl_factor", "ldl_solve", "lu", "jax_eigh", "jax_lu",
                                           "jax_lu_solve"])
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
    b = jnp.ones((args.batch, args.n, 1), dtype=args.dtype)
    # The solves' factors from LAPACK on the host, so that no factor kernel is in the profile.
    host = np.asarray(a)
    if args.op == "ldl_solve":
        sytrf = scipy.linalg.lapack.get_lapack_funcs(("sytrf",), dtype=host.dtype)[0]
        factors = [sytrf(m, lower=1)[:2] for m in host]
        ldl = (jnp.asarray(np.stack([np.tril(f) for f, _ in factors])),
               jnp.asarray(np.stack([p for _, p in factors])))
    if args.op == "jax_lu_solve":
        factors = [scipy.linalg.lu_factor(m) for m in host]
        lu = (jnp.asarray(np.stack([f for f, _ in factors])),
              jnp.asarray(np.stack([p for _, p in factors]).astype(np.int32)))
    ops = {
        "eigh": lambda x: jcm.eigh(x, strategy=args.strategy),
        "ldl_solve": lambda x: jcm.ldl_solve(*ldl, b, strategy=args.strategy),
        "jax_lu_solve": lambda x: jax.vmap(jax.scipy.linalg.lu_solve)(lu, b),
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
