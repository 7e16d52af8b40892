#!/usr/bin/env bash
# Session 12, call 3: the Jacobi kernel with its rotation's arithmetic shortened (call 2 measured
# the first version: faster than JAX for single matrices and n <= 8, slower for batches at n =
# 16 and 32). tests/test_eigh.py; then the kernel ("batched") against JAX over batch 1..1024 x
# n 4..32; the shipped table rebuilt on the machine with those cells (syevj points: JAX vs the
# kernel) into the installed package, so that the grid's eigh / eigvalsh cells at n <= 32 run
# what `auto` will ship; then GRID_OPS while time lasts.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_eigh.py" "${TEST_TIMEOUT:-150}"
timeout "$(kill_at "${BENCH_S:-170}")" python3 -m benchmarks.bench --ops eigh \
  --dtypes float32,float64 --strategies batched --no-torch --tag s12-jacobi-kernel2 \
  --out "$OUT/r" --shapes "$(python3 -c "print(','.join(f'{b}x{n}' for b in (1, 4, 16, 64, 256, 1024) for n in (4, 8, 12, 16, 24, 32)))")" \
  > "$OUT/r/bench.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
installed=$(cd /tmp && python3 -c "import jax_cusolver_ms, os; print(os.path.dirname(jax_cusolver_ms.__file__))")
src=$(python3 -c "import json; print(' '.join(json.load(open('jax_cusolver_ms/tables/h100.json'))['built_from']))")
python3 -m benchmarks.build_table $src "$OUT"/r/s12-jacobi-kernel2_*.json \
  --out "$installed/tables/h100.json" > "$OUT/r/build_table.txt" 2>&1
echo "table rc=$? at $((SECONDS - t0)) s"; tail -3 "$OUT/r/build_table.txt"
cp "$installed/tables/h100.json" "$OUT/r/h100-table.json"
(cd /tmp && python3 -c "
import jax_cusolver_ms as jcm, numpy as np
for b in (1, 4, 16, 64, 256):
    print(b, [jcm.explain('eigh', (b, n, n), np.float32).strategy for n in (4, 8, 16, 32)],
          [jcm.explain('eigh', (b, n, n), np.float64).strategy for n in (4, 8, 16, 32)])")
DTYPES=${DTYPES:-float32,float64} grid_goes_on "eigh,eigvalsh${GRID_OPS:+,$GRID_OPS}" "${UNTIL:-480}"
tail -80 "$OUT/r/bench.txt" | grep -E "^\| eigh" | cut -c1-120
