"""The report: every op x float32/float64 x batch x n, side by side with JAX (and PyTorch).

Run from the repository root:

    python -m benchmarks.report                # the acceptance grid (GPU): hours, not minutes
    python -m benchmarks.report --quick        # a smoke check on a GPU: under two minutes
    python -m benchmarks.report --cpu-smoke    # no GPU: a check of the report itself (< 1 min)
    python -m benchmarks.report --ops lu_factor,qr --dtypes float32 --sizes 256,1024
    python -m benchmarks.report --tag h100 --resume   # go on with an interrupted run
    python -m benchmarks.report --tag h100 --resume benchmarks/results/h100_<gpu>.json

Each cell is timed by benchmarks.bench.run_cell (JAX's function, jax_cusolver_ms under `auto`
and each --strategies entry, PyTorch where importable, every answer checked). Cells whose inputs
exceed --max-input-gb, or for which JAX already took longer than --jax-limit-s per call at a
smaller batch or n of the same op and dtype, are skipped and listed with the reason. Written to
--out (default benchmarks/results/): <tag>_<gpu>.json (environment, every timing, the summary),
<tag>_<gpu>.md (per-op geometric-mean speed-ups, cells below 0.95x of JAX, batch-1 cells,
skipped cells, then the full table) and, with matplotlib (the `bench` extra), per op
<tag>_<gpu>_<op>_speedup.png (heat map of the speed-up over JAX, batch x n) and
<tag>_<gpu>_<op>_times.png (time against n, one line per implementation).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import sys
import time
import traceback

from . import bench

BATCHES = (1, 4, 16, 64, 256)
SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048)
STRATEGIES = ("auto", "sequential", "looped", "batched")
# --quick: one op per routine family, the shapes where the strategies differ most.
QUICK = dict(ops=("lu_factor", "cholesky", "qr", "eigh", "svd"), dtypes=("float32",),
             batches=(1, 16), sizes=(64, 512), strategies=("auto",), repeats=5)
SMOKE = dict(ops=("lu_factor", "cholesky", "qr", "eigh"), dtypes=("float32",),
             batches=(1, 4), sizes=(8, 16), strategies=("auto", "looped"), repeats=3)
JAX_LIMIT_S = 20.0
PARITY = 0.95  # the acceptance bar: no cell below this fraction of JAX's speed


def _progress(total, desc):
    try:
        from jax_cusolver_ms._progress import progress
    except Exception:  # noqa: BLE001  (the package is broken: report without a bar)
        return None
    return progress(total, desc)


# --- the grid -------------------------------------------------------------------------------------

def _too_slow_before(slow: dict, op: str, dtype: str, batch: int, n: int,
                     limit_s: float = JAX_LIMIT_S) -> str | None:
    """JAX's time grows with batch and n: a cell at least as large as one where JAX took over
    the limit per call would take longer still."""
    for b, m, seconds in slow.get((op, dtype), ()):
        if batch >= b and n >= m:
            return f"JAX took {seconds:.0f} s per call at {b}x{m} (> {limit_s:g} s)"
    return None


def run_grid(args, bench_args, torch, write, done=()) -> list[dict]:
    """Runs the grid; `done`: cells of an earlier run of the same report (--resume), kept."""
    grid = [(op, d, b, n) for op in args.ops for d in args.dtypes
            for b in args.batches for n in args.sizes]
    seed_of = {key: i for i, key in enumerate(grid)}  # a cell's inputs whatever the sharding
    shard = getattr(args, "shard", None)
    if shard is not None:
        # Every count-th cell from `index` on: the slow cells (large n) spread over the shards.
        index_, count = shard
        grid = grid[index_::count]
    earlier = {(c["op"], c["dtype"], c["batch"], c["n"]): c for c in done}
    # Earlier cells of other ops / dtypes / sizes ride along untouched, after this run's grid:
    # one file holds the whole report while runs of parts of it go on (float64 after float32).
    in_grid = set(grid)
    outside = [c for key, c in earlier.items() if key not in in_grid]
    total = len(grid) + len(outside)
    cells, slow = [], {}
    bar = _progress(len(grid), "report")
    budget = getattr(args, "budget_s", None)  # callers' own args objects may not have one
    started = time.perf_counter()
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
            if kept is not None and not _stale(kept, args, bench_args):
                cell = kept
            elif why:
                cell = {"op": op, "dtype": dtype, "batch": batch, "n": n, "impls": {},
                        "status": "skipped", "note": why}
            else:
                try:
                    cell = bench.run_cell(bench.OPS[op], dtype, batch, n, bench_args, torch,
                                          seed=bench_args.seed + seed_of[op, dtype, batch, n])
                except Exception as exc:  # noqa: BLE001  (a bug of the runner: record, go on)
                    cell = {"op": op, "dtype": dtype, "batch": batch, "n": n, "impls": {},
                            "status": "error", "note": "runner: " + bench._short(exc),
                            "traceback": traceback.format_exc()}
            if cell is not kept:
                cell.setdefault("measured_at", round(time.time(), 1))  # --render: newest wins
            jax_result = cell["impls"].get("jax", {})
            if jax_result.get("probe_ms", 0) > args.jax_limit_s * 1e3:
                slow.setdefault((op, dtype), []).append((batch, n, jax_result["probe_ms"] / 1e3))
            cell.setdefault("seconds", round(time.perf_counter() - t0, 2))
            cells.append(cell)
            # The earlier run's cells not reached yet go into every checkpoint too: a run killed
            # mid-cell (a slow cell past the caller's timeout) must not drop them (session 12:
            # 177 cells of a resumed grid lost that way).
            write(cells + [earlier[key] for key in grid[index + 1:] if key in earlier] + outside,
                  total)
            speedup = _speedup(cell)
            line = f"{op} {dtype} {batch}x{n}: " + (
                f"{speedup:.2f}x" if speedup else cell.get("status", "?"))
            if bar is not None:
                bar.set_postfix_str(line)
                bar.update(1)
            else:
                print(f"[{index + 1}/{len(grid)}] {line}", flush=True)
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
    one of those (a change the plan does not show, e.g. ldl_solve's solve under its factor's),
    between --redo-min-n and --redo-max-n and at --redo-batches if given."""
    if cell.get("status") == "error":
        return True
    if (cell["op"] in (getattr(args, "redo_ops", None) or ())
            and cell["n"] <= (getattr(args, "redo_max_n", None) or cell["n"])
            and cell["n"] >= (getattr(args, "redo_min_n", None) or cell["n"])
            and cell["batch"] in (getattr(args, "redo_batches", None) or (cell["batch"],))):
        return True
    redo_below = getattr(args, "redo_below", None)
    speedup = _speedup(cell)
    if redo_below and speedup is not None and speedup < redo_below:
        return True
    if cell.get("status") == "skipped" or bench.jcm is None:
        return False
    op = bench.OPS[cell["op"]]
    shape = bench.first_operand_shape(op, cell["dtype"], cell["batch"], cell["n"])
    before = _plan_key(cell.get("explain"))
    if before is None:  # no plan recorded: nothing to compare with
        return False
    now = _plan_key(bench.auto_plan(op, shape, cell["dtype"], bench_args))
    return now is not None and now != before


