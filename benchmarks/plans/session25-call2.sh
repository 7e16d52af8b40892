#!/usr/bin/env bash
# Session 25, call 2 on nvidia-h100-x1. Call 1 (session25-call1.sh, the cluster panel's second
# exchange by st.async, now on main): ldl_factor 1x2048 float32 5.72 ms, float64 6.35 (JAX 4.92 /
# 5.84); float32 clusters from 1025 rows (JCM_LDL_PANEL_CLUSTER_MIN_ROWS=1025) 5.42.
# 1. The package built with that as the default (cluster_panel_shape: a one-block panel of more
#    rows than threads goes to a cluster, up to JCM_LDL_PANEL_CLUSTER_TALL_COUNT matrices);
#    tests/test_ldl.py's cluster tests and its blocked tests (1100 rows: float32 now on clusters).
# 2. ldl_factor at 1x2048 / 4x2048 / 16x2048 with it and without it (TALL_COUNT=0), then at
#    1x2048 the cluster's shape (threads a block, blocks) and the panel width (JCM_LDL_BLOCK),
#    which were set when each step had two cluster barriers.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "$(kill_at 120)" t0 "cluster or blocked"
tests_passed t0 && echo "tests passed"
tar czf "$OUT/results.tgz" -C "$OUT" r
if tests_passed t0; then
  bench_op s25-c2-tall ldl_factor auto 1x2048,4x2048,16x2048 40
  JCM_LDL_PANEL_CLUSTER_TALL_COUNT=0 bench_op s25-c2-notall ldl_factor auto 1x2048,4x2048,16x2048 40
  JCM_LDL_PANEL_CLUSTER_THREADS=512 bench_op s25-c2-t512 ldl_factor auto 1x2048 30
  JCM_LDL_PANEL_CLUSTER_THREADS=128 bench_op s25-c2-t128 ldl_factor auto 1x2048 30
  JCM_LDL_PANEL_CLUSTER_THREADS=128 JCM_LDL_PANEL_CLUSTER=16 bench_op s25-c2-t128r16 ldl_factor auto 1x2048 30
  JCM_LDL_BLOCK=64 bench_op s25-c2-nb64 ldl_factor auto 1x2048 30
  JCM_LDL_BLOCK=64 JCM_LDL_PANEL_CLUSTER_THREADS=128 JCM_LDL_PANEL_CLUSTER=16 bench_op s25-c2-nb64t128r16 ldl_factor auto 1x2048 30
  JCM_LDL_BLOCK=16 bench_op s25-c2-nb16 ldl_factor auto 1x2048 30
  JCM_LDL_PANEL_CLUSTER=4 bench_op s25-c2-r4 ldl_factor auto 1x2048 30
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^\| ldl" "$OUT"/r/bench-s25-c2-*.txt | sed 's/.*bench-s25-c2-//' | cut -c1-100
