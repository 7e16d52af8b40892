#!/usr/bin/env bash
# Session 20, call 8 on nvidia-h100-x1: the cluster panel for up to 16 matrices (call 7: float64
# 16x2048 24.5 -> 17.6 ms, float32 19.7 -> 14.8, 16x1024 5.99 -> 4.64; 64 x 1024 no faster).
# tests/test_ldl.py (the cluster test now has 6 matrices of one shape); if they pass, the grid's
# ldl_factor / ldl_solve cells at batch 16 from n = 1024 again (report --redo-batches, new), and
# the cells under 0.95x.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-200}" t1
if ! tests_passed t1; then
  echo "tests failed: no grid"; head -80 "$OUT/r/t1/failures.log"
else
  REDO_OPS=ldl_factor,ldl_solve REDO_MIN_N=1024 REDO_BATCHES=16 DTYPES=float32,float64 NO_TORCH=1 \
    grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-470}"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
