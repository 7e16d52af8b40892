#!/usr/bin/env bash
# Session 12, call 2: the batched Jacobi kernel (ffi/eigh_kernels.cu, eigh at n <= 32) on the
# H100. tests/test_eigh.py (the kernel's own tests included), then the kernel against JAX
# (syevjBatched for batches, syevj / syevd for one matrix) and PyTorch from n = 4 to 32 and
# batch 1 to 4096, then the grid: eigh / eigvalsh cells whose auto plan changed (n <= 32) are
# measured again, then GRID_OPS (DTYPES) while time lasts.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_eigh.py" "${TEST_TIMEOUT:-150}"
timeout "$(kill_at "${BENCH_S:-150}")" python3 -m benchmarks.bench --ops eigh,eigvalsh \
  --dtypes float32,float64 --strategies auto,looped --tag s12-jacobi-kernel --out "$OUT/r" \
  --shapes 1x4,1x8,1x16,1x32,16x4,16x8,16x16,16x32,256x4,256x8,256x16,256x32,4096x4,4096x8,4096x16,4096x32 \
  > "$OUT/r/bench.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
DTYPES=${DTYPES:-float32,float64} grid_goes_on "eigh,eigvalsh${GRID_OPS:+,$GRID_OPS}" "${UNTIL:-480}"
tail -25 "$OUT/r/bench.txt"