# --- the summary ----------------------------------------------------------------------------------

def _median(cell, name):
    result = cell.get("impls", {}).get(name) or {}
    if "median_ms" not in result or result.get("ok") is False:
        return None
    return result["median_ms"]


def _speedup(cell, over="jax"):
    """JAX's (or torch's) time over jax_cusolver_ms auto's: > 1 is faster than it."""
    ours, theirs = _median(cell, "jcm:auto"), _median(cell, over)
    return theirs / ours if ours and theirs else None


def _geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(cells: list[dict]) -> dict:
    per_op, per_dtype, below, batch1, skipped = {}, {}, [], [], []
    same = sum(1 for c in cells
               if (c.get("impls", {}).get("jcm:auto") or {}).get("same_program_as") == "jax")
    for c in cells:
        where = f"{c['op']} {c['dtype']} {c['batch']}x{c['n']}"
        if c.get("status") == "skipped":
            skipped.append(f"{where}: {c.get('note', '')}")
            continue
        s, t = _speedup(c), _speedup(c, "torch")
        if s is None:
            continue
        entry = per_op.setdefault(f"{c['op']} {c['dtype']}", {
            "op": c["op"], "dtype": c["dtype"], "vs_jax": [], "vs_torch": []})
        entry["vs_jax"].append(s)
        if t:
            entry["vs_torch"].append(t)
        per_dtype.setdefault(c["dtype"], []).append(s)
        picks = (c.get("explain") or {}).get("strategy")
        if s < PARITY:
            below.append({"cell": where, "speedup": s, "auto_picks": picks,
                          "parity": picks == "xla", "same_program": c.get("same_program"),
                          "reference": bench.REFERENCE_IS_OTHER.get(c["op"])})
        if c["batch"] == 1:
            batch1.append((s, c["op"] in bench.REFERENCE_IS_OTHER))
    ops = [{"op": e["op"], "dtype": e["dtype"], "cells": len(e["vs_jax"]),
            "geomean_vs_jax": _geomean(e["vs_jax"]), "min_vs_jax": min(e["vs_jax"]),
            "max_vs_jax": max(e["vs_jax"]), "geomean_vs_torch": _geomean(e["vs_torch"])}
           for e in per_op.values()]
    return {"per_op": ops,
            "geomean_vs_jax": {d: _geomean(v) for d, v in per_dtype.items()},
            "cells_below_parity": below, "parity_bar": PARITY,
            "batch1_min_vs_jax": min(b for b, _ in batch1) if batch1 else None,
            # Over the ops JAX has (the others' JAX column is another algorithm).
            "batch1_min_vs_jax_same_op": min((b for b, other in batch1 if not other),
                                             default=None),
            "skipped": skipped, "same_program_cells": same}


