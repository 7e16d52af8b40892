#!/usr/bin/env bash
# Session 23, call 4 on nvidia-h100-x1: how much of a single matrix's panel step the strided row
# accesses of the symmetric interchange cost at all. be3b021 with session23-call4-probe.diff
# applied (never committed): JCM_LDL_PROBE=1 reads the candidate column coalesced and skips every
# store along a row (wrong factors, flagged "wrong" by the benchmark; timing only), against the
# mirror (reads coalesced, row stores doubled) and the committed row reads (JCM_LDL_MIRROR=0).
source benchmarks/plans/device_call.sh
S=1x512,1x1024,1x2048
JCM_LDL_PROBE=1 bench_op s23-c4-probe ldl_factor auto $S 50
bench_op s23-c4-mirror ldl_factor auto $S 50
JCM_LDL_MIRROR=0 bench_op s23-c4-rows ldl_factor auto $S 50
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-s23-c4-*.txt; do echo "== ${f##*/}"; grep -E "^\| ldl" "$f" | cut -c1-90; done
