# Sourced by the per-call device plans (session7-call*.sh): strict mode, $OUT exported, the
# package built and installed by gpu_session.sh (the build log only on failure), $OUT/r for the
# results to tar, t0 for the call's clock.
set -uo pipefail
export OUT
t0=$SECONDS
SKIP_TESTS=1 SKIP_BENCH=1 bash benchmarks/gpu_session.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
rm -f "$OUT/build.txt"
mkdir -p "$OUT/r"

# gpu_tests "FILES" [TIMEOUT]: those test files on the GPU (the slow stream / thread tests left
# out), logs under $OUT/r/t1; prints the failures and pytest's last line.
gpu_tests() {
  SKIP_BUILD=1 SKIP_BENCH=1 TEST_TIMEOUT="${2:-200}" OUT="$OUT/r/t1" TESTS="$1" \
    PYTEST_ARGS="-k 'not stream_semantics and not threads_gpu'" \
    bash benchmarks/gpu_session.sh > "$OUT/r/tests1.txt" 2>&1
  grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests1.txt" | head -30; tail -1 "$OUT/r/t1/pytest.log"
  echo "tests done at $((SECONDS - t0)) s"
}

# grid_goes_on OPS UNTIL: the issue-7 grid (float32, auto, PyTorch alongside) resumed from the
# committed one, OPS first, starting no cell after UNTIL seconds into the call; cells under 0.95x
# or whose auto plan changed are measured again. Results tarred to $OUT/results.tgz.
grid_goes_on() {
  local budget=$(($2 - (SECONDS - t0)))
  timeout $((budget + 45)) python3 -m benchmarks.report --tag h100-grid --dtypes float32 \
    --strategies auto --ops "$1" --budget-s "$budget" --out "$OUT/r" --redo-below 0.95 \
    --resume benchmarks/results/h100-grid_NVIDIA-H100-80GB-HBM3.json > "$OUT/r/report.txt" 2>&1
  echo "report rc=$? at $((SECONDS - t0)) s"
  tar czf "$OUT/results.tgz" -C "$OUT" r
  grep -E "^# " "$OUT/r/report.txt" | tail -3
  sed -n '1,24p' "$OUT"/r/h100-grid*.md
}
