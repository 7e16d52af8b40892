#!/usr/bin/env bash
# Session 21, call 8 on nvidia-h100-x1: the ?sytf2 block kernel without the barrier at each
# step's end (what a step writes after its last barrier, column k scaled or a 2x2 step's columns
# from w, the next step neither reads nor writes before its own first barrier; one barrier after
# the loop for the copy out), for the float64 n = 32 batches (0.81-0.90x). tests/test_ldl.py,
# racecheck / synccheck on the kernel with the matrix in shared memory, then ldl_factor batched
# at n = 32 / 64 against JAX.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-240}" t1
tests_passed t1 || { echo "tests failed (benchmarks still run)"; head -60 "$OUT/r/t1/failures.log"; }
sanitize_ldl sytrf_lower 90 --batched
bench_op s21-ldl-c8 ldl_factor auto 4x32,64x32,256x32,4x64,64x64,256x64 60
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^\| ldl" "$OUT/r/bench-s21-ldl-c8.txt" | cut -c1-100
