#!/usr/bin/env bash
# Session 13, call 1: why bench.same_program told jnp.linalg.cholesky and jcm.cholesky apart on
# the GPU (session 12's call 4: two tests/test_tune.py failures; d476952 a candidate fix), the
# probe and tests/test_tune.py; then the grid's leftovers (float64 svd / svd_qr / eig / eigvals /
# svdvals, float32 svd / eig / svd_qr / svdvals at batch 64-256) over every GPU of the host.
source benchmarks/plans/device_call.sh
nvidia-smi -L
python3 -m benchmarks.diag.same_program_probe > "$OUT/r/same_program.txt" 2>&1
tail -25 "$OUT/r/same_program.txt"
gpu_tests "tests/test_tune.py" "${TEST_TIMEOUT:-150}"
DTYPES=${DTYPES:-float64,float32} grid_sharded "${GRID_OPS:-svd,svd_qr,eig,eigvals,svdvals}" "${UNTIL:-470}"
