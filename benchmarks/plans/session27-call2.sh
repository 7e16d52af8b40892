#!/usr/bin/env bash
# Session 27, call 2 on nvidia-h100-x1, branch wip/cluster-deferred. Call 1 found the branch
# correct (tests/test_ldl.py 652 passed, synccheck clean) but slower at 2048 (float32 1x2048
# 6.24 ms against main's 5.45). Suspect: the panel's end, where each thread gathered its ~64
# moved rows' entries one load at a time (w and a may alias, so each store waited on its load:
# ~64 L2 round trips, twice a panel, 32 panels). Now each thread issues a batch of 16 loads
# before their stores. Same sequence as call 1, then every kernel's time at float32 1x2048.
source benchmarks/plans/device_call.sh
ldl_cluster_first s27-c2-batched 1x1024,1x2048,4x2048,16x2048
kernel_times factor-f32-2048 ldl_factor float32 1 2048 --strategy auto --calls 1
head -6 "$OUT/r/ncu-factor-f32-2048.txt"
save_results
grep -E "^\| ldl" "$OUT"/r/bench-s27-c2-*.txt | cut -d'|' -f2-7
