#!/usr/bin/env bash
# Session 7, device call 4: the GPU tests of the code paths the session's strategy changes touch
# (cholesky, qr, tune; ldl ran in call 3), the float64 eigh cells at parity with pooled rounds
# (auto there is JAX's own lowering), and issue 7's report --quick (its first GPU run).
source benchmarks/plans/device_call.sh
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_cholesky.py tests/test_qr.py tests/test_tune.py" TEST_TIMEOUT=250 \
  OUT="$OUT/r/t1" bash benchmarks/gpu_session.sh > "$OUT/r/tests1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests1.txt" | head -20; tail -1 "$OUT/r/t1/pytest.log"
echo "tests done at $((SECONDS - t0)) s"
timeout 90 python3 -m benchmarks.bench --tag s7-eigh64-pooled --ops eigh --dtypes float64 \
  --shapes 64x64,16x512 --strategies auto --budget-s 0.4 --min-repeats 5 --rounds 4 --no-torch \
  --out "$OUT/r" > "$OUT/r/bench-eigh64.txt" 2>&1
echo "eigh done at $((SECONDS - t0)) s"
timeout $((580 - (SECONDS - t0))) python3 -m benchmarks.report --quick --tag s7-report-quick --out "$OUT/r" \
  > "$OUT/r/report-quick.txt" 2>&1
echo "report rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/s7-eigh64*.md; do sed -n '/^| [a-z]/p' "$f" | grep -v "^| op" | cut -d'|' -f2-8; done
sed -n '1,60p' "$OUT"/r/s7-report-quick*.md
