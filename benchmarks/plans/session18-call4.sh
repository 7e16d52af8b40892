#!/usr/bin/env bash
# Session 18, call 4 on nvidia-h100-x1 (no source change since call 3): float64 ldl_factor with
# the ?sytf2 block kernel at 256 threads (the default below n = 128), 128 and 64 (JCM_LDL_THREADS:
# session 17 swept them in float32 only, where n <= 32 now runs the warp kernel); then the grid's
# float32 LDL^T cells up to n = 32 again (the warp kernel as patched in call 1; the grid's are
# from before it).
source benchmarks/plans/device_call.sh
bench() {  # bench TAG: float64 ldl_factor batched against JAX at the block kernel's small shapes
  timeout "$(kill_at 100)" python3 -m benchmarks.bench --ops ldl_factor --dtypes float64 \
    --strategies batched --no-torch --tag "$1" --out "$OUT/r" \
    --shapes 4x32,64x32,256x32,4x64,16x64,64x64,256x64,64x128,256x128 > "$OUT/r/bench-$1.txt" 2>&1
  echo "bench $1 rc=$? at $((SECONDS - t0)) s"
}
bench s18-ldl-f64-t-default
JCM_LDL_THREADS=128 bench s18-ldl-f64-t128
JCM_LDL_THREADS=64 bench s18-ldl-f64-t64
tar czf "$OUT/results.tgz" -C "$OUT" r
REDO_OPS=ldl_factor,ldl_solve REDO_MAX_N=32 DTYPES=float32 \
  grid_goes_on "ldl_factor,ldl_solve" "${UNTIL1:-450}"
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
