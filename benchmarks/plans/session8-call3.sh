#!/usr/bin/env bash
# Session 8, device call 3: the issue-7 grid (float32, auto, PyTorch alongside) goes on from
# session 7's 166 cells with the table of calls 1-2 (tuned points laid over the shipped ones, a
# table answering only within reach of its measurements). Ops ordered so the families not yet
# measured come first; lu cells whose auto plan changed, or under 0.95x, are measured again.
source benchmarks/plans/device_call.sh
ops=cholesky,qr,eigh,svd,eig,lu_factor,solve,inv,det,cho_solve,ldl_factor,ldl_solve,qr_r,qr_multiply,eigvalsh,eigvals,svdvals,svd_qr
budget=$((540 - (SECONDS - t0)))
timeout $((budget + 50)) python3 -m benchmarks.report --tag h100-grid --dtypes float32 --strategies auto \
  --ops "$ops" --budget-s "$budget" --out "$OUT/r" --redo-below 0.95 \
  --resume "${RESUME:-benchmarks/results/h100-grid_NVIDIA-H100-80GB-HBM3.json}" > "$OUT/r/report.txt" 2>&1
echo "report rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^# " "$OUT/r/report.txt" | tail -3
sed -n '1,16p' "$OUT"/r/h100-grid*.md
