#!/usr/bin/env bash
# Session 13, call 3 (the session's last ~10 device minutes): the small LU-solve kernel
# (getrs_small_batched: getrs's batched path for n <= 64 and <= 64 right-hand sides) and the LU
# kernel's launch shape for more than two matrices per SM. tests/test_lu.py; the LU kernel at
# batch 1024 and solve / inv under auto at n <= 64 against JAX; the shipped table rebuilt on the
# machine with the new lu_factor cells; then the grid's solve / inv / det / lu_factor cells up to
# n = 64 measured again.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_lu.py" "${TEST_TIMEOUT:-120}"
timeout "$(kill_at "${BENCH_S:-60}")" python3 -m benchmarks.bench --ops lu_factor \
  --dtypes float32,float64 --strategies batched --no-torch --tag s13-lu-kernel-1024 \
  --out "$OUT/r" --shapes 1024x4,1024x8,1024x16,1024x32,1024x48,1024x64 > "$OUT/r/bench.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
timeout "$(kill_at "${BENCH2_S:-70}")" python3 -m benchmarks.bench --ops solve,inv \
  --dtypes float32,float64 --strategies auto --no-torch --tag s13-lu-solve-kernel \
  --out "$OUT/r" --shapes 1x16,16x16,256x16,1x64,16x64,256x64 > "$OUT/r/bench2.txt" 2>&1
echo "bench2 rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
table_with "$OUT"/r/s13-lu-kernel-1024_*.json
REDO_OPS=solve,inv,det,lu_factor REDO_MAX_N=64 DTYPES=${DTYPES:-float32,float64} \
  grid_goes_on "solve,inv,det,lu_factor${GRID_OPS:+,$GRID_OPS}" "${UNTIL:-360}"
grep -E "^\| (lu_factor|solve|inv)" "$OUT/r/bench.txt" "$OUT/r/bench2.txt" | cut -d: -f2 | cut -c1-130
