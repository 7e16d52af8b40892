#!/usr/bin/env bash
# Session 11, call 3 (a fresh machine): tune float64 eigh (syevd) at 16x2048 and 64x2048, which
# the shipped table lacks (auto took 4x2048's winner, XsyevBatched on 4 lanes: 336 ms at 16x2048
# against JAX's 272); then the grid, eigh / eigvalsh first (float64's new plans, float32's stale
# n <= 32 cells), then the float64 ops still missing.
source benchmarks/plans/device_call.sh
tune_until tune-eigh-f64 "${TUNE_UNTIL:-230}" --ops eigh --dtypes float64 --batches 16,64 \
  --sizes 2048 --lanes 4,8,16 --repeats 5
DTYPES=float64,float32 grid_goes_on "${GRID_OPS:-eigh,eigvalsh,ldl_factor,ldl_solve,svdvals,det}" "${UNTIL:-470}"
