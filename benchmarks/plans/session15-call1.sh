#!/usr/bin/env bash
# Session 15, call 1 (benchmarks/plans/session15.txt items 0-3): tests/test_cholesky.py (the
# Cholesky kernels' final launch shapes, first run) with tests/test_lu.py; the det probe (item
# 3); the grid's cholesky / cho_solve cells up to n = 64 measured again with the shape that
# ships; then the grid's slow leftovers, sharded over every GPU of the host (nvidia-h100-x2
# where lent).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_cholesky.py tests/test_lu.py" "${TEST_TIMEOUT:-150}"
timeout "$(kill_at 90)" python3 -m benchmarks.diag.det_probe > "$OUT/r/det_probe.txt" 2>&1
echo "det probe rc=$? at $((SECONDS - t0)) s"; tail -18 "$OUT/r/det_probe.txt"
REDO_OPS=cholesky,cho_solve REDO_MAX_N=64 DTYPES=float32,float64 \
  grid_goes_on "cholesky,cho_solve" "${UNTIL1:-330}"
DTYPES=${DTYPES:-float64,float32} grid_sharded "${GRID_OPS:-eig,svd_qr,eigvals,svdvals,svd}" "${UNTIL:-480}"
