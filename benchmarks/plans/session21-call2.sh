#!/usr/bin/env bash
# Session 21, call 2 on nvidia-h100-x1. Call 1's one-block panel with rows trading labels (no
# barrier of its own a step) passed the tests but was 15-20% slower than the old one (float32
# 1x1024 2.70 vs 2.33 ms, 256x128 0.349 vs 0.286): its next columns were read after the first
# barrier, and the row taking label kp read its moved entry from global memory at the step's end,
# both round trips on the step's critical path. Now the next columns are read at the step's start
# (the row that took the last step's label kp reading its entries where they were moved from),
# and the moved entries A(k + 1, k) / A(k + 2, k + 1) pass through the slots (also in the cluster
# panel). The cluster panel starts with a cluster barrier (racecheck: remote shared-memory writes
# to a block that might not have started). Same tests / benchmarks / sanitizers as call 1.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-240}" t1
tests_passed t1 || { echo "tests failed (benchmarks still run)"; head -80 "$OUT/r/t1/failures.log"; }
SHAPES=1x256,1x512,1x1024,1x2048,4x512,4x1024,16x512,64x256,256x128
bench_op s21-ldl-c2-a ldl_factor auto "$SHAPES" 100
bench_op s21-ldl-c2-solve ldl_solve auto 1x512,1x1024,4x1024 60
tar czf "$OUT/results.tgz" -C "$OUT" r
sanitize_ldl lasyf 100
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
