#!/usr/bin/env bash
# Session 22, call 2 on nvidia-h100-x1: the small block kernel with 8 warps by default (call 1:
# fewer warps faster at every batch) and from n = 17 in float32 too (the warp kernel to 16):
# tests/test_ldl.py; whether its factors equal the warp / block kernels' to the bit; the warp
# kernel against it at n <= 16 (JCM_LDL_WARP_MAX_N=0) and 4 warps (COLS=16); then the grid's
# ldl_factor / ldl_solve cells up to n = 64 again.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-300}" t1
if ! tests_passed t1; then
  echo "tests failed: no grid"; head -80 "$OUT/r/t1/failures.log"
else
  timeout "$(kill_at 120)" python3 benchmarks/diag/ldl_small_bits.py > "$OUT/r/small-bits.txt" 2>&1
  echo "bits rc=$? at $((SECONDS - t0)) s"; grep -v "^differs" "$OUT/r/small-bits.txt" | tail -12
  SHAPES=4x8,256x8,4x16,256x16,4x32,256x32,4x64,256x64
  bench_op s22-c2-default ldl_factor auto $SHAPES 60
  JCM_LDL_WARP_MAX_N=0 bench_op s22-c2-nowarp ldl_factor auto $SHAPES 60
  JCM_LDL_SMALL_BLOCK_COLS=16 bench_op s22-c2-cols16 ldl_factor auto $SHAPES 60
  for f in "$OUT"/r/bench-s22-c2-*.txt; do echo "== ${f##*/}"; grep -E "^\| ldl" "$f" | cut -c1-82; done
  REDO_OPS=ldl_factor,ldl_solve REDO_MAX_N=64 DTYPES=float32,float64 NO_TORCH=1 \
    grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-535}"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
