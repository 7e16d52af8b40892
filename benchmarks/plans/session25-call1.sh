#!/usr/bin/env bash
# Session 25, call 1 on nvidia-h100-x1: what the cluster panel's exchange costs, and where the
# one-block panel's instructions go after session 24's pointer changes.
# 1. benchmarks/diag/cluster_barrier_probe.cu (needs no build of the package: nvcc alone): a
#    step's argmax exchange over a cluster as lasyf_lower_cluster_kernel does it (cluster.sync():
#    MEMBAR.ALL.GPU + barrier), the barrier alone (relaxed, no fence), and st.async pushes
#    completing on each block's mbarrier (no barrier, no fence), with and without a global store
#    before it. Session 24's ncu: the float64 1x2048 factorization spends 4.7 of its 6.9 ms in
#    cluster panels, ~3.9 us a column against ~2.0 in one-block panels.
# 2. ncu --set full with SASS counters of a float32 1024-row one-block panel (as session 23 call
#    6, gpu-tests/session23-c6): instructions a warp a step after session 24's changes.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
mkdir -p "$OUT/r"
"$nvcc" -std=c++17 -arch=sm_90 -O3 -o /tmp/cluster_barrier_probe \
  benchmarks/diag/cluster_barrier_probe.cu && for shape in "8 256" "8 128" "4 256" "2 512"; do
  timeout 60 /tmp/cluster_barrier_probe $shape 20000
done 2>&1 | tee "$OUT/r/cluster-barrier-probe.txt"
source benchmarks/plans/device_call.sh
ncu_full shared-f32-1024 lasyf_lower_shared 2 ldl_factor float32 1 1024 --strategy auto
ncu_full cluster-f64-2048 lasyf_lower_cluster 2 ldl_factor float64 1 2048 --strategy auto
tar czf "$OUT/results.tgz" -C "$OUT" r
cat "$OUT/r/cluster-barrier-probe.txt"
