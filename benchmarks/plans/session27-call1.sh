#!/usr/bin/env bash
# Session 27, call 1 on nvidia-h100-x1, on branch wip/cluster-deferred (built for sm_90 without a
# GPU in session 26: not yet run). The cluster LDL^T panel with its interchanges of the trailing
# matrix deferred to the panel's end (current A(i, j) read as the stored A(home(i), home(j))), so
# that a step writes no global memory and needs no cluster barrier: its four exchanges (the
# column's argmax, W(imax), the row's argmax, the next W(k)) by st.async onto each block's
# mbarriers; at the end the moved trailing rows gathered into w and put back. Main (session 26
# calls 2-3): ldl_factor 1x2048 float32 5.45-5.55 ms, float64 6.33-6.47; 4x2048 7.34 / 9.04;
# 1x1024 1.99 / 2.43 (JAX 4.90 / 5.80, 2.08 / 2.40).
# 1. The package built; tests/test_ldl.py's cluster tests first (a wrong byte count hangs a
#    panel: the child's timeout says so), then the whole file.
# 2. ldl_factor / ldl_solve against JAX where clusters run.
# 3. compute-sanitizer's racecheck / synccheck on the cluster kernel, if time is left.
source benchmarks/plans/device_call.sh
ldl_cluster_first s27-c1-deferred 1x1024,1x2048,4x2048,16x2048 && sanitize_ldl lasyf_lower_cluster 60
save_results
grep -E "^\| ldl" "$OUT"/r/bench-s27-c1-*.txt | cut -d'|' -f2-7
