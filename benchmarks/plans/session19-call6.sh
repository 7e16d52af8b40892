#!/usr/bin/env bash
# Session 19, call 6 on nvidia-h100-x1: whether the blocked LDL^T (the shared-memory panel) takes
# n = 64 too (call 5's grid: float64 ldl_factor 4x64 / 16x64 / 64x64 at 0.90-0.94x with the
# block kernel; the blocked algorithm runs one 32-column panel and the ?sytf2 kernel's last 32
# columns there), also with 16-column panels (JCM_LDL_BLOCK=16). No code change since call 5:
# no tests.
source benchmarks/plans/device_call.sh
bench() { bench_op "$@" 120; }  # bench TAG OP STRATEGIES SHAPES
bench s19-ldl-n64-a ldl_factor blocked,batched 1x64,4x64,16x64,64x64,256x64,4x96
JCM_LDL_BLOCK=16 bench s19-ldl-n64-nb16 ldl_factor blocked 1x64,4x64,16x64,64x64,256x64,4x96
bench s19-ldl-solve-n64 ldl_solve blocked,batched 1x64,4x64,64x64
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
