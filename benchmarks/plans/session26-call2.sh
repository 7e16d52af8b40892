#!/usr/bin/env bash
# Session 26, call 2 on nvidia-h100-x1, on main. Call 1 (branch wip/cluster-fence-warp: the
# cluster panel with no cluster barrier in its step loop, a fence warp a block) passed
# tests/test_ldl.py (652) but was slower: ldl_factor 1x2048 float32 5.42 -> 5.76 ms, float64
# 6.38 -> 6.56; not merged. Here: a single matrix's trailing update by syrkx (the lower triangle
# alone) instead of one GEMM over the whole trailing square (ncu, session 25 call 4: the GEMMs
# ~0.6 ms float32 / ~0.75 float64 of a 1x2048 factorization, half of their flops on the upper
# triangle, which nothing reads).
# 1. The package built; all of tests/test_ldl.py (syrkx is the default at batch 1).
# 2. ldl_factor / ldl_solve at batch 1 where the blocked algorithm runs (n >= 128): syrkx (the
#    build's default) and JCM_LDL_UPDATE=gemm (the whole square, as before) side by side.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "$(kill_at 200)" t1
tests_passed t1 && echo "tests passed"
tar czf "$OUT/results.tgz" -C "$OUT" r
shapes=1x128,1x256,1x512,1x1024,1x2048
bench_op s26-c2-syrkx ldl_factor,ldl_solve auto "$shapes" 100
JCM_LDL_UPDATE=gemm bench_op s26-c2-gemm ldl_factor,ldl_solve auto "$shapes" 100
tar czf "$OUT/results.tgz" -C "$OUT" r
for v in gemm syrkx; do
  echo "== $v"; grep -E "^\| ldl" "$OUT/r/bench-s26-c2-$v.txt" | cut -d'|' -f2-7
done
