#!/usr/bin/env bash
# Session 25, call 3 on nvidia-h100-x1: the grid's ldl_factor / ldl_solve cells where cluster
# panels run (n = 1024 and 2048 at batch 1, 4 and 16; float32 and float64) measured again with
# main's kernels: the cluster panel's second exchange by st.async (call 1: tests/test_ldl.py 652
# passed) and float32's one-block panels of more rows than threads on clusters (call 2: its
# cluster and blocked tests 192 passed; ldl_factor float32 1x2048 5.75 -> 5.45 ms, 4x2048 8.27 ->
# 7.36, 16x2048 14.3 -> 12.1). Cells start until ~420 s: the report draws its figures after.
source benchmarks/plans/device_call.sh
REDO_OPS=ldl_factor,ldl_solve REDO_MIN_N=1024 REDO_BATCHES=1,4,16 DTYPES=float32,float64 \
  NO_TORCH=1 grid_goes_on "ldl_factor,ldl_solve" "${UNTIL:-420}"
tar czf "$OUT/results.tgz" -C "$OUT" r
ldl_grid_cells 1024
