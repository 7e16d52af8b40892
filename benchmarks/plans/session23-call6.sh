#!/usr/bin/env bash
# Session 23, call 6 on nvidia-h100-x1 (the session's last ~400 s of device time): data for
# session 24's item 1 (benchmarks/plans/session24.txt). One 1024-row float32 one-block panel
# (lasyf_lower_shared_kernel, the third launch of a 1x1024 factorization) profiled in full with
# its SASS and per-instruction counters (instructions executed, stall samples), and then, if
# time is left, one float64 cluster panel of a 1x2048 factorization.
source benchmarks/plans/device_call.sh
ncu --version | tail -1
ncu_full shared-f32-1024 lasyf_lower_shared 2 ldl_factor float32 1 1024 --strategy auto
ncu_full cluster-f64-2048 lasyf_lower_cluster 2 ldl_factor float64 1 2048 --strategy auto
