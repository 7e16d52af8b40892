#!/usr/bin/env bash
# Session 21, call 4 on nvidia-h100-x1: call 3 found the one-block panel with rows trading labels
# slower per launch than session 20's (float32 1x256: 69 vs 51 us a panel; ncu at 1024 rows:
# long-scoreboard stalls 1.96 vs 0.90 a issued instruction, barrier stalls 1.16 vs 1.88). Here:
# the SASS with stall samples of call 3's two profiles (diag-reps/, carried as untracked files),
# and the labels kernel with a barrier at each step's end again (JCM_LDL_PANEL_LABELS=2) timed
# against both.
source benchmarks/plans/device_call.sh
for name in labels moved; do
  ncu --import "diag-reps/ncu-$name.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/r/ncu-$name-sass.csv" 2>&1
  echo "sass $name: $(wc -l < "$OUT/r/ncu-$name-sass.csv") lines"
done
SHAPES=1x256,1x1024,256x128
for v in 1 2 0; do
  JCM_LDL_PANEL_LABELS=$v bench_op s21-ldl-c4-v$v ldl_factor auto "$SHAPES" 60
done
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-100; done
