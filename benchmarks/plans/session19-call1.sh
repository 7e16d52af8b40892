#!/usr/bin/env bash
# Session 19, call 1 on nvidia-h100-x1: the ?lasyf panel with its L and W in shared memory
# (ffi/ldl_kernels.cu lasyf_lower_shared_kernel: a thread per row, the column in registers, two
# or three barriers a step where the global-memory kernel has a dozen after L2 round trips; a
# panel narrower than 32 where that is what fits).
# tests/test_ldl.py; if they pass, ldl_factor blocked against JAX with the shared panel (1024
# threads from 1024 rows on, and 512) and with the global-memory panel (JCM_LDL_PANEL_SHARED=0).
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-150}" t1
if ! tests_passed t1; then
  echo "tests failed: no benchmark"; head -80 "$OUT/r/t1/failures.log"
else
  bench() {  # bench TAG: ldl_factor blocked against JAX
    timeout "$(kill_at 110)" python3 -m benchmarks.bench --ops ldl_factor \
      --dtypes float32,float64 --strategies blocked --no-torch --tag "$1" --out "$OUT/r" \
      --shapes 1x128,1x256,1x512,1x1024,1x2048,4x1024,64x256,256x256,64x1024 \
      > "$OUT/r/bench-$1.txt" 2>&1
    echo "bench $1 rc=$? at $((SECONDS - t0)) s"
  }
  bench s19-ldl-panel-shared-a
  JCM_LDL_PANEL_SHARED=0 bench s19-ldl-panel-global-a
  JCM_LDL_PANEL_THREADS=512 bench s19-ldl-panel-shared-t512
fi
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-110; done
