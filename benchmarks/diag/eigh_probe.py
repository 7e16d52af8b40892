"""GPU probe for eigh 16x1024 float32: under `auto` our eigh is JAX's own lowering (XsyevBatched),
yet it measured 0.77x of jnp.linalg.eigh twice (s3-spectral, s4-spec), while eigvalsh (the same
computation) measured 1.11x. Times, on the SAME inputs, alternating the order over rounds:
jnp.linalg.eigh, lax.linalg.eigh, ours under auto, ours without the non-finite guard, and
fresh inputs per round, to separate data, order/clock and wrapper effects.

  python benchmarks/diag/eigh_probe.py [--batch 16 --n 1024 --rounds 4]
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jax_cusolver_ms as jcm
from jax_cusolver_ms.timing import device_time_ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=4)
    opts = p.parse_args()
    rng = np.random.default_rng(0)

    def ours_unguarded(a):
        # JAX's lowering exactly as auto reaches it, minus nan_for_nonfinite_input.
        a = (a + jnp.swapaxes(a, -1, -2)) / 2
        v, w = jax.lax.linalg.eigh(a, lower=True, symmetrize_input=False)
        return w, v

    candidates = {
        "jnp.linalg.eigh": lambda a: jnp.linalg.eigh(a),
        "lax.linalg.eigh": lambda a: jax.lax.linalg.eigh(a)[::-1],
        "jcm.eigh auto": lambda a: jcm.eigh(a),
        "lax, own symmetrize": ours_unguarded,
        "jnp.linalg.eigvalsh": lambda a: jnp.linalg.eigvalsh(a),
        "jcm.eigvalsh auto": lambda a: jcm.eigvalsh(a),
    }
    print(jax.devices()[0].device_kind, "batch", opts.batch, "n", opts.n)
    names = list(candidates)
    for r in range(opts.rounds):
        a = jnp.asarray(rng.standard_normal((opts.batch, opts.n, opts.n)).astype(np.float32))
        order = names if r % 2 == 0 else names[::-1]
        row = {}
        for name in order:
            t = device_time_ms(candidates[name], a, repeats=5, warmup=2)
            row[name] = float(np.median(t))
        print(f"round {r} ({'forward' if r % 2 == 0 else 'reverse'} order): " +
              ", ".join(f"{k} {row[k]:.1f}" for k in names), flush=True)


if __name__ == "__main__":
    main()