def _x(value):
    return f"{value:.2f}x" if value else "-"


def summary_markdown(summary: dict, env: dict, figures: dict, plot_note: str | None) -> str:
    lines = [f"## jax-cusolver-ms vs JAX: {env['gpu']} (driver {env['driver']}), "
             f"jax {env['versions'].get('jax')}", "",
             "Speed-up = JAX's time / jax-cusolver-ms `auto`'s (device-side, median of repeats); "
             "vs torch likewise with torch.linalg's time.", "",
             "| op | dtype | cells | geomean vs JAX | min | max | geomean vs torch |",
             "|---|---|---|---|---|---|---|"]
    for e in summary["per_op"]:
        lines.append(f"| {e['op']} | {e['dtype']} | {e['cells']} | {_x(e['geomean_vs_jax'])} | "
                     f"{_x(e['min_vs_jax'])} | {_x(e['max_vs_jax'])} | "
                     f"{_x(e['geomean_vs_torch'])} |")
    lines += ["", "Geometric mean over the grid: " + ", ".join(
        f"{d} **{_x(g)}**" for d, g in summary["geomean_vs_jax"].items()) + ".",
        f"Batch-1 cells: lowest speed-up {_x(summary['batch1_min_vs_jax'])}"
        + (f" ({_x(summary['batch1_min_vs_jax_same_op'])} over the ops JAX has)"
           if summary.get("batch1_min_vs_jax_same_op") not in (None,
                                                               summary["batch1_min_vs_jax"])
           else "") + ".", ""]
    if summary.get("same_program_cells"):
        lines += [f"Cells where `auto` runs the very program JAX compiles (JAX's own lowering, "
                  f"nothing of ours around it): {summary['same_program_cells']}, timed once and "
                  "at 1.00x by construction.", ""]
    below = summary["cells_below_parity"]
    parity = sum(1 for b in below if b["parity"])
    other = sum(1 for b in below if not b["parity"] and b.get("reference"))
    lines.append(f"Cells below {summary['parity_bar']}x of JAX: {len(below) or 'none'}"
                 + (f" ({parity} where `auto` runs JAX's own lowering, {other} where JAX's "
                    f"column is another algorithm, {len(below) - parity - other} other)"
                    if below else "") + ".")
    same = sum(1 for b in below if b.get("same_program"))
    if same:
        lines.append(f"Of these, {same} run the very program JAX compiles (the same kernels: "
                     "the gap is the timer's noise).")
    for b in below:
        if b.get("same_program"):
            why = " (auto runs JAX's own lowering: the same compiled program, timer noise)"
        elif b["parity"] and b.get("same_program") is False:
            why = (" (auto runs JAX's own lowering inside this project's non-finite-input "
                   "guard: one more kernel)")
        elif b["parity"]:
            why = (" (auto picks JAX's own lowering: the gap is noise, or this project's "
                   "non-finite-input guard around it where the op has one)")
        else:
            why = f" (auto picks {b['auto_picks']}" + (f"; {b['reference']})"
                                                        if b.get("reference") else ")")
        lines.append(f"- {b['cell']}: {b['speedup']:.2f}x{why}")
    lines += ["", f"Skipped cells: {len(summary['skipped']) or 'none'}."]
    lines += [f"- {s}" for s in summary["skipped"]]
    lines.append("")
    if plot_note:
        lines += [f"Figures: none ({plot_note}).", ""]
    elif figures:
        lines.append("Figures:")
        for op, files in figures.items():
            lines.append(f"- {op}: " + ", ".join(f"[{os.path.basename(f)}]({os.path.basename(f)})"
                                                  for f in files))
        lines.append("")
    return "\n".join(lines) + "\n"


