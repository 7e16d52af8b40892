#!/usr/bin/env bash
# Session 9: the blocked LU (getrf strategy "blocked": panel / laswp kernels, trsmBatched,
# strided-batched GEMM updates). The LU, LDL and QR tests on the GPU (the kernels' shared
# helpers moved), then its panel width against JAX, lanes and PyTorch where JAX's getrfBatched
# or lanes are at parity with each other and MAGMA is ahead (batch >= 16, n >= 256).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_lu.py tests/test_ldl.py tests/test_qr.py" "${TEST_TIMEOUT:-240}"
shapes=${SHAPES:-4x512,4x1024,4x2048,16x256,16x512,16x1024,16x2048,64x128,64x256,64x512,64x1024,64x2048,256x128,256x256,256x512,256x1024}
for nb in ${BLOCKS:-64 32 128}; do
  left=$(( ${UNTIL:-560} - (SECONDS - t0) ))
  (( left > 30 )) || break
  extra=(--no-torch --strategies blocked)
  [[ $nb == 64 ]] && extra=(--strategies auto,blocked,looped:8)
  JCM_LU_BLOCK=$nb timeout "$left" python3 -m benchmarks.bench --ops lu_factor \
    --dtypes "${LU_DTYPES:-float32}" --shapes "$shapes" "${extra[@]}" --jax-limit-s 2 \
    --out "$OUT/r" --tag "s9-lub$nb" > "$OUT/r/lub$nb.txt" 2>&1
  echo "nb=$nb rc=$? at $((SECONDS - t0)) s"
done
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/s9-lub*.md; do echo "== $f"; grep "^| lu_factor" "$f" | cut -c1-150; done
# Minutes left: the grid goes on (from wip/, a fresh machine's seed).
if (( ${UNTIL:-560} - (SECONDS - t0) > 60 )); then
  grid_goes_on "${GRID_OPS:-svd_qr,eigvals,svd,eig}" "${UNTIL:-560}"
fi
