#!/usr/bin/env bash
# Session 19, call 2 on nvidia-h100-x1: LDL^T's solve by LAPACK ?sytrs2's route (ffi/ldl_ops.cc
# sytrs_trsm: the factor converted once, cuBLAS TRSMs) for up to 4 matrices in the blocked
# strategy; the shared-memory panel narrowed only for few matrices (call 1: float64 64x1024
# slower with panels of 8).
# tests/test_ldl.py; if they pass, ldl_solve blocked and batched against JAX (the TRSM route up
# to 4 matrices), then with the TRSM route up to 64 matrices (JCM_LDL_SOLVE_TRSM=64) where the
# default runs the blocked kernels; ldl_factor blocked where the panel rule changed.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-150}" t1
if ! tests_passed t1; then
  echo "tests failed: no benchmark"; head -80 "$OUT/r/t1/failures.log"
else
  bench() { bench_op "$@" 120; }  # bench TAG OP STRATEGIES SHAPES
  bench s19-ldl-solve-trsm-a ldl_solve blocked,batched 1x64,1x128,1x256,1x512,4x256,16x256
  bench s19-ldl-solve-trsm-b ldl_solve blocked 1x1024,1x2048,4x1024,16x1024
  JCM_LDL_SOLVE_TRSM=64 bench s19-ldl-solve-trsm64 ldl_solve blocked 16x256,16x1024,64x256,64x1024
  bench s19-ldl-panel-rule ldl_factor blocked 16x1024,64x1024,256x1024,64x512
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-120; done
