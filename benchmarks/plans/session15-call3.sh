#!/usr/bin/env bash
# Session 15, call 3 (nvidia-h100-x2 where lent): the det grid cell with the blocked LU forced
# (call 2's `auto` ran JAX's lowering there), 4 seeds; the grid's eigh / eigvalsh cells up to
# n = 32 again with the table of call 2's Jacobi kernel points and the unguarded-kernel margin
# (tables.py: MARGIN, not XLA_MARGIN, against JAX inside the guard); then the grid's slow
# leftovers (JAX's geev / gesvd), sharded over the host's GPUs.
source benchmarks/plans/device_call.sh
timeout "$(kill_at 60)" python3 -m benchmarks.diag.det_probe --cells "${DET_CELLS:-4}" \
  --strategy blocked > "$OUT/r/det_cells.txt" 2>&1
echo "det cells rc=$? at $((SECONDS - t0)) s"; grep -v "^backend" "$OUT/r/det_cells.txt" | cut -c1-200 | tail -12
REDO_OPS=eigh,eigvalsh REDO_MAX_N=32 DTYPES=float32,float64 \
  grid_goes_on "eigh,eigvalsh" "${UNTIL1:-230}"
DTYPES=${DTYPES:-float64,float32} grid_sharded "${GRID_OPS:-eig,svd_qr,eigvals,svdvals,svd}" "${UNTIL:-430}"
