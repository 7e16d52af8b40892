#!/usr/bin/env bash
# Session 20, call 3 on nvidia-h100-x1: the cluster panel where one block's would be narrower than
# 16 columns or not fit (call 2: float32 1x2048 6.79 -> 6.46 ms, float64 6.96 with clusters from
# 1024 rows against 10.8, from 512 rows slower than one block where 16 or 32 columns fit it).
# tests/test_ldl.py; if they pass, the grid's LDL^T cells again where under 0.95x (float32 and
# float64; the single matrices at n = 1024 / 2048 among them), then ldl_factor and ldl_solve at
# batch 1 / 4 of n = 1024 / 2048 against JAX.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-200}" t1
if ! tests_passed t1; then
  echo "tests failed: no grid"; head -80 "$OUT/r/t1/failures.log"
else
  DTYPES=float32,float64 NO_TORCH=1 grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-400}"
  bench_op s20-ldl-final ldl_factor,ldl_solve auto 1x1024,1x2048,4x1024,4x2048 100
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-100; done
