#!/usr/bin/env bash
# Session 23, call 5 on nvidia-h100-x1: the small block kernel without its variant for
# 64 < n <= 128 (one copy of the matrix, measured slower than the ?sytf2 kernel in call 1): it
# stops at n = 64 (kLdlSmallBlockMaxN), where its code is as before (PTX of its instances
# unchanged). tests/test_ldl.py whole.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "$(kill_at 170)" t1
tests_passed t1 && echo "tests passed"
tar czf "$OUT/results.tgz" -C "$OUT" r
