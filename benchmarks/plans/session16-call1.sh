#!/usr/bin/env bash
# Session 16, call 1 (benchmarks/plans/session16.txt items 1, 2, 3, 5) on nvidia-h100-x2. GPU 1:
# the grid's slow leftovers the whole call (2 timed calls where one takes over 4 s). GPU 0: the
# tests of the small solve kernels' shared preamble (item 5: tests/test_lu.py,
# tests/test_cholesky.py); the det probe with the installed package (per strategy on seeds 0-1;
# the grid's very cell with the blocked LU on seeds 0-3); the QR kernels on one lane and on 4
# against JAX at n = 16 / 32 (batches 4..256), the table rebuilt on the machine with them, the
# grid's qr / qr_r / qr_multiply cells up to n = 32 measured again. The grids merged last.
source benchmarks/plans/device_call.sh
DTYPES=float64,float32 MIN_REPEATS=2 grid_beside "${GRID_OPS:-eig,svd_qr,eigvals,svdvals,svd}" \
  "${UNTIL:-500}" 1
export CUDA_VISIBLE_DEVICES=0
gpu_tests "tests/test_lu.py tests/test_cholesky.py" "${TEST_TIMEOUT:-150}"
timeout "$(kill_at 50)" python3 -m benchmarks.diag.det_probe --seeds 2 > "$OUT/r/det_probe.txt" 2>&1
echo "det probe rc=$? at $((SECONDS - t0)) s"; cut -c1-160 "$OUT/r/det_probe.txt" | tail -13
timeout "$(kill_at 50)" python3 -m benchmarks.diag.det_probe --cells 4 --strategy blocked \
  > "$OUT/r/det_cells.txt" 2>&1
echo "det cells rc=$? at $((SECONDS - t0)) s"; cut -c1-160 "$OUT/r/det_cells.txt" | tail -12
timeout "$(kill_at "${BENCH_S:-130}")" python3 -m benchmarks.bench --ops qr,qr_r,qr_multiply \
  --dtypes float32,float64 --strategies batched,batched:4 --no-torch --tag s16-qr-small \
  --out "$OUT/r" --shapes 4x16,16x16,64x16,256x16,4x32,16x32,64x32,256x32 > "$OUT/r/bench.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
table_with "$OUT"/r/s16-qr-small_*.json
REDO_OPS=qr,qr_r,qr_multiply REDO_MAX_N=32 DTYPES=float32,float64 \
  grid_goes_on "qr,qr_r,qr_multiply" "${UNTIL1:-510}"
grid_beside_done
grep -E "^\| qr" "$OUT/r/bench.txt" | cut -c1-120
