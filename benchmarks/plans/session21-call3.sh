#!/usr/bin/env bash
# Session 21, call 3 on nvidia-h100-x1: why the one-block panel with rows trading labels (calls
# 1-2, tests passing) is 15-20% slower than session 20's with rows moved and a barrier at each
# step's end (float32 1x1024 2.69 vs 2.33 ms, 256x128 0.341 vs 0.286). Session 20's kernel is
# built alongside for this call only (JCM_LDL_PANEL_LABELS=0). Both timed side by side, every
# kernel's duration of one factorization (ncu), and one panel launch of each profiled in full.
source benchmarks/plans/device_call.sh
ncu --version | tail -1
SHAPES=1x256,1x1024,256x128
bench_op s21-ldl-c3-labels ldl_factor auto "$SHAPES" 60
JCM_LDL_PANEL_LABELS=0 bench_op s21-ldl-c3-moved ldl_factor auto "$SHAPES" 60
prof() {
  local name=$1
  shift
  timeout "$(kill_at 100)" ncu --clock-control none --kernel-name "regex:lasyf_lower_shared" \
    --launch-skip 2 --launch-count 1 --set full --import-source yes -f -o "$OUT/r/ncu-$name" \
    python3 benchmarks/diag/ncu_probe.py ldl_factor float32 1 1024 --strategy auto --calls 1 \
    > "$OUT/r/ncu-$name.log" 2>&1
  echo "ncu $name rc=$? at $((SECONDS - t0)) s"
  ncu --import "$OUT/r/ncu-$name.ncu-rep" --page details > "$OUT/r/ncu-$name-details.txt" 2>&1
  ncu --import "$OUT/r/ncu-$name.ncu-rep" --page raw --csv > "$OUT/r/ncu-$name-raw.csv" 2>&1
  grep -E "^  [a-zA-Z_].*\(|Duration|Executed Instructions |Warp Cycles Per Issued|Block Size" \
    "$OUT/r/ncu-$name-details.txt" | head -8
}
durations() {
  local name=$1
  shift
  timeout "$(kill_at 100)" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    python3 benchmarks/diag/ncu_probe.py ldl_factor float32 1 256 --strategy auto --calls 1 \
    > "$OUT/r/ncu-$name.csv" 2>&1
  echo "ncu $name rc=$? at $((SECONDS - t0)) s"
  python3 benchmarks/diag/ncu_sum.py "$OUT/r/ncu-$name.csv" --top 6
}
prof labels
JCM_LDL_PANEL_LABELS=0 prof moved
tar czf "$OUT/results.tgz" -C "$OUT" r
durations sum-labels
JCM_LDL_PANEL_LABELS=0 durations sum-moved
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-100; done
