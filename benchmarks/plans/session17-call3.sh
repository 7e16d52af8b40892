#!/usr/bin/env bash
# Session 17, call 3 on nvidia-h100-x2, the session's last. GPU 1, in the background: the blocked
# LDL^T of one matrix with the trailing update in 256-column GEMMs as before
# (JCM_LDL_UPDATE_BLOCK=256). GPU 0: tests/test_ldl.py (a single matrix now updates its whole
# trailing square in one GEMM); if they pass, the same shapes with that default, then the grid's
# LDL^T cells under 0.95x, svdvals up to n = 32 (the SVD kernel's carried norms) and eigh's cell
# under 0.95x measured again.
source benchmarks/plans/device_call.sh
bench() {  # bench TAG: ldl_factor / ldl_solve blocked against JAX, float32 and float64
  timeout "$(kill_at "${BENCH_S:-150}")" python3 -m benchmarks.bench --ops ldl_factor,ldl_solve \
    --dtypes float32,float64 --strategies blocked --no-torch --tag "$1" --out "$OUT/r" \
    --shapes 1x256,1x512,1x1024,1x2048,4x1024 > "$OUT/r/bench-$1.txt" 2>&1
  echo "bench $1 rc=$? at $((SECONDS - t0)) s"
}
(CUDA_VISIBLE_DEVICES=1 JCM_LDL_UPDATE_BLOCK=256 bench s17-ldl-upd256) &
export CUDA_VISIBLE_DEVICES=0
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-120}"
if [[ -s "$OUT/r/t1/failures.log" ]] || ! grep -q " passed" "$OUT/r/t1/pytest.log"; then
  echo "tests failed: no benchmark"; head -60 "$OUT/r/t1/failures.log"
else
  bench s17-ldl-whole
  tar czf "$OUT/results.tgz" -C "$OUT" r
  REDO_OPS=svdvals REDO_MAX_N=32 DTYPES=float32,float64 \
    grid_goes_on "ldl_factor,ldl_solve,svdvals,eigh" "${UNTIL1:-460}"
fi
wait
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-120; done
