#!/usr/bin/env bash
# Session 23, call 3 on nvidia-h100-x1 (run inline on call 2's warm machine, the build of be3b021
# installed): call 2's benchmark, cut by its test time, again: ldl_factor at a single 512 .. 2048
# with the mirror (default in be3b021) and without (JCM_LDL_MIRROR=0).
source benchmarks/plans/device_call.sh
S=1x512,1x1024,1x2048
bench_op s23-c3-mirror ldl_factor auto $S 60
JCM_LDL_MIRROR=0 bench_op s23-c3-rows ldl_factor auto $S 60
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-s23-c3-*.txt; do echo "== ${f##*/}"; grep -E "^\| ldl" "$f" | cut -c1-90; done