# --- figures --------------------------------------------------------------------------------------

def _import_pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return None, (f"matplotlib is not importable ({exc}); install the bench extra: "
                      "pip install -e '.[bench]'")
    return plt, None


def plot(cells: list[dict], out: str, stem: str, plt) -> dict:
    """Per op: a speed-up heat map (batch x n, one panel per dtype) and time against n (one
    panel per dtype x batch, one line per implementation). Returns {op: [files]}."""
    import numpy as np

    figures = {}
    for op in dict.fromkeys(c["op"] for c in cells):
        mine = [c for c in cells if c["op"] == op]
        dtypes = list(dict.fromkeys(c["dtype"] for c in mine))
        batches = sorted({c["batch"] for c in mine})
        sizes = sorted({c["n"] for c in mine})
        files = []

        size = (1.1 * len(sizes) + 2.5, 0.7 * len(batches) + 2)
        fig, axes = plt.subplots(1, len(dtypes), figsize=size, squeeze=False)
        for ax, dtype in zip(axes[0], dtypes):
            grid = np.full((len(batches), len(sizes)), np.nan)
            for c in mine:
                if c["dtype"] == dtype and (s := _speedup(c)):
                    grid[batches.index(c["batch"]), sizes.index(c["n"])] = s
            image = ax.imshow(np.log2(grid), cmap="RdBu", vmin=-4, vmax=4, origin="lower",
                              aspect="auto")
            for (i, j), s in np.ndenumerate(grid):
                ax.text(j, i, "-" if np.isnan(s) else f"{s:.2g}", ha="center", va="center",
                        fontsize=7)
            ax.set_xticks(range(len(sizes)), [str(n) for n in sizes])
            ax.set_yticks(range(len(batches)), [str(b) for b in batches])
            ax.set_xlabel("n")
            ax.set_ylabel("batch")
            ax.set_title(f"{op} {dtype}: speed-up over JAX")
        fig.colorbar(image, ax=axes[0].tolist(), label="log2 speed-up (auto vs JAX)")
        files.append(os.path.join(out, f"{stem}_{op}_speedup.png"))
        fig.savefig(files[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)

        names = list(dict.fromkeys(k for c in mine for k in c["impls"]))
        fig, axes = plt.subplots(len(dtypes), len(batches), squeeze=False, sharex=True,
                                 figsize=(3.2 * len(batches), 2.8 * len(dtypes)))
        for row, dtype in enumerate(dtypes):
            for col, batch in enumerate(batches):
                ax = axes[row][col]
                for name in names:
                    points = sorted((c["n"], t) for c in mine
                                    if c["dtype"] == dtype and c["batch"] == batch
                                    and (t := _median(c, name)))
                    if points:
                        ax.plot(*zip(*points), marker="o", markersize=3,
                                label=name.replace("jcm:", "jcm "),
                                linewidth=2 if name in ("jax", "jcm:auto") else 1)
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_title(f"{op} {dtype} batch {batch}", fontsize=9)
                ax.set_xlabel("n")
                ax.set_ylabel("ms")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=max(1, len(labels)), fontsize=8)
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        files.append(os.path.join(out, f"{stem}_{op}_times.png"))
        fig.savefig(files[-1], dpi=110)
        plt.close(fig)
        figures[op] = files
    return figures


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
    p = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", type=bench._list, default=None,
                   help=f"comma-separated, from {','.join(bench.OPS)} (default: all)")
    p.add_argument("--dtypes", type=bench._list, default=None, help="default: float32,float64")
    p.add_argument("--batches", type=_ints, default=None,
                   help="default: " + ",".join(map(str, BATCHES)))
    p.add_argument("--sizes", type=_ints, default=None,
                   help="matrix orders n (default: " + ",".join(map(str, SIZES)) + ")")
    p.add_argument("--strategies", type=bench._list, default=None,
                   help="jax_cusolver_ms strategies timed beside auto, STRATEGY[:LANES] "
                        "(default: " + ",".join(STRATEGIES) + ")")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--min-repeats", type=int, default=None,
                   help="timed calls of an impl whose one call takes over 4 s (benchmarks.bench "
                        "--min-repeats; default 3). H100 grid: such calls vary by 3%% (median "
                        "spread), so the slow cells of a long grid may take 2")
    p.add_argument("--jax-limit-s", type=float, default=JAX_LIMIT_S,
                   help="skip cells beyond one where JAX took longer per call (default 20)")
    p.add_argument("--max-input-gb", type=float, default=8.0)
    p.add_argument("--quick", action="store_true",
                   help="a GPU smoke check, under two minutes on an H100: "
                        + ", ".join(f"{k} {','.join(map(str, v)) if isinstance(v, tuple) else v}"
                                    for k, v in QUICK.items()))
    p.add_argument("--cpu-smoke", action="store_true",
                   help="a check of the report without a GPU, under a minute")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--budget-s", type=float, default=None,
                   help="start no cell after this many seconds; the figures and summary then "
                        "cover the cells done, and --resume goes on with the rest (0 with "
                        "--resume: measure nothing, write the summary and figures again)")
    p.add_argument("--render", nargs="+", default=None, metavar="JSON",
                   help="measure nothing: merge these runs' cells (later files win) and write "
                        "the summary, Markdown and figures to --out as --tag")
    p.add_argument("--redo-below", type=float, default=None, metavar="R",
                   help="with --resume: measure again the cells whose speed-up over JAX was "
                        "under R (cells whose auto plan changed are measured again anyway)")
    p.add_argument("--redo-ops", type=bench._list, default=None, metavar="OPS",
                   help="with --resume: measure again every cell of these ops")
    p.add_argument("--redo-max-n", type=int, default=None, metavar="N",
                   help="with --redo-ops: only their cells up to this n (e.g. a new kernel's)")
    p.add_argument("--redo-min-n", type=int, default=None, metavar="N",
                   help="with --redo-ops: only their cells from this n on")
    p.add_argument("--redo-batches", type=_ints, default=None, metavar="B,...",
                   help="with --redo-ops: only their cells at these batch sizes")
    p.add_argument("--shard", type=_shard, default=None, metavar="K/N",
                   help="measure every N-th cell of the grid from the K-th (0-based) only, e.g. "
                        "one process per GPU of a host (benchmarks/plans/device_call.sh grid_sharded); "
                        "--render merges the shards' files, the newest version of a cell winning")
    p.add_argument("--out", default=os.path.join("benchmarks", "results"))
    p.add_argument("--tag", default=None, help="file-name prefix (default: report-<timestamp>)")
    p.add_argument("--resume", nargs="?", const=True, default=None, metavar="JSON",
                   help="keep the cells an earlier run finished (errors are re-run): the JSON "
                        "given, or without one the output file of --tag; a long grid can run "
                        "in several sessions")
    args = p.parse_args(argv)
    if args.resume is True and not args.tag:
        p.error("--resume without a file needs --tag (the run to go on with)")
    preset = SMOKE if args.cpu_smoke else QUICK if args.quick else {}
    args.ops = args.ops or list(preset.get("ops", bench.OPS))
    args.dtypes = args.dtypes or list(preset.get("dtypes", bench.DTYPES))
    args.batches = args.batches or list(preset.get("batches", BATCHES))
    args.sizes = args.sizes or list(preset.get("sizes", SIZES))
    args.strategies = args.strategies or list(preset.get("strategies", STRATEGIES))
    if "auto" not in args.strategies:
        args.strategies.insert(0, "auto")  # the speed-ups are auto's
    args.repeats = args.repeats or preset.get("repeats")
    if args.tag is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", args.tag):
        p.error("--tag may hold letters, digits, '.', '_' and '-' only")

    # The knobs the cells share with benchmarks.bench, validated by its parser.
    forwarded = ["--ops", ",".join(args.ops), "--dtypes", ",".join(args.dtypes),
                 "--strategies", ",".join(args.strategies),
                 "--shapes", ",".join(f"{b}x{n}" for b in args.batches for n in args.sizes),
                 "--max-input-gb", str(args.max_input_gb), "--out", args.out]
    forwarded += ["--repeats", str(args.repeats)] if args.repeats else []
    forwarded += ["--min-repeats", str(args.min_repeats)] if args.min_repeats else []
    forwarded += ["--jax-limit-s", str(args.jax_limit_s)]
    forwarded += ["--no-torch"] if args.no_torch or args.cpu_smoke else []
    forwarded += ["--cpu-smoke"] if args.cpu_smoke else []
    return args, bench.parse_args(forwarded)


