#!/usr/bin/env bash
# Session 18, call 6 on nvidia-h100-x1: the LDL^T solve for n <= 128 as a warp per right-hand side
# with its column in registers and no barrier after the factor's copy to shared memory
# (ffi/ldl_kernels.cu sytrs_lower_warp_kernel; call 5's block kernel with the factor in shared
# memory saved only 10%: its steps are barriers and shared-memory round trips).
# tests/test_ldl.py; if they pass, ldl_solve batched against JAX with it and with the factor in
# global memory (JCM_LDL_SOLVE_SHARED_FACTOR=0: the block kernel as before call 5), alternating;
# then the grid's ldl_solve cells up to n = 128 again (float32 and float64).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-120}" t1
if [[ -s "$OUT/r/t1/failures.log" ]] || ! grep -q " passed" "$OUT/r/t1/pytest.log"; then
  echo "tests failed: no benchmark"; head -80 "$OUT/r/t1/failures.log"
else
  bench() {  # bench TAG: ldl_solve batched against JAX where the warp kernel runs
    timeout "$(kill_at 100)" python3 -m benchmarks.bench --ops ldl_solve \
      --dtypes float32,float64 --strategies batched --no-torch --tag "$1" --out "$OUT/r" \
      --shapes 1x16,1x32,1x64,1x128,4x64,64x64,256x64,64x128,256x128 > "$OUT/r/bench-$1.txt" 2>&1
    echo "bench $1 rc=$? at $((SECONDS - t0)) s"
  }
  bench s18-ldl-solve-warp-a
  JCM_LDL_SOLVE_SHARED_FACTOR=0 bench s18-ldl-solve-global-c
  tar czf "$OUT/results.tgz" -C "$OUT" r
  REDO_OPS=ldl_solve REDO_MAX_N=128 DTYPES=float32,float64 \
    grid_goes_on "ldl_solve" "${UNTIL1:-330}"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
