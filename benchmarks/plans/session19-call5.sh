#!/usr/bin/env bash
# Session 19, call 5 on nvidia-h100-x1: the TRSM route's preparation without a one-thread walk
# (ldl_steps_kernel: each row's step from a max-scan of the negative runs' starts;
# ldl_convert_kernel: the step list in shared memory, the permutation walked by one more block
# beside the columns). tests/test_ldl.py; if they pass, ncu's kernel times of the solve alone,
# ldl_solve blocked against JAX at small n, then the grid's LDL^T cells from n = 128 again
# (float32 and float64; sytrf's blocked algorithm from n = 128 now, the TRSM route for up to 4
# matrices from n = 128).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-150}" t1
if ! tests_passed t1; then
  echo "tests failed: no benchmark"; head -80 "$OUT/r/t1/failures.log"
else
  for shape in "1 128" "1 2048"; do
    name=solve-f32-${shape// /x}-blocked
    timeout "$(kill_at 40)" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      python3 benchmarks/diag/ncu_probe.py ldl_solve float32 $shape --strategy blocked \
      > "$OUT/r/ncu-$name.csv" 2> "$OUT/r/ncu-$name.err"
    python3 benchmarks/diag/ncu_sum.py "$OUT/r/ncu-$name.csv" --top 6
  done
  timeout "$(kill_at 60)" python3 -m benchmarks.bench --ops ldl_solve \
    --dtypes float32,float64 --strategies blocked --no-torch --tag s19-ldl-solve-c \
    --out "$OUT/r" --shapes 1x128,1x256,1x512,4x128 > "$OUT/r/bench-s19-ldl-solve-c.txt" 2>&1
  echo "bench rc=$? at $((SECONDS - t0)) s"
  tar czf "$OUT/results.tgz" -C "$OUT" r
  REDO_OPS=ldl_factor,ldl_solve REDO_MIN_N=128 DTYPES=float32,float64 NO_TORCH=1 \
    grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-470}"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
