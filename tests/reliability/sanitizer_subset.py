#!/usr/bin/env python3
"""The compute-sanitizer subset: every op of the contract table (tests/test_contract.py) with
every strategy it has, at the sizes that reach each of its code paths, small enough to run under
memcheck, racecheck, synccheck and initcheck. A plain script (no pytest):

    python3 tests/reliability/sanitizer_subset.py [--strategies looped,batched] [--ops lu,qr]
                                                  [--all-dtypes] [--shard i/k]

Sizes per strategy (n; QR and SVD take n x 2n/3 matrices):
  auto        8
  sequential  40
  looped      8 on one lane (the inline path on XLA's stream), 40 on three lanes (fork / join)
  batched     8 (the one-launch kernels: LU, Cholesky, LDL^T warp kernel, Jacobi eigh and SVD),
              40 (LDL^T small-block kernel, syevd's XsyevBatched, the Jacobi SVD kernel with
              two rows a lane), 72 (getrfBatched, potrfBatched / potrsBatched, the ?sytf2 block
              kernel), and for the QR kernels 200 (the matrix in global memory), for ldl_solve
              137 (the block solve kernel) and for the Jacobi SVD 128 (128 x 85: complex128's V
              in the workspace) and 32 on 1200 matrices (32 x 21, a team of 16 lanes each)
  blocked     the table's blocked_n (more than one panel), on 2 and on 5 matrices
Plus lu_solve and ldl_solve with malformed pivots (out of range: no access out of bounds, the
neighbours exact). Each case's dtype rotates over the op's dtypes (--all-dtypes: every one).
A strategy the extension refuses for a shape ("cannot run a ...") is counted, not run.

Every result is checked against the table's reference; the exit status is 1 if any case was
wrong or raised, else 0. The last line says how many (op, strategy, dtype, n) cases ran.
"""
import argparse
import functools
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/: conftest and test_contract

import conftest  # noqa: E402  (enables float64 first)
import jax  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402

import jax_cusolver_ms as jcm  # noqa: E402
from test_contract import OPS, assert_matches, run_options, strategies_of  # noqa: E402

SMALL, MID, LARGE = 8, 40, 72
QR_GLOBAL_N, LDL_SOLVE_BLOCK_N, SVD_WORKSPACE_N = 200, 137, 128
# More matrices than an H100 or H200 runs at once in the SVD kernel's blocks: its team kernel.
SVD_TEAM_BATCH, SVD_TEAM_N = 1200, 32
# geev's batched path is the tiny-matrix kernel alone (n <= 4): over two blocks of 128.
GEEV_TINY_BATCH, GEEV_TINY_N = 200, 3
QR_FAMILY = {"qr", "qr_complete", "qr_r", "qr_raw", "householder_product", "ormqr", "qr_multiply"}
BATCH = 3


def cases(op):
    """(strategy, lanes, batch, n) for one op."""
    out = []
    for s in strategies_of(op):
        if s is None:  # matmul: no strategies
            out += [(None, None, (BATCH,), n) for n in (SMALL, LARGE)]
        elif s == "auto":
            out.append((s, None, (BATCH,), SMALL))
        elif s == "sequential":
            out.append((s, None, (BATCH,), MID))
        elif s == "looped":
            out += [(s, 1, (BATCH,), SMALL), (s, 3, (BATCH,), MID)]
        elif s == "batched" and "geev" in op.targets:
            out.append((s, 2, (GEEV_TINY_BATCH,), GEEV_TINY_N))
        elif s == "batched":
            sizes = [SMALL, MID, LARGE]
            if op.name in QR_FAMILY:
                sizes.append(QR_GLOBAL_N)
            if op.name == "ldl_solve":
                sizes.append(LDL_SOLVE_BLOCK_N)
            if "gesvdj" in op.targets:
                sizes.append(SVD_WORKSPACE_N)
            out += [(s, 2, (BATCH,), n) for n in sizes]
            if "gesvdj" in op.targets:
                out.append((s, 2, (SVD_TEAM_BATCH,), SVD_TEAM_N))
        elif s == "blocked":
            out += [(s, None, (b,), op.blocked_n) for b in (2, 5)]
    return out


def _written_on_device(x):
    """x as the output of an XLA kernel (x + zeros, which XLA cannot fold: the zeros are an
    argument). initcheck tracks device writes; an operand that arrives straight from the host
    was read as uninitialised by the first kernel to touch it (getrf_small_kernel, on the H200)."""
    x = np.asarray(x)
    return jax.jit(lambda x, zeros: x + zeros)(x, np.zeros_like(x))


