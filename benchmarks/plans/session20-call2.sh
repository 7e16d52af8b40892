#!/usr/bin/env bash
# Session 20, call 2 on nvidia-h100-x1: the cluster panel rewritten after call 1 (rows trade
# labels instead of moving between blocks; two cluster barriers a step where call 1's had three
# and swap buffers; the next columns read after the step's first barrier). Call 1: the tests'
# pivots all matched the one-block panel's but float32 factors differed by rounding (1e-5 of
# entries, the same in every cluster shape); slower than the one-block panel where that fits in
# shared memory (float32 1x1024 3.24 vs 2.38 ms), faster where it does not (float64 1x2048 8.6 vs
# 11.1, 4x2048 11.4 vs 15.9). tests/test_ldl.py, then ldl_factor blocked against JAX: clusters
# from 512 rows (the default), from 1024 and 1536, none.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-240}" t1
tests_passed t1 || { echo "tests failed (benchmarks still run)"; head -60 "$OUT/r/t1/failures.log"; }
SHAPES=1x1024,1x2048,2x2048,4x1024,4x2048
bench_op s20-ldl-cluster2-a ldl_factor blocked "$SHAPES" 90
JCM_LDL_PANEL_CLUSTER=0 bench_op s20-ldl-cluster2-off ldl_factor blocked "$SHAPES" 90
JCM_LDL_PANEL_CLUSTER_MIN_ROWS=1024 bench_op s20-ldl-cluster2-r1024 ldl_factor blocked "$SHAPES" 90
JCM_LDL_PANEL_CLUSTER_MIN_ROWS=1536 bench_op s20-ldl-cluster2-r1536 ldl_factor blocked "$SHAPES" 90
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-100; done
