#!/usr/bin/env bash
# Session 20, call 4 on nvidia-h100-x1: the cluster panel's block shape at 2048 rows (call 3's
# default: 8 blocks of 256 threads, a row each): 8 of 128 (two rows a thread), 16 of 128
# (non-portable), 4 of 512. ldl_factor blocked against JAX at 1 / 2 / 4 x 2048 (the shapes whose
# first panels run on clusters). No ffi/ change since call 3 (tests passed there).
source benchmarks/plans/device_call.sh
SHAPES=1x2048,2x2048,4x2048
bench_op s20-ldl-shape-t256 ldl_factor blocked "$SHAPES" 80
JCM_LDL_PANEL_CLUSTER_THREADS=128 bench_op s20-ldl-shape-t128 ldl_factor blocked "$SHAPES" 80
JCM_LDL_PANEL_CLUSTER=16 JCM_LDL_PANEL_CLUSTER_THREADS=128 \
  bench_op s20-ldl-shape-r16 ldl_factor blocked "$SHAPES" 80
JCM_LDL_PANEL_CLUSTER_THREADS=512 bench_op s20-ldl-shape-t512 ldl_factor blocked "$SHAPES" 80
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-100; done
