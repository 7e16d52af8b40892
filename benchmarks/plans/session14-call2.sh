#!/usr/bin/env bash
# Session 14, call 2: the small Cholesky kernels (ffi/cholesky_kernels.cu potrf_small /
# potrs_small: the batched path of potrf and potrs for n <= 64) and getrs_small with a warp per
# right-hand side up to 32 warps. tests/test_cholesky.py and tests/test_lu.py; the kernels
# against JAX (cholesky, cho_solve) at batch 1..1024 x n 8..64; the shipped table rebuilt on the
# machine with them; then the grid's cholesky / cho_solve / inv cells up to n = 64 measured again.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_cholesky.py tests/test_lu.py" "${TEST_TIMEOUT:-150}"
timeout "$(kill_at "${BENCH_S:-150}")" python3 -m benchmarks.bench --ops cholesky,cho_solve \
  --dtypes float32,float64 --strategies batched --no-torch --tag s14-cholesky-kernel \
  --out "$OUT/r" --shapes 1x8,1x16,1x32,1x64,4x8,4x16,4x32,4x64,16x8,16x16,16x32,16x64,64x8,64x16,64x32,64x64,256x8,256x16,256x32,256x64,1024x8,1024x16,1024x32,1024x64 \
  > "$OUT/r/bench.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
table_with "$OUT"/r/s14-cholesky-kernel_*.json
REDO_OPS=cholesky,cho_solve,inv REDO_MAX_N=64 DTYPES=${DTYPES:-float32,float64} \
  grid_goes_on "cholesky,cho_solve,inv${GRID_OPS:+,$GRID_OPS}" "${UNTIL:-470}"
grep -E "^\| (cholesky|cho_solve)" "$OUT/r/bench.txt" | cut -c1-130
