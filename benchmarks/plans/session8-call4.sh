#!/usr/bin/env bash
# Session 8, device call 4: eigh's measured points stop at n = 512 for batch 4 / 16, and
# XsyevBatched changes regime between 256 and 512 (4x256: JAX 2.7 ms, the hybrid 4.8 ms, call 3):
# tune syevd at n 64-512 for every batch into a cache the report reads (laid over the shipped
# table); then the grid goes on: eigh (its 0.57x cell again), svd, eig first.
source benchmarks/plans/device_call.sh
export JAX_CUSOLVER_MS_TUNE_CACHE="$OUT/r/cache"
(cd /tmp && timeout 170 python3 -m jax_cusolver_ms.tune --ops eigh --dtypes float32 \
  --batches 4,16,64,256 --sizes 64,128,256,512 --lanes 4,8,16 --repeats 5 --budget-s 130) \
  > "$OUT/r/tune.txt" 2>&1
echo "tune rc=$? at $((SECONDS - t0)) s"; tail -3 "$OUT/r/tune.txt"
ops=eigh,svd,eig,cholesky,qr,lu_factor,solve,inv,det,cho_solve,ldl_factor,ldl_solve,qr_r,qr_multiply,eigvalsh,eigvals,svdvals,svd_qr
budget=$((545 - (SECONDS - t0)))
timeout $((budget + 45)) python3 -m benchmarks.report --tag h100-grid --dtypes float32 --strategies auto \
  --ops "$ops" --budget-s "$budget" --out "$OUT/r" --redo-below 0.95 \
  --resume benchmarks/results/h100-grid_NVIDIA-H100-80GB-HBM3.json > "$OUT/r/report.txt" 2>&1
echo "report rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^# " "$OUT/r/report.txt" | tail -3
sed -n '1,22p' "$OUT"/r/h100-grid*.md
