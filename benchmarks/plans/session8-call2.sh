#!/usr/bin/env bash
# Session 8, device call 2: the guard masks LU's outputs only (no identity substitution) and the
# shipped table has call 1's points (jax_cusolver_ms/tables/h100.json): test_lu (NaN / singular
# paths) and test_tune on the GPU; tune the small-n cells (lu_factor / cholesky / qr at batch 4,
# 16, 256, n 16-64) and eigh's lanes-vs-XsyevBatched cells into a cache file the report then
# reads; then the issue-7 grid goes on (cells whose auto plan changed, or under 0.95x, again).
source benchmarks/plans/device_call.sh
SKIP_BUILD=1 SKIP_BENCH=1 TEST_TIMEOUT=200 OUT="$OUT/r/t1" TESTS="tests/test_lu.py tests/test_tune.py" \
  PYTEST_ARGS="-k 'not stream_semantics and not threads_gpu'" \
  bash benchmarks/gpu_session.sh > "$OUT/r/tests1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests1.txt" | head -30; tail -1 "$OUT/r/t1/pytest.log"
echo "tests done at $((SECONDS - t0)) s"
export JAX_CUSOLVER_MS_TUNE_CACHE="$OUT/r/cache"
repo=$PWD
(cd /tmp && timeout 150 python3 -m jax_cusolver_ms.tune --ops lu_factor,cholesky,qr --dtypes float32 \
  --batches 4,16,256 --sizes 16,32,64 --lanes 4,8,16 --repeats 7 --budget-s 110 \
  && timeout 150 python3 -m jax_cusolver_ms.tune --ops eigh --dtypes float32 --batches 4,16 \
  --sizes 512,1024,2048 --lanes 4,8,16 --repeats 5 --budget-s 100) > "$OUT/r/tune.txt" 2>&1
echo "tune rc=$? at $((SECONDS - t0)) s"; tail -5 "$OUT/r/tune.txt"
budget=$((500 - (SECONDS - t0)))
timeout $((budget + 60)) python3 -m benchmarks.report --tag h100-grid --dtypes float32 --strategies auto \
  --budget-s "$budget" --out "$OUT/r" --resume benchmarks/results/h100-grid_NVIDIA-H100-80GB-HBM3.json \
  --redo-below 0.95 > "$OUT/r/report.txt" 2>&1
echo "report rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
sed -n '1,20p' "$OUT"/r/h100-grid*.md
