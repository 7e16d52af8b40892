#!/usr/bin/env bash
# Session 6, device call 2: the ?sytf2 kernel finds the next pivot column's maximum while it
# updates it (one pass and two barriers fewer per step). Build; the LDL kernel and blocked tests;
# LDL against JAX's LU (small shapes with the unblocked kernel, all with the blocked algorithm);
# QR and Cholesky in float64 (never measured). Results tarred into $OUT.
set -uo pipefail
export OUT
SKIP_TESTS=1 SKIP_BENCH=1 bash benchmarks/gpu_session.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
rm -f "$OUT/build.txt"
mkdir -p "$OUT/r"
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_ldl.py" \
  PYTEST_ARGS="-k 'blocked or batched_kernel or pivot or singular or ldl_factor or ldl_solve'" \
  TEST_TIMEOUT=140 OUT="$OUT/r/t1" bash benchmarks/gpu_session.sh > "$OUT/r/tests1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests1.txt" | head -20; tail -1 "$OUT/r/t1/pytest.log"
common=(--ops ldl_factor,ldl_solve --dtypes float32,float64 --budget-s 0.2 --min-repeats 3
        --warmup 1 --no-torch --out "$OUT/r")
timeout 100 python3 -m benchmarks.bench --tag s6-ldl-small --shapes 64x64,64x128,256x128,1x128,1x512 \
  --strategies auto,batched,blocked "${common[@]}" > "$OUT/r/bench-s6-ldl-small.txt" 2>&1
timeout 100 python3 -m benchmarks.bench --tag s6-ldl-large \
  --shapes 64x256,64x512,64x1024,16x2048,4x2048,1x1024 --strategies auto "${common[@]}" \
  > "$OUT/r/bench-s6-ldl-large.txt" 2>&1
timeout 170 python3 -m benchmarks.bench --tag s6-qr64 --ops qr,qr_multiply,cholesky --dtypes float64 \
  --shapes 64x64,64x128,256x64,64x256,64x512,16x2048 --strategies auto,batched,looped \
  --budget-s 0.2 --min-repeats 3 --warmup 1 --no-torch --out "$OUT/r" > "$OUT/r/bench-s6-qr64.txt" 2>&1
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/*.md; do sed -n '/^|/p' "$f" | head -60; done
