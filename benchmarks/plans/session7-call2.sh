#!/usr/bin/env bash
# Session 7, device call 2: LDL^T factor kernels with the block size as a launch parameter and one
# row-maximum reduction instead of two. Build; test_ldl (the kernel and blocked tests also at
# 1024 threads); ldl_factor at 256 / 512 / 1024 threads per matrix; float64 QR, qr_multiply,
# Cholesky and cho_solve on the issue-4 grid. Results tarred into $OUT.
source benchmarks/plans/device_call.sh
echo "built at $((SECONDS - t0)) s"
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_ldl.py" PYTEST_ARGS="-k 'not stream and not threads_gpu'" \
  TEST_TIMEOUT=150 OUT="$OUT/r/t1" bash benchmarks/gpu_session.sh > "$OUT/r/tests1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests1.txt" | head -20; tail -1 "$OUT/r/t1/pytest.log"
JCM_LDL_THREADS=1024 SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_ldl.py" \
  PYTEST_ARGS="-k 'blocked_matches or blocked_zero or batched_kernel or pivot_format or singular'" \
  TEST_TIMEOUT=90 OUT="$OUT/r/t2" bash benchmarks/gpu_session.sh > "$OUT/r/tests2.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests2.txt" | head -20; tail -1 "$OUT/r/t2/pytest.log"
echo "tests done at $((SECONDS - t0)) s"
common=(--budget-s 0.15 --min-repeats 3 --warmup 1 --no-torch --out "$OUT/r")
for threads in 256 512 1024; do
  JCM_LDL_THREADS=$threads timeout 60 python3 -m benchmarks.bench --tag s7-ldl-t$threads --ops ldl_factor \
    --dtypes float32 --shapes 64x64,64x128,256x128,64x256,1x256,1x1024,64x1024 --strategies batched,blocked \
    "${common[@]}" > "$OUT/r/bench-ldl-t$threads.txt" 2>&1
done
echo "thread probe done at $((SECONDS - t0)) s"
left=$((570 - (SECONDS - t0)))
timeout "$left" python3 -m benchmarks.bench --tag s7-qrchol64b --ops qr,qr_multiply,cholesky,cho_solve \
  --dtypes float64 --shapes 16x2048,64x128,64x256,64x512,64x1024 --strategies auto \
  "${common[@]}" > "$OUT/r/bench-s7-qrchol64b.txt" 2>&1
tar czf "$OUT/results.tgz" -C "$OUT" r
python3 - "$OUT"/r/s7-ldl-t*.json <<'PY'
import json, sys
rows = {}
for path in sys.argv[1:]:
    t = path.split("-t")[-1].split("_")[0]
    for c in json.load(open(path))["cells"]:
        for k, v in c["impls"].items():
            if k.startswith("jcm:"):
                rows.setdefault((c["dtype"], c["batch"], c["n"], k), {})[t] = v.get("median_ms")
        rows.setdefault((c["dtype"], c["batch"], c["n"], "jax"), {})[t] = c["impls"]["jax"].get("median_ms")
for key, v in sorted(rows.items()):
    print(*key, *(f"{t}:{v.get(t)}" for t in ("256", "512", "1024")))
PY
for f in "$OUT"/r/s7-qrchol64b*.md; do sed -n '/^|/p' "$f"; done
