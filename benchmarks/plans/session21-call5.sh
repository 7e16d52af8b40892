#!/usr/bin/env bash
# Session 21, call 5 on nvidia-h100-x1: call 4's SASS of the one-block panel with rows trading
# labels showed its GEMVs compiled to a branch around each L read (BSSY / BSYNC, the shared
# window's base read again each time: ~13 instructions a column against ~2.5 in session 20's
# kernel; 261 against 147 instructions a warp in each step's straight-line code). A barrier at
# each step's end again changed nothing (JCM_LDL_PANEL_LABELS=2). Now the GEMVs read every
# slot's L and keep the sum by a select (also in the cluster panel). tests/test_ldl.py, the
# kernels' SASS counts, then the three variants timed side by side.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_ldl.py" "${TEST_TIMEOUT:-240}" t1
tests_passed t1 || { echo "tests failed (benchmarks still run)"; head -60 "$OUT/r/t1/failures.log"; }
SO=$(cd /tmp && python3 -c "import jax_cusolver_ms._jcm_ffi as e; print(e.__file__)")
cuobjdump -sass "$SO" > "$OUT/r/sass-all.txt" 2>&1
python3 - "$OUT/r/sass-all.txt" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
for part in re.split(r"\n\s*Function : ", text)[1:]:
    name = part.split("\n", 1)[0]
    if re.search(r"lasyf_lower_(shared|cluster)", name) and re.search(r"I[fd]Li1E", name):
        print(name[-70:], "instrs", part.count(";"), "BSSY", part.count("BSSY"),
              "CgaCtaId", part.count("CgaCtaId"))
PY
SHAPES=1x256,1x1024,1x2048,4x1024,256x128
for v in 1 0; do
  JCM_LDL_PANEL_LABELS=$v bench_op s21-ldl-c5-v$v ldl_factor auto "$SHAPES" 70
done
tar czf "$OUT/results.tgz" -C "$OUT" r
for f in "$OUT"/r/bench-*.txt; do echo "== $f"; grep -E "^\| ldl" "$f" | cut -c1-100; done
