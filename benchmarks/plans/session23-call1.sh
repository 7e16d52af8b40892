#!/usr/bin/env bash
# Session 23, call 1 on nvidia-h100-x1 (measurements, no code change since 87bc59e):
# 1. The small block kernel at 64 < n <= 128 (JCM_LDL_SMALL_BLOCK_MAX_N=128; 16 columns a
#    thread there, 8 warps; JCM_LDL_SMALL_BLOCK_COLS=8: 16 warps) against the ?sytf2 block kernel
#    (batched with the kernel to n = 64) and the blocked factorization (`auto` from n = 128).
# 2. A single matrix at n = 1024 / 2048 (0.76-0.90x of JAX's LU): panels of 16 / 48 columns
#    (JCM_LDL_BLOCK) against the default 32.
# 3. Every kernel's duration of one float32 1x2048 factorization (ncu): panels (cluster and
#    one-block) against GEMMs.
source benchmarks/plans/device_call.sh
S1=1x96,64x96,1x128,4x128,64x128,256x128
JCM_LDL_SMALL_BLOCK_MAX_N=128 bench_op s23-c1-small128 ldl_factor batched,blocked $S1 110
JCM_LDL_SMALL_BLOCK_MAX_N=128 JCM_LDL_SMALL_BLOCK_COLS=8 bench_op s23-c1-small128-c8 ldl_factor \
  batched $S1 60
JCM_LDL_SMALL_BLOCK_MAX_N=64 bench_op s23-c1-sytf2 ldl_factor batched 1x96,64x96,1x128,64x128 50
tar czf "$OUT/results.tgz" -C "$OUT" r
S2=1x1024,1x2048
bench_op s23-c1-nb32 ldl_factor auto $S2 40
JCM_LDL_BLOCK=16 bench_op s23-c1-nb16 ldl_factor auto $S2 40
JCM_LDL_BLOCK=48 bench_op s23-c1-nb48 ldl_factor auto $S2 40
tar czf "$OUT/results.tgz" -C "$OUT" r
timeout "$(kill_at 60)" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  python3 benchmarks/diag/ncu_probe.py ldl_factor float32 1 2048 --strategy auto --calls 1 \
  > "$OUT/r/ncu-f32-2048.csv" 2>&1
echo "ncu rc=$? at $((SECONDS - t0)) s"
python3 benchmarks/diag/ncu_sum.py "$OUT/r/ncu-f32-2048.csv" --top 8
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-s23-c1-*.txt; do echo "== ${f##*/}"; grep -E "^\| ldl" "$f" | cut -c1-90; done
