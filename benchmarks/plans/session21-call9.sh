#!/usr/bin/env bash
# Session 21, call 9 on nvidia-h100-x1: the grid's ldl_factor / ldl_solve cells up to n = 64
# measured again with call 8's code (the ?sytf2 block kernel without the barrier at each step's
# end; call 8: tests/test_ldl.py 635 passed, racecheck / synccheck clean, float64 4x32 0.0557 ms
# against JAX's 0.0566). No tests here: the same sources as call 8.
source benchmarks/plans/device_call.sh
REDO_OPS=ldl_factor,ldl_solve REDO_MAX_N=64 DTYPES=float32,float64 NO_TORCH=1 \
  grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-380}"
tar czf "$OUT/results.tgz" -C "$OUT" r
