"""What the non-finite-input guard costs around JAX's own lowering on tiny batches, and what JAX's
GPU lowerings give for NaN / Inf input without it (session 8, issue 7; eigvalsh / eigh / svd
added in session 9).

    python3 -m benchmarks.diag.guard_probe

For lu_factor, det, inv, eigvalsh and svdvals at n <= 64: JAX's function, ours under `auto` (JAX's lowering inside
nan_for_nonfinite_input), and the guard reduced to masking the outputs only, timed in pooled
alternating rounds (device-side, jax_cusolver_ms.timing); the number of kernels-ish (fusions and
custom calls) in each optimized HLO; then JAX's own outputs for matrices holding NaN or Inf, and
whether a neighbour in the batch changed.
"""
from __future__ import annotations

import re
import statistics

from benchmarks import bench  # first: the installed package, not this source folder

import jax
import jax.numpy as jnp
import numpy as np

jcm = bench.jcm
device_time_ms = bench.device_time_ms

ROUNDS = 6
REPEATS = 25


def _bad(a):
    return ~jnp.all(jnp.isfinite(a), axis=(-2, -1))


def _mask(bad, x):
    return jnp.where(bad.reshape(bad.shape + (1,) * (x.ndim - bad.ndim)), jnp.nan, x)


def lu_out_only(a):
    lu, piv, _ = jax.lax.linalg.lu(a)
    return _mask(_bad(a), lu), piv


def det_out_only(a):
    lu, piv, _ = jax.lax.linalg.lu(a)
    lu = _mask(_bad(a), lu)
    n = a.shape[-1]
    parity = jnp.count_nonzero(piv != jnp.arange(n), axis=-1)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    return jnp.where(parity % 2 == 1, -1.0, 1.0).astype(a.dtype) * jnp.prod(diag, axis=-1)


def inv_out_only(a):
    return _mask(_bad(a), jnp.linalg.inv(a))


def eigvalsh_out_only(a):
    return _mask(_bad(a), jnp.linalg.eigvalsh(a))


def svdvals_out_only(a):
    return _mask(_bad(a), jnp.linalg.svdvals(a))


VARIANTS = {
    "lu_factor": {"jax": jax.scipy.linalg.lu_factor, "ours": jcm.lu_factor,
                  "out-only": lu_out_only},
    "det": {"jax": jnp.linalg.det, "ours": jcm.det, "out-only": det_out_only},
    "inv": {"jax": jnp.linalg.inv, "ours": jcm.inv, "out-only": inv_out_only},
    # Session 10: would masking the outputs only do for the iterative routines too (ours
    # substitutes the identity first, one kernel more)? Only if JAX's own lowering neither hangs
    # nor lets a NaN matrix touch its neighbours: nan_semantics below.
    "eigvalsh": {"jax": jnp.linalg.eigvalsh, "ours": jcm.eigvalsh, "out-only": eigvalsh_out_only},
    "svdvals": {"jax": jnp.linalg.svdvals, "ours": jcm.svdvals, "out-only": svdvals_out_only},
}
SYMMETRIC = {"eigvalsh"}
SHAPES = [(1, 16), (4, 16), (4, 32), (16, 32), (64, 16), (256, 16), (256, 32), (256, 64)]


def kernels(fn, a) -> int:
    text = jax.jit(fn).lower(a).compile().as_text()
    entry = text[text.find("ENTRY"):]
    return len(re.findall(r"= [^=]*\b(fusion|custom-call|copy|transpose)\(", entry))


def timing() -> None:
    print(f"| op | BxN | " + " | ".join(f"{v} ms (kernels)" for v in ("jax", "ours", "out-only"))
          + " | ours/jax | out-only/jax |")
    print("|---|---|---|---|---|---|---|")
    for op, variants in VARIANTS.items():
        for batch, n in SHAPES:
            a = jax.random.normal(jax.random.key(batch * n), (batch, n, n), jnp.float32)
            if op in SYMMETRIC:
                a = (a + jnp.swapaxes(a, -1, -2)) / 2
            pooled = {name: [] for name in variants}
            names = list(variants)
            for r in range(ROUNDS):
                for name in (names if r % 2 == 0 else names[::-1]):
                    pooled[name] += device_time_ms(variants[name], a, repeats=REPEATS, warmup=2)
            med = {name: statistics.median(t) for name, t in pooled.items()}
            count = {name: kernels(fn, a) for name, fn in variants.items()}
            print(f"| {op} | {batch}x{n} | " + " | ".join(
                f"{med[v]:.4f} ({count[v]})" for v in names)
                + f" | {med['jax'] / med['ours']:.2f}x | {med['jax'] / med['out-only']:.2f}x |",
                flush=True)


def nan_semantics() -> None:
    print("\nJAX's own GPU lowering on non-finite input (matrix 1: NaN at (3, 5); matrix 2: Inf "
          "at (0, 0)); nonfinite = the item's outputs hold a NaN or Inf:")
    for batch, n in [(4, 16), (4, 32), (16, 32), (2, 300), (1, 16), (1, 300)]:
        a = np.array(jax.random.normal(jax.random.key(n), (batch, n, n), jnp.float32))
        clean = a.copy()
        if batch >= 2:
            a[1, 3, 5] = np.nan
        a[min(2, batch - 1) if batch >= 3 else 0, 0, 0] = np.inf
        if batch == 1:
            a[0, 3, 5] = np.nan
        sym = lambda x: (x + jnp.swapaxes(x, -1, -2)) / 2
        # The iterative routines last: a hang there (the guard's reason to substitute) still
        # leaves the rest printed.
        for name, fn in [("lu_factor", lambda x: jax.scipy.linalg.lu_factor(x)[0]),
                         ("det", jnp.linalg.det), ("inv", jnp.linalg.inv),
                         ("solve", lambda x: jnp.linalg.solve(x, jnp.ones(x.shape[:-1] + (1,),
                                                                         x.dtype))),
                         ("eigvalsh", lambda x: jnp.linalg.eigvalsh(sym(x))),
                         ("eigh", lambda x: jnp.linalg.eigh(sym(x))[1]),
                         ("svdvals", jnp.linalg.svdvals),
                         ("svd", lambda x: jnp.linalg.svd(x)[0])]:
            out = np.asarray(jax.jit(fn)(jnp.asarray(a)))
            ref = np.asarray(jax.jit(fn)(jnp.asarray(clean)))
            flat = out.reshape(batch, -1)
            nonfinite = [bool(~np.all(np.isfinite(row))) for row in flat]
            changed = [bool(not np.allclose(o, r, equal_nan=False)) for o, r in
                       zip(flat, ref.reshape(batch, -1))]
            print(f"  {name} {batch}x{n}: nonfinite per item {nonfinite[:4]}, "
                  f"differs from clean {changed[:4]}", flush=True)


if __name__ == "__main__":
    print(jax.devices()[0].device_kind, jax.__version__)
    timing()
    nan_semantics()
