#!/usr/bin/env bash
# On a bare GPU machine, from the repository root: build and install for this GPU, check that the
# extension loads, run the fast GPU test suite, run a benchmark grid and write its report under
# $OUT. A short table (per op and dtype the speed-up over JAX, then the tests) is printed last.
#
#   bash benchmarks/gpu_session.sh                 # the quick grid (a few minutes)
#   bash benchmarks/gpu_session.sh full            # the full grid (hours on one H100)
#   bash benchmarks/gpu_session.sh GRID [OPTIONS]  # a grid of benchmarks/grids.toml, and any
#                                                  # options of python -m benchmarks.report
#                                                  # (on a host of several GPUs, one process
#                                                  # per GPU, each a --shard of the grid)
#
#   SANITIZE=1 bash benchmarks/gpu_session.sh      # build, then compute-sanitizer only (below)
#   TUNE="--ops qr --budget-s 400" bash benchmarks/gpu_session.sh   # build, then tune only
#   TUNE="--ops svd --budget-s 200" bash benchmarks/gpu_session.sh oblong  # tune, then a grid
#   TUNE="--sizes 64 --batches 1024; --sizes 512 --batches 16"  # two tunes into one table
#                                                  # (on a host of several GPUs at once, one
#                                                  # per GPU, then merged)
#   JAX_SUITE=PATH/linalg_test.py bash benchmarks/gpu_session.sh  # build, then JAX's own tests
#   SHARDED=1 bash benchmarks/gpu_session.sh       # build, then one GPU against all of them
#                                                  # (SHARDED="--batch 64": its options)
#
# TUNE (options of python -m jax_cusolver_ms.tune): measures into the table shipped for this GPU
# instead of the tests, and installs it (SKIP_BUILD=1 runs after it read it); with a GRID named
# too, that grid's benchmark then runs on the new table, else nothing more.
#
# Environment: OUT (default ./out), SKIP_BUILD=1 (reuse the installed build), SKIP_TESTS=1,
# SKIP_BENCH=1, TEST_TIMEOUT (seconds, default 480), PYTEST_ARGS (more pytest arguments),
# CMAKE_ARGS (default: this GPU's architecture only), CUDA_VISIBLE_DEVICES (the GPUs the tunes
# and benchmark shards spread over; default all). No network is needed: the build uses what
# is installed (--no-build-isolation --no-deps).
#
# SANITIZE=1 (or a list, e.g. SANITIZE=memcheck,racecheck): instead of the tests and the
# benchmark, compute-sanitizer's memcheck, initcheck, racecheck and synccheck, one after the
# other, each over tests/reliability/sanitizer_subset.py. memcheck watches every kernel (an access
# out of bounds through our arguments shows in the library's kernels) and so does initcheck
# (a kernel left out is not watched writing either), all but cuSOLVER's getrf_pivot, which reads
# workspace it has not written; racecheck and synccheck watch this project's kernels (namespace
# jcm) only, the shared memory and barriers that are ours. Each buffer is its own allocation
# (XLA_PYTHON_CLIENT_ALLOCATOR=platform), so memcheck sees an access past one. Logs:
# $OUT/sanitize-<tool>.log; one summary line per run at the end. SANITIZE_TIMEOUT (seconds,
# default 540) bounds each process; SANITIZE_ARGS adds subset options (--ops, ...).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT="$(mkdir -p "${OUT:-./out}" && cd "${OUT:-./out}" && pwd)"
GRID="${1:-quick}"
GRID_GIVEN=$(( $# > 0 ))
(( $# )) && shift
step() { printf '\n=== %s\n' "$*"; }
# The GPUs this run may use: CUDA_VISIBLE_DEVICES where set (e.g. the tests on GPU 0 while a
# tune runs on GPU 1, two runs of this script at once), else every GPU of the host.
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
  IFS=',' read -ra gpu_ids <<< "$CUDA_VISIBLE_DEVICES"
else
  mapfile -t gpu_ids < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null)
fi
gpus=${#gpu_ids[@]}

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
print("strategy tables:", jcm.explain("lu_factor", (16, 2048, 2048), "float32").source)
raise SystemExit(0 if jcm.gpu_available() else "the CUDA extension did not load, or JAX sees "
                                                 "no GPU")
EOF
) || { echo "EXTENSION CHECK FAILED"; exit 1; }

if [[ -n "${JAX_SUITE:-}" ]]; then
  # JAX's own tests/linalg_test.py (JAX_SUITE: its path; not part of this repository) in three
  # modes: as it is, with the mirrored namespaces, under enable() (tests/jax_linalg_suite.py).
  step "JAX's linalg tests: $JAX_SUITE (logs: $OUT/jax_suite)"
  suite="$PWD/tests/jax_linalg_suite.py" file="$(cd "$(dirname "$JAX_SUITE")" && pwd)/$(basename "$JAX_SUITE")"
  workers=()
  python3 -c "import xdist" 2>/dev/null && workers=(-n 8)
  (cd "${TMPDIR:-/tmp}" && JAX_ENABLE_X64=1 XLA_PYTHON_CLIENT_PREALLOCATE=false \
    timeout "${TEST_TIMEOUT:-480}" python3 -P "$suite" "$file" --out "$OUT/jax_suite" -- \
    "${workers[@]}" -q -p no:cacheprovider 2>&1 | tail -20)
  exit "${PIPESTATUS[0]}"
fi

if [[ -n "${SHARDED:-}" ]]; then
  # On a host with several GPUs: one GPU against the batch sharded over all of them.
  step "python -m benchmarks.sharded ${SHARDED/#1/} (log: $OUT/sharded.log)"
  eval "sargs=(${SHARDED/#1/})"
  # benchmarks.bench imports the installed jax_cusolver_ms in preference to the source folder.
  python3 -m benchmarks.sharded --out "$OUT/sharded" "${sargs[@]}" > "$OUT/sharded.log" 2>&1
  rc=$?
  tail -14 "$OUT/sharded.log"
  exit $rc
fi

if [[ -n "${TUNE:-}" ]]; then
  # Measures into the table shipped for this GPU model (jax_cusolver_ms/tables/, found by its
  # "gpu"; a new file for a model without one): its points stay, the cells it lacks are added.
  # The table comes back as $OUT/tables/<file>: copy it into the repository.
  table=$(python3 - <<'EOF'
import json, pathlib, re, jax
gpu = jax.devices()[0].device_kind
for path in sorted(pathlib.Path("jax_cusolver_ms/tables").glob("*.json")):
    if json.loads(path.read_text()).get("gpu") == gpu:
        print(path)
        break
else:
    print(f"jax_cusolver_ms/tables/{re.sub(r'[^a-z0-9]+', '-', gpu.lower()).strip('-')}.json")
EOF
)
  # The tune writes the copy under $OUT after every cell: a command cut short by the device's
  # time limit still brings back every cell it finished.
  mkdir -p "$OUT/tables"
  out_table="$OUT/tables/$(basename "$table")"
  installed=$(cd "${TMPDIR:-/tmp}" && python3 -c \
    "import jax_cusolver_ms, os; print(os.path.dirname(jax_cusolver_ms.__file__))")
  # The repository's table, with the points an earlier tune on this warm machine installed
  # (SKIP_BUILD=1): each call brings a fresh copy of the working tree, whose table lacks them.
  repo_table="$PWD/$table"
  (cd "${TMPDIR:-/tmp}" && python3 - "$repo_table" "$installed/tables/$(basename "$table")" \
    "$out_table") <<'EOF'
import json, pathlib, sys
from jax_cusolver_ms import tables
repo, installed, out = map(pathlib.Path, sys.argv[1:])
found = [tables.Table.from_json(json.loads(p.read_text()), str(p)) for p in (repo, installed)
         if p.exists()]
if len(found) == 2 and found[1].gpu == found[0].gpu:  # the repository's times win
    found = [found[1].merged(found[0], found[0].source)]
if found:
    tables.write_atomic(out, found[0].to_json())
EOF
  # Several tunes, one after the other into the same table, where TUNE separates them by ";"
  # (e.g. large batches at small n, small batches at large n, without the product of the two).
  rc=0
  IFS=';' read -ra tunes <<< "$TUNE"
  if (( gpus > 1 && ${#tunes[@]} > 1 )); then
    # Several GPUs: one chain of tunes per GPU at once, the i-th tune on GPU i mod gpus (one
    # process per GPU: two would time each other's kernels), each GPU into its own copy of the
    # table (logs: $OUT/tune-<gpu>.log), then the copies merged into it.
    step "${#tunes[@]} tunes on $gpus GPUs at once: $TUNE"
    pids=()
    for (( g = 0; g < gpus && g < ${#tunes[@]}; g++ )); do
      [[ -f "$out_table" ]] && cp "$out_table" "$OUT/tables/part-$g.json"
      (
        for (( i = g; i < ${#tunes[@]}; i += gpus )); do
          eval "targs=(${tunes[$i]})"
          (cd "${TMPDIR:-/tmp}" && CUDA_VISIBLE_DEVICES=${gpu_ids[$g]} \
            python3 -P -m jax_cusolver_ms.tune --ship --out "$OUT/tables/part-$g.json" \
            "${targs[@]}") || exit $?
        done
      ) > "$OUT/tune-$g.log" 2>&1 &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
    cat "$OUT"/tune-*.log >> "$OUT/tune.log"
    (cd "${TMPDIR:-/tmp}" && python3 - "$out_table" "$OUT"/tables/part-*.json) <<'EOF'
import json, pathlib, sys
from jax_cusolver_ms import tables
out, parts = pathlib.Path(sys.argv[1]), [pathlib.Path(p) for p in sys.argv[2:]]
merged = None
for path in parts:
    if path.exists():
        table = tables.Table.from_json(json.loads(path.read_text()), str(path))
        merged = table if merged is None else merged.merged(table, merged.source)
        path.unlink()
if merged is not None:
    tables.write_atomic(out, merged.to_json())
EOF
    tunes=()
    if [[ -f "$out_table" ]]; then
      cp "$out_table" "$table"
      cp "$out_table" "$installed/tables/" && echo "installed into $installed/tables/"
    fi
  fi
  for spec in "${tunes[@]}"; do
    step "tune --ship --out $out_table $spec (log: $OUT/tune.log)"
    eval "targs=($spec)"
    # From another folder (-P and cd), so that the installed package runs.
    (cd "${TMPDIR:-/tmp}" && python3 -P -m jax_cusolver_ms.tune --ship --out "$out_table" \
      "${targs[@]}" >> "$OUT/tune.log" 2>&1) || rc=$?
    if [[ -f "$out_table" ]]; then
      cp "$out_table" "$table"
      # Into the installed package too: the next tune (whose composite strategies call `auto`
      # inside) and a later SKIP_BUILD=1 run on this machine read the table just measured.
      cp "$out_table" "$installed/tables/" && echo "installed into $installed/tables/"
    fi
  done
  grep -E "^wrote" "$OUT/tune.log"
  echo "tune: exit $rc, $(grep -c '^  skipped' "$OUT/tune.log") cells or candidates skipped"
  # A grid named as well runs next, on the table just tuned (one machine, one build).
  (( rc != 0 || ! GRID_GIVEN )) && exit $rc
  SKIP_TESTS=1
fi

if [[ -n "${SANITIZE:-}" ]]; then
  step "compute-sanitizer: ${SANITIZE/#1/every tool}, one at a time (logs: $OUT/sanitize-*.log)"
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [[ -x "$sanitizer" ]] || { echo "SANITIZE: no compute-sanitizer at $sanitizer"; exit 1; }
  "$sanitizer" --version | tail -1
  subset="$PWD/tests/reliability/sanitizer_subset.py"
  eval "sargs=(${SANITIZE_ARGS:-})"
  ours="--kernel-name kns=jcm"
  declare -A tool_args=(
    [memcheck]="--tool memcheck --leak-check no"
    [initcheck]="--tool initcheck --kernel-name-exclude kns=getrf_pivot"
    [racecheck]="--tool racecheck --racecheck-report all $ours"
    [synccheck]="--tool synccheck $ours"
  )
  # One tool at a time: several compute-sanitizer processes at once on the H200 segfaulted
  # together, each partway through the subset.
  [[ "$SANITIZE" == 1 ]] && SANITIZE=memcheck,initcheck,racecheck,synccheck
  sanitize_rc=0 summaries=()
  # SANITIZE_SHARDS=k runs the subset as k processes (--shard i/k), one after the other: the
  # tool itself segfaulted partway through one long process (initcheck, racecheck), and a shard
  # loses only its own remaining cases.
  shards=${SANITIZE_SHARDS:-1}
  for tool in ${SANITIZE//,/ }; do
    for (( shard = 0; shard < shards; shard++ )); do
      log="$OUT/sanitize-$tool.log"
      (( shards > 1 )) && log="$OUT/sanitize-$tool-$shard.log"
      # From another folder, so that the installed package is imported (see above). No
      # autotuning: XLA's own trial kernels are not what is checked, and they cost time here.
      (cd "${TMPDIR:-/tmp}" && XLA_PYTHON_CLIENT_ALLOCATOR=platform \
        XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_FLAGS="--xla_gpu_autotune_level=0" \
        timeout "${SANITIZE_TIMEOUT:-540}" "$sanitizer" ${tool_args[$tool]} \
        --target-processes all --error-exitcode 86 --print-limit 100 \
        python3 "$subset" --shard "$shard/$shards" "${sargs[@]}" > "$log" 2>&1)
      rc=$?
      (( rc != 0 )) && sanitize_rc=1
      summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
      named=$(grep -cE "^=========  +at .*jcm::" "$log")
      cases=$(grep -E "^sanitizer subset:" "$log" | tail -1)
      [[ -z "$cases" ]] && cases="subset did not finish, $(grep -c '^ok' "$log") cases ok"
      case $rc in
        0) verdict="clean";; 86) verdict="ERRORS";; 124) verdict="CUT SHORT by SANITIZE_TIMEOUT";;
        *) verdict="exit $rc";;
      esac
      summaries+=("sanitize $tool $shard/$shards: $verdict | ${summary:-no summary} | frames in jcm kernels: $named | $cases")
      echo "${summaries[-1]}"
    done
  done
  step "summary"
  printf '%s\n' "${summaries[@]}"
  exit $sanitize_rc
fi

tests_rc=0 tests_line="tests: skipped (SKIP_TESTS)"
if [[ -z "${SKIP_TESTS:-}" ]]; then
  step "tests: pytest -m 'not slow' (log: $OUT/pytest.log)"
  workers=()
  if python3 -c "import xdist" 2>/dev/null; then
    # worksteal: an idle worker takes queued tests from a busy one, so a few long tests
    # scheduled late do not leave the others waiting.
    workers=(-n "$(( $(nproc) < 14 ? $(nproc) : 14 ))" --dist worksteal)
    # One BLAS thread per worker: NumPy's reference checks in a dozen processes would otherwise
    # fight over the cores.
    export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
  fi
  eval "extra=(${PYTEST_ARGS:-})"  # quoted words stay one argument
  : > "$OUT/failures.log"
  # -P: leave this folder off sys.path, so the tests import the installed package. Several test
  # processes share the GPU: none claims most of its memory up front. Every failure's traceback
  # goes to failures.log as it happens (tests/conftest.py), so a run cut short by the timeout
  # still says what failed. -rs: pytest.log lists each skipped test with its reason (a GPU test
  # skipped for want of a second GPU says so).
  XLA_PYTHON_CLIENT_PREALLOCATE=false JCM_FAILURES_LOG="$OUT/failures.log" \
    timeout "${TEST_TIMEOUT:-480}" python3 -P -m pytest -m "not slow" -q -rfEs \
    -p no:cacheprovider "${workers[@]}" "${extra[@]}" > "$OUT/pytest.log" 2>&1
  tests_rc=$?
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | sort -u | head -30
  tests_line="tests: $(tail -1 "$OUT/pytest.log") (exit $tests_rc)"
  (( tests_rc == 124 )) && tests_line+=" CUT SHORT by TEST_TIMEOUT=${TEST_TIMEOUT:-480}s"
fi

bench_rc=0
if [[ -z "${SKIP_BENCH:-}" ]]; then
  step "benchmark: python -m benchmarks.report --grid $GRID $* (log: $OUT/bench.log)"
  # benchmarks.bench imports the installed jax_cusolver_ms in preference to the source folder.
  # No figures: at most 8 files come back from the device, and --render draws them from
  # report.json here.
  # The runner's own import path, from here, must reach the extension: otherwise it would time
  # JAX's fallback for the whole budget.
  if python3 -c "from benchmarks import bench; import sys; sys.exit(0 if bench.jcm is not None \
and bench.jcm.gpu_available() else 'benchmarks.bench sees no GPU through jax_cusolver_ms \
(the extension not loaded?): ' + str(getattr(bench.jcm, '__file__', bench.JCM_IMPORT_ERROR)))"; then
    if (( gpus > 1 )); then
      # One process per GPU, each its share of the cells and shapes (--shard k/N), then one
      # report of them all (--render: the newest version of a cell wins).
      pids=()
      for (( k = 0; k < gpus; ++k )); do
        CUDA_VISIBLE_DEVICES=${gpu_ids[$k]} python3 -m benchmarks.report --grid "$GRID" \
          --shard "$k/$gpus" --out "$OUT/shard$k" --no-docs --no-plots "$@" \
          > "$OUT/bench$k.log" 2>&1 &
        pids+=($!)
      done
      bench_rc=0
      for pid in "${pids[@]}"; do wait "$pid" || bench_rc=$?; done
      cat "$OUT"/bench[0-9]*.log > "$OUT/bench.log"
      rm -f "$OUT"/bench[0-9]*.log
      python3 -m benchmarks.report --render "$OUT"/shard*/report.json --out "$OUT/report" \
        --no-docs --no-plots >> "$OUT/bench.log" 2>&1 || bench_rc=$?
      rm -rf "$OUT"/shard*
    else
      python3 -m benchmarks.report --grid "$GRID" --out "$OUT/report" --no-docs --no-plots "$@" \
        > "$OUT/bench.log" 2>&1
      bench_rc=$?
    fi
  else
    echo "BENCHMARK IMPORT CHECK FAILED"
    bench_rc=1
  fi
  [[ -f "$OUT/bench.log" ]] && grep -E "^# |WRONG|ERROR" "$OUT/bench.log" | head -20
fi

step "summary"
[[ -f "$OUT/report/report.json" ]] && python3 -m benchmarks.report --show "$OUT/report/report.json"
(( bench_rc != 0 )) && echo "benchmark: exit $bench_rc (see $OUT/bench.log)"
echo "$tests_line"
exit $(( tests_rc != 0 ? tests_rc : bench_rc ))
