#!/usr/bin/env bash
# Session 7, device call 1: the blocked LDL^T (written in session 6, never run on a GPU). Build;
# its GPU tests; LDL against JAX's LU in float32 and float64 (unblocked kernel, blocked, auto);
# the rest of test_ldl; float64 QR / Cholesky as time allows. Results tarred into $OUT.
set -uo pipefail
export OUT
t0=$SECONDS
SKIP_TESTS=1 SKIP_BENCH=1 bash benchmarks/gpu_session.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
head -8 "$OUT/build.txt"; rm -f "$OUT/build.txt"
mkdir -p "$OUT/r"
echo "built at $((SECONDS - t0)) s"
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_ldl.py" PYTEST_ARGS="-k 'blocked or explain'" TEST_TIMEOUT=120 \
  OUT="$OUT/r/t1" bash benchmarks/gpu_session.sh > "$OUT/r/tests1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests1.txt" | head -20; tail -1 "$OUT/r/t1/pytest.log"
echo "blocked tests done at $((SECONDS - t0)) s"
common=(--budget-s 0.2 --min-repeats 3 --warmup 1 --no-torch --out "$OUT/r")
timeout 170 python3 -m benchmarks.bench --tag s7-ldl --ops ldl_factor,ldl_solve --dtypes float32,float64 \
  --shapes 64x64,64x128,64x256,64x512,64x1024,16x2048,1x1024 --strategies auto,batched,blocked \
  "${common[@]}" > "$OUT/r/bench-s7-ldl.txt" 2>&1
echo "ldl bench done at $((SECONDS - t0)) s"
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_ldl.py" PYTEST_ARGS="-k 'not blocked and not explain'" \
  TEST_TIMEOUT=130 OUT="$OUT/r/t2" bash benchmarks/gpu_session.sh > "$OUT/r/tests2.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests2.txt" | head -20; tail -1 "$OUT/r/t2/pytest.log"
left=$((560 - (SECONDS - t0)))
echo "rest of test_ldl done at $((SECONDS - t0)) s; ${left} s left for float64 qr/cholesky"
if (( left > 40 )); then
  timeout "$left" python3 -m benchmarks.bench --tag s7-qrchol64 --ops qr,qr_multiply,cholesky --dtypes float64 \
    --shapes 64x64,64x128,256x64,64x256,64x512,16x2048 --strategies auto,batched,looped \
    "${common[@]}" > "$OUT/r/bench-s7-qrchol64.txt" 2>&1
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/*.md; do echo "## $f"; sed -n '/^|/p' "$f" | head -70; done