def main(argv=None) -> int:
    args, bench_args = parse_args(argv)
    if args.render:
        return render(args)
    torch, torch_note = bench._import_torch(bench_args)
    env = bench.environment(torch)
    if torch_note:
        env["torch_skipped"] = torch_note
    print(f"# report: {env['gpu']} (driver {env['driver']}), jax backend {env['jax_backend']}, "
          f"timer: {bench.TIMER}" + (f"; torch skipped: {torch_note}" if torch_note else ""),
          flush=True)
    if env["jax_backend"] != "gpu":
        print("# no GPU: the times are JAX's CPU fallback, a check of the report, not of speed",
              flush=True)
    plt, plot_note = (None, "--no-plots") if args.no_plots else _import_pyplot()
    if plot_note and not args.no_plots:
        print(f"# WARNING: {plot_note}: no figures", flush=True)

    stem = _stem(args.tag or "report-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"),
                 env["gpu"])
    json_path = os.path.join(args.out, stem + ".json")
    md_path = os.path.join(args.out, stem + ".md")
    run_args = {k: v for k, v in vars(args).items()}
    run_args["lanes"] = bench_args.lanes  # what build_table reads
    started = time.perf_counter()

    def write(cells, total, figures=None):
        # Rewritten after every cell: a run cut short still leaves every finished cell behind.
        return write_report(args.out, stem, env, run_args, cells, total, figures or {},
                            plot_note, seconds=round(time.perf_counter() - started, 1))

    done = []
    resume_path = json_path if args.resume is True else args.resume
    if resume_path and os.path.exists(resume_path):
        with open(resume_path) as f:
            earlier = json.load(f)
        if earlier["environment"].get("gpu") != env["gpu"]:
            print(f"# not resuming {resume_path}: measured on {earlier['environment'].get('gpu')}",
                  flush=True)
        else:
            done = earlier["cells"]
            run_args.update(_union_axes([earlier["args"], run_args]))  # the whole report's
            print(f"# resuming {resume_path}: {len(done)} cells done before", flush=True)
    cells = run_grid(args, bench_args, torch, write, done)
    figures = plot(cells, args.out, stem, plt) if plt is not None else {}
    grid = {(op, d, b, n) for op in args.ops for d in args.dtypes for b in args.batches
            for n in args.sizes}
    total = len(grid | {(c["op"], c["dtype"], c["batch"], c["n"]) for c in done})
    summary = write(cells, total, figures)
    print(f"\n# wrote {json_path}, {md_path}"
          + (f" and {sum(len(f) for f in figures.values())} figures" if figures else "")
          + f" ({time.perf_counter() - started:.0f} s)\n")
    print(summary_markdown(summary, env, figures, plot_note), flush=True)
    return 1 if bench.failures(cells) else 0


