#!/usr/bin/env bash
# Session 21, call 7 on nvidia-h100-x1: the ?sytf2 block kernel (sytrf_lower_kernel) without the
# barriers its two argmaxes a step brought along (block_argmax<false>: each call site's slots are
# its own and the step's own barriers already order them; 14 -> 10 bar.sync in its PTX), for the
# float64 n = 32 batches under 0.95x (JAX's getrfBatched 0.053-0.068 ms, the kernel 0.059-0.083).
# tests/test_ldl.py, then the grid's ldl_factor / ldl_solve cells up to n = 64 measured again.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-240}" t1
if ! tests_passed t1; then
  echo "tests failed: no grid"; head -80 "$OUT/r/t1/failures.log"
else
  REDO_OPS=ldl_factor,ldl_solve REDO_MAX_N=64 DTYPES=float32,float64 NO_TORCH=1 \
    grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-530}"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
