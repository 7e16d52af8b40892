# Sourced by the per-call device plans: strict mode, $OUT exported, the package built and
# installed by gpu_session.sh (skipped on a warm machine whose installed build is of these same
# sources; the build log only on failure), $OUT/r for the results to tar, t0 for the call's clock.
#
# Calls of one loan share build/session-state (build/ is git-ignored, so a warm machine keeps it):
# the grid resumes from the state's JSON there, else from benchmarks/results/wip/ (an earlier
# call's, fetched and put there), else from the committed one; tunes write their cache there (or
# go on from wip/cache), and the report reads it (a tuned table laid over the shipped one).
set -uo pipefail
export OUT
t0=$SECONDS
STATE=$PWD/build/session-state
mkdir -p "$STATE" "$OUT/r"
export JAX_CUSOLVER_MS_TUNE_CACHE="$STATE/cache"
# A fresh machine: the state fetched from an earlier call (untracked, so it travels) seeds it.
WIP=benchmarks/results/wip
[[ -d "$STATE/cache" || ! -d "$WIP/cache" ]] || cp -r "$WIP/cache" "$STATE/cache"
sources=$(cat $(find ffi jax_cusolver_ms CMakeLists.txt pyproject.toml -type f \
  -not -path '*__pycache__*' | sort) | sha1sum | cut -c1-16)
if [[ "$(cat "$STATE/built" 2>/dev/null)" == "$sources" ]]; then
  echo "warm machine: build of these sources installed already"
else
  SKIP_TESTS=1 SKIP_BENCH=1 bash benchmarks/gpu_session.sh > "$OUT/build.txt" 2>&1 \
    || { tail -40 "$OUT/build.txt"; exit 1; }
  echo "$sources" > "$STATE/built"
  echo "built in $((SECONDS - t0)) s"
fi
rm -f "$OUT/build.txt"
GRID=h100-grid_NVIDIA-H100-80GB-HBM3.json

# kill_at SECONDS: SECONDS, or less so that a killed step still leaves the call's last ~40 s of
# its 600 (session 10: a grid cell started just before UNTIL ran 150 s, past the call's limit,
# and the results were never tarred).
kill_at() {
  local left=$((560 - (SECONDS - t0)))
  (( left < 1 )) && left=1
  echo $(( $1 < left ? $1 : left ))
}

# gpu_tests "FILES" [TIMEOUT] [NAME] [SELECT]: those test files on the GPU, the tests pytest's -k
# SELECT picks (default: the slow stream / thread tests left out), logs under $OUT/r/NAME (default
# t1); prints the failures and pytest's last line.
gpu_tests() {
  local name=${3:-t1} select=${4:-not stream_semantics and not threads_gpu}
  SKIP_BUILD=1 SKIP_BENCH=1 TEST_TIMEOUT="${2:-200}" OUT="$OUT/r/$name" TESTS="$1" \
    PYTEST_ARGS="-k '$select'" \
    bash benchmarks/gpu_session.sh > "$OUT/r/tests-$name.txt" 2>&1
  grep -E "FAILED|ERROR|CUT SHORT" "$OUT/r/tests-$name.txt" | head -30
  tail -1 "$OUT/r/$name/pytest.log"
  echo "tests done at $((SECONDS - t0)) s"
}

# tests_passed NAME: gpu_tests NAME ran and passed (no failures logged, a pass count).
tests_passed() {
  [[ ! -s "$OUT/r/$1/failures.log" ]] && grep -q " passed" "$OUT/r/$1/pytest.log"
}

