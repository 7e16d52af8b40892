#!/usr/bin/env bash
# Session 22, call 4 on nvidia-h100-x1: the committed code (calls 1-3's kernels; the warp kernel's
# bound made dtype-independent in form, comments, the tests' child helper shared) through
# tests/test_ldl.py once more.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-300}" t1
tests_passed t1 || { echo "tests failed"; head -60 "$OUT/r/t1/failures.log"; }
tar czf "$OUT/results.tgz" -C "$OUT" r
