#!/usr/bin/env bash
# Session 16, call 3 on nvidia-h100-x2. GPU 1: the grid's slow eigvals / svd_qr leftovers (JAX
# 1-20 s a call: one timed call after the probe, no PyTorch). GPU 0: tests/test_eigh.py (the
# Jacobi rotations moved to ffi/jacobi.cuh, shared with the SVD kernel), then the grid's svd /
# svdvals cells up to n = 32 measured again with the SVD kernel and the table that ships (call
# 2's), then their leftovers. The grids merged last.
source benchmarks/plans/device_call.sh
DTYPES=float64,float32 MIN_REPEATS=1 NO_TORCH=1 \
  grid_beside "${GRID_OPS:-eigvals,svd_qr}" "${UNTIL:-510}" 1
export CUDA_VISIBLE_DEVICES=0
gpu_tests "tests/test_eigh.py" "${TEST_TIMEOUT:-150}"
REDO_OPS=svd,svdvals REDO_MAX_N=32 DTYPES=float32,float64 MIN_REPEATS=1 \
  grid_goes_on "svdvals,svd" "${UNTIL1:-500}"
grid_beside_done
