#!/usr/bin/env bash
# Session 20, call 7 on nvidia-h100-x1: the cluster panel for more matrices (`auto` keeps it to 4;
# beyond, a panel too tall for one block's shared memory runs at 16 columns or in global memory):
# JCM_LDL_PANEL_CLUSTER_COUNT=16 and 64 against `auto` at 16 x 1024 / 2048 and 64 x 1024. No ffi/
# code change since call 5 (comments only).
source benchmarks/plans/device_call.sh
SHAPES=16x1024,16x2048,64x1024
bench_op s20-ldl-c7-auto ldl_factor blocked "$SHAPES" 100
JCM_LDL_PANEL_CLUSTER_COUNT=16 bench_op s20-ldl-c7-count16 ldl_factor blocked "$SHAPES" 100
JCM_LDL_PANEL_CLUSTER_COUNT=64 bench_op s20-ldl-c7-count64 ldl_factor blocked "$SHAPES" 100
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-100; done
