#!/usr/bin/env bash
# Session 23, call 6 on nvidia-h100-x1 (the session's last ~400 s of device time): data for
# session 24's item 1 (benchmarks/plans/session24.txt). One 1024-row float32 one-block panel
# (lasyf_lower_shared_kernel, the third launch of a 1x1024 factorization) profiled in full with
# its SASS and per-instruction counters (instructions executed, stall samples), and then, if
# time is left, one float64 cluster panel of a 1x2048 factorization.
source benchmarks/plans/device_call.sh
ncu --version | tail -1
# prof NAME FILTER SKIP PROBE-ARGS...: launch SKIP + 1 of the kernels matching FILTER, every
# section; its details page and its SASS with per-instruction counters (CSV).
prof() {
  local name=$1 filter=$2 skip=$3
  shift 3
  timeout "$(kill_at 120)" ncu --clock-control none --kernel-name "regex:$filter" \
    --launch-skip "$skip" --launch-count 1 --set full --import-source yes -f \
    -o "$OUT/r/ncu-$name" python3 benchmarks/diag/ncu_probe.py "$@" --calls 1 \
    > "$OUT/r/ncu-$name.log" 2>&1
  echo "ncu $name rc=$? at $((SECONDS - t0)) s"
  ncu --import "$OUT/r/ncu-$name.ncu-rep" --page details > "$OUT/r/ncu-$name-details.txt" 2>&1
  ncu --import "$OUT/r/ncu-$name.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/r/ncu-$name-sass.csv" 2>&1
  rm -f "$OUT/r/ncu-$name.ncu-rep"
  grep -E "^  [a-zA-Z_].*\(|Duration|Executed Instructions |Warp Cycles Per Issued|Block Size" \
    "$OUT/r/ncu-$name-details.txt" | head -8
  tar czf "$OUT/results.tgz" -C "$OUT" r
}
prof shared-f32-1024 lasyf_lower_shared 2 ldl_factor float32 1 1024 --strategy auto
prof cluster-f64-2048 lasyf_lower_cluster 2 ldl_factor float64 1 2048 --strategy auto
