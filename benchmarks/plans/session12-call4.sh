#!/usr/bin/env bash
# Session 12, call 4: the shipped table with the Jacobi kernel's points (s12-jacobi-kernel2) and
# syevj compared at XLA_MARGIN (tables.UNGUARDED_KERNELS): tests/test_tune.py and
# tests/test_eigh.py, then the grid, where the eigh / eigvalsh cells whose auto plan changed are
# measured again, then GRID_OPS (DTYPES) while time lasts.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_tune.py tests/test_eigh.py" "${TEST_TIMEOUT:-150}"
DTYPES=${DTYPES:-float32,float64} grid_goes_on "eigh,eigvalsh${GRID_OPS:+,$GRID_OPS}" "${UNTIL:-480}"
