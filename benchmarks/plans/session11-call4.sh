#!/usr/bin/env bash
# Session 11, call 4 (the session's last ~6 device minutes): tests/test_eigh.py with the rebuilt
# shipped table (float64 syevd 16x2048 / 64x2048 tuned in call 3), then float64 grid cells while
# time lasts.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_eigh.py" "${TEST_TIMEOUT:-110}"
DTYPES=float64 grid_goes_on "${GRID_OPS:-eigvalsh,ldl_factor,ldl_solve,svdvals,det}" "${UNTIL:-250}"
