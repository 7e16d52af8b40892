"""GPU probe for the grid's one WRONG cell: det float32 64 x 512 under `auto` (the blocked LU)
had error 0.134 where JAX's had 0.0041 (bar: 20x JAX's), while lu_factor's backward error was
JAX's (1.43e-6 vs 1.31e-6) and a NumPy emulation of the blocked LU gives LAPACK's det errors.

On the same unit-determinant inputs as benchmarks/bench.py's det cells, per matrix: the det
error of JAX's det and of jcm.det under each strategy, each factorization's backward error
||P A - L U|| / ||A|| (float64), its growth factor max|U| / max|A|, and its pivots' agreement
with JAX's. Prints the worst matrices and a summary line per implementation.

Session 15's runs (calls 1-3) imported the source folder's package, which has no compiled
extension: every strategy ran JAX's own lowering, so they said nothing about the blocked LU. The
package now comes through bench (the installed copy first), and the first line says which.

`--cells K [--strategy S]` runs the grid's very cell instead (bench.run_cell: inputs from
jax.random.key(seed), the output of the first call after compiling) for seeds 0..K-1, and for a
seed whose error misses the bar, the det of each matrix from 8 more calls (does it vary from
call to call?) and the worst matrix's condition number.

    python -m benchmarks.diag.det_probe [--batch 64] [--n 512] [--seeds 3] [--cells 0]
        [--strategy auto]
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import bench  # first: the installed package, not this source folder

jcm = bench.jcm  # bench enables float64 too

STRATEGIES = ("blocked", "looped", "batched", "auto")


def factor_stats(a64, lu, piv):
    """Backward error and growth factor of each matrix's LU (float64 arithmetic)."""
    n = a64.shape[-1]
    lu = np.asarray(lu).astype(np.float64)
    perm = np.asarray(jax.lax.linalg.lu_pivots_to_permutation(jnp.asarray(piv), n))
    l = np.tril(lu, -1) + np.eye(n)
    u = np.triu(lu)
    pa = np.take_along_axis(a64, perm[..., :, None], axis=-2)
    backward = np.linalg.norm(pa - l @ u, axis=(-2, -1)) / np.linalg.norm(a64, axis=(-2, -1))
    growth = np.abs(u).max(axis=(-2, -1)) / np.abs(a64).max(axis=(-2, -1))
    return backward, growth


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--cells", type=int, default=0)
    p.add_argument("--strategy", default="auto", help="for --cells: jcm's strategy")
    args = p.parse_args()
    print(f"backend {jax.default_backend()}, {args.batch} x {args.n} {args.dtype}; "
          f"{jcm.__name__} from {jcm.__file__}, GPU path: {jcm._ffi.gpu_available()}")
    if args.cells:
        return grid_cells(args)
    for seed in range(args.seeds):
        (a,), truth = bench._unit_det(jax.random.PRNGKey(seed), args.batch, args.n,
                                      np.dtype(args.dtype))
        a64 = np.asarray(a).astype(np.float64)
        truth = np.asarray(truth[0])  # the plain relative error here, not the grid's
        rows = {"jax": (np.asarray(jnp.linalg.det(a)), jax.scipy.linalg.lu_factor(a))}
        for s in STRATEGIES:
            rows[s] = (np.asarray(jcm.det(a, strategy=s)), jcm.lu_factor(a, strategy=s))
        jax_piv = np.asarray(rows["jax"][1][1])
        print(f"seed {seed}: {'impl':>8} {'max det err':>12} {'median':>10} {'worst at':>8} "
              f"{'max backward':>12} {'max growth':>10} {'pivots = JAX':>12}")
        for name, (d, (lu, piv)) in rows.items():
            err = np.abs(d.astype(np.float64) - truth) / np.abs(truth)
            backward, growth = factor_stats(a64, lu, piv)
            same = float(np.mean(np.all(np.asarray(piv) == jax_piv, axis=-1)))
            print(f"seed {seed}: {name:>8} {err.max():12.3g} {np.median(err):10.3g} "
                  f"{int(err.argmax()):8d} {backward.max():12.3g} {growth.max():10.3g} "
                  f"{same:12.2f}")


def grid_cells(args):
    bench_args = bench.parse_args(["--ops", "det", "--dtypes", args.dtype, "--strategies",
                                   args.strategy, "--no-torch", "--shapes",
                                   f"{args.batch}x{args.n}"])
    op = bench.OPS["det"]
    for seed in range(args.cells):
        cell = bench.run_cell(op, args.dtype, args.batch, args.n, bench_args, None, seed)
        ours, ref = cell["impls"][f"jcm:{args.strategy}"], cell["impls"]["jax"]
        print(f"cell seed {seed}: jax error {ref.get('error', float('nan')):.3g}, "
              f"{args.strategy} {ours.get('error', float('nan')):.3g} (bar "
              f"{cell['error_bar']:.3g}, ok {ours.get('ok')}); auto: {cell['explain']['text']}")
        if ours.get("ok", True):
            continue
        (a,), truth = op.build(jax.random.key(seed), args.batch, args.n, np.dtype(args.dtype))
        truth = np.asarray(truth[0])
        ours_fn = jax.jit(lambda x: jcm.det(x, strategy=args.strategy))
        jax_fn = jax.jit(jnp.linalg.det)
        calls = [np.asarray(ours_fn(a)).astype(np.float64) for _ in range(8)]
        errs = np.stack([np.abs(d - truth) / np.abs(truth) for d in calls])
        jerr = np.abs(np.asarray(jax_fn(a)).astype(np.float64) - truth) / np.abs(truth)
        worst = int(errs.max(axis=0).argmax())
        cond = np.linalg.cond(np.asarray(a[worst]).astype(np.float64))
        print(f"  8 calls: max error per call {np.array2string(errs.max(axis=1), precision=3)};"
              f" calls identical: {all(np.array_equal(calls[0], c) for c in calls)}")
        print(f"  worst matrix {worst}: ours {errs[:, worst].max():.3g}, JAX {jerr[worst]:.3g}, "
              f"cond {cond:.3g}; JAX's worst {int(jerr.argmax())} ({jerr.max():.3g})")


if __name__ == "__main__":
    main()
