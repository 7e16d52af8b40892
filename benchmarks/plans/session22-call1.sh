#!/usr/bin/env bash
# Session 22, call 1 on nvidia-h100-x1: the small block kernel (sytrf_small_block_kernel: the
# matrix mirrored twice in shared memory, rows relabelled, every warp taking the step's decision,
# one barrier a step) for the batched ldl_factor at 16 < n <= 64 (float64 n = 32 batches were
# 0.81-0.94x of JAX's LU with sytrf_lower_kernel). tests/test_ldl.py, racecheck / synccheck, then
# ldl_factor at n = 16 / 32 / 64 with each kernel and thread shape.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-300}" t1
tests_passed t1 || { echo "tests failed (benchmarks still run)"; head -60 "$OUT/r/t1/failures.log"; }
sanitize_ldl sytrf_small_block 90 --batched
SHAPES=4x16,256x16,4x32,16x32,64x32,256x32,4x64,64x64,256x64
bench_op s22-c1-default ldl_factor auto $SHAPES 70
JCM_LDL_SMALL_BLOCK_MAX_N=0 bench_op s22-c1-old ldl_factor auto $SHAPES 70
JCM_LDL_WARP_MAX_N=0 JCM_LDL_SMALL_BLOCK_COLS=1 bench_op s22-c1-cols1 ldl_factor auto $SHAPES 70
JCM_LDL_WARP_MAX_N=0 JCM_LDL_SMALL_BLOCK_COLS=2 bench_op s22-c1-cols2 ldl_factor auto $SHAPES 70
JCM_LDL_WARP_MAX_N=0 JCM_LDL_SMALL_BLOCK_COLS=8 bench_op s22-c1-cols8 ldl_factor auto $SHAPES 70
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-s22-c1-*.txt; do echo "== ${f##*/}"; grep -E "^\| ldl" "$f" | cut -c1-90; done
