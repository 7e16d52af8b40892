#!/usr/bin/env bash
# Session 19, call 7 on nvidia-h100-x1: the shared-memory panel narrowed by count x rows x element
# size (8 columns up to 128 KiB, 16 up to 512 KiB) instead of the count alone (call 5's grid:
# float64 16x2048 26.8 -> 29.3 ms with 8-column panels). tests/test_ldl.py; if they pass, the
# grid's LDL^T cells at n = 2048 again (float32 and float64). (Call 6: at n = 64 the blocked
# algorithm and the block kernel are equal within noise; BLOCKED_MIN_N stays 128.)
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-150}" t1
if ! tests_passed t1; then
  echo "tests failed: no grid"; head -80 "$OUT/r/t1/failures.log"
else
  REDO_OPS=ldl_factor,ldl_solve REDO_MIN_N=2048 DTYPES=float32,float64 NO_TORCH=1 \
    grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-480}"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
