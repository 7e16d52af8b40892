#!/usr/bin/env bash
# Session 20, call 10 on nvidia-h100-x1: the final review changed ffi/ldl_kernels.cu's host side
# only (the panel kernels' rows-a-thread dispatch one helper, with_rows_per_thread, for the
# one-block and cluster launches and the cluster check; the cluster-shape cache keyed by a tuple;
# the PTX of all 85 kernels the same). tests/test_ldl.py.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-200}" t1
tests_passed t1 || { echo "tests failed"; head -80 "$OUT/r/t1/failures.log"; }
tar czf "$OUT/results.tgz" -C "$OUT" r