def render(args) -> int:
    """--render FILE [FILE ...]: the summary, the Markdown and the figures of earlier runs, their
    cells merged (a later file's cell replaces an earlier one's), written to --out as --tag:
    nothing is measured, so it runs anywhere (the runs' GPU and versions are kept)."""
    docs = []
    for path in args.render:
        with open(path) as f:
            docs.append(json.load(f))
    gpus = {d["environment"].get("gpu") for d in docs}
    if len(gpus) != 1:
        raise SystemExit(f"report --render: runs of one GPU only, got {sorted(map(str, gpus))}")
    env, run_args = docs[-1]["environment"], dict(docs[-1]["args"])
    run_args.update(_union_axes([d["args"] for d in docs]))  # the runs may have covered parts
    merged = {}
    for doc in docs:
        for c in doc["cells"]:
            # The most recently measured version of a cell (shards of one run each carry the
            # others' cells as they were before it); equal or unknown times: the later file's.
            key = (c["op"], c["dtype"], c["batch"], c["n"])
            if c.get("measured_at", 0) >= merged.get(key, {}).get("measured_at", 0):
                merged[key] = c
    grid = [(op, d, b, n) for op in run_args["ops"] for d in run_args["dtypes"]
            for b in run_args["batches"] for n in run_args["sizes"]]
    order = {key: i for i, key in enumerate(grid)}
    cells = sorted(merged.values(), key=lambda c: order.get(
        (c["op"], c["dtype"], c["batch"], c["n"]), len(order)))
    total = len(set(grid) | set(merged))
    plt, plot_note = (None, "--no-plots") if args.no_plots else _import_pyplot()
    stem = _stem(args.tag or "report", env["gpu"])
    os.makedirs(args.out, exist_ok=True)
    if plt is not None:
        figures = plot(cells, args.out, stem, plt)
    else:  # figures of this tag already in --out (drawn on the machine that ran the cells)
        figures = {}
        for op in dict.fromkeys(c["op"] for c in cells):
            files = [os.path.join(args.out, f"{stem}_{op}_{kind}.png")
                     for kind in ("speedup", "times")]
            if all(os.path.exists(f) for f in files):
                figures[op] = files
        plot_note = None if figures else plot_note
    summary = write_report(args.out, stem, env, run_args, cells, total, figures, plot_note,
                           rendered_from=[str(p) for p in args.render])
    print(summary_markdown(summary, env, figures, plot_note))
    return 0


