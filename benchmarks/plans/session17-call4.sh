#!/usr/bin/env bash
# Session 17, call 4 on nvidia-h100-x1: eigh float64 4 x 32, the grid's one cell under 0.95x
# outside LDL^T (0.91x, then 0.88x: the Jacobi kernel 0.200 ms against JAX's syevjBatched 0.176,
# where the table's point had the kernel ahead, 0.180 / 0.191). The kernel against JAX at n = 32,
# 3 alternating rounds; the table rebuilt with them; the grid's float64 eigh / eigvalsh cells up
# to n = 32 measured again.
source benchmarks/plans/device_call.sh
timeout "$(kill_at 150)" python3 -m benchmarks.bench --ops eigh,eigvalsh --dtypes float64 \
  --strategies batched --no-torch --rounds 3 --tag s17-eigh-edge --out "$OUT/r" \
  --shapes 1x32,4x32,16x32 > "$OUT/r/bench-s17-eigh-edge.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
table_with "$OUT"/r/s17-eigh-edge_*.json
REDO_OPS=eigh,eigvalsh REDO_MAX_N=32 DTYPES=float64 grid_goes_on "eigh,eigvalsh" "${UNTIL1:-300}"
grep -E "^\| eig" "$OUT/r/bench-s17-eigh-edge.txt" | cut -c1-120
