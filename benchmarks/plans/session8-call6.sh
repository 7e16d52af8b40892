#!/usr/bin/env bash
# Session 8, device call 6 (the session's last device minutes): the grid goes on where call 5
# stopped, same-lowering cells that disagree now pooled over rounds.
source benchmarks/plans/device_call.sh
grid_goes_on "${OPS:-eig,svd,lu_factor,solve,inv,det,cholesky,qr,eigh,cho_solve,ldl_factor,ldl_solve,qr_r,qr_multiply,eigvalsh,eigvals,svdvals,svd_qr}" "${UNTIL:-480}"
