# Sourced by the per-call device plans (session7-call*.sh): strict mode, $OUT exported, the
# package built and installed by gpu_session.sh (the build log only on failure), $OUT/r for the
# results to tar, t0 for the call's clock.
set -uo pipefail
export OUT
t0=$SECONDS
SKIP_TESTS=1 SKIP_BENCH=1 bash benchmarks/gpu_session.sh > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
rm -f "$OUT/build.txt"
mkdir -p "$OUT/r"
