#!/usr/bin/env bash
# Session 11, calls 2 on: the slow cells (JAX's geev / gesvd: 30-150 s a cell), float32 leftovers
# first, then float64; resumed from the warm machine's state or benchmarks/results/wip/.
source benchmarks/plans/device_call.sh
DTYPES=${DTYPES:-float32,float64} grid_sharded "${GRID_OPS:-eigvals,svd,svd_qr,eig,inv,cho_solve,qr,qr_r,qr_multiply,eigh,eigvalsh,ldl_factor,ldl_solve,svdvals}" "${UNTIL:-480}"
