#!/usr/bin/env bash
# Session 10, grid calls: the issue-7 grid goes on (float32's slow cells, then float64 every op),
# resumed from the warm machine's state or benchmarks/results/wip/.
source benchmarks/plans/device_call.sh
DTYPES=${DTYPES:-float32,float64} grid_goes_on "${GRID_OPS:-eigvals,svd,eig,svd_qr,inv,qr,cho_solve,qr_r,qr_multiply,eigh,eigvalsh,svdvals,ldl_factor,ldl_solve,lu_factor,cholesky,solve,det}" "${UNTIL:-560}"
