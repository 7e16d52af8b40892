#!/usr/bin/env bash
# One GPU session, from the repository root: build and install, check the extension loads on the
# GPU, run the test suite (GPU tests included), run the benchmarks; logs and results under $OUT.
#
#   bash benchmarks/gpu_session.sh                    # full benchmark grid
#   bash benchmarks/gpu_session.sh --quick            # arguments go to benchmarks/bench.py
#   SKIP_BUILD=1 SKIP_TESTS=1 bash benchmarks/gpu_session.sh --ops solve
#   BENCH_PLAN=benchmarks/plans/issue4.txt bash benchmarks/gpu_session.sh   # one bench run per line
#
# SKIP_BUILD=1 reuses the installed build (a warm machine); SKIP_TESTS=1 skips pytest; CMAKE_ARGS
# overrides the CUDA architectures (default: the GPU's own); TESTS names the test files (default:
# all); PYTEST_WORKERS (default 14) spreads them over pytest-xdist workers where it is installed
# (compiles dominate, and the GPU has room for several processes); BENCH_PLAN names a file with
# one line of bench.py arguments per run (blank lines and '#' comments skipped).
# No network is needed: the build uses what is installed (--no-build-isolation --no-deps).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT="${OUT:-./out}"
mkdir -p "$OUT"
step() { printf '\n=== %s\n' "$*"; }

step "device and versions"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
python3 - <<'EOF'
import importlib.metadata as md, sys
names = ["jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "torch", "numpy",
         "nvidia-cusolver", "nvidia-cublas", "nanobind", "scikit-build-core", "pytest"]
found = []
for name in names:
    try:
        found.append(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        pass
print("python", sys.version.split()[0], "|", ", ".join(found))
EOF
nvcc --version | tail -1; cmake --version | head -1

if [[ -z "${SKIP_BUILD:-}" ]]; then
  # Only this GPU's architecture: a fraction of the default multi-architecture compile time.
  export CMAKE_ARGS="${CMAKE_ARGS:--DCMAKE_CUDA_ARCHITECTURES=native}"
  step "build and install, CMAKE_ARGS=$CMAKE_ARGS (full log: /tmp/build.log)"
  python3 -m pip install --no-build-isolation --no-deps -v . 2>&1 | tee "${LOGS:=/tmp}/build.log" | tail -30 \
    || { echo "BUILD FAILED"; exit 1; }
fi

# From another folder, so the installed package is imported, not the source folder here (which
# has no compiled extension). Without the extension the GPU tests would be skipped, not failed.
step "installed package"
(cd "${TMPDIR:-/tmp}" && python3 - <<'EOF'
import jax, jax_cusolver_ms as jcm
print("jax_cusolver_ms from", jcm.__file__)
print("jax devices:", jax.devices())
print("library versions:", jcm.library_versions() if hasattr(jcm, "library_versions") else "n/a")
ok = jcm.gpu_available()
print("gpu_available:", ok)
raise SystemExit(0 if ok else "the CUDA extension did not load, or JAX sees no GPU")
EOF
) || { echo "EXTENSION CHECK FAILED"; exit 1; }

tests_rc=0
if [[ -z "${SKIP_TESTS:-}" ]]; then
  step "tests (log: $OUT/pytest.log)"
  # -P: leave the current folder off sys.path, so the tests import the installed package.
  # Whole suite (no -x: one failure must not hide the others), bounded by TEST_TIMEOUT seconds.
  workers=()
  if python3 -c "import xdist" 2>/dev/null; then
    workers=(-n "${PYTEST_WORKERS:-14}")
    # One BLAS thread per worker: a dozen processes each spinning 16 OpenBLAS threads over
    # NumPy's reference checks would fight for 16 cores.
    export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
    export MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
  fi
  # Several test processes share the GPU: no up-front claim of most of its memory by each.
  # Verbose (one line per test, with its name) into the log, and every failure's traceback into
  # $OUT/failures.log as it happens (tests/conftest.py): a run that the time limit cuts short
  # still names what failed and why. The console gets the failures and the summary only.
  eval "extra=(${PYTEST_ARGS:-})"  # quoted words stay one argument: PYTEST_ARGS="-k 'not slow'"
  : > "$OUT/failures.log"
  XLA_PYTHON_CLIENT_PREALLOCATE=false JCM_FAILURES_LOG="$OUT/failures.log" \
    timeout "${TEST_TIMEOUT:-420}" \
    python3 -P -m pytest ${TESTS:-tests} -v -rfs --durations=15 -p no:cacheprovider \
    -p no:benchmark "${workers[@]}" "${extra[@]}" > "$OUT/pytest.log" 2>&1
  tests_rc=$?
  grep -E "FAILED|ERROR" "$OUT/pytest.log" | grep -v "^=" | sed 's/^\[gw[0-9]*\] \[ *[0-9]*%\] //' | sort -u
  (( tests_rc == 124 )) && echo "TESTS CUT SHORT by TEST_TIMEOUT=${TEST_TIMEOUT:-420}s: see $OUT/pytest.log"
  tail -25 "$OUT/pytest.log"
fi

# bench.py imports the installed jax_cusolver_ms in preference to the source folder. Its table is
# left out here and printed once at the end.
bench_rc=0
run_bench() {
  local module=benchmarks.bench out=(--out "$OUT") python=(python3)
  # A plan line "matmul: ARGS" runs the matmul benchmark instead, "report: ARGS" the report
  # (benchmarks/report.py), "tune: ARGS" jax_cusolver_ms.tune (its --out, a file, is given on the
  # line: $OUT/<name>.json, with --resume-from the copy in the tree).
  case "${1:-}" in
    matmul:) module=benchmarks.bench_matmul; shift ;;
    report:) module=benchmarks.report; shift ;;
    # -P: the installed package (with its extension), not the source folder here.
    tune:) module=jax_cusolver_ms.tune; out=(); python=(python3 -P); shift ;;
  esac
  step "$module: ${*:-full grid} (log: /tmp/bench.log)"
  "${python[@]}" -m "$module" "${out[@]}" "$@" 2>&1 | tee -a /tmp/bench.log | sed '/^### /,$d'
  local rc=${PIPESTATUS[0]}
  (( rc != 0 )) && bench_rc=$rc
}
if [[ -n "${BENCH_PLAN:-}" ]]; then
  while read -r line; do
    [[ -z "${line// }" || "$line" == \#* ]] && continue
    eval "run_bench $line"
  done < "$BENCH_PLAN"
elif [[ -z "${SKIP_BENCH:-}" ]]; then
  run_bench "$@"
fi

step "summary"
[[ -z "${SKIP_TESTS:-}" ]] && echo "pytest: $(tail -1 "$OUT/pytest.log") (exit $tests_rc)"
echo "bench exit $bench_rc; files in $OUT:"; ls "$OUT"
for md in $(ls -tr "$OUT"/*.md 2>/dev/null); do echo; cat "$md"; done
exit $(( tests_rc != 0 ? tests_rc : bench_rc ))
