#!/usr/bin/env bash
# Session 15, call 2: the Jacobi kernel (ffi/eigh_kernels.cu) with each lane computing one
# pair's rotation (a thread takes its two by shuffles: half the rotations per thread, a quarter
# of the block's) and a rotation of two reciprocal square roots and no division; the shared
# block_reduce (kernel_util.cuh, also qr_kernels.cu's norms) and ldl_ops.cc's ldl_chunk.
# tests/test_eigh.py, tests/test_qr.py, tests/test_ldl.py; the kernel ("batched") against JAX
# over batch 1..1024 x n 4..32; the det grid cell replicated for 6 seeds (det_probe --cells);
# the shipped table rebuilt on the machine with those points; the
# grid's eigh / eigvalsh cells up to n = 32 measured again.
source benchmarks/plans/device_call.sh
gpu_tests "tests/test_eigh.py tests/test_qr.py tests/test_ldl.py" "${TEST_TIMEOUT:-170}"
timeout "$(kill_at "${BENCH_S:-150}")" python3 -m benchmarks.bench --ops eigh \
  --dtypes float32,float64 --strategies batched --no-torch --tag s15-jacobi-kernel3 \
  --out "$OUT/r" --shapes "$(python3 -c "print(','.join(f'{b}x{n}' for b in (1, 4, 16, 64, 256, 1024) for n in (4, 8, 12, 16, 24, 32)))")" \
  > "$OUT/r/bench.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
timeout "$(kill_at 80)" python3 -m benchmarks.diag.det_probe --cells "${DET_CELLS:-6}" \
  > "$OUT/r/det_cells.txt" 2>&1
echo "det cells rc=$? at $((SECONDS - t0)) s"; grep -v "^backend" "$OUT/r/det_cells.txt" | tail -12
tar czf "$OUT/results.tgz" -C "$OUT" r
table_with "$OUT"/r/s15-jacobi-kernel3_*.json
REDO_OPS=eigh,eigvalsh REDO_MAX_N=32 DTYPES=${DTYPES:-float32,float64} \
  grid_goes_on "eigh,eigvalsh${GRID_OPS:+,$GRID_OPS}" "${UNTIL:-470}"
grep -E "^\| eigh" "$OUT/r/bench.txt" | cut -c1-120
