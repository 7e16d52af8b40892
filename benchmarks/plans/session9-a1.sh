#!/usr/bin/env bash
# Session 9, device call A1: the eigh n <= 32 rule on the GPU (tests/test_eigh.py); then tune the
# float64 cells the shipped table lacks (getrf / potrf / geqrf / syevd at batch 4, 16, 256),
# into the loan's tune cache, which later calls' grids read.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_eigh.py" 150
tune_until tune-f64 "${UNTIL:-560}" --ops lu_factor,cholesky,qr,eigh --dtypes float64 \
  --batches 4,16,256 --sizes 64,128,256,512,1024,2048 --lanes 4,8,16 --repeats 5
