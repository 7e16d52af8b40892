#!/usr/bin/env bash
# Session 8, device call 1: what the non-finite guard costs around JAX's lowering on tiny batches
# (and what JAX gives for NaN input without it); then tune the cells the shipped table lacks
# (batch 4 / 16 / 256 from n = 128: 4x512 and 16x512 interpolate 64x512's getrfBatched today,
# 256x1024 extrapolates 64x1024's lanes).
source benchmarks/plans/device_call.sh
timeout 150 python3 -m benchmarks.diag.guard_probe > "$OUT/r/guard_probe.txt" 2>&1
echo "guard probe rc=$? at $((SECONDS - t0)) s"
budget=$((500 - (SECONDS - t0)))
# From another folder: the installed package (with its extension), not this source folder.
repo=$PWD
(cd /tmp && timeout $((budget + 60)) python3 -m jax_cusolver_ms.tune --out "$OUT/r/h100-tuned.json" \
  --resume-from "$repo/jax_cusolver_ms/tables/h100.json" --ops lu_factor,cholesky,qr \
  --dtypes float32 --batches 4,16,256 --sizes 128,256,512,1024,2048 --lanes 4,8,16 \
  --repeats 5 --budget-s "$budget") > "$OUT/r/tune.txt" 2>&1
echo "tune rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
cat "$OUT/r/guard_probe.txt"; tail -15 "$OUT/r/tune.txt"
