#!/usr/bin/env bash
# Session 8, device call 6 (the session's last device minutes): the grid goes on where call 5
# stopped: the LU family first (its cells under 0.95x again, pooled over rounds), same-lowering
# cells that disagree pooled too.
source benchmarks/plans/device_call.sh
grid_goes_on "${OPS:-lu_factor,solve,inv,det,cholesky,qr,eigh,eig,svd,cho_solve,ldl_factor,ldl_solve,qr_r,qr_multiply,eigvalsh,eigvals,svdvals,svd_qr}" "${UNTIL:-300}"
