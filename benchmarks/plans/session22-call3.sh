#!/usr/bin/env bash
# Session 22, call 3 on nvidia-h100-x1 (call 2's machine, warm): the grid's ldl_factor /
# ldl_solve cells up to n = 64 with the small block kernel (call 2: 636 passed, its factors the
# warp and block kernels' to the bit; 8 warps kept, the warp kernel to n = 16).
source benchmarks/plans/device_call.sh
REDO_OPS=ldl_factor,ldl_solve REDO_MAX_N=64 DTYPES=float32,float64 NO_TORCH=1 \
  grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-500}"
tar czf "$OUT/results.tgz" -C "$OUT" r
