#!/usr/bin/env bash
# Session 10, call 1: the blocked LU's in-kernel triangular solve (JCM_LU_TRSM=kernel) on the
# GPU: its test, then the blocked LU with and without it where cuBLAS trsmBatched may dominate
# (batch 64 and 256), then the grid goes on (float32's slow cells, float64).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_lu.py tests/test_ldl.py" 260
shapes=${SHAPES:-16x512,16x1024,64x512,64x1024,64x2048,256x256,256x512,256x1024,256x2048}
for trsm in kernel cublas; do
  JCM_LU_TRSM=$trsm timeout 150 python3 -m benchmarks.bench --ops lu_factor --dtypes float32 \
    --shapes "$shapes" --strategies blocked --no-torch --jax-limit-s 2 --out "$OUT/r" \
    --tag "s10-lutrsm-$trsm" > "$OUT/r/lutrsm-$trsm.txt" 2>&1
  echo "trsm=$trsm rc=$? at $((SECONDS - t0)) s"
done
for f in "$OUT"/r/s10-lutrsm-*.md; do echo "== $f"; grep "^| lu_factor" "$f" | cut -c1-120; done
timeout 120 python3 -m benchmarks.diag.guard_probe > "$OUT/r/guard_probe.txt" 2>&1
echo "guard probe rc=$? at $((SECONDS - t0)) s"; tail -30 "$OUT/r/guard_probe.txt"
tar czf "$OUT/results.tgz" -C "$OUT" r
DTYPES=${DTYPES:-float32,float64} grid_goes_on "${GRID_OPS:-eigvals,svd,eig,svd_qr,eigh,eigvalsh,inv,qr,cho_solve,qr_r,qr_multiply,ldl_factor,ldl_solve,svdvals,lu_factor,cholesky,solve,det}" "${UNTIL:-560}"
