#!/usr/bin/env bash
# Session 26, call 3 on nvidia-h100-x1, on main (calls 1-2: the fence-warp branch and syrkx,
# both slower, neither kept). The cluster LDL^T panel's two argmax lambdas share one reduction of
# a candidate set (reduce_candidates; `duplicates` flagged the copy): its SASS changed, so
# 1. the package built; all of tests/test_ldl.py;
# 2. ldl_factor at 1x1024 / 1x2048 against JAX (call 2's gemm run: float32 2.01 / 5.55 ms,
#    float64 2.45 / 6.47);
# 3. compute-sanitizer's racecheck / synccheck on main's cluster panel (the st.async second
#    exchange since session 25 has not been under them; session 22's cluster panel was clean).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "$(kill_at 200)" t1
tests_passed t1 && echo "tests passed"
tar czf "$OUT/results.tgz" -C "$OUT" r
bench_op s26-c3-reduce ldl_factor auto 1x1024,1x2048 60
tar czf "$OUT/results.tgz" -C "$OUT" r
sanitize_ldl lasyf_lower_cluster 70
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^\| ldl" "$OUT/r/bench-s26-c3-reduce.txt" | cut -d'|' -f2-7
