#!/usr/bin/env bash
# Session 19, call 9 on nvidia-h100-x1 (review): block_argmax built on the shared-memory panel's
# reduction (the warp's integer max / min reductions: the LU panel, the ?sytf2 and the global
# ?lasyf kernels change), the panels' interchange walk one helper, grid-stride loops one helper
# (batch and matmul kernels: the same PTX). tests/test_ldl.py and tests/test_lu.py.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py tests/test_lu.py" "${TEST_TIMEOUT:-330}" t1
tar czf "$OUT/results.tgz" -C "$OUT" r
