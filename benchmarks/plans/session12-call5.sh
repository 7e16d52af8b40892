#!/usr/bin/env bash
# Session 12, call 5 (the last ~3 device minutes): why same_program tells jnp.linalg.cholesky and
# jcm.cholesky apart on the GPU (tests/test_tune.py's two failures in call 4).
source benchmarks/plans/device_call.sh
python3 -m benchmarks.diag.same_program_probe 2>&1 | tee "$OUT/r/same_program.txt" | tail -70
tar czf "$OUT/results.tgz" -C "$OUT" r
