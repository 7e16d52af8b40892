#!/usr/bin/env bash
# Session 18, call 3 on nvidia-h100-x1: the Jacobi eigh kernel stored by position in the
# round-robin order (call 2's ncu: 8-way shared-load conflicts, 63% of its wavefronts; 22 shuffles
# a round), each thread's own rotation unshuffled, real rotations as two shuffled values, the
# leading dimension per m from a bank-conflict count (benchmarks/diag/jacobi_model.py).
# tests/test_eigh.py (the kernel at every n from 1 to 32); if they pass, eigh / eigvalsh batched
# against JAX at n <= 32 (2 alternating rounds), the table rebuilt with them, and the grid's
# eigh / eigvalsh cells up to n = 32 again (float32 and float64).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_eigh.py" "${TEST_TIMEOUT:-200}" t1
if [[ -s "$OUT/r/t1/failures.log" ]] || ! grep -q " passed" "$OUT/r/t1/pytest.log"; then
  echo "tests failed: no benchmark"; head -60 "$OUT/r/t1/failures.log"
else
  timeout "$(kill_at 200)" python3 -m benchmarks.bench --ops eigh,eigvalsh \
    --dtypes float32,float64 --strategies batched --no-torch --rounds 2 --tag s18-eigh-pos \
    --out "$OUT/r" --shapes 1x8,64x8,1x16,4x16,64x16,256x16,1x24,64x24,1x32,4x32,16x32,64x32,256x32 \
    > "$OUT/r/bench-s18-eigh-pos.txt" 2>&1
  echo "bench rc=$? at $((SECONDS - t0)) s"
  tar czf "$OUT/results.tgz" -C "$OUT" r
  table_with "$OUT"/r/s18-eigh-pos_*.json
  REDO_OPS=eigh,eigvalsh REDO_MAX_N=32 DTYPES=float32,float64 \
    grid_goes_on "eigh,eigvalsh" "${UNTIL1:-470}"
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^\| eig" "$OUT/r/bench-s18-eigh-pos.txt" | cut -c1-110
