#!/usr/bin/env bash
# Session 19, call 4 on nvidia-h100-x1: the shared-memory ?lasyf panel with L and W in shared
# memory only (call 3: W alone in L2 was slower everywhere), reading the next column ahead
# (patched for the step's interchange) and with the argmaxes by the warp's integer max / min
# reductions. tests/test_ldl.py (banded matrices added: interchanges with the next rows); if they
# pass, ldl_factor and ldl_solve against JAX, blocked and batched where either may win, blocked
# alone above; then the shipped table rebuilt with these for the grid of call 5.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-180}" t1
if ! tests_passed t1; then
  echo "tests failed: no benchmark"; head -80 "$OUT/r/t1/failures.log"
else
  bench() { bench_op "$@" 130; }  # bench TAG OP STRATEGIES SHAPES
  small=1x128,1x256,4x128,4x256,16x128,16x256,64x128,64x256,256x128,256x256
  bench s19-ldl-factor-a ldl_factor blocked,batched $small
  bench s19-ldl-factor-b ldl_factor blocked 1x512,1x1024,1x2048,4x1024,64x1024
  bench s19-ldl-solve-a ldl_solve blocked,batched 1x128,1x256,4x128,4x256,16x256,64x256,256x256
  bench s19-ldl-solve-b ldl_solve blocked 1x512,1x1024,1x2048,4x1024
  table_with "$OUT"/r/s19-ldl-*_NVIDIA-H100-80GB-HBM3.json
  # The solve alone (on LAPACK's factor): the unblocked kernel (batched) against the TRSM route
  # (blocked, up to 4 matrices), every kernel's time by ncu.
  for shape in "1 128" "1 256" "4 256"; do
    for strategy in batched blocked; do
      name=solve-f32-${shape// /x}-$strategy
      timeout "$(kill_at 40)" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
        python3 benchmarks/diag/ncu_probe.py ldl_solve float32 $shape --strategy $strategy \
        > "$OUT/r/ncu-$name.csv" 2> "$OUT/r/ncu-$name.err"
      python3 benchmarks/diag/ncu_sum.py "$OUT/r/ncu-$name.csv" --top 4
    done
  done
  echo "ncu done at $((SECONDS - t0)) s"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
