#!/usr/bin/env bash
# Session 10: the blocked LDL^T solve (ffi/ldl_ops.cc sytrs_blocked) on the GPU: the LDL^T tests,
# the solve alone unblocked / blocked / JAX's lu_solve, then the grid goes on (LDL^T cells first).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py tests/test_lu.py" 200
timeout 100 python3 -m benchmarks.diag.ldl_solve_probe --dtypes float32,float64 --rounds 3 \
  --shapes 1x64,1x256,1x1024,1x2048,4x2048,64x256,64x1024,256x512 \
  > "$OUT/r/ldl_solve_probe.txt" 2>&1
echo "ldl solve probe rc=$? at $((SECONDS - t0)) s"; cat "$OUT/r/ldl_solve_probe.txt" | tail -34
tar czf "$OUT/results.tgz" -C "$OUT" r
DTYPES=${DTYPES:-float32,float64} grid_goes_on "${GRID_OPS:-ldl_solve,ldl_factor,eigvals,svd,eig,svd_qr,inv,qr,cho_solve,qr_r,qr_multiply,eigh,eigvalsh,svdvals,lu_factor,cholesky,solve,det}" "${UNTIL:-380}"
