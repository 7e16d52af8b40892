#!/usr/bin/env bash
# Session 18, call 2 on nvidia-h100-x1: where the small kernels' time goes (Nsight Compute, clocks
# left alone): this project's eigh kernel and LDL^T factor kernels (block and warp) at float64
# n = 32, the block kernel at float64 256 x 128, and every kernel of JAX's eigh / LU at the same
# shapes (durations only). Then float32 ldl_factor / ldl_solve at n <= 32 against JAX with the
# warp kernel as patched in call 1 (tree of selects, labels on every lane).
source benchmarks/plans/device_call.sh
ncu --version | tail -1
# prof NAME FILTER PROBE-ARGS...: the second call's kernel matching FILTER, every section; its
# details page and its SASS with per-instruction samples (CSV).
prof() {
  local name=$1 filter=$2
  shift 2
  timeout "$(kill_at 150)" ncu --clock-control none --kernel-name "regex:$filter" --launch-skip 1 \
    --launch-count 1 --set full --import-source yes -f -o "$OUT/ncu-$name" \
    python3 benchmarks/diag/ncu_probe.py "$@" > "$OUT/r/ncu-$name.log" 2>&1
  echo "ncu $name rc=$? at $((SECONDS - t0)) s"
  ncu --import "$OUT/ncu-$name.ncu-rep" --page details > "$OUT/r/ncu-$name-details.txt" 2>&1
  ncu --import "$OUT/ncu-$name.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/r/ncu-$name-sass.csv" 2>&1
  grep -E "^  [a-zA-Z_].*\(|Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued" \
    "$OUT/r/ncu-$name-details.txt" | head -8
}
# durations NAME PROBE-ARGS...: every kernel of both calls, its duration only.
durations() {
  local name=$1
  shift
  timeout "$(kill_at 120)" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    python3 benchmarks/diag/ncu_probe.py "$@" > "$OUT/r/ncu-$name.csv" 2>&1
  echo "ncu $name rc=$? at $((SECONDS - t0)) s"
}
prof eigh-f64-4x32 syevj_small eigh float64 4 32
JCM_LDL_WARP_MAX_N=16 prof ldl-block-f64-4x32 sytrf_lower ldl_factor float64 4 32
JCM_LDL_WARP_MAX_N=32 prof ldl-warp-f64-4x32 sytrf_small ldl_factor float64 4 32
prof ldl-block-f64-256x128 sytrf_lower ldl_factor float64 256 128
durations jax-eigh-f64-4x32 jax_eigh float64 4 32
durations jax-lu-f64-4x32 jax_lu float64 4 32
durations jax-lu-f64-256x128 jax_lu float64 256 128
durations eigh-f64-4x32-all eigh float64 4 32
durations ldl-f64-4x32-all ldl_factor float64 4 32
tar czf "$OUT/results.tgz" -C "$OUT" r
timeout "$(kill_at 100)" python3 -m benchmarks.bench --ops ldl_factor,ldl_solve \
  --dtypes float32 --strategies batched --no-torch --tag s18-ldl-warp-f32 --out "$OUT/r" \
  --shapes 1x16,1x32,4x16,4x32,16x32,64x16,64x32,256x16,256x32 > "$OUT/r/bench-f32.txt" 2>&1
echo "bench rc=$? at $((SECONDS - t0)) s"
tar czf "$OUT/results.tgz" -C "$OUT" r
grep -E "^\| ldl" "$OUT/r/bench-f32.txt" | cut -c1-110
for f in "$OUT"/r/ncu-*.csv; do
  echo "== $f: $(grep -c gpu__time_duration "$f") kernels"
done
