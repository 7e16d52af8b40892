#!/usr/bin/env bash
# Session 25, call 5 on nvidia-h100-x1. Call 4's ncu of a float64 cluster panel (105 us, 32
# columns: ~3.3 us a column, 6,500 cycles a step; gpu-tests/session25-c4): ~20% of its stall
# samples at the cluster barrier (ERRBAR behind MEMBAR.ALL.GPU, UCGABAR_WAIT), ~9% at the
# CCTL.IVALL behind the second exchange's mbarrier wait (.acquire.cluster), ~10% at the two
# __syncthreads. The wait now acquires at block scope (no CCTL.IVALL): the cluster tests, the
# bench against call 3's grid (ldl_factor float32 1x2048 5.52 ms, float64 6.44; JAX 4.89 /
# 5.83), then the whole of tests/test_ldl.py.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "$(kill_at 120)" t0 "cluster or blocked"
tests_passed t0 && echo "cluster tests passed"
tar czf "$OUT/results.tgz" -C "$OUT" r
if tests_passed t0; then
  bench_op s25-c5-cta ldl_factor,ldl_solve auto 1x1024,1x2048,4x2048 60
  tar czf "$OUT/results.tgz" -C "$OUT" r
  gpu_tests "tests/test_ldl.py" "$(kill_at 200)" t1
  tests_passed t1 && echo "tests passed"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^\| ldl" "$OUT"/r/bench-s25-c5-*.txt | cut -c1-110
