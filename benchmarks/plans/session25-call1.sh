#!/usr/bin/env bash
# Session 25, call 1 on nvidia-h100-x1, on branch wip/cluster-stasync (built for sm_90 without a
# GPU in session 24: not yet run). The cluster LDL^T panel's second exchange a step (the
# candidate row's argmax and its slots) by st.async onto each block's mbarrier instead of a
# cluster barrier, whose release compiles to MEMBAR.ALL.GPU (session 24's ncu: the float64
# 1x2048 factorization spends 4.7 of its 6.9 ms in cluster panels, ~3.9 us a column against ~2.0
# in one-block panels).
# 1. benchmarks/diag/cluster_barrier_probe.cu (nvcc alone, seconds): a step's argmax exchange by
#    cluster.sync(), by a relaxed barrier (no fence) and by st.async, with and without a global
#    store before it.
# 2. The package built; tests/test_ldl.py's cluster tests first (a wrong byte count would hang a
#    panel: the child's timeout says so), then the whole file.
# 3. ldl_factor / ldl_solve against JAX where clusters run (main's numbers: session 24 call 2 /
#    call 3, h100-grid_*), and clusters from fewer rows (JCM_LDL_PANEL_CLUSTER_MIN_ROWS).
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
mkdir -p "$OUT/r"
"$nvcc" -std=c++17 -arch=sm_90 -O3 -o /tmp/cluster_barrier_probe \
  benchmarks/diag/cluster_barrier_probe.cu && for shape in "8 256" "8 128" "4 256" "2 512"; do
  timeout 60 /tmp/cluster_barrier_probe $shape 20000
done 2>&1 | tee "$OUT/r/cluster-barrier-probe.txt"
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "$(kill_at 120)" t0 "cluster"
if tests_passed t0; then
  gpu_tests "tests/test_ldl.py" "$(kill_at 200)" t1
  tests_passed t1 && echo "tests passed"
  tar czf "$OUT/results.tgz" -C "$OUT" r
  bench_op s25-c1-stasync ldl_factor,ldl_solve auto 1x1024,1x2048,4x2048,16x2048 120
  # With one cluster barrier a step, clusters may pay from fewer rows: float32's 1025..1670-row
  # panels run 16 columns on one block of 1024 threads, two rows a thread (2.6 us a column).
  JCM_LDL_PANEL_CLUSTER_MIN_ROWS=1025 bench_op s25-c1-stasync-min1025 ldl_factor auto 1x2048 60
  JCM_LDL_PANEL_CLUSTER_MIN_ROWS=513 bench_op s25-c1-stasync-min513 ldl_factor auto 1x1024 60
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
cat "$OUT/r/cluster-barrier-probe.txt"
grep -E "^\| ldl" "$OUT"/r/bench-s25-c1-stasync*.txt | cut -c1-120
