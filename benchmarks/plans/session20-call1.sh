#!/usr/bin/env bash
# Session 20, call 1 on nvidia-h100-x1: the ?lasyf panel over a cluster of blocks
# (ffi/ldl_kernels.cu lasyf_lower_cluster_kernel: a single matrix's panel rows spread over up to
# 8 SMs' shared memory, cluster barriers for the argmaxes and the step's end) for up to 4
# matrices from 512 rows. tests/test_ldl.py (test_blocked_panels_on_clusters puts every panel of
# small matrices on clusters of 2..16 blocks, 1..4 rows a thread); then ldl_factor blocked
# against JAX: the default (clusters), JCM_LDL_PANEL_CLUSTER=0 (session 19's one-block panel),
# 128-thread blocks, 16-block clusters of 128.
# (It ran the kernel's first version, never committed: three cluster barriers a step and rows
# moved between blocks through swap buffers; call 2 ran the committed one, rows trading labels.)
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-240}" t1
tests_passed t1 || { echo "tests failed (benchmarks still run)"; head -60 "$OUT/r/t1/failures.log"; }
SHAPES=1x512,1x1024,1x2048,2x2048,4x1024,4x2048
bench_op s20-ldl-cluster-a ldl_factor blocked "$SHAPES" 100
JCM_LDL_PANEL_CLUSTER=0 bench_op s20-ldl-cluster-off ldl_factor blocked "$SHAPES" 100
JCM_LDL_PANEL_CLUSTER_THREADS=128 bench_op s20-ldl-cluster-t128 ldl_factor blocked "$SHAPES" 100
JCM_LDL_PANEL_CLUSTER=16 JCM_LDL_PANEL_CLUSTER_THREADS=128 \
  bench_op s20-ldl-cluster-r16 ldl_factor blocked 1x1024,1x2048,4x2048 80
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
