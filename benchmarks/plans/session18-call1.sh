#!/usr/bin/env bash
# Session 18, call 1 on nvidia-h100-x1: the warp LDL^T kernel with a tree of selects, labels on
# every lane and the 2x2 step's w computed locally (session18-ldl-warp.patch), and the
# Bunch-Kaufman choice as one helper in the three ?sytf2-style kernels.
# tests/test_ldl.py with the shipped dispatch (float32 n <= 32, wider n <= 16) and with the warp
# kernel up to n = 32 in every dtype; if both pass, float64 ldl_factor / ldl_solve at n = 24 / 32
# with the warp kernel (JCM_LDL_WARP_MAX_N=32) and the block kernel (=16), twice each, alternating.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-120}" t1
JCM_LDL_WARP_MAX_N=32 gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-120}" t2
failed() { [[ -s "$OUT/r/$1/failures.log" ]] || ! grep -q " passed" "$OUT/r/$1/pytest.log"; }
if failed t1 || failed t2; then
  echo "tests failed: no benchmark"; head -80 "$OUT"/r/t*/failures.log
else
  bench() {  # bench TAG: float64 ldl_factor / ldl_solve batched against JAX at n = 24 / 32
    timeout "$(kill_at 100)" python3 -m benchmarks.bench --ops ldl_factor,ldl_solve \
      --dtypes float64 --strategies batched --no-torch --tag "$1" --out "$OUT/r" \
      --shapes 1x24,4x24,64x24,256x24,1x32,4x32,16x32,64x32,256x32 > "$OUT/r/bench-$1.txt" 2>&1
    echo "bench $1 rc=$? at $((SECONDS - t0)) s"
  }
  JCM_LDL_WARP_MAX_N=32 bench s18-ldl-warp-a
  JCM_LDL_WARP_MAX_N=16 bench s18-ldl-block-a
  JCM_LDL_WARP_MAX_N=32 bench s18-ldl-warp-b
  JCM_LDL_WARP_MAX_N=16 bench s18-ldl-block-b
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
