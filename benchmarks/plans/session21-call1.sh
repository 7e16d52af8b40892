#!/usr/bin/env bash
# Session 21, call 1 on nvidia-h100-x1: the one-block ?lasyf panel (lasyf_lower_shared_kernel)
# rewritten with rows trading labels (as the cluster panel's), so that a step has only its
# argmaxes' barriers (the row swaps of L and W and the barrier at each step's end gone; imax's
# slot comes with the argmax; the next row's entries of the step's columns from slots). The
# cluster panel's argmax ties go to the smaller label within a thread too. tests/test_ldl.py
# (with the new test_shared_panel_matches_global_panel), ldl_factor / ldl_solve with auto where
# the one-block panel runs, then compute-sanitizer's racecheck and synccheck on small panels.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-240}" t1
tests_passed t1 || { echo "tests failed (benchmarks still run)"; head -80 "$OUT/r/t1/failures.log"; }
SHAPES=1x256,1x512,1x1024,1x2048,4x512,4x1024,16x512,64x256,256x128
bench_op s21-ldl-c1-a ldl_factor auto "$SHAPES" 100
bench_op s21-ldl-c1-solve ldl_solve auto 1x512,1x1024,4x1024 60
tar czf "$OUT/results.tgz" -C "$OUT" r
sanitize_ldl lasyf 90
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
