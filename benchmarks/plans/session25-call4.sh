#!/usr/bin/env bash
# Session 25, call 4 on nvidia-h100-x1: where a single 2048 factorization's time goes now (main
# after calls 1-2: one cluster barrier a step, float32's tall panels on clusters; ldl_factor
# float32 1x2048 5.52 ms against JAX 4.89, float64 6.44 against 5.83 in call 3's grid), to pick
# session 26's work: every kernel's time summed by name (as session 24 call 2), then one float64
# cluster panel and one float32 one-block panel of 1024 rows with SASS counters (as session 23
# call 6, gpu-tests/session23-c6).
source benchmarks/plans/device_call.sh
kernel_times factor-f32-2048 ldl_factor float32 1 2048 --strategy auto --calls 1
kernel_times factor-f64-2048 ldl_factor float64 1 2048 --strategy auto --calls 1
tar czf "$OUT/results.tgz" -C "$OUT" r
ncu_full cluster-f64-2048 lasyf_lower_cluster 2 ldl_factor float64 1 2048 --strategy auto
ncu_full shared-f32-2048 lasyf_lower_shared 40 ldl_factor float32 1 2048 --strategy auto
cat "$OUT"/r/ncu-factor-*.txt | cut -c1-100
