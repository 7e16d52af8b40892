#!/usr/bin/env bash
# Session 11, call 1: ldl_solve again (float32, the blocked solve), the stale eigh / eigvalsh
# cells, then float64 for the fast ops (after test_ldl.py: the refactored blocked-solve kernels). Sharded over every GPU when the machine has several.
source benchmarks/plans/device_call.sh
# The blocked solve's kernels were refactored after session 10's last GPU run (one SolveBlock
# view, one grid helper; CPU-built): its tests first.
gpu_tests "tests/test_ldl.py" 120
DTYPES=float32 REDO_OPS=ldl_solve grid_sharded "${GRID_OPS:-ldl_solve,eigh,eigvalsh}" 200
DTYPES=float64 grid_sharded "${GRID_OPS64:-inv,cho_solve,qr,qr_r,qr_multiply,eigh,eigvalsh,ldl_factor,ldl_solve,svdvals}" "${UNTIL:-480}"
