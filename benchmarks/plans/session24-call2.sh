#!/usr/bin/env bash
# Session 24, call 2 on nvidia-h100-x1. Call 1 put the one-block LDL^T panel's write-out by
# pointer on main (float32 1x1024 2.39 -> 2.09 ms, 1x2048 6.47 -> 5.99). Here the same for the
# cluster panel's end (write_label_panel), and both panels' GEMVs by column pointer with the
# live-row predicate worked out once a step (their SASS: ~6 integer instructions an FFMA before).
# tests/test_ldl.py, ldl_factor / ldl_solve against JAX at the call-1 shapes, then ncu's kernel
# times of one 1x2048 factorization (float32 and float64): how much of it the panels are.
source benchmarks/plans/device_call.sh
ldl_tests_then_bench s24-c2-gemv 1x256,1x512,1x1024,1x2048,4x1024,64x256
prof() {  # prof NAME PROBE-ARGS...: every kernel's time, summed by name
  local name=$1
  shift
  timeout "$(kill_at 60)" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    python3 benchmarks/diag/ncu_probe.py "$@" > "$OUT/r/ncu-$name.csv" 2> "$OUT/r/ncu-$name.err"
  echo "ncu $name rc=$? at $((SECONDS - t0)) s"
  python3 benchmarks/diag/ncu_sum.py "$OUT/r/ncu-$name.csv" --top 10 > "$OUT/r/ncu-$name.txt"
}
prof factor-f32-2048 ldl_factor float32 1 2048 --strategy auto --calls 1
prof factor-f64-2048 ldl_factor float64 1 2048 --strategy auto --calls 1
tar czf "$OUT/results.tgz" -C "$OUT" r
cat "$OUT"/r/ncu-*.txt | cut -c1-100
grep -E "^\| ldl" "$OUT/r/bench-s24-c2-gemv.txt" | cut -c1-100
