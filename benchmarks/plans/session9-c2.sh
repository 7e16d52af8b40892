#!/usr/bin/env bash
# Session 9, call C2 (the session's last device minutes): the float64 grid begins, LU and
# Cholesky first (the shipped table now has the float64 blocked LU of call C1).
source benchmarks/plans/device_call.sh
DTYPES=float64 grid_goes_on "${GRID_OPS:-lu_factor,cholesky,solve,det,inv,qr,eigh}" "${UNTIL:-330}"