# sanitize_ldl KERNELS [KILL] [ARGS...]: compute-sanitizer's racecheck and synccheck on the kernels
# whose names contain KERNELS while benchmarks/diag/ldl_panel_sanitize.py ARGS runs, each killed
# after KILL s (default 90), logs $OUT/r/sanitize-TOOL.txt; prints the summaries and the count of
# factorizations checked.
sanitize_ldl() {
  local kernels=$1 limit=${2:-90} san tool
  shift $(( $# < 2 ? $# : 2 ))
  san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in racecheck synccheck; do
    XLA_PYTHON_CLIENT_PREALLOCATE=false timeout "$(kill_at "$limit")" "$san" --tool "$tool" \
      --kernel-name kns="$kernels" --print-limit 20 python3 benchmarks/diag/ldl_panel_sanitize.py \
      "$@" > "$OUT/r/sanitize-$tool.txt" 2>&1
    echo "$tool rc=$? at $((SECONDS - t0)) s"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Potential|Error" "$OUT/r/sanitize-$tool.txt" \
      | sort | uniq -c | head -8
    grep -c " ok$" "$OUT/r/sanitize-$tool.txt"
  done
}

# save_results: $OUT/r tarred into $OUT/results.tgz (after each step, so that a call killed later
# still brings back what ran).
save_results() {
  tar czf "$OUT/results.tgz" -C "$OUT" r
}

# ldl_test_file LIMIT: all of tests/test_ldl.py (gpu_tests t1, killed after LIMIT s or the call's
# end), "tests passed" where it did, results tarred.
ldl_test_file() {
  gpu_tests "tests/test_ldl.py" "$(kill_at "$1")" t1
  tests_passed t1 && echo "tests passed"
  save_results
}

# ldl_tests_then_bench TAG SHAPES: tests/test_ldl.py (gpu_tests t1), then bench_op TAG of
# ldl_factor and ldl_solve (`auto`) at SHAPES whether or not they passed; results tarred after each.
ldl_tests_then_bench() {
  ldl_test_file 170
  bench_op "$1" ldl_factor,ldl_solve auto "$2" 120
  save_results
}

# ldl_cluster_first TAG SHAPES: for a change to the cluster panel, whose wrong arrival or byte
# count hangs it: tests/test_ldl.py's cluster tests first (gpu_tests t0; a hang ends at the
# child's timeout), and only if they pass, bench_op TAG of ldl_factor and ldl_solve (`auto`) at
# SHAPES and then the whole file (t1); results tarred after each. Fails where t0 did.
ldl_cluster_first() {
  gpu_tests "tests/test_ldl.py" "$(kill_at 120)" t0 "cluster"
  save_results
  tests_passed t0 || return 1
  bench_op "$1" ldl_factor,ldl_solve auto "$2" 90
  save_results
  ldl_test_file 200
}

# ncu_full NAME FILTER SKIP PROBE-ARGS...: ncu --set full of launch SKIP + 1 of the kernels
# matching FILTER while benchmarks/diag/ncu_probe.py PROBE-ARGS (one call) runs: its details page
# and its SASS with per-instruction counters (CSV) under $OUT/r/ncu-NAME*, the report itself
# dropped; prints its duration and instruction counts; results tarred.
ncu_full() {
  local name=$1 filter=$2 skip=$3
  shift 3
  timeout "$(kill_at 150)" ncu --clock-control none --kernel-name "regex:$filter" \
    --launch-skip "$skip" --launch-count 1 --set full --import-source yes -f \
    -o "$OUT/r/ncu-$name" python3 benchmarks/diag/ncu_probe.py "$@" --calls 1 \
    > "$OUT/r/ncu-$name.log" 2>&1
  echo "ncu $name rc=$? at $((SECONDS - t0)) s"
  ncu --import "$OUT/r/ncu-$name.ncu-rep" --page details > "$OUT/r/ncu-$name-details.txt" 2>&1
  ncu --import "$OUT/r/ncu-$name.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/r/ncu-$name-sass.csv" 2>&1
  rm -f "$OUT/r/ncu-$name.ncu-rep"
  grep -E "^  [a-zA-Z_].*\(|Duration|Executed Instructions |Warp Cycles Per Issued|Block Size" \
    "$OUT/r/ncu-$name-details.txt" | head -8
  save_results
}

# kernel_times NAME PROBE-ARGS...: every kernel's time (ncu) while benchmarks/diag/ncu_probe.py
# PROBE-ARGS runs, summed by kernel name into $OUT/r/ncu-NAME.txt (the top 10).
kernel_times() {
  local name=$1
  shift
  timeout "$(kill_at 60)" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    python3 benchmarks/diag/ncu_probe.py "$@" > "$OUT/r/ncu-$name.csv" 2> "$OUT/r/ncu-$name.err"
  echo "ncu $name rc=$? at $((SECONDS - t0)) s"
  python3 benchmarks/diag/ncu_sum.py "$OUT/r/ncu-$name.csv" --top 10 > "$OUT/r/ncu-$name.txt"
}

# ldl_grid_cells MIN_N: the call's grid's ldl_factor / ldl_solve cells from n = MIN_N at batch 1,
# 4 and 16, JAX's time against `auto`'s.
ldl_grid_cells() {
  python3 - "$OUT/r/$GRID" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["cells"]:
    if c["op"].startswith("ldl") and c["n"] >= int(sys.argv[2]) and c["batch"] in (1, 4, 16):
        i = c.get("impls", {})
        j, a = i.get("jax", {}).get("median_ms"), i.get("jcm:auto", {}).get("median_ms")
        if j and a:
            print(f'{c["op"]:10} {c["dtype"]:7} {c["batch"]:3}x{c["n"]:<5} jax {j:8.3f} auto {a:8.3f} {j / a:5.2f}x')
PY
}

# bench_op TAG OP STRATEGIES SHAPES [KILL]: benchmarks.bench of OP (float32 and float64, no
# PyTorch) against JAX, its table in $OUT/r/bench-TAG.txt, killed after KILL s (default 120) or
# in time for the call's tar.
bench_op() {
  timeout "$(kill_at "${5:-120}")" python3 -m benchmarks.bench --ops "$2" \
    --dtypes float32,float64 --strategies "$3" --no-torch --tag "$1" --out "$OUT/r" \
    --shapes "$4" > "$OUT/r/bench-$1.txt" 2>&1
  echo "bench $1 rc=$? at $((SECONDS - t0)) s"
}

# tune_until NAME UNTIL TUNE-ARGS...: jax_cusolver_ms.tune (from another folder: the installed
# package) into the state's cache, which it goes on from (cells there are not measured again),
# stopping by UNTIL seconds into the call; the cache copied to $OUT/r/NAME/.
tune_until() {
  local name=$1 budget=$(($2 - (SECONDS - t0)))
  shift 2
  (cd /tmp && timeout $((budget + 60)) python3 -m jax_cusolver_ms.tune --budget-s "$budget" "$@") \
    > "$OUT/r/$name.txt" 2>&1
  echo "tune $name rc=$? at $((SECONDS - t0)) s"; tail -4 "$OUT/r/$name.txt"
  mkdir -p "$OUT/r/$name" && cp -r "$JAX_CUSOLVER_MS_TUNE_CACHE"/. "$OUT/r/$name/"
  save_results
}

# The grid is the H100 80GB HBM3's: on another GPU (a kind that came as H200) it is not resumed.
grid_gpu_ok() {
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  [[ "$gpu" == "NVIDIA H100 80GB HBM3" ]] && return 0
  echo "grid skipped: this machine's GPU is $gpu, the grid's the NVIDIA H100 80GB HBM3"
  return 1
}

# The grid file to resume from: the warm machine's state, else wip/, else the committed one.
grid_from() {
  if [[ -f "$STATE/$GRID" ]]; then echo "$STATE/$GRID"
  elif [[ -f "$WIP/$GRID" ]]; then echo "$WIP/$GRID"
  else echo "benchmarks/results/$GRID"; fi
}

# grid_report OPS BUDGET FROM LOG REPORT-ARGS...: one report process of the grid (DTYPES, auto,
# PyTorch alongside unless NO_TORCH, REDO_OPS with REDO_MIN_N / REDO_MAX_N / REDO_BATCHES,
# MIN_REPEATS), killed in time for the call's tar.
grid_report() {
  local ops=$1 budget=$2 from=$3 log=$4
  shift 4
  timeout "$(kill_at $((budget + 45)))" python3 -m benchmarks.report --tag h100-grid \
    --dtypes "${DTYPES:-float32}" --strategies auto --ops "$ops" --budget-s "$budget" \
    --redo-below 0.95 ${REDO_OPS:+--redo-ops "$REDO_OPS"} ${REDO_MAX_N:+--redo-max-n "$REDO_MAX_N"} \
    ${REDO_MIN_N:+--redo-min-n "$REDO_MIN_N"} ${REDO_BATCHES:+--redo-batches "$REDO_BATCHES"} \
    ${MIN_REPEATS:+--min-repeats "$MIN_REPEATS"} ${NO_TORCH:+--no-torch} --resume "$from" "$@" \
    > "$log" 2>&1
}

# The merged grid into the machine's state and the call's tarball, its summary printed.
grid_done() {
  cp "$OUT/r/$GRID" "$STATE/$GRID"
  save_results
  sed -n '1,30p' "$OUT"/r/h100-grid*.md
}

# grid_goes_on OPS UNTIL: the issue-7 grid (DTYPES, default float32; auto; PyTorch alongside;
# REDO_OPS: ops whose every cell, from REDO_MIN_N / up to REDO_MAX_N if set, is measured again)
# resumed, OPS first, starting no cell after
# UNTIL seconds into the call; cells under 0.95x or whose auto plan changed are measured again;
# earlier cells outside OPS x DTYPES kept as they were. Results tarred to $OUT/results.tgz.
grid_goes_on() {
  grid_gpu_ok || return 0
  local from
  from=$(grid_from)
  echo "grid resumes from $from"
  grid_report "$1" $(($2 - (SECONDS - t0))) "$from" "$OUT/r/report.txt" --out "$OUT/r"
  echo "report rc=$? at $((SECONDS - t0)) s"
  grep -E "^# " "$OUT/r/report.txt" | tail -3
  grid_done
}

# grid_sharded OPS UNTIL: grid_goes_on over every GPU of the host at once, one report process per
# GPU (CUDA_VISIBLE_DEVICES) measuring every N-th cell (--shard K/N), each resumed from the same
# file; --render merges the shards (the newest version of each cell) into $OUT/r with figures.
# One GPU: grid_goes_on.
grid_sharded() {
  grid_gpu_ok || return 0
  local gpus from budget=$(($2 - (SECONDS - t0)))
  gpus=$(nvidia-smi -L | wc -l)
  if (( gpus < 2 )); then grid_goes_on "$@"; return; fi
  from=$(grid_from)
  echo "grid resumes from $from on $gpus GPUs"
  for ((k = 0; k < gpus; k++)); do
    CUDA_VISIBLE_DEVICES=$k grid_report "$1" "$budget" "$from" "$OUT/r/report-shard$k.txt" \
      --out "$OUT/r/shard$k" --shard "$k/$gpus" --no-plots &
  done
  wait
  python3 -m benchmarks.report --render "$from" "$OUT"/r/shard*/"$GRID" --tag h100-grid \
    --out "$OUT/r" > "$OUT/r/report.txt" 2>&1
  echo "render rc=$? at $((SECONDS - t0)) s"
  grid_done
}

# table_with FILES...: the shipped table rebuilt from its own sources and FILES (benchmark JSON
# of this call) into the installed package, so that the grid's cells after it run what `auto`
# will ship; a copy to $OUT/r/h100-table.json.
table_with() {
  local installed src
  installed=$(cd /tmp && python3 -c "import jax_cusolver_ms, os; print(os.path.dirname(jax_cusolver_ms.__file__))")
  src=$(python3 -c "import json; print(' '.join(json.load(open('jax_cusolver_ms/tables/h100.json'))['built_from']))")
  python3 -m benchmarks.build_table $src "$@" --out "$installed/tables/h100.json" \
    > "$OUT/r/build_table.txt" 2>&1
  echo "table rc=$? at $((SECONDS - t0)) s"; tail -1 "$OUT/r/build_table.txt"
  cp "$installed/tables/h100.json" "$OUT/r/h100-table.json"
}

# grid_beside OPS UNTIL GPU: the grid's OPS (DTYPES) on that GPU alone, in the background, while
# the call goes on with other work on the other GPU(s) (CUDA_VISIBLE_DEVICES set for it);
# grid_beside_done waits for it and merges its cells into the call's grid (newest wins).
grid_beside() {
  grid_gpu_ok || return 0
  local from
  from=$(grid_from)
  echo "grid beside on GPU $3 resumes from $from"
  CUDA_VISIBLE_DEVICES=$3 grid_report "$1" $(($2 - (SECONDS - t0))) "$from" \
    "$OUT/r/report-beside.txt" --out "$OUT/r/beside" --no-plots &
}

grid_beside_done() {
  wait
  [[ -f "$OUT/r/beside/$GRID" ]] || { echo "grid beside: no cells"; return 0; }
  grep -E "^# " "$OUT/r/report-beside.txt" | tail -2
  python3 -m benchmarks.report --render "$(grid_from)" "$OUT/r/beside/$GRID" --tag h100-grid \
    --out "$OUT/r" > "$OUT/r/report.txt" 2>&1
  echo "render rc=$? at $((SECONDS - t0)) s"
  grid_done
}
