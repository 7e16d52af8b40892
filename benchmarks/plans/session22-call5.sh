#!/usr/bin/env bash
# Session 22, call 5 on nvidia-h100-x1 (the session's last ~240 s of device time): the small block
# kernel to n = 128 (64 for complex128), one copy of the matrix above n = 64 and a second barrier
# in the 1x1 steps after a second search. The batched-kernel tests of tests/test_ldl.py only, then
# ldl_factor's batched strategy (now this kernel) against the blocked one (`auto` from n = 128).
source benchmarks/plans/device_call.sh
SKIP_BUILD=1 SKIP_BENCH=1 TEST_TIMEOUT=200 OUT="$OUT/r/t1" TESTS="tests/test_ldl.py" \
  PYTEST_ARGS="-k 'small_block or batched_kernel'" bash benchmarks/gpu_session.sh \
  > "$OUT/r/tests-t1.txt" 2>&1
grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests-t1.txt" | head -20; tail -1 "$OUT/r/t1/pytest.log"
echo "tests done at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
bench_op s22-c5 ldl_factor batched,blocked 1x96,4x96,256x96,1x128,4x128,64x128,256x128 90
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^\| ldl" "$OUT/r/bench-s22-c5.txt" | cut -c1-120
