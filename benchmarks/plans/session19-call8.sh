#!/usr/bin/env bash
# Session 19, call 8 on nvidia-h100-x1 (session 18's plan item 5): eigh / eigvalsh at batch 1024
# with the Jacobi kernel stored by position (session 18), batched against JAX's own lowering:
# the shipped table's 1024 x 32 float64 point is session 15's kernel (1.01 ms against JAX's
# 0.67), so `auto` gives that shape to JAX. No code change since call 7: no tests.
source benchmarks/plans/device_call.sh
timeout "$(kill_at 150)" python3 -m benchmarks.bench --ops eigh,eigvalsh \
  --dtypes float32,float64 --strategies batched --no-torch --tag s19-eigh-1024 --out "$OUT/r" \
  --shapes 1024x8,1024x16,1024x24,1024x32,512x32 > "$OUT/r/bench-s19-eigh-1024.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^\| eig" "$OUT/r/bench-s19-eigh-1024.txt" | cut -c1-110
