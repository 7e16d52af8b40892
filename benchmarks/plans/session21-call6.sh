#!/usr/bin/env bash
# Session 21, call 6 on nvidia-h100-x1: the final code. Call 5's one-block panel with rows
# trading labels and branch-free GEMVs came out within +-5% of session 20's (float32 1x1024 2.28
# vs 2.41 ms, float64 2.75 vs 2.69, 256x128 float32 0.292 vs 0.266), so session 20's kernel stays
# (its PTX the same as then). The cluster panel keeps this session's changes (tested in calls
# 2 and 5): a cluster barrier before any remote write (racecheck), argmax ties to the smaller
# label within a thread, the moved entries through the slots, branch-free GEMVs.
# tests/test_ldl.py, then the grid's ldl_factor / ldl_solve cells from n = 1024 at batch 1, 4,
# 16 (where the cluster panel runs) and those under 0.95x measured again. Before the grid, the
# one-block panel with fewer threads of more rows each (JCM_LDL_PANEL_THREADS) at 512 / 1024
# rows: call 4's SASS put a step's straight-line code at ~150 instructions a warp, so 32 warps
# may spend as long issuing them as waiting on the barriers.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-240}" t1
if ! tests_passed t1; then
  echo "tests failed: no grid"; head -80 "$OUT/r/t1/failures.log"
else
  for t in 0 512 256; do
    JCM_LDL_PANEL_THREADS=$t bench_op s21-ldl-c6-t$t ldl_factor auto 1x512,1x1024,4x1024 60
  done
  for f in "$OUT"/r/bench-s21-ldl-c6-t*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-90; done
  REDO_OPS=ldl_factor,ldl_solve REDO_MIN_N=1024 REDO_BATCHES=1,4,16 DTYPES=float32,float64 \
    NO_TORCH=1 grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-530}"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
