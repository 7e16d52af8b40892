"""The benchmark report: a grid of benchmarks/grids.toml measured side by side with JAX (and
PyTorch), written as one report that replaces the last.

Run from the repository root:

    python -m benchmarks.report                     # the quick grid (the smoke grid without a GPU)
    python -m benchmarks.report --grid full         # the acceptance grid: hours on one H100
    python -m benchmarks.report --grid full --resume --budget-s 500   # the same, in steps
    python -m benchmarks.report --ops lu_factor,qr --dtypes float32 --sizes 256,1024 --out DIR
    python -m benchmarks.report --random 300 --seed 1 --out DIR   # random shapes against JAX
    python -m benchmarks.report --render benchmarks/results/H100/report.json   # measure nothing

A report is a folder: report.json (per cell the median and min ms of each implementation, the
error, what `auto` picked; no raw samples), report.md (the summary, then every cell) and
figures/*.png (with matplotlib: the `bench` extra). The full grid on a GPU goes to
benchmarks/results/<GPU>/ and regenerates docs/benchmarks.md; any other run goes to --out, or to
a new temporary folder: a run on the CPU writes nothing into the repository.

Square cells are measured by benchmarks.bench.run_cell (JAX's function, jax_cusolver_ms under
`auto` and each --strategies entry, PyTorch where importable, every answer checked); matmul cells
by benchmarks.matmul. Cells whose inputs exceed --max-input-gb, or beyond one where JAX took
longer than --jax-limit-s a call (a smaller batch or n of the same op and dtype), are skipped and
listed with the reason. The random part draws --random N shapes (benchmarks.random_shapes:
rectangular, complex, several right-hand sides) and times `auto` against JAX on each with the
same run_cell; a shape whose JAX call takes over --jax-limit-s is skipped (where JAX loops per
matrix over a large batch, learned from a smaller batch first: bench.estimated_jax_ms).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import sys
import tempfile
import threading
import time
import tomllib
import traceback

from . import bench, matmul as _matmul, random_shapes, render
from .render import summarize, summary_markdown  # noqa: F401  (the report's summary)

GRIDS_FILE = render.GRIDS_FILE
JAX_LIMIT_S = 20.0
_PARTS = ("square", "matmul", "random", "oblong")
# The keys of a grid's oblong part, and of its sweep.
_OBLONG_KEYS = {"cells", "sweep", "repeats"}
_SWEEP_KEYS = {"ops", "dtype", "batch", "n", "ratios"}
# The ops whose oblong cells also time the QR-first SVD (their SVD's strategy "blocked").
QR_FIRST_OPS = ("svd", "svdvals", "pinv", "lstsq")
# The keys of a grid's random part (grids.toml).
_RANDOM_KEYS = {"count", "seed", "ops", "dtypes", "max_n", "max_batch", "repeats", "jax_limit_s",
                "strategies"}
# What a report records of the options that shaped it.
_SQUARE_ARGS = ("ops", "dtypes", "batches", "sizes", "strategies", "repeats", "min_repeats",
                "jax_limit_s", "max_input_gb", "no_torch", "lanes")


def load_grids(path: str = GRIDS_FILE) -> dict:
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    grids = {name: spec for name, spec in doc.items()
             if isinstance(spec, dict) and "description" in spec}
    cells = _matmul.cells_from(doc.get("matmul_cells", []))
    for name, spec in grids.items():
        unknown = set(spec) - {"description", *_PARTS}
        if unknown:
            raise ValueError(f"{path}: grid {name!r} has unknown keys {sorted(unknown)}")
        ops = spec.get("square", {}).get("ops")
        if isinstance(ops, list) and set(ops) - set(bench.OPS):
            raise ValueError(f"{path}: grid {name!r}: unknown ops "
                             f"{sorted(set(ops) - set(bench.OPS))}")
        wanted = spec.get("matmul", {}).get("cells")
        if isinstance(wanted, list) and set(wanted) - set(cells):
            raise ValueError(f"{path}: grid {name!r}: unknown matmul cells "
                             f"{sorted(set(wanted) - set(cells))}")
        try:
            oblong_shapes(spec.get("oblong", {}))
        except ValueError as exc:
            raise ValueError(f"{path}: grid {name!r}: {exc}") from None
        rnd = spec.get("random", {})
        if set(rnd.get("strategies", ["auto"])) - {"auto", bench.ENABLED} or "auto" not in rnd.get(
                "strategies", ["auto"]):
            raise ValueError(f"{path}: grid {name!r}: the random part times 'auto' and "
                             f"optionally {bench.ENABLED!r}, got {rnd['strategies']}")
        if set(rnd) - _RANDOM_KEYS:
            raise ValueError(f"{path}: grid {name!r}: unknown random keys "
                             f"{sorted(set(rnd) - _RANDOM_KEYS)}")
        undrawable = (set(rnd.get("ops", ())) - set(random_shapes.OPS)) | (
            set(rnd.get("dtypes", ())) - set(random_shapes.DTYPES))
        if undrawable:
            raise ValueError(f"{path}: grid {name!r}: the random part cannot draw "
                             f"{sorted(undrawable)}")
    return {"grids": grids, "matmul_cells": cells,
            "headline": doc.get("headline", {}).get("cells", [])}


def _done(bar, count: str, what: str, result: dict) -> None:
    """One cell or shape measured: its speed-up (or status) on the progress bar, or a line."""
    s = render.speedup(result)
    line = f"{what}: " + (f"{s:.2f}x" if s else result.get("status", "?"))
    if bar is not None:
        bar.set_postfix_str(line)
        bar.update(1)
    else:
        print(f"[{count}] {line}", flush=True)


def _progress(total, desc):
    try:
        from jax_cusolver_ms._progress import progress
    except Exception:  # noqa: BLE001  (the package is broken: report without a bar)
        return None
    return progress(total, desc)


# --- the square grid ------------------------------------------------------------------------------

def _too_slow_before(slow: dict, op: str, dtype: str, batch: int, n: int,
                     limit_s: float = JAX_LIMIT_S) -> str | None:
    """JAX's time grows with batch and n: a cell at least as large as one where JAX took over
    the limit per call would take longer still."""
    for b, m, seconds in slow.get((op, dtype), ()):
        if batch >= b and n >= m:
            return f"JAX took {seconds:.0f} s per call at {b}x{m} (> {limit_s:g} s)"
    return None


# The exit status of a run stopped by --cell-limit-s (EX_TEMPFAIL: --resume goes on past it).
EXIT_CELL_LIMIT = 75
_exit = os._exit  # the timer's thread ends the process: the main thread is stuck in the call


@contextlib.contextmanager
def _cell_limit(args, cell: dict, checkpoint):
    """Measures one cell (or shape) within args.cell_limit_s (none: no limit). Past it,
    `checkpoint(skipped)` writes the report with this cell as skipped (a --resume keeps it, and
    so goes on past it) and the process exits with EXIT_CELL_LIMIT: a call that never returns
    in time would otherwise take the caller's whole time limit with it (a random shape's call
    ran past 6 minutes on the H200 and its process finished nothing after it)."""
    limit_s = getattr(args, "cell_limit_s", None)
    if not limit_s:
        yield
        return

    def stop():
        note = f"still running after --cell-limit-s {limit_s:g} s: the run stopped there"
        checkpoint(dict(cell, impls={}, status="skipped", note=note,
                        measured_at=round(time.time(), 1)))
        print(f"\n# {cell.get('op')} {cell.get('dtype')} {cell.get('batch')}x{cell.get('n')}: "
              f"{note}", flush=True)
        _exit(EXIT_CELL_LIMIT)

    timer = threading.Timer(limit_s, stop)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def run_grid(args, bench_args, torch, write, done=()) -> list[dict]:
    """Runs the square grid; `done`: cells of an earlier run of the same report (--resume), kept
    unless stale (_stale). `write(cells, total)` is called after every cell (a checkpoint)."""
    grid = [(op, d, b, n) for op in args.ops for d in args.dtypes
            for b in args.batches for n in args.sizes]
    seed_of = {key: i for i, key in enumerate(grid)}  # a cell's inputs whatever the sharding
    shard = getattr(args, "shard", None)
    if shard is not None:
        # Every count-th cell from `index` on: the slow cells (large n) spread over the shards.
        index_, count = shard
        grid = grid[index_::count]
    earlier = {(c["op"], c["dtype"], c["batch"], c["n"]): c for c in done}
    if getattr(bench_args, "torch_seen", None) is not None:
        bench.remember_torch(bench_args.torch_seen, done)
    # Earlier cells of other ops / dtypes / sizes ride along untouched, after this run's grid:
    # one file holds the whole report while runs of parts of it go on (float64 after float32).
    in_grid = set(grid)
    outside = [c for key, c in earlier.items() if key not in in_grid]
    total = len(grid) + len(outside)
    cells, slow = [], {}
    bar = _progress(len(grid), "report")
    budget = getattr(args, "budget_s", None)  # callers' own args objects may not have one
    started = getattr(args, "started", None) or time.perf_counter()
    try:
        for index, (op, dtype, batch, n) in enumerate(grid):
            t0 = time.perf_counter()
            if budget is not None and t0 - started >= budget:
                # The earlier run's cells not reached stay in the output, as they were.
                left = [earlier[key] for key in grid[index:] if key in earlier]
                cells += left + outside
                write(cells, total)
                print(f"\n# --budget-s {budget:g} spent: {len(grid) - index} cells not "
                      f"reached ({len(left)} of them kept from the earlier run) for --resume",
                      flush=True)
                break
            why = _too_slow_before(slow, op, dtype, batch, n, args.jax_limit_s)
            kept = earlier.get((op, dtype, batch, n))
            # The earlier run's cells not reached yet go into every checkpoint too: a run killed
            # mid-cell (a slow cell past the caller's timeout) must not drop them.
            rest = [earlier[key] for key in grid[index + 1:] if key in earlier] + outside
            if kept is not None and not _stale(kept, args, bench_args):
                cell = kept
            elif why:
                cell = {"op": op, "dtype": dtype, "batch": batch, "n": n, "impls": {},
                        "status": "skipped", "note": why}
            else:
                try:
                    with _cell_limit(args, {"op": op, "dtype": dtype, "batch": batch, "n": n},
                                     lambda stub: write(cells + [stub] + rest, total)):
                        cell = bench.run_cell(bench.OPS[op], dtype, batch, n, bench_args, torch,
                                              seed=bench_args.seed + seed_of[op, dtype, batch, n])
                except Exception as exc:  # noqa: BLE001  (a bug of the runner: record, go on)
                    cell = {"op": op, "dtype": dtype, "batch": batch, "n": n, "impls": {},
                            "status": "error", "note": "runner: " + bench.short(exc),
                            "traceback": traceback.format_exc()}
            if cell is not kept:
                cell.setdefault("measured_at", round(time.time(), 1))  # --render: newest wins
            jax_result = cell["impls"].get("jax", {})
            if jax_result.get("probe_ms", 0) > args.jax_limit_s * 1e3:
                slow.setdefault((op, dtype), []).append((batch, n, jax_result["probe_ms"] / 1e3))
            cell.setdefault("seconds", round(time.perf_counter() - t0, 2))
            cells.append(cell)
            write(cells + rest, total)
            _done(bar, f"{index + 1}/{len(grid)}", f"{op} {dtype} {batch}x{n}", cell)
        else:
            cells += outside
    finally:
        if bar is not None:
            bar.close()
    return cells


def _plan_key(plan) -> tuple | None:
    if not plan or "strategy" not in plan:
        return None
    return plan["strategy"], int(plan.get("lanes") or 1)


def _stale(cell: dict, args, bench_args) -> bool:
    """An earlier cell is measured again when it failed, when `auto` now picks another strategy
    or lane count for it (a new table, or new rules: its time is no longer auto's), or, with
    --redo-below R, when its speed-up over JAX was under R, or with --redo-ops, when its op is
    one of those (a change the plan does not show), between --redo-min-n and --redo-max-n and
    at --redo-batches if given, or with --redo-missing, when it has no time for a strategy this
    run measures (a column added to the grid since: the cell is measured whole again, so that
    its columns stay side by side from one run)."""
    if cell.get("status") == "error":
        return True
    if (getattr(args, "redo_missing", False) and cell.get("status") == "ok"
            and any(f"jcm:{spec}" not in cell["impls"] for spec in bench_args.strategies)):
        return True
    if (cell["op"] in (getattr(args, "redo_ops", None) or ())
            and cell["n"] <= (getattr(args, "redo_max_n", None) or cell["n"])
            and cell["n"] >= (getattr(args, "redo_min_n", None) or cell["n"])
            and cell["batch"] in (getattr(args, "redo_batches", None) or (cell["batch"],))):
        return True
    redo_below = getattr(args, "redo_below", None)
    s = render.speedup(cell)
    if redo_below and s is not None and s < redo_below:
        return True
    if cell.get("status") == "skipped" or bench.jcm is None:
        return False
    op = bench.OPS[cell["op"]]
    # A random shape's rows and right-hand sides (the grid's cells have neither).
    rows = {"rows": cell["m"]} if "m" in cell else {}
    nrhs = {"nrhs": cell["nrhs"]} if "nrhs" in cell else {}
    shape = bench.first_operand_shape(op, cell["dtype"], cell["batch"], cell["n"], **rows, **nrhs)
    before = _plan_key(cell.get("explain"))
    if before is None:  # no plan recorded: nothing to compare with
        return False
    now = _plan_key(bench.auto_plan(op, shape, cell["dtype"], bench_args, **nrhs))
    return now is not None and now != before


# --- the random shapes ----------------------------------------------------------------------------

def _run_shapes(args, shapes: list[dict], earlier_at, stale, measure, write, desc: str,
                label, outside=(), mine=None) -> list[dict]:
    """Measures `shapes` in order and returns the results: `earlier_at(i)` is an earlier run's
    result for shape i (--resume) or None, kept unless `stale(result)`; `measure(i, shape)`
    measures one (a runner's exception is recorded as the result); `outside`: earlier results
    of shapes not in this run, kept after them; `mine(i)`: whether this process measures shape
    i (--shard: another measures the rest, whose earlier results are kept). `write(results)`
    after every shape, the earlier results not reached yet included, so that a run killed
    mid-shape loses none."""
    results = []
    bar = _progress(len(shapes), desc)
    budget = getattr(args, "budget_s", None)
    started = getattr(args, "started", None) or time.perf_counter()
    try:
        for index, shape in enumerate(shapes):
            t0 = time.perf_counter()
            if budget is not None and t0 - started >= budget:
                left = [e for i in range(index, len(shapes)) if (e := earlier_at(i))]
                results += left + list(outside)
                write(results)
                print(f"\n# --budget-s {budget:g} spent: {len(shapes) - index} {desc} shapes "
                      f"not reached ({len(left)} of them kept from the earlier run) for --resume",
                      flush=True)
                break
            result = earlier_at(index)
            if mine is not None and not mine(index):
                if result is not None:
                    results.append(result)
                continue
            rest = [e for i in range(index + 1, len(shapes)) if (e := earlier_at(i))] + \
                list(outside)
            if result is None or stale(result):
                given = {k: v for k, v in shape.items() if v is not None}
                try:
                    with _cell_limit(args, given, lambda stub: write(results + [stub] + rest)):
                        result = measure(index, shape)
                except Exception as exc:  # noqa: BLE001  (a bug of the runner: record, go on)
                    result = {**given, "impls": {}, "status": "error",
                              "note": "runner: " + bench.short(exc),
                              "traceback": traceback.format_exc()}
                result.update(measured_at=round(time.time(), 1),
                              seconds=round(time.perf_counter() - t0, 2))
            results.append(result)
            write(results + rest)
            _done(bar, f"{desc} {index + 1}/{len(shapes)}", label(shape), result)
        else:
            results += list(outside)
    finally:
        if bar is not None:
            bar.close()
    return results


def run_random(args, bench_args, shapes: list[dict], write, done=()) -> list[dict]:
    """Measures each drawn shape with bench.run_cell (`auto` against JAX; torch is not timed);
    `done`: entries of an earlier run with the same seed (--resume), kept where they are the
    shape drawn at their index and not stale (_stale). `write(entries)` after every shape."""
    earlier = {e.get("index"): e for e in done}
    # Each shape says which of the draw it is, measured or failed, whatever a shard skips.
    shapes = [dict(shape, index=index) for index, shape in enumerate(shapes)]

    def earlier_at(i):
        e = earlier.get(i)
        return e if e is not None and all(e.get(k) == v for k, v in shapes[i].items()) else None

    def measure(index, shape):
        result = bench.run_cell(bench.OPS[shape["op"]], shape["dtype"], shape["batch"],
                                shape["n"], bench_args, None, seed=bench_args.seed + index,
                                rows=shape["m"], nrhs=shape["nrhs"])
        return dict(result, index=index)

    shard = getattr(args, "shard", None)
    mine = None if shard is None else (lambda i: i % shard[1] == shard[0])
    return _run_shapes(args, shapes, earlier_at, lambda e: _stale(e, args, bench_args), measure,
                       write, "random", random_shapes.label, mine=mine)


# --- tall-skinny and wide ---------------------------------------------------------------------

def oblong_shapes(spec: dict) -> list[dict]:
    """The oblong part's cells: its `cells` ([op, dtype, batch, m, n]), then its sweep's (each
    op at m = n * ratio), as {op, dtype, batch, m, n, nrhs}; nrhs 1 for lstsq, None for the
    ops without right-hand sides; a sweep's shape that is also a cell once. A ValueError names
    what is wrong."""
    if set(spec) - _OBLONG_KEYS:
        raise ValueError(f"unknown oblong keys {sorted(set(spec) - _OBLONG_KEYS)}")
    shapes = []
    for cell in spec.get("cells", []):
        if len(cell) != 5 or not all(isinstance(v, int) and v > 0 for v in cell[2:]):
            raise ValueError(f"an oblong cell is [op, dtype, batch, m, n], got {cell}")
        shapes.append(dict(zip(("op", "dtype", "batch", "m", "n"), cell)))
    sweep = spec.get("sweep")
    if sweep:
        if set(sweep) != _SWEEP_KEYS:
            raise ValueError(f"the oblong sweep takes exactly {sorted(_SWEEP_KEYS)}, got "
                             f"{sorted(sweep)}")
        for op in sweep["ops"]:
            for ratio in sweep["ratios"]:
                shapes.append({"op": op, "dtype": sweep["dtype"], "batch": sweep["batch"],
                               "m": max(1, round(sweep["n"] * ratio)), "n": sweep["n"]})
    for shape in shapes:
        if shape["op"] not in bench.OPS:
            raise ValueError(f"unknown oblong op {shape['op']!r}")
        if shape["dtype"] not in bench.DTYPES:
            raise ValueError(f"unknown oblong dtype {shape['dtype']!r}")
        shape["nrhs"] = 1 if shape["op"].startswith("lstsq") else None
    # Once each: a repeated shape would be measured once and its earlier cell (--resume) kept
    # beside the new one.
    once = {}
    for shape in shapes:
        once.setdefault(_oblong_key(shape), shape)
    return list(once.values())


def _oblong_key(cell: dict) -> tuple:
    return cell["op"], cell["dtype"], cell["batch"], cell["m"], cell["n"]


def oblong_strategies(shape: dict) -> list[str]:
    """`auto`, and the QR-first SVD where the op runs an SVD of a matrix at least twice as tall
    as wide or as wide as tall (strategy "blocked" takes nothing else)."""
    m, n = shape["m"], shape["n"]
    oblong = max(m, n) >= 2 * min(m, n)
    return ["auto"] + (["blocked"] if shape["op"] in QR_FIRST_OPS and oblong else [])


def run_oblong(args, bench_args, torch, shapes: list[dict], write, done=()) -> list[dict]:
    """Measures each oblong cell with bench.run_cell (JAX, PyTorch, the strategies of
    oblong_strategies); `done`: cells of an earlier run (--resume), kept unless stale.
    `write(cells)` after every cell."""
    earlier = {_oblong_key(c): c for c in done}
    wanted = {_oblong_key(s) for s in shapes}

    def own_args(shape):
        own = copy.copy(bench_args)
        own.strategies = oblong_strategies(shape)
        return own

    def measure(index, shape):
        own = own_args(shape)
        return bench.run_cell(bench.OPS[shape["op"]], shape["dtype"], shape["batch"],
                              shape["n"], own, torch, seed=own.seed + index, rows=shape["m"],
                              nrhs=shape["nrhs"])

    return _run_shapes(
        args, shapes, lambda i: earlier.get(_oblong_key(shapes[i])),
        lambda c: _stale(c, args, own_args(c)), measure, write, "oblong",
        lambda s: f"{s['op']} {s['dtype']} {s['batch']}x{s['m']}x{s['n']}",
        [c for key, c in earlier.items() if key not in wanted])


def oblong_part(env: dict, run_args: dict, cells: list[dict]) -> dict:
    """The oblong part: its cells in the grid's order (op, dtype, batch, n, m / n)."""
    rank = {name: i for i, name in enumerate(bench.OPS)}
    cells = sorted((render.compact_cell(c) for c in cells),
                   key=lambda c: (rank.get(c["op"], len(rank)), c["dtype"], c["batch"], c["n"],
                                  c["m"] / c["n"]))
    return {"environment": render.compact_env(env), "args": run_args,
            "complete": len(cells) >= run_args["total"], "total": run_args["total"],
            "cells": cells}


# --- the report folder ----------------------------------------------------------------------------

def _order(cells: list[dict], dtypes=()) -> list[dict]:
    """Cells in the grid's order: by op (bench.OPS's, family by family), dtype, batch, n."""
    ops = {name: i for i, name in enumerate(bench.OPS)}
    dtype_rank = {d: i for i, d in enumerate(list(dtypes) + list(bench.DTYPES))}
    return sorted(cells, key=lambda c: (ops.get(c["op"], len(ops)),
                                        dtype_rank.get(c["dtype"], 99), c["batch"], c["n"]))


def square_part(env: dict, run_args: dict, cells: list[dict], total: int) -> dict:
    cells = [render.compact_cell(c) for c in _order(cells, run_args.get("dtypes", ()))]
    rank = {name: i for i, name in enumerate(bench.OPS)}
    run_args = dict(run_args, ops=sorted(run_args.get("ops") or [],
                                         key=lambda op: rank.get(op, len(rank))))
    return {"environment": render.compact_env(env), "args": run_args,
            "complete": len(cells) >= total, "total": total,
            "summary": render.round_floats(render.summarize(cells), 5), "cells": cells}


def matmul_part(env: dict, run_args: dict, rows: list[dict], total: int) -> dict:
    rows = [render.compact_row(r) for r in rows]
    return {"environment": render.compact_env(env), "args": run_args,
            "complete": len(rows) >= total, "total": total,
            "summary": render.round_floats(render.summarize_matmul(rows), 5), "cells": rows}


def merged_sharded(parts: list[dict]) -> dict:
    """benchmarks.sharded's parts as one: the last part's devices and environment, and the rows
    of all, a later part's row replacing an earlier one of the same op, batch, n and dtype.
    Each row keeps the date of the run that measured it. Parts of another device count are
    left out: their speed-ups are not comparable."""
    last = parts[-1]
    rows = {}
    for part in parts:
        if part["devices"] != last["devices"]:
            continue
        date = part.get("environment", {}).get("date")
        for row in part["rows"]:
            key = (row["op"], row["batch"], row["n"], row.get("dtype"))
            rows.pop(key, None)
            rows[key] = {"date": date, **row} if date and "date" not in row else row
    return dict(last, rows=sorted(rows.values(), key=lambda r: r["batch"]))


def random_part(env: dict, run_args: dict, entries: list[dict]) -> dict:
    """The random part: its draw's arguments (count, seed, ...), the summary (render's
    summarize_random) and every shape measured, in the order drawn."""
    shapes = [render.compact_cell(e) for e in sorted(entries, key=lambda e: e["index"])]
    return {"environment": render.compact_env(env), "args": run_args,
            "complete": len(shapes) >= run_args["count"], "total": run_args["count"],
            "summary": render.round_floats(render.summarize_random(shapes), 5),
            "shapes": shapes}


def write_report(out: str, doc: dict, figures: dict | None = None, plot_note: str | None = None,
                 headline=()) -> None:
    """<out>/report.json and <out>/report.md, each replaced whole (written to a temporary file
    first)."""
    os.makedirs(out, exist_ok=True)
    for name, text in (("report.json", render.dumps(doc)),
                       ("report.md", render.report_markdown(doc, figures or {}, plot_note,
                                                            headline))):
        tmp = os.path.join(out, f".{name}.tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, name))


def draw(doc: dict, out: str, plt) -> dict:
    """figures/ of the report, replaced: every PNG of an earlier report there is removed."""
    folder = os.path.join(out, "figures")
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            if name.endswith(".png"):
                os.remove(os.path.join(folder, name))
    cells = (doc.get("square") or {}).get("cells", [])
    rows = (doc.get("matmul") or {}).get("cells", [])
    oblong = (doc.get("oblong") or {}).get("cells", [])
    figures = render.plot(cells, rows, folder, plt, doc.get("gpu"), oblong)
    return {name: [f"figures/{f}" for f in files] for name, files in figures.items()}


def finish(doc: dict, out: str, args, headline) -> dict:
    """The figures, report.json and report.md, then docs/benchmarks.md where the report is one
    of the repository's."""
    plt, plot_note = (None, "--no-plots") if args.no_plots else render.import_pyplot()
    figures = draw(doc, out, plt) if plt is not None else {}
    if plot_note and not args.no_plots:
        print(f"# WARNING: {plot_note}: no figures", flush=True)
    doc["figures"] = figures
    write_report(out, doc, figures, plot_note, headline)
    docs = args.docs
    if docs is None and os.path.dirname(os.path.abspath(out)) == os.path.abspath(
            render.RESULTS_DIR):
        docs = render.DOCS_PAGE
    if docs:
        render.write_docs(docs, headline)
        print(f"# wrote {docs}", flush=True)
    return doc


# --- command line ---------------------------------------------------------------------------------

def _ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def _shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes K/N, got {text!r}") from None
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"--shard K/N needs 0 <= K < N, got {text!r}")
    return index, count


def parse_args(argv=None):
    """(the report's options, the measurement options benchmarks.bench.run_cell reads)."""
    known = load_grids()
    p = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("what to measure")
    g.add_argument("--grid", choices=sorted(known["grids"]), default=None,
                   help="a grid of benchmarks/grids.toml: " + "; ".join(
                       f"{k}: {v['description']}" for k, v in known["grids"].items())
                   + " (default: quick; smoke where JAX has no GPU)")
    g.add_argument("--only", choices=_PARTS, default=None,
                   help="run only this part of the grid")
    g.add_argument("--ops", type=bench._list, default=None,
                   help=f"square part: comma-separated, from {','.join(bench.OPS)} (and the "
                        "random part's draw: those of them it draws)")
    g.add_argument("--dtypes", type=bench._list, default=None,
                   help="square part: dtypes (and the random part's draw, as --ops)")
    g.add_argument("--batches", type=_ints, default=None, help="square part: batch sizes")
    g.add_argument("--sizes", type=_ints, default=None, help="square part: matrix orders n")
    g.add_argument("--strategies", type=bench._list, default=None,
                   help="square part: jax_cusolver_ms strategies timed beside auto, "
                        "STRATEGY[:LANES]")
    g.add_argument("--matmul-cells", type=bench._list, default=None,
                   help="matmul part: cell names (see grids.toml), or 'all'")
    g.add_argument("--random", type=int, default=None, metavar="N",
                   help="random part: draw N shapes (benchmarks/random_shapes.py) and time "
                        "`auto` against JAX on each; alone (no --grid), the random part only, "
                        "from the space of the default grid's random part (smoke's small one "
                        "without a GPU, else the full space); --ops / --dtypes narrow the draw")
    g.add_argument("--seed", type=int, default=None, metavar="S",
                   help="random part: the draw's seed (default: the grid's, else 0)")
    m = p.add_argument_group("how")
    m.add_argument("--repeats", type=int, default=None)
    m.add_argument("--min-repeats", type=int, default=None,
                   help="timed calls of an impl whose one call takes over 4 s (default 3)")
    m.add_argument("--jax-limit-s", type=float, default=None,
                   help=f"skip cells beyond one where JAX took longer per call (default "
                        f"{JAX_LIMIT_S:g})")
    m.add_argument("--max-input-gb", type=float, default=None,
                   help="skip cells whose inputs are larger (default 8)")
    m.add_argument("--no-torch", action="store_true", help="do not time PyTorch")
    m.add_argument("--budget-s", type=float, default=None,
                   help="start no cell after this many seconds; the report then covers the "
                        "cells done, and --resume goes on with the rest")
    m.add_argument("--cell-limit-s", type=float, default=None, metavar="S",
                   help="stop the run when one cell or shape is still running after S seconds, "
                        "after writing the report with it as skipped (exit status "
                        f"{EXIT_CELL_LIMIT}): --resume goes on with the next")
    m.add_argument("--shard", type=_shard, default=None, metavar="K/N",
                   help="measure every N-th square cell and random shape from the K-th "
                        "(0-based) only, e.g. one process per GPU of a host, each with its own "
                        "--out; --render then merges the shards' report.json files, the newest "
                        "version of a cell winning")
    r = p.add_argument_group("resuming a long grid")
    r.add_argument("--resume", nargs="?", const=True, default=None, metavar="JSON",
                   help="keep the cells an earlier run finished (errors are measured again): "
                        "the report.json given, or without one --out's")
    r.add_argument("--redo-below", type=float, default=None, metavar="R",
                   help="with --resume: measure again the cells whose speed-up over JAX was "
                        "under R (cells whose auto plan changed are measured again anyway)")
    r.add_argument("--redo-missing", action="store_true",
                   help="with --resume: measure again the cells that lack a strategy of "
                        "--strategies (e.g. the enabled column)")
    r.add_argument("--redo-ops", type=bench._list, default=None, metavar="OPS",
                   help="with --resume: measure again every cell of these ops")
    r.add_argument("--redo-max-n", type=int, default=None, metavar="N",
                   help="with --redo-ops: only their cells up to this n")
    r.add_argument("--redo-min-n", type=int, default=None, metavar="N",
                   help="with --redo-ops: only their cells from this n on")
    r.add_argument("--redo-batches", type=_ints, default=None, metavar="B,...",
                   help="with --redo-ops: only their cells at these batch sizes")
    o = p.add_argument_group("output")
    o.add_argument("--out", default=None,
                   help="the report folder (default: benchmarks/results/<GPU>/ for the full "
                        "grid on a GPU and for --render, else a new temporary folder)")
    o.add_argument("--docs", default=None, metavar="PATH",
                   help="write the docs page here (default: docs/benchmarks.md when the "
                        "report is one of benchmarks/results/)")
    o.add_argument("--no-docs", action="store_true", help="do not write the docs page")
    o.add_argument("--no-plots", action="store_true")
    o.add_argument("--render", nargs="+", default=None, metavar="JSON",
                   help="measure nothing: the report of these files (report.json, or older "
                        "result files of benchmarks.bench / the matmul benchmark; of one GPU, "
                        "later files win), written to --out")
    o.add_argument("--show", default=None, metavar="JSON",
                   help="print a report's short summary table and exit")
    args = p.parse_args(argv)
    if args.no_docs:
        args.docs = ""
    given = {k: getattr(args, k) for k in ("ops", "dtypes", "repeats", "jax_limit_s")}
    if args.random is not None and args.grid is None and args.only is None:
        args.only = "random"

    gpu = bench.jax.default_backend() == "gpu"
    args.grid_given = args.grid is not None
    args.grid = args.grid or ("quick" if gpu else "smoke")
    spec = known["grids"][args.grid]
    square = dict(spec.get("square", {})) if args.only in (None, "square") else {}
    mm = dict(spec.get("matmul", {})) if args.only in (None, "matmul") else {}
    rnd = dict(spec.get("random", {})) if args.only in (None, "random") else {}
    oblong = dict(spec.get("oblong", {})) if args.only in (None, "oblong") else {}
    args.oblong_shapes = [s for s in oblong_shapes(oblong)
                          if (given["ops"] is None or s["op"] in given["ops"])
                          and (given["dtypes"] is None or s["dtype"] in given["dtypes"])]
    args.subset = any(v is not None for v in (args.ops, args.dtypes, args.batches, args.sizes,
                                              args.strategies, args.matmul_cells, args.only,
                                              args.shard, args.random, args.seed))
    if square:
        ops = square.get("ops", "all")
        args.ops = args.ops or (list(bench.OPS) if ops == "all" else list(ops))
        args.dtypes = args.dtypes or list(square.get("dtypes", bench.DTYPES))
        args.batches = args.batches or list(square["batches"])
        args.sizes = args.sizes or list(square["sizes"])
        args.strategies = args.strategies or list(square.get("strategies", ["auto"]))
        args.repeats = args.repeats or square.get("repeats")
        args.jax_limit_s = args.jax_limit_s or square.get("jax_limit_s", JAX_LIMIT_S)
        args.max_input_gb = args.max_input_gb or square.get("max_input_gb", 8.0)
        args.no_torch = args.no_torch or square.get("no_torch", False)
        for name in args.ops:
            if name not in bench.OPS:
                p.error(f"unknown op {name!r}; known: {', '.join(bench.OPS)}")
        if "auto" not in args.strategies:
            args.strategies.insert(0, "auto")  # the speed-ups are auto's
    else:
        args.ops, args.dtypes, args.batches, args.sizes = [], [], [], []
        args.strategies = ["auto"]
        args.jax_limit_s = args.jax_limit_s or JAX_LIMIT_S
        args.max_input_gb = args.max_input_gb or 8.0
    args.matmul_spec = mm
    if mm:
        names = args.matmul_cells or mm.get("cells", "all")
        cells = known["matmul_cells"]
        if names == "all" or names == ["all"]:
            names = [name for name, c in cells.items() if not c.smoke]
        unknown = [n for n in names if n not in cells]
        if unknown:
            p.error(f"unknown matmul cells {unknown}; known: {', '.join(cells)}")
        args.matmul_cells = list(names)
    else:
        args.matmul_cells = []
    args.headline = known["headline"]
    args.known_matmul = known["matmul_cells"]
    args.random_args = _random_args(p, args, rnd, given)
    # A --resume goes on with the earlier draw unless one of these says otherwise (main).
    args.draw_given = args.random is not None or args.seed is not None or any(
        given[k] is not None for k in ("ops", "dtypes"))

    # The knobs the square cells share with benchmarks.bench, validated by its parser.
    forwarded = ["--strategies", ",".join(args.strategies),
                 "--max-input-gb", str(args.max_input_gb), "--jax-limit-s", str(args.jax_limit_s)]
    forwarded += ["--repeats", str(args.repeats)] if args.repeats else []
    forwarded += ["--min-repeats", str(args.min_repeats)] if args.min_repeats else []
    forwarded += ["--no-torch"] if args.no_torch else []
    forwarded += ["--cpu-smoke"] if not gpu else []
    args.oblong_bench_args = None
    if args.oblong_shapes:
        # Its own repeats; the strategies are set per cell (oblong_strategies).
        own = ["--max-input-gb", str(args.max_input_gb), "--jax-limit-s", str(args.jax_limit_s)]
        repeats = given["repeats"] or oblong.get("repeats")
        own += ["--repeats", str(repeats)] if repeats else []
        own += ["--min-repeats", str(args.min_repeats)] if args.min_repeats else []
        own += ["--no-torch"] if args.no_torch else []
        own += ["--cpu-smoke"] if not gpu else []
        args.oblong_bench_args = bench.parse_args(own)
    args.random_bench_args = None
    if args.random_args:
        # The random part times `auto` (and "enabled"), with its own repeats and JAX limit;
        # a shape too slow for JAX is learned from a smaller batch where that is cheaper.
        rargs = args.random_args
        # "enabled" (JAX's code under enable()) rides along where the part or --strategies
        # asks for it.
        strategies = rargs["strategies"] or ["auto"] + [bench.ENABLED] * (
            bench.ENABLED in (args.strategies or []))
        own = ["--strategies", ",".join(strategies), "--max-input-gb", str(rargs["max_input_gb"]),
               "--jax-limit-s", str(rargs["jax_limit_s"]), "--no-torch", "--estimate-first"]
        own += ["--repeats", str(rargs["repeats"])] if rargs["repeats"] else []
        own += ["--min-repeats", str(args.min_repeats)] if args.min_repeats else []
        own += ["--cpu-smoke"] if not gpu else []
        args.random_bench_args = bench.parse_args(own)
    return args, bench.parse_args(forwarded)


def _random_args(p, args, spec: dict, given: dict) -> dict | None:
    """The random part's draw and measurement arguments: the grid's random part, --random and
    --seed over it, the draw narrowed to --ops / --dtypes where given. None: no random part."""
    count = args.random if args.random is not None else spec.get("count", 0)
    if count < 0:
        p.error(f"--random: N must be >= 0, got {count}")
    if args.only == "random" and not count:
        p.error(f"--only random: nothing to draw (grid {args.grid!r} has no random part): "
                "give --random N")
    if not count:
        return None
    ops = [o for o in given["ops"] or spec.get("ops", random_shapes.OPS)
           if o in random_shapes.OPS]
    dtypes = [d for d in given["dtypes"] or spec.get("dtypes", random_shapes.DTYPES)
              if d in random_shapes.DTYPES]
    if not ops or not dtypes:
        if args.random is not None:
            p.error("--random: none of --ops / --dtypes can be drawn; ops from "
                    f"{', '.join(random_shapes.OPS)}, dtypes from "
                    f"{', '.join(random_shapes.DTYPES)}")
        print("# no random part: none of --ops / --dtypes can be drawn", flush=True)
        return None
    return {"count": count, "seed": args.seed if args.seed is not None else spec.get("seed", 0),
            "ops": ops, "dtypes": dtypes, "max_n": spec.get("max_n", random_shapes.MAX_N),
            "max_batch": spec.get("max_batch"), "max_input_gb": args.max_input_gb,
            "jax_limit_s": given["jax_limit_s"] or spec.get("jax_limit_s", args.jax_limit_s),
            "repeats": given["repeats"] or spec.get("repeats"),
            "strategies": spec.get("strategies")}


def _out(args, gpu_name: str, measuring: bool) -> tuple[str, bool]:
    """The report folder, and whether it is a new temporary one."""
    if args.out:
        return args.out, False
    if not measuring or (args.grid == "full" and not args.subset
                         and bench.jax.default_backend() == "gpu"):
        return os.path.join(render.RESULTS_DIR, render.gpu_model(gpu_name)), False
    return tempfile.mkdtemp(prefix=f"jcm-report-{args.grid}-"), True


def main(argv=None) -> int:
    args, bench_args = parse_args(argv)
    if args.show:
        with open(args.show) as f:
            print(render.brief(json.load(f)), end="")
        return 0
    if args.render:
        return render_files(args)
    torch, torch_note = bench._import_torch(bench_args)
    env = bench.environment(torch)
    if torch_note:
        env["torch_skipped"] = torch_note
    out, temporary = _out(args, env["gpu"], measuring=True)
    print(f"# report, grid {args.grid}: {env['gpu']} (driver {env['driver']}), jax backend "
          f"{env['jax_backend']}, timer: {bench.TIMER}"
          + (f"; torch skipped: {torch_note}" if torch_note else "") + f"\n# out: {out}",
          flush=True)
    if env["jax_backend"] != "gpu":
        print("# no GPU: the times are JAX's CPU fallback, a check of the report, not of speed",
              flush=True)
    elif env.get("jcm_gpu_available") is not True:
        print("# WARNING: JAX has a GPU but jax_cusolver_ms's CUDA extension is not loaded: "
              "its columns time JAX's fallback, not the lanes", flush=True)

    earlier = {}
    resume_path = os.path.join(out, "report.json") if args.resume is True else args.resume
    if args.resume is True and temporary:
        raise SystemExit("report: --resume without a file needs --out (the report to go on "
                         "with)")
    if resume_path and os.path.exists(resume_path):
        with open(resume_path) as f:
            earlier = json.load(f)
        if earlier.get("gpu") != env["gpu"]:
            print(f"# not resuming {resume_path}: measured on {earlier.get('gpu')}", flush=True)
            earlier = {}
        else:
            print(f"# resuming {resume_path}", flush=True)
            for part, key in (("square", "cells"), ("random", "shapes"), ("oblong", "cells")):
                bench.drop_unbuilt((earlier.get(part) or {}).get(key) or ())

    args.started = time.perf_counter()
    doc = {"format": render.FORMAT, "gpu": env["gpu"], "grid": args.grid}
    square_args = {k: getattr(args, k, None) for k in _SQUARE_ARGS}
    square_args["lanes"] = bench_args.lanes
    square_args["min_repeats"] = bench_args.min_repeats
    square_args["repeats"] = bench_args.repeats
    mm_args = {"cells": args.matmul_cells,
               "calls": args.matmul_spec.get("calls", _matmul.CALLS),
               "repeats": args.matmul_spec.get("repeats", _matmul.REPEATS),
               "warmup": _matmul.WARMUP, "seed": 0, "no_torch": args.no_torch}
    before_square = (earlier.get("square") or {})
    before_mm = (earlier.get("matmul") or {})
    before_random = (earlier.get("random") or {})
    before_oblong = (earlier.get("oblong") or {})
    drawn = before_random.get("args") or {}
    if args.random_args and not args.draw_given and "seed" in drawn and "count" in drawn:
        # Resumed without --random, --seed, --ops or --dtypes: the earlier run's draw, not the
        # grid's (which would draw other shapes and keep none of the earlier ones).
        args.random_args = dict(args.random_args, **{
            k: drawn[k] for k in ("count", "seed", "ops", "dtypes", "max_n", "max_batch")
            if k in drawn})
        print(f"# random part: {drawn['count']} shapes with seed {drawn['seed']}, as resumed",
              flush=True)
    if earlier.get("sharded"):  # measured on a multi-GPU host by benchmarks.sharded: kept
        doc["sharded"] = earlier["sharded"]
    if before_square:
        for axis in ("ops", "dtypes", "batches", "sizes"):  # the whole report's axes
            square_args[axis] = list(dict.fromkeys(list(square_args[axis] or [])
                                                   + list(before_square["args"].get(axis, []))))

    def checkpoint(cells=None, total=None, rows=None, entries=None, oblong=None):
        if cells is not None:
            doc["square"] = square_part(env, square_args, cells, total)
        if rows is not None:
            doc["matmul"] = matmul_part(env, mm_args, rows, len(args.matmul_cells))
        if entries is not None:
            doc["random"] = random_part(env, random_args, entries)
        if oblong is not None:
            doc["oblong"] = oblong_part(env, oblong_args, oblong)
        write_report(out, doc, headline=args.headline)

    if before_mm and not args.matmul_cells:
        doc["matmul"] = before_mm  # a square-only run keeps the report's matmul part
    if before_square and not args.ops:
        doc["square"] = before_square
    random_args = args.random_args
    if before_random and not random_args:
        doc["random"] = before_random
    if before_oblong and not args.oblong_shapes:
        doc["oblong"] = before_oblong
    keys = {_oblong_key(s) for s in args.oblong_shapes} | {
        _oblong_key(c) for c in before_oblong.get("cells", ())}
    oblong_args = {"shapes": len(args.oblong_shapes), "total": len(keys),
                   "repeats": (args.oblong_bench_args.repeats if args.oblong_bench_args
                               else None), "no_torch": args.no_torch}
    if args.ops:
        cells = run_grid(args, bench_args, torch, lambda c, t: checkpoint(c, t),
                         before_square.get("cells", ()))
        grid = {(op, d, b, n) for op in args.ops for d in args.dtypes for b in args.batches
                for n in args.sizes}
        grid |= {(c["op"], c["dtype"], c["batch"], c["n"]) for c in before_square.get("cells",
                                                                                      ())}
        checkpoint(cells, len(grid))
    if args.matmul_cells:
        opts = argparse.Namespace(**mm_args)
        cells = [args.known_matmul[name] for name in args.matmul_cells]
        deadline = args.started + args.budget_s if args.budget_s is not None else None
        rows = _matmul.run(cells, opts, None if args.no_torch else torch,
                           env.get("gpu") or env.get("device_kind") or "",
                           done=before_mm.get("cells", ()), deadline=deadline,
                           on_row=lambda rows: checkpoint(rows=rows))
        checkpoint(rows=rows)
    if random_args:
        rb = args.random_bench_args
        random_args = dict(random_args, min_repeats=rb.min_repeats, repeats=rb.repeats,
                           lanes=rb.lanes)
        shapes = random_shapes.draw_shapes(
            random_args["count"], random_args["seed"], random_args["ops"], random_args["dtypes"],
            max_n=random_args["max_n"], max_batch=random_args["max_batch"],
            max_input_gb=random_args["max_input_gb"])
        # Another seed's shapes are other shapes: none of them is kept.
        same_seed = (before_random.get("args") or {}).get("seed") == random_args["seed"]
        entries = run_random(args, rb, shapes, lambda e: checkpoint(entries=e),
                             before_random.get("shapes", ()) if same_seed else ())
        checkpoint(entries=entries)
    if args.oblong_shapes:
        cells = run_oblong(args, args.oblong_bench_args, torch, args.oblong_shapes,
                           lambda c: checkpoint(oblong=c), before_oblong.get("cells", ()))
        checkpoint(oblong=cells)
    finish(doc, out, args, args.headline)
    print(f"\n# wrote {out}: report.json, report.md" + (", figures/" if doc["figures"] else "")
          + f" ({time.perf_counter() - args.started:.0f} s)\n")
    print(render.brief(doc), flush=True)
    square_failures = render.failures((doc.get("square") or {}).get("cells", []))
    random_failures = render.failures((doc.get("random") or {}).get("shapes", []))
    random_failures += render.failures((doc.get("oblong") or {}).get("cells", []))
    mm_failed = [r for r in (doc.get("matmul") or {}).get("cells", [])
                 if "failed" in r["impls"].get("jcm", {}) or r["impls"].get("jcm", {}).get(
                     "ok") is False]
    return 1 if square_failures or random_failures or mm_failed else 0


# --- --render -------------------------------------------------------------------------------------

def _parts_of(doc: dict) -> list[tuple[str, dict]]:
    """("square" | "matmul" | "random", the part) of a report.json, or ("square" | "matmul",
    {"environment", "args", "cells"}) of an older result file."""
    measured = (*_PARTS, "sharded")  # sharded: benchmarks.sharded's (a multi-GPU host)
    if any(k in doc for k in measured):
        return [(k, doc[k]) for k in measured if doc.get(k)]
    cells = doc.get("cells", [])
    kind = "matmul" if (cells and "cell" in cells[0]) or "calls" in doc.get("args", {}) \
        else "square"
    return [(kind, doc)]


def _draw_of(random_args: dict) -> tuple:
    """What the random part's shapes depend on, but their count (more draws: the same first)."""
    return tuple(str(random_args.get(k)) for k in ("seed", "ops", "dtypes", "max_n", "max_batch",
                                                   "max_input_gb"))


def render_files(args) -> int:
    """--render FILE [FILE ...]: the report of earlier runs, their cells merged (of one GPU; the
    most recently measured version of a cell wins, then the later file's), written to --out:
    nothing is measured, so it runs anywhere."""
    docs = []
    for path in args.render:
        with open(path) as f:
            docs.append(json.load(f))
    parts = [(kind, part) for doc in docs for kind, part in _parts_of(doc)]
    gpus = {part["environment"].get("gpu") for _, part in parts}
    if len(gpus) != 1:
        raise SystemExit(f"report --render: runs of one GPU only, got {sorted(map(str, gpus))}")
    gpu = gpus.pop()
    doc = {"format": render.FORMAT, "gpu": gpu,
           "grid": next((d.get("grid") for d in docs if d.get("grid")), None) or "full"}
    squares = [p for k, p in parts if k == "square"]
    if squares:
        run_args = {k: v for k, v in squares[-1]["args"].items() if k in _SQUARE_ARGS}
        for axis in ("ops", "dtypes", "batches", "sizes"):  # the runs may have covered parts
            values = dict.fromkeys(v for p in squares for v in p["args"].get(axis, ()))
            run_args[axis] = sorted(values) if axis in ("batches", "sizes") else list(values)
        merged = {}
        for part in squares:
            for c in part["cells"]:
                # The most recently measured version of a cell (shards of one run each carry
                # the others' cells as they were before it); equal or unknown: the later file's.
                key = (c["op"], c["dtype"], c["batch"], c["n"])
                if c.get("measured_at", 0) >= merged.get(key, {}).get("measured_at", 0):
                    merged[key] = c
        grid = {(op, d, b, n) for op in run_args["ops"] for d in run_args["dtypes"]
                for b in run_args["batches"] for n in run_args["sizes"]}
        doc["square"] = square_part(squares[-1]["environment"], run_args,
                                    list(merged.values()), len(grid | set(merged)))
    matmuls = [p for k, p in parts if k == "matmul"]
    if matmuls:
        rows = {}
        for part in matmuls:
            for r in part["cells"]:
                if r.get("measured_at", 0) >= rows.get(r["cell"], {}).get("measured_at", 0):
                    rows[r["cell"]] = r
        last = matmuls[-1]["args"]
        mm_args = {k: last[k] for k in ("calls", "repeats", "warmup", "seed", "no_torch")
                   if k in last}
        mm_args["cells"] = list(rows)
        doc["matmul"] = matmul_part(matmuls[-1]["environment"], mm_args, list(rows.values()),
                                    len(rows))
    randoms = [p for k, p in parts if k == "random"]
    if randoms:
        # The last file's draw; of the others only the parts of the same draw (the same shapes
        # at the same indices), each shape's most recently measured version winning.
        last = randoms[-1]
        entries = {}
        for part in randoms:
            if _draw_of(part["args"]) != _draw_of(last["args"]):
                continue
            for e in part["shapes"]:
                if e["index"] >= last["args"]["count"]:
                    continue
                if e.get("measured_at", 0) >= entries.get(e["index"], {}).get("measured_at", 0):
                    entries[e["index"]] = e
        doc["random"] = random_part(last["environment"], last["args"], list(entries.values()))
    oblongs = [p for k, p in parts if k == "oblong"]
    if oblongs:
        merged = {}
        for part in oblongs:
            for c in part["cells"]:
                if c.get("measured_at", 0) >= merged.get(_oblong_key(c), {}).get("measured_at",
                                                                                   0):
                    merged[_oblong_key(c)] = c
        last = dict(oblongs[-1]["args"], total=len(merged))
        doc["oblong"] = oblong_part(oblongs[-1]["environment"], last, list(merged.values()))
    shardeds = [p for k, p in parts if k == "sharded"]
    if shardeds:
        doc["sharded"] = merged_sharded(shardeds)
    out, _ = _out(args, gpu, measuring=False)
    finish(doc, out, args, args.headline)
    print(f"# wrote {out}: report.json, report.md" + (", figures/" if doc["figures"] else "")
          + "\n")
    print(render.brief(doc), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
