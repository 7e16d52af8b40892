#!/usr/bin/env bash
# On a bare GPU machine, from the repository root: build and install for this GPU, check that the
# extension loads, run the fast GPU test suite, run a benchmark grid and write its report under
# $OUT. A short table (per op and dtype the speed-up over JAX, then the tests) is printed last.
#
#   bash benchmarks/gpu_session.sh                 # the quick grid (a few minutes)
#   bash benchmarks/gpu_session.sh full            # the full grid (hours on one H100)
#   bash benchmarks/gpu_session.sh GRID [OPTIONS]  # a grid of benchmarks/grids.toml, and any
#                                                  # options of python -m benchmarks.report
#
# Environment: OUT (default ./out), SKIP_BUILD=1 (reuse the installed build), SKIP_TESTS=1,
# SKIP_BENCH=1, TEST_TIMEOUT (seconds, default 420), PYTEST_ARGS (more pytest arguments),
# CMAKE_ARGS (default: this GPU's architecture only). No network is needed: the build uses what
# is installed (--no-build-isolation --no-deps).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT="$(mkdir -p "${OUT:-./out}" && cd "${OUT:-./out}" && pwd)"
GRID="${1:-quick}"
(( $# )) && shift
step() { printf '\n=== %s\n' "$*"; }

step "device and versions"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
python3 - <<'EOF'
import importlib.metadata as md, sys
names = ["jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "numpy", "nvidia-cusolver",
         "nvidia-cublas", "torch", "pytest", "pytest-xdist", "matplotlib"]
found = []
for name in names:
    try:
        found.append(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        pass
print("python", sys.version.split()[0], "|", ", ".join(found))
EOF

if [[ -z "${SKIP_BUILD:-}" ]]; then
  # Only this GPU's architecture: a fraction of a multi-architecture compile.
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
  export CMAKE_ARGS="${CMAKE_ARGS:--DCMAKE_CUDA_ARCHITECTURES=${arch:-native}}"
  step "build and install, CMAKE_ARGS=$CMAKE_ARGS (log: $OUT/build.log)"
  start=$SECONDS
  python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
  echo "built in $(( SECONDS - start )) s"
fi

# From another folder, so that the installed package is imported, not the source folder here
# (which has no compiled extension: without it the GPU tests would be skipped, not failed).
step "installed package"
(cd "${TMPDIR:-/tmp}" && python3 - <<'EOF'
import jax, jax_cusolver_ms as jcm
print("jax_cusolver_ms from", jcm.__file__)
print("jax devices:", jax.devices(), "| libraries:", jcm.library_versions())
raise SystemExit(0 if jcm.gpu_available() else "the CUDA extension did not load, or JAX sees "
                                                 "no GPU")
EOF
) || { echo "EXTENSION CHECK FAILED"; exit 1; }

tests_rc=0 tests_line="tests: skipped (SKIP_TESTS)"
if [[ -z "${SKIP_TESTS:-}" ]]; then
  step "tests: pytest -m 'not slow' (log: $OUT/pytest.log)"
  workers=()
  if python3 -c "import xdist" 2>/dev/null; then
    workers=(-n "$(( $(nproc) < 14 ? $(nproc) : 14 ))")
    # One BLAS thread per worker: NumPy's reference checks in a dozen processes would otherwise
    # fight over the cores.
    export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
  fi
  eval "extra=(${PYTEST_ARGS:-})"  # quoted words stay one argument
  : > "$OUT/failures.log"
  # -P: leave this folder off sys.path, so the tests import the installed package. Several test
  # processes share the GPU: none claims most of its memory up front. Every failure's traceback
  # goes to failures.log as it happens (tests/conftest.py), so a run cut short by the timeout
  # still says what failed.
  XLA_PYTHON_CLIENT_PREALLOCATE=false JCM_FAILURES_LOG="$OUT/failures.log" \
    timeout "${TEST_TIMEOUT:-420}" python3 -P -m pytest -m "not slow" -q -rfE \
    -p no:cacheprovider "${workers[@]}" "${extra[@]}" > "$OUT/pytest.log" 2>&1
  tests_rc=$?
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | sort -u | head -30
  tests_line="tests: $(tail -1 "$OUT/pytest.log") (exit $tests_rc)"
  (( tests_rc == 124 )) && tests_line+=" CUT SHORT by TEST_TIMEOUT=${TEST_TIMEOUT:-420}s"
fi

bench_rc=0
if [[ -z "${SKIP_BENCH:-}" ]]; then
  step "benchmark: python -m benchmarks.report --grid $GRID $* (log: $OUT/bench.log)"
  # benchmarks.bench imports the installed jax_cusolver_ms in preference to the source folder.
  python3 -m benchmarks.report --grid "$GRID" --out "$OUT/report" --no-docs "$@" \
    > "$OUT/bench.log" 2>&1
  bench_rc=$?
  grep -E "^# |WRONG|ERROR" "$OUT/bench.log" | head -20
fi

step "summary"
[[ -f "$OUT/report/report.json" ]] && python3 -m benchmarks.report --show "$OUT/report/report.json"
(( bench_rc != 0 )) && echo "benchmark: exit $bench_rc (see $OUT/bench.log)"
echo "$tests_line"
exit $(( tests_rc != 0 ? tests_rc : bench_rc ))
