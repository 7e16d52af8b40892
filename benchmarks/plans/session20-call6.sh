#!/usr/bin/env bash
# Session 20, call 6 on nvidia-h100-x1: clusters of fewer, larger blocks for the panels `auto`
# keeps on one block (call 2: 4 blocks of 256 at 1024 rows, float32 1x1024 2.98 ms against one
# block's 2.35): 2 blocks of 512 threads at 1024 rows (4 at 2048), and at most 2 blocks (two rows a
# thread at 2048 rows), clusters from 512 rows; `auto` alongside. No ffi/ change since call 5.
source benchmarks/plans/device_call.sh
SHAPES=1x1024,1x2048,4x1024
bench_op s20-ldl-c6-auto ldl_factor blocked "$SHAPES" 80
JCM_LDL_PANEL_CLUSTER_MIN_ROWS=512 JCM_LDL_PANEL_CLUSTER_THREADS=512 \
  bench_op s20-ldl-c6-t512 ldl_factor blocked "$SHAPES" 80
JCM_LDL_PANEL_CLUSTER_MIN_ROWS=512 JCM_LDL_PANEL_CLUSTER_THREADS=512 JCM_LDL_PANEL_CLUSTER=2 \
  bench_op s20-ldl-c6-t512r2 ldl_factor blocked "$SHAPES" 80
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-100; done
