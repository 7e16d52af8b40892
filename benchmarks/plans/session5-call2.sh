#!/usr/bin/env bash
# Session 5, second device call: build, the batched-kernel probe (shared-memory QR / LDL kernels
# against cuSOLVER on lanes and JAX), the QR and LDL test files plus the tests that call 1's time
# limit cut, then the eigh 16x1024 probe. Short outputs under $OUT, printed last.
set -uo pipefail
export OUT
SKIP_TESTS=1 SKIP_BENCH=1 bash benchmarks/gpu_session.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
timeout 200 python3 -P benchmarks/diag/kernel_probe.py > "$OUT/probe.txt" 2>&1
cut=(tests/test_cholesky.py::test_blocked_across_block_edges
     "tests/test_svd.py::test_cond[-inf-complex128]"
     "tests/test_svd.py::test_cuda_lowering_uses_ffi[complex128-looped]"
     "tests/test_svd.py::test_strategies_agree[(5,40,36)-float64]"
     "tests/test_svd.py::test_svd_check_grads[(4,6)-qr-float64]"
     "tests/test_svd.py::test_stream_semantics_gpu[jacobi-24-20-sequential-8]"
     "tests/test_svd.py::test_stream_semantics_gpu[jacobi-48-40-auto-1]"
     "tests/test_svd.py::test_stream_semantics_gpu[jacobi-48-40-batched-1]"
     "tests/test_svd.py::test_stream_semantics_gpu[jacobi-48-40-looped-1]"
     "tests/test_svd.py::test_stream_semantics_gpu[qr-40-24-batched-1]"
     "tests/test_svd.py::test_stream_semantics_gpu[qr-40-24-looped-1]")
SKIP_BUILD=1 SKIP_BENCH=1 TESTS="tests/test_ldl.py tests/test_qr.py ${cut[*]}" TEST_TIMEOUT="${TEST_TIMEOUT:-300}" \
  bash benchmarks/gpu_session.sh > "$OUT/tests.txt" 2>&1
timeout 100 python3 -P benchmarks/diag/eigh_probe.py --rounds 4 > "$OUT/eigh.txt" 2>&1
echo "=== probe"; cat "$OUT/probe.txt"
echo "=== eigh"; cat "$OUT/eigh.txt"
echo "=== tests"; grep -E "FAILED|ERROR|CUT SHORT" "$OUT/tests.txt" | head -30; tail -3 "$OUT/tests.txt"
