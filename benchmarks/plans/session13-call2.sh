#!/usr/bin/env bash
# Session 13, call 2: the small-matrix LU kernel (ffi/lu_kernels.cu getrf_small_batched, n <= 64:
# getrf's batched path there, one launch, no guard). tests/test_lu.py and tests/test_tune.py
# (bench.text_signature now ignores the timer stamps' slots); then the kernel ("batched")
# against JAX over batch 1..1024 x n 4..64; the shipped table rebuilt on the machine with those
# cells into the installed package, so that the grid's LU cells at n <= 64 run what `auto` will
# ship (cells whose auto plan changed are measured again); then GRID_OPS while time lasts.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_lu.py tests/test_tune.py" "${TEST_TIMEOUT:-170}"
timeout "$(kill_at "${BENCH_S:-150}")" python3 -m benchmarks.bench --ops lu_factor \
  --dtypes float32,float64 --strategies batched --no-torch --tag s13-lu-kernel \
  --out "$OUT/r" --shapes "$(python3 -c "print(','.join(f'{b}x{n}' for b in (1, 4, 16, 64, 256, 1024) for n in (4, 8, 16, 32, 48, 64)))")" \
  > "$OUT/r/bench.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
table_with "$OUT"/r/s13-lu-kernel_*.json
(cd /tmp && python3 -c "
import jax_cusolver_ms as jcm, numpy as np
for b in (1, 4, 16, 64, 256):
    print(b, [jcm.explain('lu_factor', (b, n, n), np.float32).strategy for n in (16, 32, 64, 128)],
          [jcm.explain('lu_factor', (b, n, n), np.float64).strategy for n in (16, 32, 64, 128)])")
DTYPES=${DTYPES:-float32,float64} grid_goes_on "lu_factor,solve,det,inv${GRID_OPS:+,$GRID_OPS}" "${UNTIL:-470}"
grep -E "^\| lu_factor" "$OUT/r/bench.txt" | cut -c1-140 | tail -80
