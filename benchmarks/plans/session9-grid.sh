#!/usr/bin/env bash
# Session 9, the grid's calls: it goes on from the loan's state (or the committed JSON), OPS in
# order (env OPS, DTYPES, UNTIL override), a float64 tune first where TUNE_UNTIL is set.
source benchmarks/plans/device_call.sh
if [[ -n "${TUNE_UNTIL:-}" ]]; then
  tune_until tune-f64 "$TUNE_UNTIL" --ops lu_factor,cholesky,qr,eigh --dtypes float64 \
    --batches 4,16,256 --sizes 64,128,256,512,1024,2048 --lanes 4,8,16 --repeats 5
fi
grid_goes_on "${OPS:-cho_solve,eigvalsh,qr_r,qr_multiply,ldl_factor,ldl_solve,svdvals,svd_qr,eigvals,svd,eig,lu_factor,solve,inv,det,cholesky,qr,eigh}" "${UNTIL:-545}"
