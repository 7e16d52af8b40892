#!/usr/bin/env bash
# Session 17, call 2 on nvidia-h100-x2 (benchmarks/plans/session17.txt items 2 and 6). GPU 1, in
# the background: the ?sytf2 kernel's block size at small n, the default (256 / 512 threads per
# matrix) against 32, 64 and 128 (JCM_LDL_THREADS). GPU 0: tests/test_svd.py (the SVD kernel
# carries its columns' squared norms) and tests/test_ldl.py (the batched LDL^T solve kernel keeps
# B in shared memory, a warp per right-hand side); if they pass, svd and ldl_solve batched
# against JAX, then the grid's svd and ldl_solve cells up to n = 32 again (and any under 0.95x).
source benchmarks/plans/device_call.sh
bench() {  # bench TAG OPS SHAPES: batched against JAX, float32 and float64
  timeout "$(kill_at "${BENCH_S:-150}")" python3 -m benchmarks.bench --ops "$2" \
    --dtypes float32,float64 --strategies batched --no-torch --tag "$1" --out "$OUT/r" \
    --shapes "$3" > "$OUT/r/bench-$1.txt" 2>&1
  echo "bench $1 rc=$? at $((SECONDS - t0)) s"
}
ldl_shapes=1x16,1x32,1x64,1x128,4x32,16x32,64x16,64x32,256x16,256x32,256x64,256x128
(
  export CUDA_VISIBLE_DEVICES=1
  bench s17-ldl-tdefault ldl_factor "$ldl_shapes"
  for t in 32 64 128; do JCM_LDL_THREADS=$t bench "s17-ldl-t$t" ldl_factor "$ldl_shapes"; done
) &
export CUDA_VISIBLE_DEVICES=0
gpu_tests "tests/test_svd.py tests/test_ldl.py" "${TEST_TIMEOUT:-200}"
if [[ -s "$OUT/r/t1/failures.log" ]] || ! grep -q " passed" "$OUT/r/t1/pytest.log"; then
  echo "tests failed: no benchmark"; head -60 "$OUT/r/t1/failures.log"
else
  bench s17-svd-norms svd 1x16,1x32,4x32,64x32,256x16,256x32,1024x16,1024x32
  bench s17-ldl-solve ldl_solve 1x16,1x32,1x64,1x128,1x256,4x32,64x32,256x32,256x128
  tar czf "$OUT/results.tgz" -C "$OUT" r
  REDO_OPS=svd,ldl_solve REDO_MAX_N=32 DTYPES=float32,float64 \
    grid_goes_on "svd,ldl_solve" "${UNTIL1:-470}"
fi
wait
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| (svd|ldl)" "$f" | cut -c1-120; done
