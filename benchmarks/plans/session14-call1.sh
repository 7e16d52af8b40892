#!/usr/bin/env bash
# Session 14, call 1 (benchmarks/plans/session14.txt items 0-2): the GPU tests of every kernel
# file after kernel_util.cuh's allow_shared fix (session 13 call 3: getrs_small at complex128
# 32 x 64 failed without the opt-in); the LU kernel's float32 16 x 16 point measured again with
# its neighbours (session 13: one 0.066 ms outlier kept `auto` on JAX's lowering there), the
# table rebuilt on the machine, the grid's LU cells up to n = 32 measured again; then the grid's
# slow leftovers, sharded over every GPU of the host (nvidia-h100-x2 where lent).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_lu.py tests/test_eigh.py tests/test_qr.py tests/test_ldl.py" "${TEST_TIMEOUT:-200}"
timeout "$(kill_at "${BENCH_S:-60}")" python3 -m benchmarks.bench --ops lu_factor \
  --dtypes float32 --strategies batched --no-torch --rounds 3 --tag s14-lu-kernel-16 \
  --out "$OUT/r" --shapes 4x16,16x8,16x16,16x32,64x16 > "$OUT/r/bench.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
table_with "$OUT"/r/s14-lu-kernel-16_*.json
REDO_OPS=lu_factor,det,inv,solve REDO_MAX_N=32 DTYPES=float32 grid_goes_on "lu_factor,det,inv,solve" 300
DTYPES=${DTYPES:-float64,float32} grid_sharded "${GRID_OPS:-eig,svd_qr,eigvals,svdvals,svd}" "${UNTIL:-480}"
