"""Build a shipped strategy table (jax_cusolver_ms/tables/*.json) from benchmark results.

    python -m benchmarks.build_table benchmarks/results/*_NVIDIA-H100-80GB-HBM3.json \
        --out jax_cusolver_ms/tables/h100.json

Reads the JSON that benchmarks.bench / benchmarks.report write, and tables (what
`python -m jax_cusolver_ms.tune --out` writes, or an earlier shipped table). Each cell of an op that times one
routine on its own (ROUTINES below) becomes a measured point of that routine: JAX's time is the
"xla" candidate, each "jcm:<strategy>[:lanes]" column the candidate that strategy really runs
(strategy.choose resolves it: e.g. "batched" where no batched API fits runs lanes), and "auto"
the candidate it picked when no explicit column measured that one. Only answers that passed the
check count. Later files win where they measure the same candidate of the same cell.

A table from `python -m jax_cusolver_ms.tune --out ...` is the better source (every lane count,
every size); this turns the results already measured into one.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from jax_cusolver_ms import strategy as _strategy, tables as _tables

# Bench ops whose time is one routine's (or, for qr and cho_solve, a pair's whose strategy is
# chosen together): op -> the routines it informs. Derived ops (solve, inv, det, ...) add JAX's
# work around the routine and are left out.
ROUTINES = {
    "lu_factor": ("getrf",),
    "cholesky": ("potrf",),
    "cho_solve": ("potrs",),  # cho_factor + cho_solve, both under the strategy timed
    "qr": ("geqrf", "orgqr"),
    "ldl_factor": ("sytrf",),
    "eigh": (None,),  # None: strategy.routine_of(op, n, n) (syevj / syevd by n)
    "svd": (None,),
    "eig": ("geev",),
    "svd_qr": ("gesvd",),
}


def _candidate(routine, cell, strategy, lanes):
    choice = _strategy.choose(routine, cell["batch"], (cell["n"], cell["n"]), cell["dtype"],
                              strategy, lanes)
    return _tables.candidate_name(choice.strategy, choice.lanes)


def cell_times(cell: dict, routine: str, default_lanes) -> dict[str, float]:
    impls = cell.get("impls", {})
    times = {}
    # JAX's column is another algorithm for routines it has none of (LU next to LDL^T).
    if "median_ms" in impls.get("jax", {}) and routine not in _strategy.NO_XLA:
        times[_tables.XLA] = impls["jax"]["median_ms"]
    for name, result in impls.items():
        if not name.startswith("jcm:") or not result.get("ok") or "median_ms" not in result:
            continue
        spec = name[len("jcm:"):]
        strategy, _, lanes = spec.partition(":")
        if strategy == "auto":
            continue
        lanes = int(lanes) if lanes else default_lanes
        times.setdefault(_candidate(routine, cell, strategy, lanes), result["median_ms"])
    auto = impls.get("jcm:auto", {})
    plan = cell.get("explain") or {}
    if auto.get("ok") and "median_ms" in auto and plan.get("strategy"):
        times.setdefault(_tables.candidate_name(plan["strategy"], int(plan.get("lanes") or 1)),
                         auto["median_ms"])
    return times


def build(paths) -> dict:
    gpus, points, sources = set(), {}, []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        if "entries" in doc:  # a table: `python -m jax_cusolver_ms.tune --out` or this script's
            tuned = _tables.Table.from_json(doc, str(path))
            gpus.add(tuned.gpu)
            sources.append(str(path))
            for key, tuned_points in tuned.entries.items():
                at = points.setdefault(key, {})
                for p in tuned_points:
                    at.setdefault((p.batch, p.n), {}).update(p.times_ms)
            continue
        env = doc["environment"]
        if env.get("jax_backend") != "gpu":
            continue
        gpus.add(env["device_kind"])
        sources.append(str(path))
        for cell in doc["cells"]:
            for routine in ROUTINES.get(cell["op"], ()):
                routine = routine or _strategy.routine_of(cell["op"], cell["n"], cell["n"])
                times = cell_times(cell, routine, doc["args"].get("lanes"))
                if times:
                    dtype = np.dtype(cell["dtype"]).name
                    at = points.setdefault((routine, dtype), {})
                    at.setdefault((cell["batch"], cell["n"]), {}).update(times)
    if len(gpus) != 1:
        raise SystemExit(f"build_table: need results of one GPU model, got {sorted(gpus)}")
    gpu = gpus.pop()
    table = _tables.Table(gpu, "built", {
        k: [_tables.Point(b, n, t) for (b, n), t in v.items()] for k, v in points.items()})
    doc = table.to_json()
    doc["built_from"] = sources
    return doc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.build_table", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+",
                   help="benchmark JSON files and tune tables (one GPU model), later ones win")
    p.add_argument("--out", required=True, help="the table to write")
    args = p.parse_args(argv)
    doc = build(args.results)
    _tables.Table.from_json(doc, "check")  # what auto will read must parse
    _tables.write_atomic(args.out, doc)
    count = sum(len(v) for per in doc["entries"].values() for v in per.values())
    print(f"wrote {args.out}: {doc['gpu']}, {count} points, routines "
          f"{', '.join(sorted(doc['entries']))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
