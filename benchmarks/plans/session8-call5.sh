#!/usr/bin/env bash
# Session 8, device call 5: the shipped table now holds calls 1, 2 and 4's points (eigh at every
# batch from n = 64): test_tune and test_eigh on the GPU, then the grid goes on where call 4
# stopped (cells under 0.95x, or whose auto plan changed, measured again).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_tune.py tests/test_eigh.py" 150
grid_goes_on "${OPS:-eig,svd,lu_factor,solve,inv,det,cholesky,qr,eigh,cho_solve,ldl_factor,ldl_solve,qr_r,qr_multiply,eigvalsh,eigvals,svdvals,svd_qr}" 545
