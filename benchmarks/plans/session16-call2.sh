#!/usr/bin/env bash
# Session 16, call 2 on nvidia-h100-x2. GPU 1: the grid's det cells measured again (det's bench
# error is now per unit of condition, with its own floor), then the slow leftovers (2 timed calls
# where one takes over 4 s). GPU 0: tests/test_svd.py (the new one-sided Jacobi kernel,
# ffi/svd_kernels.cu); if they pass, svd against JAX with the kernel and lanes (n <= 32, and 64
# for the table's edge), the table rebuilt on the machine with it, the grid's svd / svdvals cells
# up to n = 32 measured again. The grids merged last.
source benchmarks/plans/device_call.sh
DTYPES=float32,float64 REDO_OPS=det MIN_REPEATS=2 \
  grid_beside "det,${GRID_OPS:-svd_qr,eig,eigvals,svdvals,svd}" "${UNTIL:-510}" 1
export CUDA_VISIBLE_DEVICES=0
gpu_tests "tests/test_svd.py" "${TEST_TIMEOUT:-170}"
if [[ -s "$OUT/r/t1/failures.log" ]] || ! grep -q " passed" "$OUT/r/t1/pytest.log"; then
  echo "svd tests failed: no svd benchmark"; head -60 "$OUT/r/t1/failures.log"
else
  small=1x8,1x16,1x32,4x8,4x16,4x32,16x16,16x32,64x16,64x32,256x16,256x32,1024x16,1024x32
  timeout "$(kill_at "${BENCH_S:-150}")" python3 -m benchmarks.bench --ops svd \
    --dtypes float32,float64 --strategies batched,looped --no-torch --tag s16-svd-kernel \
    --out "$OUT/r" --shapes "$small,1x64,4x64,16x64,64x64,256x64" > "$OUT/r/bench.txt" 2>&1
  echo "bench rc=$? at $((SECONDS - t0)) s"
  tar czf "$OUT/results.tgz" -C "$OUT" r
  table_with "$OUT"/r/s16-svd-kernel_*.json
  REDO_OPS=svd,svdvals REDO_MAX_N=32 DTYPES=float32,float64 \
    grid_goes_on "svd,svdvals" "${UNTIL1:-500}"
fi
grid_beside_done
grep -E "^\| svd" "$OUT/r/bench.txt" | cut -c1-130
