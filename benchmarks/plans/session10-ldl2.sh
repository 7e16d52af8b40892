#!/usr/bin/env bash
# Session 10, last call: the blocked LDL^T solve's kernels with the block's square of L in shared
# memory and warp-wide dot products (the first version, call 3, lost to the unblocked kernel
# below n = 2048: serial per-thread loops over global memory): the LDL^T tests, then the solve
# probe (unblocked / blocked / JAX's lu_solve) that sets BLOCKED_MIN_N["sytrs"].
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" 150
timeout 120 python3 -m benchmarks.diag.ldl_solve_probe --dtypes float32,float64 --rounds 3 \
  --shapes 1x64,1x256,1x1024,1x2048,4x2048,64x256,64x1024,256x512 \
  > "$OUT/r/ldl_solve_probe.txt" 2>&1
echo "ldl solve probe rc=$? at $((SECONDS - t0)) s"; tail -18 "$OUT/r/ldl_solve_probe.txt"
tar czf "$OUT/results.tgz" -C "$OUT" r
