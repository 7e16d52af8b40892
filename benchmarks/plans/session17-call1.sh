#!/usr/bin/env bash
# Session 17, call 1 (benchmarks/plans/session17.txt items 1, 3, 4) on nvidia-h100-x2. GPU 1:
# the grid's last leftover cells (svd / svdvals / svd_qr at batch 256; one timed call after the
# probe, no PyTorch). GPU 0: QR of a single matrix at n <= 64 and LDL^T of a single matrix from
# n = 128 under every strategy against JAX; the table rebuilt on the machine with them; the grid's
# svd cells up to n = 32 (float64's still gesvdjBatched's numbers) and the qr / ldl cells whose
# plan the table changes measured again. The grids merged last.
source benchmarks/plans/device_call.sh
DTYPES=float64,float32 MIN_REPEATS=1 NO_TORCH=1 \
  grid_beside "${GRID_OPS:-svdvals,svd_qr,svd}" "${UNTIL:-500}" 1
export CUDA_VISIBLE_DEVICES=0
# Session 16's review changed gesvdj_traits' workspace helpers after its last GPU run.
gpu_tests "tests/test_svd.py" "${TEST_TIMEOUT:-120}"
timeout "$(kill_at "${BENCH_S:-120}")" python3 -m benchmarks.bench --ops qr,qr_r,qr_multiply \
  --dtypes float32,float64 --strategies batched,sequential --no-torch --tag s17-qr-single \
  --out "$OUT/r" --shapes 1x8,1x16,1x32,1x64 > "$OUT/r/bench-qr.txt" 2>&1
echo "bench qr rc=$? at $((SECONDS - t0)) s"
timeout "$(kill_at "${BENCH_S:-120}")" python3 -m benchmarks.bench --ops ldl_factor,ldl_solve \
  --dtypes float32,float64 --strategies looped,sequential,blocked,batched --no-torch \
  --tag s17-ldl-single --out "$OUT/r" --shapes 1x128,1x256,1x512,1x1024,1x2048 \
  > "$OUT/r/bench-ldl.txt" 2>&1
echo "bench ldl rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
table_with "$OUT"/r/s17-qr-single_*.json "$OUT"/r/s17-ldl-single_*.json
# svd's cells up to n = 32 every one; the others where the new table changes `auto`'s plan.
REDO_OPS=svd REDO_MAX_N=32 DTYPES=float64,float32 \
  grid_goes_on "svd,qr,qr_r,qr_multiply,ldl_factor,ldl_solve" "${UNTIL1:-480}"
grid_beside_done
grep -E "^\| (qr|ldl)" "$OUT"/r/bench-*.txt | cut -c1-140
