#!/usr/bin/env bash
# Session 11, call 1: ldl_solve again (float32, the blocked solve), the stale eigh / eigvalsh
# cells, then float64 for the fast ops. Sharded over every GPU when the machine has several.
source benchmarks/plans/device_call.sh
DTYPES=float32 REDO_OPS=ldl_solve grid_sharded "${GRID_OPS:-ldl_solve,eigh,eigvalsh}" 200
DTYPES=float64 grid_sharded "${GRID_OPS64:-inv,cho_solve,qr,qr_r,qr_multiply,eigh,eigvalsh,ldl_factor,ldl_solve,svdvals}" "${UNTIL:-480}"
