#!/usr/bin/env bash
# Session 5, third device call: build; QR (the batched kernels now under auto for n <= 128) and
# Cholesky benchmarks; the shipped H100 table rebuilt with their results and installed; the tests
# of what changed since call 2 against that table; then LDL and eigh benchmarks. Outputs under
# $OUT: tables.md (every table), results.tar.gz (the JSON), h100.json, tests.txt, pytest.log.
set -uo pipefail
export OUT PYTHONUNBUFFERED=1
SKIP_TESTS=1 SKIP_BENCH=1 bash benchmarks/gpu_session.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
rm -f "$OUT/build.txt"
bench() { timeout "$1" python3 -m benchmarks.bench --out "$OUT" "${@:2}" 2>&1 | tail -3; }
common=(--budget-s 0.2 --min-repeats 3 --warmup 1)
bench 75 --tag s5-qr --ops qr --dtypes float32 --shapes 64x64,64x128,256x64,64x256,4x128,1x128 --strategies auto,batched,looped "${common[@]}"
bench 40 --tag s5-qrmul --ops qr_multiply --dtypes float32 --shapes 64x64,64x128,256x64,64x256 --strategies auto,batched,looped "${common[@]}"
bench 70 --tag s5-chol --ops cholesky --dtypes float32 --shapes 16x2048,64x1024,4x4096 --strategies auto,blocked,looped "${common[@]}" --no-torch
for nb in 512; do
  JCM_CHOLESKY_BLOCK=$nb bench 30 --tag s5-chol-nb$nb --ops cholesky --dtypes float32 --shapes 16x2048 --strategies auto,blocked "${common[@]}" --no-torch
done
# The shipped table: the sources it was built from, plus this call's QR and Cholesky results.
cp "$OUT"/s5-qr_*.json "$OUT"/s5-chol_*.json benchmarks/results/
pkg=$(cd /tmp && python3 -c "import jax_cusolver_ms, os; print(os.path.dirname(jax_cusolver_ms.__file__))")
python3 -m benchmarks.build_table $(python3 -c "import json; print(' '.join(json.load(open('jax_cusolver_ms/tables/h100.json'))['built_from']))") \
  benchmarks/results/s5-qr_*.json benchmarks/results/s5-chol_*.json --out "$pkg/tables/h100.json" && cp "$pkg/tables/h100.json" "$OUT/h100.json"
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_qr.py tests/test_tune.py tests/test_ldl.py tests/test_cholesky.py::test_blocked_across_block_edges" TEST_TIMEOUT=150 \
  bash benchmarks/gpu_session.sh > "$OUT/tests.txt" 2>&1
bench 70 --tag s5-ldl --ops ldl_factor,ldl_solve --dtypes float32 --shapes 64x128,64x512,64x1024,16x2048 --strategies auto,batched "${common[@]}"
bench 30 --tag s5-eigh --ops eigh --dtypes float32 --shapes 16x1024 --strategies auto --budget-s 0.5 --min-repeats 5 --rounds 4 --no-torch
(cd "$OUT" && tar czf results.tar.gz ./s5-*.json && for f in $(ls -tr ./*.md); do cat "$f"; echo; done > tables.md && rm -f ./s5-*.json ./s5-*.md)
echo "=== tests"; grep -E "FAILED|ERROR|CUT SHORT" "$OUT/tests.txt" | head -30; tail -2 "$OUT/tests.txt"
echo "=== tables"; grep -E "^\| |^###" "$OUT/tables.md" | grep -v "^|---"
