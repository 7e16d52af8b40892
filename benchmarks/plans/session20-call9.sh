#!/usr/bin/env bash
# Session 20, call 9 on nvidia-h100-x1: the ?sytf2 block kernel's threads for float64 at n = 32 /
# 64 (the grid's float64 ldl_factor n = 32 cells, 0.82-0.93x, run it with 256 threads; session 17
# measured float32 256x32 0.072 ms with 128 against 0.079 with 256, before the warp kernel took
# float32 there): JCM_LDL_THREADS=64 / 128 against the default. No ffi/ change since call 8.
source benchmarks/plans/device_call.sh
SHAPES=4x32,64x32,256x32,4x64,64x64,256x64
bench64() {  # bench64 TAG: float64 ldl_factor batched against JAX
  timeout "$(kill_at 80)" python3 -m benchmarks.bench --ops ldl_factor --dtypes float64 \
    --strategies batched --no-torch --tag "$1" --out "$OUT/r" --shapes "$SHAPES" \
    > "$OUT/r/bench-$1.txt" 2>&1
  echo "bench $1 rc=$? at $((SECONDS - t0)) s"
}
bench64 s20-ldl-c9-t256
JCM_LDL_THREADS=128 bench64 s20-ldl-c9-t128
JCM_LDL_THREADS=64 bench64 s20-ldl-c9-t64
bench64 s20-ldl-c9-t256b
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-100; done