def check_case(op, strategy, lanes, batch, n, dtype, rng):
    args = [_written_on_device(x) for x in op.build(rng, dtype, batch, n)]
    opts = run_options(strategy, lanes) if strategy is not None else {}
    if strategy in ("looped", "batched") and lanes is not None:
        opts = dict(strategy=strategy, lanes=lanes)
    out = jax.jit(functools.partial(op.call, **opts))(*args)
    assert_matches(op, args, out, op.reference(*args), dtype, len(batch) if op.batched else 0,
                   f"{op} {strategy} lanes={lanes} {dtype.name} batch={batch} n={n}")


def check_bad_pivots(name, strategy, n, rng):
    """lu_solve / ldl_solve with one matrix's pivots out of range: its neighbours exact."""
    a = conftest.random_matrix(rng, (3, n, n), np.float64, "well_conditioned")
    a = (a + a.transpose(0, 2, 1)) / 2 + n * np.eye(n)
    b = conftest.random_rhs(rng, (3, n, 2), np.float64)
    opts = dict(strategy=strategy)
    if name == "lu_solve":
        lu, piv = jsl.lu_factor(a)
        piv = np.array(piv)
        piv[1] = n + 3
        x = jax.jit(lambda lu, piv, b: jcm.lu_solve((lu, piv), b, **opts))(lu, piv, b)
    else:
        ld, piv = jcm.ldl_factor(a)
        piv = np.array(piv)
        piv[1] = n + 3
        x = jax.jit(lambda ld, piv, b: jcm.ldl_solve(ld, piv, b, **opts))(ld, piv, b)
    x = np.asarray(x)
    ref = np.linalg.solve(a, b)
    err = conftest.rel_err(x[[0, 2]], ref[[0, 2]])
    assert err <= 1e-9, f"{name} {strategy}: malformed pivots changed the neighbours ({err:.3g})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategies", help="comma-separated: only these (auto, sequential, "
                        "looped, batched, blocked; 'none' for matmul)")
    parser.add_argument("--ops", help="comma-separated op names of the contract table")
    parser.add_argument("--all-dtypes", action="store_true", help="every dtype, not rotated")
    parser.add_argument("--shard", default="0/1", help="i/k: only the ops at i, i + k, ... of "
                        "the table (and the malformed pivots in shard 0), for k processes")
    args = parser.parse_args(argv)
    shard, shards = (int(x) for x in args.shard.split("/"))
    strategies = set(args.strategies.split(",")) if args.strategies else None
    names = set(args.ops.split(",")) if args.ops else None
    if not jcm.gpu_available():
        print("warning: no GPU or no extension: every op runs JAX's own implementation",
              flush=True)

    rng = np.random.default_rng(0)
    ran = infeasible = 0
    failed = []
    start = time.monotonic()

    def run(label, fn):
        nonlocal ran, infeasible
        try:
            fn()
            ran += 1
            print(f"ok   {label}", flush=True)
        except ValueError as exc:
            if conftest.INFEASIBLE in str(exc):
                infeasible += 1
                print(f"skip {label}: {str(exc).splitlines()[0][:160]}", flush=True)
                return
            failed.append(label)
            print(f"FAIL {label}\n{traceback.format_exc()}", flush=True)
        except Exception:  # noqa: BLE001 - a wrong result or a runtime error: reported
            failed.append(label)
            print(f"FAIL {label}\n{traceback.format_exc()}", flush=True)

    k = 0
    for index, op in enumerate(OPS):
        if (names and op.name not in names) or index % shards != shard:
            continue
        for strategy, lanes, batch, n in cases(op):
            if strategies and (strategy or "none") not in strategies:
                continue
            dtypes = op.dtypes if args.all_dtypes else (op.dtypes[k % len(op.dtypes)],)
            k += 1
            for dtype in dtypes:
                dtype = np.dtype(dtype)
                run(f"{op.name} {strategy or 'default'} lanes={lanes} {dtype.name} "
                    f"batch={batch} n={n}",
                    functools.partial(check_case, op, strategy, lanes, batch, n, dtype, rng))
    for name in ("lu_solve", "ldl_solve"):
        if (names and name not in names) or shard != 0:
            continue
        for strategy in ("looped", "sequential", "batched", "blocked"):
            if strategies and strategy not in strategies:
                continue
            for n in (SMALL, LARGE):
                run(f"{name} {strategy} malformed pivots float64 n={n}",
                    functools.partial(check_bad_pivots, name, strategy, n, rng))

    print(f"sanitizer subset: {ran} (op, strategy, dtype, n) cases ran, {infeasible} refused as "
          f"infeasible, {len(failed)} failed, in {time.monotonic() - start:.0f} s", flush=True)
    for label in failed:
        print(f"  failed: {label}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
