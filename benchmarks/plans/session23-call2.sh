#!/usr/bin/env bash
# Session 23, call 2 on nvidia-h100-x1: a single matrix's panels read the candidate pivot's row
# down the mirror of the lower triangle (ldl_ops.cc ldl_mirror: the whole trailing square is
# updated there anyway), coalesced, instead of along the row n elements apart (ncu, session 21
# call 3: 43% of a one-block panel's sectors excess, from uncoalesced loads); each interchange
# then writes the moved row twice. The blocked tests of tests/test_ldl.py (mirror on for single
# matrices) and the new mirror-against-rows test, then ldl_factor at a single 256 .. 2048 with
# the mirror and without (JCM_LDL_MIRROR=0), then the rest of tests/test_ldl.py.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "$(kill_at 120)" t1 "mirror or blocked or panel"
tar czf "$OUT/results.tgz" -C "$OUT" r
S=1x256,1x512,1x1024,1x2048
bench_op s23-c2-mirror ldl_factor auto $S 45
JCM_LDL_MIRROR=0 bench_op s23-c2-rows ldl_factor auto $S 45
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-s23-c2-*.txt; do echo "== ${f##*/}"; grep -E "^\| ldl" "$f" | cut -c1-90; done
gpu_tests "tests/test_ldl.py" "$(kill_at 200)" t2 "not (mirror or blocked or panel)"
tar czf "$OUT/results.tgz" -C "$OUT" r
