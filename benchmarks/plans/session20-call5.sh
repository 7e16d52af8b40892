#!/usr/bin/env bash
# Session 20, call 5 on nvidia-h100-x1: the review after call 4 changed ffi/ldl_kernels.cu's
# factor kernels: a 2x2 pivot's multipliers and L entries from one helper (TwoByTwoPivot: the same
# expressions; the real kernels' PTX holds the same instructions) and the zero-column test from
# one (nothing_to_pivot), in all five Bunch-Kaufman kernels. tests/test_ldl.py.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-200}" t1
tests_passed t1 || { echo "tests failed"; head -80 "$OUT/r/t1/failures.log"; }
tar czf "$OUT/results.tgz" -C "$OUT" r
