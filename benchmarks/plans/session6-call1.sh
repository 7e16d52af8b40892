#!/usr/bin/env bash
# Session 6, device call 1: the blocked LDL^T. Build; its GPU tests; LDL against JAX's LU with
# the unblocked kernel, the blocked algorithm (nb 32, and nb 64 by JCM_LDL_BLOCK) side by side;
# then the rest of test_ldl as time allows. Results tarred into $OUT (few files come back).
set -uo pipefail
export OUT
SKIP_TESTS=1 SKIP_BENCH=1 bash benchmarks/gpu_session.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
rm -f "$OUT/build.txt"
mkdir -p "$OUT/r"
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_ldl.py" PYTEST_ARGS="-k blocked" TEST_TIMEOUT=150 \
  OUT="$OUT/r/t1" bash benchmarks/gpu_session.sh > "$OUT/tests1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/tests1.txt" | head -20; tail -1 "$OUT/r/t1/pytest.log"
common=(--ops ldl_factor,ldl_solve --shapes 64x128,64x256,64x512,64x1024,16x2048,1x1024
        --budget-s 0.2 --min-repeats 3 --warmup 1 --no-torch --out "$OUT/r")
timeout 200 python3 -m benchmarks.bench --tag s6-ldl --dtypes float32,float64 \
  --strategies auto,batched,blocked "${common[@]}" > "$OUT/r/bench-s6-ldl.txt" 2>&1
JCM_LDL_BLOCK=64 timeout 90 python3 -m benchmarks.bench --tag s6-ldl-nb64 --dtypes float32 \
  --strategies blocked "${common[@]}" > "$OUT/r/bench-s6-ldl-nb64.txt" 2>&1
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_ldl.py" PYTEST_ARGS="-k 'not blocked'" \
  TEST_TIMEOUT="${TEST_TIMEOUT:-120}" OUT="$OUT/r/t2" bash benchmarks/gpu_session.sh > "$OUT/tests2.txt" 2>&1
mv "$OUT"/tests*.txt "$OUT/r/"
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests2.txt" | head -20; tail -1 "$OUT/r/t2/pytest.log"
for f in "$OUT"/r/*.md; do sed -n '/^|/p' "$f" | head -60; done
