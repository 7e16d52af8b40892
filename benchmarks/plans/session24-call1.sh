#!/usr/bin/env bash
# Session 24, call 1 on nvidia-h100-x1, on branch wip/ldl-panel-writeout (not yet on main: built
# and checked for sm_90 without a GPU in session 23, whose device time had run out): the one-block
# LDL^T panel's end (the GEMMs' operands L and W, then L into A) with each thread walking its own
# rows by pointer. Session 23's ncu (gpu-tests/session23-c6): these write-outs were ~1,600 of a
# 1024-row panel's ~7,400 instructions a warp (~57 and ~39 instructions an entry, a 64-bit offset
# worked out again for each); the new loops' SASS takes ~4-10 an entry (cuobjdump). The tests of
# tests/test_ldl.py, then ldl_factor against JAX at a single 256 .. 2048 and a few batches, with
# the committed main's numbers in the grid (h100-grid_*.json) for comparison.
source benchmarks/plans/device_call.sh
ldl_tests_then_bench s24-c1-writeout 1x256,1x512,1x1024,1x2048,4x1024,64x256
grep -E "^\| ldl" "$OUT/r/bench-s24-c1-writeout.txt" | cut -c1-100
