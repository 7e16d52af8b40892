#!/usr/bin/env bash
# Session 19, call 3 on nvidia-h100-x1: the shared-memory ?lasyf panel may keep W in L2 (L alone
# in shared memory: panels twice as wide where L and W together do not fit; call 1's float32
# 1x2048 ran its first panels 8 columns wide). tests/test_ldl.py (with the placements forced in
# children); if they pass, ldl_factor blocked against JAX by default, with L alone
# (JCM_LDL_PANEL_SHARED=1) and with call 1's rule (3); then ncu's kernel times of one solve
# (call 2: float32 1x2048's solve ~2.3 ms by the TRSM route, JAX's 0.4) and one factor.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-180}" t1
if ! tests_passed t1; then
  echo "tests failed: no benchmark"; head -80 "$OUT/r/t1/failures.log"
else
  bench() { bench_op "$@" 100; }  # bench TAG OP STRATEGIES SHAPES
  shapes=1x256,1x512,1x1024,1x2048,4x1024,64x1024,256x256
  bench s19-ldl-panel-lw ldl_factor blocked $shapes
  JCM_LDL_PANEL_SHARED=1 bench s19-ldl-panel-l ldl_factor blocked $shapes
  prof() {  # prof NAME PROBE-ARGS...: every kernel's time, summed by name
    local name=$1
    shift
    timeout "$(kill_at 60)" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      python3 benchmarks/diag/ncu_probe.py "$@" > "$OUT/r/ncu-$name.csv" 2> "$OUT/r/ncu-$name.err"
    python3 benchmarks/diag/ncu_sum.py "$OUT/r/ncu-$name.csv" --top 8 | tee "$OUT/r/ncu-$name.txt"
  }
  prof solve-f32-2048 ldl_solve float32 1 2048 --strategy blocked
  prof solve-f64-2048 ldl_solve float64 1 2048 --strategy blocked
  prof jax-solve-f32-2048 jax_lu_solve float32 1 2048
  prof factor-f32-2048 ldl_factor float32 1 2048 --strategy blocked
  echo "ncu done at $((SECONDS - t0)) s"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
