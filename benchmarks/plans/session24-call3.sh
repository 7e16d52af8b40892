#!/usr/bin/env bash
# Session 24, call 3 on nvidia-h100-x1: the grid's ldl_factor / ldl_solve cells of the blocked
# factorization (n >= 128) at batch 1, 4 and 16 measured again with main's kernels (c29018b: the
# code call 2 tested, 652 passed; the panels' write-outs and GEMVs by pointer), float32 and
# float64, so that the committed grid has the cells the session's changes moved most. (Batches 64
# and 256 keep the session-22 numbers, which these kernels only make faster.)
source benchmarks/plans/device_call.sh
REDO_OPS=ldl_factor,ldl_solve REDO_MIN_N=128 REDO_BATCHES=1,4,16 DTYPES=float32,float64 \
  NO_TORCH=1 grid_goes_on "ldl_factor,ldl_solve" "${UNTIL:-540}"
tar czf "$OUT/results.tgz" -C "$OUT" r
ldl_grid_cells 128
