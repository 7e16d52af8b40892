#!/usr/bin/env bash
# Session 18, call 5 on nvidia-h100-x1: the unblocked LDL^T solve kernel with the factor's lower
# triangle (packed) and the pivots in shared memory where they fit (ffi/ldl_kernels.cu
# sytrs_lower_kernel<T, true>; before, each step waited for its pivot and column from L2).
# tests/test_ldl.py; if they pass, ldl_solve batched against JAX with the factor in shared memory
# and in global memory (JCM_LDL_SOLVE_SHARED_FACTOR=0), twice each, alternating; then the grid's
# ldl_solve cells up to n = 256 again (float32 and float64).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-120}" t1
if [[ -s "$OUT/r/t1/failures.log" ]] || ! grep -q " passed" "$OUT/r/t1/pytest.log"; then
  echo "tests failed: no benchmark"; head -80 "$OUT/r/t1/failures.log"
else
  bench() {  # bench TAG: ldl_solve batched against JAX where the unblocked kernel runs
    timeout "$(kill_at 100)" python3 -m benchmarks.bench --ops ldl_solve \
      --dtypes float32,float64 --strategies batched --no-torch --tag "$1" --out "$OUT/r" \
      --shapes 1x16,1x32,1x64,1x128,4x64,64x64,256x64,64x128,256x128 > "$OUT/r/bench-$1.txt" 2>&1
    echo "bench $1 rc=$? at $((SECONDS - t0)) s"
  }
  bench s18-ldl-solve-smem-a
  JCM_LDL_SOLVE_SHARED_FACTOR=0 bench s18-ldl-solve-global-a
  bench s18-ldl-solve-smem-b
  JCM_LDL_SOLVE_SHARED_FACTOR=0 bench s18-ldl-solve-global-b
  tar czf "$OUT/results.tgz" -C "$OUT" r
  REDO_OPS=ldl_solve REDO_MAX_N=256 DTYPES=float32,float64 \
    grid_goes_on "ldl_solve" "${UNTIL1:-470}"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*-a.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
