#!/usr/bin/env bash
# Session 15, call 1 (benchmarks/plans/session15.txt items 0-2): tests/test_cholesky.py (the
# Cholesky kernels' final launch shapes, first run) with tests/test_lu.py; the grid's cholesky /
# cho_solve cells up to n = 64 measured again with the shape that ships; then the grid's slow
# leftovers, sharded over every GPU of the host (nvidia-h100-x2 where lent).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_cholesky.py tests/test_lu.py" "${TEST_TIMEOUT:-150}"
REDO_OPS=cholesky,cho_solve REDO_MAX_N=64 DTYPES=float32,float64 \
  grid_goes_on "cholesky,cho_solve" "${UNTIL1:-330}"
DTYPES=${DTYPES:-float64,float32} grid_sharded "${GRID_OPS:-eig,svd_qr,eigvals,svdvals,svd}" "${UNTIL:-480}"
