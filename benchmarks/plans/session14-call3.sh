#!/usr/bin/env bash
# Session 14, call 3 (the last ~11 device minutes): potrf_small's own launch shape (up to 1024
# threads for a few matrices; for many, enough threads to fill the SM next to the blocks its
# shared memory holds: call 2 measured 1 x 64 at 0.86x / 0.72x and float64 1024 x 64 at 0.57x
# JAX with getrf_small's shape) and the NaN-input test's fix. tests/test_cholesky.py; the
# kernels against JAX again at n 16..64; the table rebuilt with calls 2 and 3; then the grid's
# cholesky / cho_solve / inv cells up to n = 64 measured again.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_cholesky.py" "${TEST_TIMEOUT:-60}"
timeout "$(kill_at "${BENCH_S:-120}")" python3 -m benchmarks.bench --ops cholesky,cho_solve \
  --dtypes float32,float64 --strategies batched --no-torch --tag s14-cholesky-kernel2 \
  --out "$OUT/r" --shapes 1x16,1x32,1x64,4x16,4x32,4x64,16x16,16x32,16x64,64x16,64x32,64x64,256x16,256x32,256x64,1024x16,1024x32,1024x64 \
  > "$OUT/r/bench.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
table_with benchmarks/results/s14-cholesky-kernel_*.json "$OUT"/r/s14-cholesky-kernel2_*.json
REDO_OPS=cholesky,cho_solve,inv REDO_MAX_N=64 DTYPES=${DTYPES:-float32,float64} \
  grid_goes_on "cho_solve,cholesky,inv${GRID_OPS:+,$GRID_OPS}" "${UNTIL:-500}"
python3 - "$OUT"/r/s14-cholesky-kernel2_*.json <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cells"]:
    j, k = c["impls"]["jax"].get("median_ms"), c["impls"].get("jcm:batched", {}).get("median_ms")
    print(c["op"], c["dtype"], f"{c['batch']}x{c['n']}", j, k, f"{j / k:.2f}x" if j and k else "-")
PY
