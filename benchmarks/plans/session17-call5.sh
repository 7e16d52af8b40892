#!/usr/bin/env bash
# Session 17, call 5 on nvidia-h100-x1: the warp-per-matrix LDL^T factor kernel for n <= 32
# (ffi/ldl_kernels.cu sytrf_small_kernel; model benchmarks/diag/ldl_warp_model.py).
# tests/test_ldl.py; if they pass, ldl_factor / ldl_solve batched against JAX with it and with the
# block kernel (JCM_LDL_WARP_MAX_N=0) at n <= 32, then the grid's LDL^T cells up to n = 32 again.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-120}"
if [[ -s "$OUT/r/t1/failures.log" ]] || ! grep -q " passed" "$OUT/r/t1/pytest.log"; then
  echo "tests failed: no benchmark"; head -80 "$OUT/r/t1/failures.log"
else
  bench() {  # bench TAG: ldl_factor / ldl_solve batched against JAX at n <= 32
    timeout "$(kill_at 120)" python3 -m benchmarks.bench --ops ldl_factor,ldl_solve \
      --dtypes float32,float64 --strategies batched --no-torch --tag "$1" --out "$OUT/r" \
      --shapes 1x16,1x32,4x16,4x32,16x32,64x16,64x32,256x16,256x32 > "$OUT/r/bench-$1.txt" 2>&1
    echo "bench $1 rc=$? at $((SECONDS - t0)) s"
  }
  bench s17-ldl-warp
  JCM_LDL_WARP_MAX_N=0 bench s17-ldl-block
  tar czf "$OUT/results.tgz" -C "$OUT" r
  REDO_OPS=ldl_factor,ldl_solve REDO_MAX_N=32 DTYPES=float32,float64 \
    grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-420}"
fi
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-120; done
