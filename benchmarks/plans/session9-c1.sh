#!/usr/bin/env bash
# Session 9, call C1: the blocked LU at its 32-column panels. test_lu.py on the GPU (the
# singular-panel test now allows cuBLAS's batch-count rounding), the float64 blocked LU next to
# JAX and lanes (the table has float32's from call B1), then the float32 grid's LU family again
# where `auto` now picks the blocked LU (the report re-measures cells whose plan changed).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_lu.py" 200
shapes=4x512,4x1024,4x2048,16x256,16x512,16x1024,16x2048,64x128,64x256,64x512,64x1024,64x2048,256x128,256x256,256x512,256x1024
timeout 150 python3 -m benchmarks.bench --ops lu_factor --dtypes float64 --shapes "$shapes" \
  --strategies auto,blocked --no-torch --jax-limit-s 2 --out "$OUT/r" --tag s9-lub32-f64 \
  > "$OUT/r/lub32-f64.txt" 2>&1
echo "f64 bench rc=$? at $((SECONDS - t0)) s"
grep "^| lu_factor" "$OUT"/r/s9-lub32-f64*.md | cut -c1-130
tar czf "$OUT/results.tgz" -C "$OUT" r
grid_goes_on "${GRID_OPS:-lu_factor,solve,inv,det,svd_qr,eigvals,svd,eig}" "${UNTIL:-555}"
