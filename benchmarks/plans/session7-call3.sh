#!/usr/bin/env bash
# Session 7, device call 3: LDL^T threads per matrix chosen by n and batch (ffi/ldl_ops.cc
# ldl_threads). Build; test_ldl; the issue-4 LDL grid under auto (float32, float64, with torch);
# the float64 cells of cholesky / cho_solve / qr_multiply; the float64 spectral cells and eigh
# 16x512 with pooled rounds (issue 5). Results tarred into $OUT.
set -uo pipefail
export OUT
t0=$SECONDS
left() { echo $((575 - (SECONDS - t0))); }
SKIP_TESTS=1 SKIP_BENCH=1 bash benchmarks/gpu_session.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
rm -f "$OUT/build.txt"
mkdir -p "$OUT/r"
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_ldl.py" TEST_TIMEOUT=110 OUT="$OUT/r/t1" \
  bash benchmarks/gpu_session.sh > "$OUT/r/tests1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests1.txt" | head -20; tail -1 "$OUT/r/t1/pytest.log"
echo "tests done at $((SECONDS - t0)) s"
common=(--budget-s 0.15 --min-repeats 3 --warmup 1 --out "$OUT/r")
timeout 150 python3 -m benchmarks.bench --tag s7-ldl-final --ops ldl_factor,ldl_solve --dtypes float32,float64 \
  --shapes 64x64,64x128,256x128,64x256,64x512,64x1024,16x2048,1x1024 --strategies auto \
  "${common[@]}" > "$OUT/r/bench-ldl.txt" 2>&1
timeout 80 python3 -m benchmarks.bench --tag s7-chol64 --ops cholesky,cho_solve,qr_multiply --dtypes float64 \
  --shapes 64x128,64x256,64x512,64x1024,16x2048 --strategies auto --no-torch \
  "${common[@]}" > "$OUT/r/bench-chol64.txt" 2>&1
echo "issue 4 benches done at $((SECONDS - t0)) s"
timeout $(( $(left) - 45 )) python3 -m benchmarks.bench --tag s7-spec64 --ops eigh,svd,eig --dtypes float64 \
  --shapes 64x64,64x128,8x256,16x512,16x1024 --strategies auto --no-torch \
  "${common[@]}" > "$OUT/r/bench-spec64.txt" 2>&1
timeout $(( $(left) )) python3 -m benchmarks.bench --tag s7-eigh-pooled --ops eigh --dtypes float32 \
  --shapes 16x512 --strategies auto --budget-s 0.5 --min-repeats 5 --rounds 4 --no-torch \
  --out "$OUT/r" > "$OUT/r/bench-eigh.txt" 2>&1
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/*.md; do sed -n '/^| [a-z]/p' "$f" | grep -v "^| op" | cut -d'|' -f2-8; done
