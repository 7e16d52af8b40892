#!/usr/bin/env bash
# Session 24, call 2 on nvidia-h100-x1. Call 1 put the one-block LDL^T panel's write-out by
# pointer on main (float32 1x1024 2.39 -> 2.09 ms, 1x2048 6.47 -> 5.99). Here the same for the
# cluster panel's end (write_label_panel), and both panels' GEMVs by column pointer with the
# live-row predicate worked out once a step (their SASS: ~6 integer instructions an FFMA before).
# tests/test_ldl.py, ldl_factor / ldl_solve against JAX at the call-1 shapes, then ncu's kernel
# times of one 1x2048 factorization (float32 and float64): how much of it the panels are.
source benchmarks/plans/device_call.sh
ldl_tests_then_bench s24-c2-gemv 1x256,1x512,1x1024,1x2048,4x1024,64x256
kernel_times factor-f32-2048 ldl_factor float32 1 2048 --strategy auto --calls 1
kernel_times factor-f64-2048 ldl_factor float64 1 2048 --strategy auto --calls 1
tar czf "$OUT/results.tgz" -C "$OUT" r
cat "$OUT"/r/ncu-*.txt | cut -c1-100
grep -E "^\| ldl" "$OUT/r/bench-s24-c2-gemv.txt" | cut -c1-100
