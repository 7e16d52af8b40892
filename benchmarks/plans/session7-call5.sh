#!/usr/bin/env bash
# Session 7, device call 5: a single matrix goes to JAX's own lowering under auto (where JAX has
# one; geqrf's JAX path without the transpose pair). Build; every test file but matmul and ldl
# (ldl ran in call 3; neither is touched), the slow stream tests left out; report --quick again.
source benchmarks/plans/device_call.sh
SKIP_BUILD=1 SKIP_BENCH=1 TEST_TIMEOUT=400 OUT="$OUT/r/t1" \
  TESTS="tests/test_lu.py tests/test_cholesky.py tests/test_qr.py tests/test_eigh.py tests/test_eig.py tests/test_svd.py tests/test_tune.py" \
  PYTEST_ARGS="-k 'not stream_semantics and not threads_gpu'" \
  bash benchmarks/gpu_session.sh > "$OUT/r/tests1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests1.txt" | head -30; tail -1 "$OUT/r/t1/pytest.log"
echo "tests done at $((SECONDS - t0)) s"
timeout $((585 - (SECONDS - t0))) python3 -m benchmarks.report --quick --tag s7-report-quick2 --out "$OUT/r" \
  > "$OUT/r/report-quick.txt" 2>&1
echo "report rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
sed -n '1,30p' "$OUT"/r/s7-report-quick2*.md