def _union_axes(runs_args) -> dict:
    """The grid axes of several runs' args, each the union in first-seen order."""
    return {axis: list(dict.fromkeys(v for a in runs_args for v in a.get(axis, ())))
            for axis in ("ops", "dtypes", "batches", "sizes")}


def _stem(tag: str, gpu) -> str:
    return f"{tag}_{re.sub(r'[^A-Za-z0-9.-]+', '-', str(gpu)).strip('-') or 'unknown'}"


def write_report(out, stem, env, run_args, cells, total, figures, plot_note, **extra) -> dict:
    """<out>/<stem>.json (environment, args, summary, every cell, `extra`) and <stem>.md (the
    summary, then the full table and any failures). Returns the summary."""
    os.makedirs(out, exist_ok=True)
    summary = summarize(cells)
    doc = {"environment": env, "args": run_args, "summary": summary, "cells": cells,
           "figures": figures, "complete": len(cells) == total, **extra}
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out, stem + ".md"), "w") as f:
        f.write(summary_markdown(summary, env, figures, plot_note))
        if len(cells) < total:
            f.write(f"\n(partial: {len(cells)} of {total} cells)\n")
        f.write("\n" + bench.markdown(cells, env, run_args.get("strategies") or ["auto"]))
        notes = bench.failures(cells)
        if notes:
            f.write("\nFailures:\n\n" + "".join(f"- {n}\n" for n in notes))
    return summary


if __name__ == "__main__":
    sys.exit(main())
