#!/usr/bin/env bash
# Session 7, device call 6: the svd lowering tests changed for single matrices under auto; then the
# issue-7 grid (float32 first, auto, PyTorch alongside) for as long as the call allows, written
# after every cell: later sessions go on with --resume benchmarks/results/h100-grid_<gpu>.json.
source benchmarks/plans/device_call.sh
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_svd.py" PYTEST_ARGS="-k 'lowering or auto_choices'" \
  TEST_TIMEOUT=60 OUT="$OUT/r/t1" bash benchmarks/gpu_session.sh > "$OUT/r/tests1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests1.txt" | head; tail -1 "$OUT/r/t1/pytest.log"
resume=()
[[ -f benchmarks/results/h100-grid_NVIDIA-H100-80GB-HBM3.json ]] && \
  resume=(--resume benchmarks/results/h100-grid_NVIDIA-H100-80GB-HBM3.json)
budget=$((520 - (SECONDS - t0)))
timeout $((budget + 60)) python3 -m benchmarks.report --tag h100-grid --dtypes float32 --strategies auto \
  --budget-s "$budget" --out "$OUT/r" "${resume[@]}" > "$OUT/r/report.txt" 2>&1
echo "report rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
sed -n '1,40p' "$OUT"/r/h100-grid*.md
