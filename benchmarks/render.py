"""The report's presentation: the compact report.json, report.md, the figures and the generated
docs/benchmarks.md, all from measured cells. Nothing here measures: it runs without a GPU.

benchmarks.report calls it after a run and for `--render` (report.json or older result files in,
the report out).
"""
from __future__ import annotations

import glob
import io
import json
import math
import os
import re
import tomllib

from . import bench, jax_lowering, matmul as _matmul, random_shapes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "benchmarks", "results")
DOCS_PAGE = os.path.join(ROOT, "docs", "benchmarks.md")
GRIDS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grids.toml")
TINY_MAX_N = 4  # the tiny-matrix section: square cells up to this n
FORMAT = 1
PARITY = 0.95  # the bar: no cell below this fraction of JAX's speed
LOW = 0.90  # the random part counts the shapes below this too: clearly slower, not noise
FIGURE_DPI = 90


# --- the GPU's folder ---------------------------------------------------------------------------

def gpu_model(gpu: str) -> str:
    """A GPU's folder name under benchmarks/results/: "NVIDIA H100 80GB HBM3" -> "H100",
    "NVIDIA H100 PCIe" -> "H100-PCIe", "NVIDIA A100-SXM4-80GB" -> "A100"."""
    text = str(gpu).replace("NVIDIA", " ")
    match = re.search(r"\b([A-Z]+\d+[A-Za-z]*)", text)
    if not match:
        return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "unknown"
    return match.group(1) + ("-PCIe" if "PCIe" in text else "")


# --- compact JSON -------------------------------------------------------------------------------

def _sig(value, digits=4):
    """value rounded to `digits` significant digits (a float), or as it is."""
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        return float(f"{value:.{digits}g}")
    return value


_IMPL_KEYS = ("median_ms", "min_ms", "error", "ok", "rounds", "same_program_as", "failed",
              "over_limit_ms", "estimated")
_MATMUL_IMPL_KEYS = ("median_ms", "min_ms", "tflops", "error_vs_xla", "ok", "failed")


def _short_text(text, limit=300):
    text = str(text)
    return text if len(text) <= limit else text[:limit] + " ..."


def compact_cell(cell: dict) -> dict:
    """A square cell or a random shape without its raw samples: per implementation the median
    and min ms, the error and the check; what `auto` picked; the bar its answers were held to."""
    out = {k: cell[k] for k in ("index", "op", "dtype", "batch", "m", "n", "nrhs", "status",
                                "bytes") if k in cell}
    if cell.get("note"):
        out["note"] = _short_text(cell["note"])
    impls = {}
    for name, result in cell.get("impls", {}).items():
        kept = {}
        for key in _IMPL_KEYS:
            if key in result:
                value = result[key]
                kept[key] = (_short_text(value) if key == "failed"
                             else _sig(value, 2) if key == "error" else _sig(value))
        # JAX's first call decides whether larger cells are skipped (--jax-limit-s).
        if name == "jax" and "probe_ms" in result:
            kept["probe_ms"] = _sig(result["probe_ms"], 3)
        impls[name] = kept
    out["impls"] = impls
    plan = cell.get("explain") or {}
    if plan:
        out["explain"] = {k: plan[k] for k in ("strategy", "lanes", "failed") if k in plan}
    if "error_bar" in cell:
        out["error_bar"] = _sig(cell["error_bar"], 3)
    if cell.get("same_program") is not None:
        out["same_program"] = cell["same_program"]
    if "measured_at" in cell:
        out["measured_at"] = int(cell["measured_at"])
    if "seconds" in cell:
        out["seconds"] = round(float(cell["seconds"]), 1)
    return out


def compact_row(row: dict) -> dict:
    """A matmul cell without its raw samples."""
    out = {k: row[k] for k in ("cell", "kind", "dtype", "m", "k", "n", "batch", "epilogue",
                                "flops", "size_class", "peak_tflops") if k in row}
    out["impls"] = {name: {k: (_sig(r[k], 2) if k == "error_vs_xla" else
                               _short_text(r[k]) if k == "failed" else _sig(r[k]))
                           for k in _MATMUL_IMPL_KEYS if k in r}
                    for name, r in row.get("impls", {}).items()}
    for key in ("speed_vs_xla", "meets_bar", "measured_at", "seconds"):
        if key in row:
            out[key] = _sig(row[key]) if key == "speed_vs_xla" else row[key]
    return out


_ENV_KEYS = ("date", "gpu", "driver", "device_kind", "device_count", "jax_backend", "python",
             "platform", "timer", "jcm_gpu_available", "jcm_import_error", "torch_skipped",
             "versions")


def compact_env(env: dict) -> dict:
    return {k: env[k] for k in _ENV_KEYS if k in env}


def dumps(doc) -> str:
    """JSON with one cell a line: readable, and a small diff when a report is replaced."""
    def walk(value, indent):
        pad = " " * indent
        if isinstance(value, dict) and value:
            items = [f'{pad} {json.dumps(k)}: {walk(v, indent + 1).lstrip()}'
                     for k, v in value.items()]
            return pad + "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            items = [pad + " " + json.dumps(v, separators=(",", ":")) for v in value]
            return pad + "[\n" + ",\n".join(items) + "\n" + pad + "]"
        return pad + json.dumps(value)
    return walk(doc, 0) + "\n"


# --- the summary --------------------------------------------------------------------------------

def _median(cell, name):
    result = cell.get("impls", {}).get(name) or {}
    if "median_ms" not in result or result.get("ok") is False:
        return None
    return result["median_ms"]


def speedup(cell, over="jax"):
    """JAX's (or torch's) time over jax_cusolver_ms auto's: > 1 is faster than it."""
    ours, theirs = _median(cell, "jcm:auto"), _median(cell, over)
    return theirs / ours if ours and theirs else None


ENABLED_IMPL = f"jcm:{bench.ENABLED}"


def enabled_speedup(cell):
    """JAX's time over its own code's under jax_cusolver_ms.enable(): > 1 is faster."""
    enabled, theirs = _median(cell, ENABLED_IMPL), _median(cell, "jax")
    return theirs / enabled if enabled and theirs else None


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _loop_ranges(cells_of: dict) -> list[dict]:
    """{op: {(batch, n)}} -> [{"ops", "batches": [lo, hi], "sizes": [lo, hi]}]: the ops grouped
    by the ranges of batch and n their cells span."""
    groups = {}
    for op, cells in cells_of.items():
        batches, sizes = [b for b, _ in cells], [n for _, n in cells]
        groups.setdefault((min(batches), max(batches), min(sizes), max(sizes)), []).append(op)
    return [{"ops": ops, "batches": [b0, b1], "sizes": [n0, n1]}
            for (b0, b1, n0, n1), ops in groups.items()]


def summarize(cells: list[dict]) -> dict:
    """Per op and dtype the geometric mean, min and max speed-up over JAX (and torch's), the
    cells below PARITY with what `auto` picked there, the batch-1 minimum and the skipped cells;
    per dtype the geometric mean over the cells where JAX's lowering loops over the matrices
    (jax_lowering.jax_loops) and only the strategy differs (bench.strategy_against_jax), their
    count and the ranges of batch and n they span."""
    per_op, per_dtype, below, batch1, skipped = {}, {}, [], [], []
    loops, loops_at = {}, {}
    same = sum(1 for c in cells
               if (c.get("impls", {}).get("jcm:auto") or {}).get("same_program_as") == "jax")
    for c in cells:
        where = f"{c['op']} {c['dtype']} {c['batch']}x{c['n']}"
        if c.get("status") == "skipped":
            skipped.append(f"{where}: {c.get('note', '')}")
            continue
        s, t = speedup(c), speedup(c, "torch")
        if s is None:
            continue
        entry = per_op.setdefault(f"{c['op']} {c['dtype']}", {
            "op": c["op"], "dtype": c["dtype"], "vs_jax": [], "vs_torch": []})
        entry["vs_jax"].append(s)
        if t:
            entry["vs_torch"].append(t)
        per_dtype.setdefault(c["dtype"], []).append(s)
        if (bench.strategy_against_jax(c["op"])
                and jax_lowering.jax_loops(c["op"], c["dtype"], c["batch"], c["n"])):
            loops.setdefault(c["dtype"], []).append(s)
            loops_at.setdefault(c["op"], set()).add((c["batch"], c["n"]))
        picks = (c.get("explain") or {}).get("strategy")
        if s < PARITY:
            below.append({"cell": where, "speedup": s, "auto_picks": picks,
                          "parity": picks == "xla", "same_program": c.get("same_program"),
                          "reference": bench.REFERENCE_IS_OTHER.get(c["op"])})
        if c["batch"] == 1:
            batch1.append((s, c["op"] in bench.REFERENCE_IS_OTHER))
    ops = [{"op": e["op"], "dtype": e["dtype"], "cells": len(e["vs_jax"]),
            "geomean_vs_jax": geomean(e["vs_jax"]), "min_vs_jax": min(e["vs_jax"]),
            "max_vs_jax": max(e["vs_jax"]), "geomean_vs_torch": geomean(e["vs_torch"])}
           for e in per_op.values()]
    return {"per_op": ops,
            "geomean_vs_jax": {d: geomean(v) for d, v in per_dtype.items()},
            "jax_loops": {"geomean_vs_jax": {d: geomean(loops.get(d, [])) for d in per_dtype},
                          "cells": {d: len(loops.get(d, [])) for d in per_dtype},
                          "where": _loop_ranges(loops_at)},
            "cells_below_parity": below, "parity_bar": PARITY,
            "batch1_min_vs_jax": min(b for b, _ in batch1) if batch1 else None,
            # Over the ops JAX has (the others' JAX column is another algorithm).
            "batch1_min_vs_jax_same_op": min((b for b, other in batch1 if not other),
                                             default=None),
            "skipped": skipped, "same_program_cells": same}


def summarize_matmul(rows: list[dict]) -> dict:
    ratios = [r["speed_vs_xla"] for r in rows if r.get("speed_vs_xla")]
    return {"cells": len(rows), "geomean_vs_xla": geomean(ratios),
            "min_vs_xla": min(ratios, default=None), "max_vs_xla": max(ratios, default=None),
            "missing_the_bar": [r["cell"] for r in rows if not r.get("meets_bar")]}


def summarize_random(shapes: list[dict]) -> dict:
    """The random part's summary: over the shapes measured, the geometric mean of the speed-up
    over JAX, every shape below PARITY (slowest first, with what `auto` picked) and how many are
    below LOW; the skipped shapes with the reason; the number of failures."""
    speedups, below, skipped = [], [], []
    for c in shapes:
        if c.get("status") == "skipped":
            skipped.append(f"{cell_name(c)}: {c.get('note', '')}")
            continue
        s = speedup(c)
        if s is None:
            continue
        speedups.append(s)
        if s < PARITY:
            below.append({"index": c["index"], "shape": cell_name(c), "speedup": s,
                          "auto_picks": picks(c), "same_program": c.get("same_program")})
    return {"shapes": len(shapes), "measured": len(speedups),
            "geomean_vs_jax": geomean(speedups), "min_vs_jax": min(speedups, default=None),
            "parity_bar": PARITY, "below_parity": sorted(below, key=lambda b: b["speedup"]),
            "low_bar": LOW, "below_low_bar": sum(1 for s in speedups if s < LOW),
            "skipped": skipped, "failures": len(failures(shapes))}


def cell_name(cell: dict) -> str:
    """"op dtype BxN" of a square cell, random_shapes.label of a random one."""
    if "m" in cell:
        return random_shapes.label(cell)
    return f"{cell['op']} {cell['dtype']} {cell['batch']}x{cell['n']}"


# The implementations timed beside ours whose failures are theirs (PyTorch's eigh of 10^6 3 x 3
# matrices asks for 250 GB): listed apart, and no failure of the run.
PEERS = ("torch", bench.HOST)


def failures(cells: list[dict], peers: bool = False) -> list[str]:
    """One line per failure of this package, JAX or the runner (with `peers`, of PEERS only
    instead); the same error message in several places is listed once."""
    wrong, errors = [], {}
    for c in cells:
        where = cell_name(c)
        if c.get("status") == "error" and "note" in c and not c["impls"] and not peers:
            errors.setdefault(c["note"].splitlines()[0][:300], []).append(where)
        for name, r in c["impls"].items():
            if (name in PEERS) != peers:
                continue
            if "failed" in r:
                message = (r["failed"].splitlines() or [""])[0][:300]
                errors.setdefault(message, []).append(f"{where} {name}")
            elif r.get("ok") is False:
                wrong.append(f"WRONG {where} {name}: error {r['error']:.3g} > "
                             f"{c['error_bar']:.3g}")
    notes = wrong
    for message, places in errors.items():
        more = f" (and {len(places) - 1} more)" if len(places) > 1 else ""
        notes.append(f"ERROR {places[0]}{more}: {message}")
    return notes


# --- Markdown -----------------------------------------------------------------------------------

def _x(value):
    return f"{value:.2f}x" if value else "-"


def _num(ms) -> str:
    """A time in ms: three significant digits, no exponent."""
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def _speed(value) -> str:
    return f"{value:.0f}x" if value >= 100 else f"{value:.1f}x" if value >= 10 else \
        f"{value:.2f}x"


def round_floats(value, digits=4):
    """`value` with every float rounded to `digits` significant digits (for the JSON file)."""
    if isinstance(value, float):
        return _sig(value, digits)
    if isinstance(value, dict):
        return {k: round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [round_floats(v, digits) for v in value]
    return value


def _ms(result: dict | None, with_min: bool = False) -> str:
    if not result:
        return "-"
    if "failed" in result:
        return "error"
    if "over_limit_ms" in result:  # bench.measure_torch: one call over the limit, not timed
        return f"{'~' if result.get('estimated') else ''}{_num(result['over_limit_ms'] / 1e3)} s"
    text = _num(result["median_ms"])
    if with_min and "min_ms" in result:
        text += f" ({_num(result['min_ms'])})"
    if result.get("ok") is False:
        text += " (wrong)"
    return text


def picks(cell) -> str:
    """What `auto` ran, in words."""
    plan = cell.get("explain") or {}
    strategy, lanes = plan.get("strategy"), plan.get("lanes") or 1
    if strategy is None:
        return "-"
    if strategy == "xla":
        return "JAX's lowering"
    if strategy in ("looped", "batched") and lanes > 1:
        return f"{strategy}, {lanes} lanes"
    return strategy


def _span(lo, hi) -> str:
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def loops_lines(summary: dict, bold: str = "**") -> list[str]:
    """The geometric mean of the speed-up over the cells where JAX loops per matrix, per dtype
    with their count; which cells those are; the rule that says so. Nothing for a summary
    written before the report had them (--show of an older report.json)."""
    loops = summary.get("jax_loops")
    if loops is None:
        return []
    count = loops["cells"]
    means = ", ".join(f"{d} {bold}{_x(g)}{bold} over {count[d]} cell"
                      + ("" if count[d] == 1 else "s")
                      for d, g in loops["geomean_vs_jax"].items())
    where = "; ".join(f"{', '.join(w['ops'])} at batch {_span(*w['batches'])}, n "
                      f"{_span(*w['sizes'])}" for w in loops["where"]) or "none"
    return [f"Where JAX loops per matrix: {means}.", f"Those cells: {where}.",
            jax_lowering.RULE]


def per_op_markdown(summary: dict) -> str:
    lines = ["| op | dtype | cells | geomean vs JAX | min | max | geomean vs torch |",
             "|---|---|---|---|---|---|---|"]
    for e in summary["per_op"]:
        lines.append(f"| {e['op']} | {e['dtype']} | {e['cells']} | {_x(e['geomean_vs_jax'])} | "
                     f"{_x(e['min_vs_jax'])} | {_x(e['max_vs_jax'])} | "
                     f"{_x(e['geomean_vs_torch'])} |")
    return "\n".join(lines) + "\n"


def summary_markdown(summary: dict, env: dict, figures: dict, plot_note: str | None) -> str:
    """The summary: per op and dtype, over the grid, below parity, skipped; `figures` and
    `plot_note` (why there are none) are listed at the end."""
    batch1, batch1_same = summary["batch1_min_vs_jax"], summary.get("batch1_min_vs_jax_same_op")
    lines = ["Speed-up = JAX's time / jax-cusolver-ms `auto`'s (device-side, median of repeats); "
             "vs torch likewise with torch.linalg's time.", "", per_op_markdown(summary),
             "Geometric mean over the grid: " + ", ".join(
                 f"{d} {_x(g)}" for d, g in summary["geomean_vs_jax"].items()) + ".",
             f"Batch-1 cells: lowest speed-up {_x(batch1)}"
             + (f" ({_x(batch1_same)} over the ops JAX has)"
                if batch1_same not in (None, batch1) else "") + ".", ""]
    loops = loops_lines(summary)
    if loops:
        lines += [loops[0], " ".join(loops[1:]), ""]
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
            lines.append(f"- {op}: " + ", ".join(f"[{os.path.basename(f)}]({f})" for f in files))
        lines.append("")
    return "\n".join(lines) + "\n"


def _check(impls: dict) -> str:
    """A cell's check in words: the strategies whose answer was wrong or that failed, else ok
    and the largest error of ours."""
    wrong = [n.split(":", 1)[1] for n, r in impls.items() if r.get("ok") is False]
    failed = [n.replace("jcm:", "") for n, r in impls.items() if "failed" in r]
    check = []
    if wrong:
        check.append("WRONG " + ",".join(wrong))
    if failed:
        every = [n.replace("jcm:", "") for n in impls if n.startswith("jcm:")]
        if len(every) > 1 and all(n in failed for n in every):
            failed = ["all jcm"] + [n for n in failed if n not in every]
        check.append("ERR " + ",".join(failed))
    if not check:
        errs = [r["error"] for n, r in impls.items() if n.startswith("jcm:") and "error" in r]
        check.append(f"ok ({max(errs):.0e})" if errs else "no jcm")
    return "; ".join(check)


def cells_markdown(cells: list[dict], strategies) -> str:
    """The table of every square cell."""
    enabled = any(ENABLED_IMPL in c.get("impls", {}) for c in cells)
    host = any(bench.HOST in c.get("impls", {}) for c in cells)
    head = ["op", "dtype", "BxN", "jax", "jcm auto", "vs jax"] + (
        ["enabled vs jax"] if enabled else []) + ["auto picks", "best jcm", "torch"] + (
        ["scipy cpu"] if host else []) + ["check"]
    rows = []
    for c in cells:
        shape = f"{c['batch']}x{c['n']}"
        if c.get("status") == "skipped":
            rows.append([c["op"], c["dtype"], shape, "skipped: " + c.get("note", "")]
                        + [""] * (len(head) - 4))
            continue
        impls = c["impls"]
        jax_r, auto = impls.get("jax"), impls.get("jcm:auto")
        ratio = "-"
        if jax_r and auto and "median_ms" in jax_r and "median_ms" in auto:
            ratio = f"{jax_r['median_ms'] / auto['median_ms']:.2f}x"
        timed = [(r["median_ms"], name.split(":", 1)[1]) for name, r in impls.items()
                 if name.startswith("jcm:") and r.get("ok")]
        best = f"{min(timed)[1]} {_num(min(timed)[0])}" if timed else "-"
        plan = c.get("explain") or {}
        chosen = "-"
        if plan.get("strategy") is not None:
            chosen = str(plan["strategy"]) + (f"/{plan['lanes']}" if plan.get("lanes") else "")
        rows.append([c["op"], c["dtype"], shape, _ms(jax_r, True), _ms(auto, True), ratio]
                    + ([_x(enabled_speedup(c))] if enabled else [])
                    + [chosen, best, _ms(impls.get("torch"), True)]
                    + ([_ms(impls.get(bench.HOST), True)] if host else []) + [_check(impls)])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    floors = ", ".join(f"{d} {v:g}" for d, v in bench.ERROR_FLOOR.items())
    ops_here = {c["op"] for c in cells}
    own = [f"{o.name}: " + ", ".join(f"{d} {v:g}" for d, v in o.error_floor.items())
           for o in bench.OPS.values() if o.error_floor and o.name in ops_here]
    floors += f" ({'; '.join(own)})" if own else ""
    lines += ["", f"ms for the whole batch, median (min). Strategies timed: "
              f"{', '.join(strategies)}. 'best jcm': the fastest whose answer passed the check, "
              f"error <= max({bench.ERROR_RATIO:g} x JAX's error, {floors}); '(wrong)' marks a "
              "failed check; 'auto picks': jcm.explain()'s strategy/lanes."
              + (" 'enabled vs jax': JAX's own code compiled under jax_cusolver_ms.enable()."
                 if enabled else "")]
    return "\n".join(lines) + "\n"


def random_summary_line(part: dict) -> str:
    """N shapes, the seed, the geometric mean, the counts below PARITY and LOW."""
    args, s = part["args"], part["summary"]
    line = (f"{s['shapes']} shapes drawn with seed {args['seed']}: geometric mean of the "
            f"speed-up over JAX **{_x(s['geomean_vs_jax'])}** over {s['measured']} measured; "
            f"below {s['parity_bar']:.2f}x: {len(s['below_parity'])}, below {s['low_bar']:.2f}x: "
            f"{s['below_low_bar']}; skipped: {len(s['skipped'])}; failures: {s['failures']}.")
    if not part.get("complete"):
        line += f" **Partial: {s['shapes']} of {part.get('total', '?')} shapes.**"
    return line


def random_markdown(part: dict) -> str:
    """The random part: what was drawn, the summary line, the shapes below PARITY (slowest
    first), the skipped ones, then every shape in the order drawn."""
    args, s = part["args"], part["summary"]
    batch = f", batch up to {args['max_batch']}" if args.get("max_batch") else ""
    lines = [f"Shapes drawn by `benchmarks/random_shapes.py` from {', '.join(args['ops'])}; "
             f"{', '.join(args['dtypes'])}; n up to {args['max_n']}{batch}. Speed-up = JAX's "
             "time / jax-cusolver-ms `auto`'s.", "", random_summary_line(part), "",
             f"### Below {s['parity_bar']}x of JAX", ""]
    if s["below_parity"]:
        lines += ["| # | shape | speed-up | `auto` runs |", "|---|---|---|---|"]
        lines += [f"| {b['index']} | {b['shape']} | {b['speedup']:.2f}x | {b['auto_picks']}"
                  + (" (the very program JAX compiles)" if b.get("same_program") else "") + " |"
                  for b in s["below_parity"]]
    else:
        lines.append("None.")
    if s["skipped"]:
        lines += ["", "Skipped:"] + [f"- {k}" for k in s["skipped"]]
    enabled = any(ENABLED_IMPL in c.get("impls", {}) for c in part["shapes"])
    extra = " enabled vs jax |" if enabled else ""
    lines += ["", "### Every shape", "",
              "| # | op | dtype | batch | m x n | nrhs | jax | jcm auto | vs jax |" + extra
              + " auto runs | check |", "|---|---|---|---|---|---|---|---|---|" + "---|" * enabled
              + "---|---|"]
    for c in part["shapes"]:
        head = (f"| {c['index']} | {c['op']} | {c['dtype']} | {c['batch']} | {c['m']}x{c['n']} | "
                f"{c['nrhs'] if c['op'] in random_shapes.SOLVES else '-'} |")
        if c.get("status") == "skipped":
            lines.append(f"{head} skipped: {c.get('note', '')} | | | |" + " |" * enabled)
            continue
        impls = c["impls"]
        lines.append(f"{head} {_ms(impls.get('jax'), True)} | {_ms(impls.get('jcm:auto'), True)} "
                     f"| {_x(speedup(c))} |" + (f" {_x(enabled_speedup(c))} |" if enabled else "")
                     + f" {picks(c)} | {_check(impls)} |")
    lines += ["", "ms for the whole batch, median (min); 'check' as the grid's."]
    notes = failures(part["shapes"])
    if notes:
        lines += ["", "Failures:"] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _versions(env: dict) -> str:
    v = env.get("versions", {})
    libs = v.get("jax_cusolver_ms_libraries") or {}
    parts = [f"jax {v.get('jax')}"]
    if isinstance(libs.get("cusolver"), int):  # major * 1000 + minor * 100 + patch
        c = libs["cusolver"]
        parts.append(f"cuSOLVER {c // 1000}.{c % 1000 // 100}.{c % 100}")
    if isinstance(libs.get("cublas"), int):  # major * 10000 + minor * 100 + patch
        c = libs["cublas"]
        parts.append(f"cuBLAS {c // 10000}.{c % 10000 // 100}.{c % 100}")
    if env.get("driver"):
        parts.append(f"driver {env['driver']}")
    if v.get("torch"):
        parts.append(f"PyTorch {v['torch']}")
    return ", ".join(parts)


def headline_rows(cells: list[dict], names) -> list[dict]:
    """The cells named "op dtype BxN" that were measured, with their speed-ups."""
    by_name = {f"{c['op']} {c['dtype']} {c['batch']}x{c['n']}": c for c in cells}
    rows = []
    for name in names:
        c = by_name.get(name)
        if c is None or speedup(c) is None:
            continue
        rows.append({"cell": name, "op": c["op"], "dtype": c["dtype"],
                     "shape": f"{c['batch']} x {c['n']}", "jax_ms": _median(c, "jax"),
                     "ours_ms": _median(c, "jcm:auto"), "speedup": speedup(c),
                     "torch_ms": _median(c, "torch"), "picks": picks(c)})
    return rows


def headline_markdown(rows: list[dict]) -> str:
    if not rows:
        return ""
    lines = ["| op | dtype | B x n | JAX ms | jax-cusolver-ms ms | speed-up | `auto` runs | "
             "PyTorch ms |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        torch = _num(r["torch_ms"]) if r["torch_ms"] else "-"
        lines.append(f"| {r['op']} | {r['dtype']} | {r['shape']} | {_num(r['jax_ms'])} | "
                     f"{_num(r['ours_ms'])} | **{_speed(r['speedup'])}** | {r['picks']} | "
                     f"{torch} |")
    return "\n".join(lines) + "\n"


def matmul_brief_markdown(rows: list[dict]) -> str:
    lines = ["| cell | XLA TFLOP/s | jax-cusolver-ms TFLOP/s | jcm / XLA | torch TFLOP/s |",
             "|---|---|---|---|---|"]
    for r in rows:
        impls = r["impls"]
        ratio = f"{r['speed_vs_xla']:.2f}x" if r.get("speed_vs_xla") else "-"
        lines.append(f"| {r['cell']} | {_matmul._tf(impls.get('xla'))} | "
                     f"{_matmul._tf(impls.get('jcm'))} | {ratio} | "
                     f"{_matmul._tf(impls.get('torch'))} |")
    return "\n".join(lines) + "\n"


def _mib(value) -> str:
    return "-" if value is None else f"{value / 2**20:.3g}"


def sharded_row(row: dict) -> str:
    cells = [f"{row['op']} {row['batch']}x{row['n']}"]
    for label in ("ours", "jax"):
        r = row[label]
        if "failed" in r:
            cells += ["failed: " + r["failed"][:60], "", "", "", ""]
            continue
        share = r.get("share")  # absent from parts written before it was measured
        cells += [f"{r['one']['ms']:.3g} / {r['sharded']['ms']:.3g}", f"{r['speedup']:.2f}x",
                  f"{share['ms']:.3g} ({r['efficiency']:.2f})" if share else "-",
                  str(sum(r["sharded"]["collectives"].values())),
                  f"{_mib(r['one']['device_bytes'])} / {_mib(r['sharded']['device_bytes'])}"]
    return "| " + " | ".join(cells) + " |"


def _run_dates(part: dict) -> str:
    """When the rows were measured: the run's date, or each row's where they come from several
    runs (report.merged_sharded)."""
    dates = sorted({r["date"] for r in part["rows"] if r.get("date")})
    if len(dates) <= 1:
        return dates[0] if dates else part.get("environment", {}).get("date", "?")
    return ", ".join(dates) + " (each row's in its own run)"


def sharded_markdown(part: dict) -> str:
    """benchmarks.sharded's table: one device against the batch sharded over all."""
    count = part["devices"]
    env = part.get("environment", {})
    head = (f"| op, B x n | ours 1 / {count} devices ms | ours speed-up | ours B/{count} on 1 "
            f"device ms (efficiency) | ours collectives | ours MiB per device, 1 / {count} | "
            f"JAX 1 / {count} devices ms | JAX speed-up | JAX B/{count} on 1 device ms "
            f"(efficiency) | JAX collectives | JAX MiB per device, 1 / {count} |")
    lines = [f"{env.get('gpu')} x {count} ({part.get('platform', 'gpu')}), the batch sharded over "
             f"all of them (`P('b')`), jitted; wall time of a call, median; {part['dtype']}. "
             f"Efficiency: one device's share of the batch alone on one device, over the sharded "
             f"call (1: sharding costs nothing). {_versions(env)}; run {_run_dates(part)}.",
             "", head, "|" + "---|" * 11]
    lines += [sharded_row(r) for r in part["rows"]]
    return "\n".join(lines) + "\n"


def peak_bandwidth(gpu: str) -> float | None:
    """The GPU model's peak memory bandwidth in bytes/s (grids.toml [bandwidth]), or None."""
    with open(GRIDS_FILE, "rb") as f:
        return tomllib.load(f).get("bandwidth", {}).get(gpu)


def tiny_markdown(cells: list[dict], gpu: str) -> str:
    """Square cells of n <= TINY_MAX_N: per op, dtype and n the time of each batch for JAX,
    PyTorch and `auto`, and at the largest batch the bytes a call must move (its inputs and
    outputs) over `auto`'s time, against the GPU's peak bandwidth. "" without such cells."""
    # A cell whose PyTorch or JAX call failed still counts (PyTorch's eigh out of memory at
    # 10^6 matrices, JAX's syevjBatched refusing 10^7): where ours ran, the failure is the news.
    tiny = [c for c in cells if c["n"] <= TINY_MAX_N and _median(c, "jcm:auto")
            and (_median(c, "jax") or "failed" in c["impls"].get("jax", {}))]
    if not tiny:
        return ""
    peak = peak_bandwidth(gpu)
    groups: dict[tuple, list[dict]] = {}
    for c in tiny:
        groups.setdefault((c["op"], c["dtype"], c["n"]), []).append(c)
    batches = sorted({c["batch"] for c in tiny})
    lines = ["Milliseconds per call, JAX / PyTorch / jax-cusolver-ms `auto`, for each batch of "
             "n x n matrices; then, at the largest batch, what a call must read and write (its "
             "inputs and outputs) over `auto`'s time"
             + (f", against the GPU's peak of {peak / 1e12:.3g} TB/s." if peak else "."), "",
             "| op | dtype | n | " + " | ".join(f"B = {b:.0e}".replace("e+0", "e") for b in batches)
             + " | GB/s (of peak) |", "|---" * (4 + len(batches)) + "|"]
    for (op, dtype, n), group in groups.items():
        by_batch = {c["batch"]: c for c in group}
        row = [op, dtype, str(n)]
        for b in batches:
            c = by_batch.get(b)
            row.append("-" if c is None else " / ".join(
                _ms(c["impls"].get(k)) for k in ("jax", "torch", "jcm:auto")))
        # The largest batch that knows its bytes (an earlier run's cell where JAX failed has
        # none).
        largest = max(group, key=lambda c: (bool(c.get("bytes")), c["batch"]))
        ours = _median(largest, "jcm:auto")
        if ours and largest.get("bytes"):
            rate = largest["bytes"] / (ours * 1e-3)
            row.append(f"{rate / 1e9:.0f}" + (f" ({rate / peak:.0%})" if peak else ""))
        else:
            row.append("-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def oblong_markdown(part: dict) -> str:
    """Tall-skinny and wide cells: per cell the ms of JAX, PyTorch, `auto` and the QR-first SVD
    (strategy "blocked") where timed, and `auto`'s and the best strategy's speed-up over JAX."""
    lines = ["Milliseconds per call for the whole batch; `blocked` is the QR-first SVD "
             "(Householder QR, the SVD of R, U = Q U_R), timed where the op runs an SVD of a "
             "matrix at least twice as tall as wide or as wide as tall. Speed-up = JAX's time / "
             "ours.", "",
             "| op | dtype | batch x m x n | m / n | JAX | PyTorch | auto | blocked | auto vs JAX "
             "| best vs JAX | auto runs |", "|---" * 11 + "|"]
    for c in part["cells"]:
        jax_ms, auto_ms = _median(c, "jax"), _median(c, "jcm:auto")
        ours = [t for t in (auto_ms, _median(c, "jcm:blocked")) if t]
        ratio = c["m"] / c["n"]
        plan = c.get("explain") or {}
        lines.append(
            f"| {c['op']} | {c['dtype']} | {c['batch']}x{c['m']}x{c['n']} | "
            f"{ratio:.3g} | {_ms(c['impls'].get('jax'))} | {_ms(c['impls'].get('torch'))} | "
            f"{_ms(c['impls'].get('jcm:auto'))} | {_ms(c['impls'].get('jcm:blocked'))} | "
            + (f"{_x(jax_ms / auto_ms)}" if jax_ms and auto_ms else "-") + " | "
            + (f"{_x(jax_ms / min(ours))}" if jax_ms and ours else "-") + " | "
            + (plan.get("strategy") or c.get("status", "-")) + " |")
    return "\n".join(lines) + "\n"


def report_markdown(doc: dict, figures: dict, plot_note: str | None, headline=()) -> str:
    """report.md: the summary, the headline cells, matmul, the random shapes, then every cell
    and any failure."""
    square, mm, rnd = doc.get("square"), doc.get("matmul"), doc.get("random")
    env = (square or mm or rnd or {}).get("environment", {})
    lines = [f"# Benchmark report: {doc['gpu']}", "",
             "Generated by `python -m benchmarks.report` from report.json: do not edit. How the "
             "cells are measured: [docs/benchmarks.md](../../../docs/benchmarks.md).", ""]
    if square:
        args = square["args"]
        lines += [f"Square grid: {', '.join(args.get('ops', []))}; "
                  f"{', '.join(args.get('dtypes', []))}; batch "
                  f"{', '.join(map(str, args.get('batches', [])))}; n "
                  f"{', '.join(map(str, args.get('sizes', [])))}. "
                  f"{_versions(env)}; last run {env.get('date', '?')}."
                  + ("" if square.get("complete") else
                     f" **Partial: {len(square['cells'])} of {square.get('total', '?')} cells.**"),
                  "", "## Speed-up over JAX", "",
                  summary_markdown(square["summary"], env, {}, None).rstrip(), ""]
        rows = headline_rows(square["cells"], headline)
        if rows:
            lines += ["## Headline cells", "", headline_markdown(rows)]
    if mm:
        s = mm["summary"]
        lines += ["## Matmul", "",
                  f"jcm.matmul against XLA's dot: {s['cells']} cells, geometric mean "
                  f"{_x(s['geomean_vs_xla'])}, min {_x(s['min_vs_xla'])}, max "
                  f"{_x(s['max_vs_xla'])}. {_versions(mm.get('environment', {}))}.", "",
                  _matmul.markdown(mm["cells"], mm.get("args", {}))]
    if rnd:
        lines += ["## Random shapes", "", random_markdown(rnd)]
    if doc.get("sharded"):
        lines += [f"## A sharded batch: one device against {doc['sharded']['devices']}", "",
                  sharded_markdown(doc["sharded"])]
    tiny = tiny_markdown(square["cells"], doc["gpu"]) if square else ""
    if tiny:
        lines += ["## Tiny matrices", "", tiny]
    if doc.get("oblong"):
        lines += ["## Tall-skinny and wide", "", oblong_markdown(doc["oblong"])]
    if plot_note:
        lines += ["## Figures", "", f"None ({plot_note}).", ""]
    elif figures:
        lines += ["## Figures", ""]
        for name, files in figures.items():
            lines.append(f"- {name}: " + ", ".join(f"[{os.path.basename(f)}]({f})"
                                                   for f in files))
        lines.append("")
    if square:
        lines += ["## Every cell", "", cells_markdown(square["cells"],
                                                      square["args"].get("strategies") or
                                                      ["auto"])]
        notes = failures(square["cells"])
        if notes:
            lines += ["## Failures", ""] + [f"- {n}" for n in notes] + [""]
        notes = failures(square["cells"], peers=True)
        if notes:
            lines += ["## Failures of the peers (not this package's)", ""] + \
                [f"- {n}" for n in notes] + [""]
    return "\n".join(lines).rstrip() + "\n"


def brief(doc: dict) -> str:
    """A short plain-text table: per op and dtype the geometric mean and the lowest speed-up."""
    lines = [f"benchmark: {doc.get('gpu')}, grid {doc.get('grid', '?')}"]
    square = doc.get("square")
    if square:
        cells = square["cells"]
        skipped = sum(1 for c in cells if c.get("status") == "skipped")
        lines.append(f"{len(cells)} cells ({skipped} skipped, {len(failures(cells))} failures): "
                     + ("complete" if square.get("complete") else
                        f"PARTIAL, {len(cells)} of {square.get('total', '?')}: --resume goes on"))
        lines.append(f"{'op':<12} {'dtype':<8} {'cells':>5} {'geomean vs JAX':>15} {'min':>7}")
        for e in square["summary"]["per_op"]:
            lines.append(f"{e['op']:<12} {e['dtype']:<8} {e['cells']:>5} "
                         f"{_x(e['geomean_vs_jax']):>15} {_x(e['min_vs_jax']):>7}")
        lines += ["  " + line for line in loops_lines(square["summary"], bold="")]
        for line in failures(cells)[:10]:
            lines.append("  " + line[:160])
        peers = failures(cells, peers=True)
        if peers:
            lines.append(f"  and {len(peers)} failures of the peers (not ours), the first: "
                         + peers[0][:120])
    mm = doc.get("matmul")
    if mm:
        s = mm["summary"]
        lines.append(f"{'matmul':<12} {'':<8} {s['cells']:>5} {_x(s['geomean_vs_xla']):>15} "
                     f"{_x(s['min_vs_xla']):>7}  vs XLA; missing the bar: "
                     f"{', '.join(s['missing_the_bar']) or 'none'}")
    oblong = doc.get("oblong")
    if oblong:
        cells = oblong["cells"]
        speedups = [s for s in (speedup(c) for c in cells) if s]
        lines.append(f"oblong: {len(cells)} cells, auto vs JAX geomean "
                     + (_x(math.exp(sum(map(math.log, speedups)) / len(speedups)))
                        if speedups else "-")
                     + (f", min {_x(min(speedups))}" if speedups else "")
                     + f"; {len(failures(cells))} failures")
        for line in failures(cells)[:10]:
            lines.append("  " + line[:160])
    rnd = doc.get("random")
    if rnd:
        lines.append("random: " + random_summary_line(rnd).replace("**", ""))
        for b in rnd["summary"]["below_parity"]:
            lines.append(f"  {b['speedup']:.2f}x  #{b['index']} {b['shape']} (auto: "
                         f"{b['auto_picks']})")
        for line in failures(rnd["shapes"])[:10]:
            lines.append("  " + line[:160])
    return "\n".join(lines) + "\n"


# --- figures ------------------------------------------------------------------------------------

def import_pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return None, (f"matplotlib is not importable ({exc}); install the bench extra: "
                      "pip install -e '.[bench]'")
    return plt, None


def _save(fig, path, plt):
    """A PNG with a 256-colour palette where Pillow is there: a third of the size."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=FIGURE_DPI, bbox_inches="tight")
    plt.close(fig)
    try:
        from PIL import Image

        image = Image.open(buffer).convert("RGB").quantize(colors=256)
        image.save(path, optimize=True)
    except ImportError:
        with open(path, "wb") as f:
            f.write(buffer.getvalue())


def plot(cells: list[dict], rows: list[dict], folder: str, plt, gpu: str | None = None,
         oblong: list[dict] = ()) -> dict:
    """Into `folder`: overview.png (per op and dtype the geometric mean and range of the
    speed-up), per op <op>_speedup.png (heat map, batch x n, a panel per dtype) and
    <op>_times.png (ms against n, a panel per dtype x batch, a line per implementation),
    tiny_batch.png (the tiny cells' ms against the batch), matmul.png and oblong_ratio.png (the
    oblong cells' ms against m / n). Returns {name: [file names]}."""
    import numpy as np

    os.makedirs(folder, exist_ok=True)
    figures = {}
    summary = summarize(cells) if cells else None
    if summary and summary["per_op"]:
        per_op = summary["per_op"]
        ops = list(dict.fromkeys(e["op"] for e in per_op))
        dtypes = list(dict.fromkeys(e["dtype"] for e in per_op))
        fig, ax = plt.subplots(figsize=(7, 0.32 * len(ops) * len(dtypes) + 1.2))
        height = 0.8 / len(dtypes)
        for j, dtype in enumerate(dtypes):
            for i, op in enumerate(ops):
                e = next((e for e in per_op if e["op"] == op and e["dtype"] == dtype), None)
                if e is None:
                    continue
                y = i + (j - (len(dtypes) - 1) / 2) * height
                ax.barh(y, e["geomean_vs_jax"], height=height * 0.9, color=f"C{j}",
                        label=dtype if i == 0 else None)
                ax.plot([e["min_vs_jax"], e["max_vs_jax"]], [y, y], color="k", linewidth=0.8)
        ax.axvline(1.0, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yticks(range(len(ops)), ops)
        ax.invert_yaxis()
        ax.set_xlabel("speed-up over JAX (bar: geometric mean; line: min to max)")
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        _save(fig, os.path.join(folder, "overview.png"), plt)
        figures["overview"] = ["overview.png"]

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
                if c["dtype"] == dtype and (s := speedup(c)):
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
        files.append(f"{op}_speedup.png")
        _save(fig, os.path.join(folder, files[-1]), plt)

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
                _log_axes(ax, f"{op} {dtype} batch {batch}", "n", 2)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=max(1, len(labels)), fontsize=8)
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        files.append(f"{op}_times.png")
        _save(fig, os.path.join(folder, files[-1]), plt)
        figures[op] = files

    tiny = _plot_tiny_batches(cells, folder, plt, gpu)
    if tiny:
        figures["tiny"] = [tiny]
    ratio = _plot_oblong_ratios(list(oblong), folder, plt)
    if ratio:
        figures["oblong"] = [ratio]

    measured = [r for r in rows if "tflops" in r["impls"].get("xla", {})]
    if measured:
        names = [n for n in ("xla", "jcm", "torch") if any(n in r["impls"] for r in measured)]
        fig, ax = plt.subplots(figsize=(7, 0.28 * len(measured) * len(names) + 1.2))
        height = 0.8 / len(names)
        for j, name in enumerate(names):
            ys = [i + (j - (len(names) - 1) / 2) * height for i in range(len(measured))]
            values = [r["impls"].get(name, {}).get("tflops", 0) or 0 for r in measured]
            ax.barh(ys, values, height=height * 0.9, color=f"C{j}",
                    label={"jcm": "jax-cusolver-ms", "xla": "XLA"}.get(name, name))
        for i, r in enumerate(measured):
            if r.get("peak_tflops"):
                ax.plot([r["peak_tflops"]] * 2, [i - 0.45, i + 0.45], color="k", linewidth=1)
        ax.set_xscale("log")
        ax.set_yticks(range(len(measured)), [r["cell"] for r in measured], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("TFLOP/s per call (black: the chip's dense peak for the mode)")
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        _save(fig, os.path.join(folder, "matmul.png"), plt)
        figures["matmul"] = ["matmul.png"]
    return figures


def _plot_tiny_batches(cells: list[dict], folder: str, plt, gpu: str | None) -> str | None:
    """tiny_batch.png: for each op and dtype with tiny cells (n <= TINY_MAX_N) at two batches
    or more, ms against the batch at the largest such n, a line per implementation, and the
    time to read and write the call's bytes at the GPU's peak bandwidth (dashed) where known.
    The file name, or None where there is nothing to draw."""
    tiny = [c for c in cells if c["n"] <= TINY_MAX_N and _median(c, "jcm:auto")]
    panels = {}
    for c in tiny:
        panels.setdefault((c["op"], c["dtype"]), []).append(c)
    panels = {key: [c for c in group if c["n"] == max(g["n"] for g in group)]
              for key, group in panels.items()}
    panels = {key: group for key, group in panels.items()
              if len({c["batch"] for c in group}) >= 2}
    if not panels:
        return None
    peak = peak_bandwidth(gpu) if gpu else None
    fig, axes = _panels(len(panels), plt, 3.2, 2.6, 4)
    for ax, ((op, dtype), group) in zip(axes.flat, panels.items()):
        group = sorted(group, key=lambda c: c["batch"])
        for color, name in enumerate(("jax", "torch", "jcm:auto")):
            points = [(c["batch"], t) for c in group if (t := _median(c, name))]
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, color=f"C{color}",
                        label=name.replace("jcm:", "jcm "), linewidth=2 if name != "torch" else 1)
        if peak:
            points = [(c["batch"], c["bytes"] / peak * 1e3) for c in group if c.get("bytes")]
            if points:
                ax.plot(*zip(*points), linestyle="--", color="grey", label="bytes at peak")
        _log_axes(ax, f"{op} {dtype} n={group[0]['n']}", "batch")
    return _finish_panels(fig, axes, len(panels), folder, "tiny_batch.png", plt)


def _log_axes(ax, title: str, xlabel: str, x_base: int = 10) -> None:
    """A time panel's axes: log-log, ms up the side."""
    ax.set_xscale("log", base=x_base)
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("ms")


def _panels(count: int, plt, width: float, height: float, most_columns: int):
    """A figure of `count` panels, up to `most_columns` a row: (fig, axes)."""
    columns = min(most_columns, count)
    rows = -(-count // columns)
    return plt.subplots(rows, columns, squeeze=False, figsize=(width * columns, height * rows))


def _finish_panels(fig, axes, used: int, folder: str, name: str, plt) -> str:
    """The panels past `used` hidden, one legend over every panel's lines (the first may lack
    some, e.g. PyTorch's), saved as folder/name. Returns name."""
    for ax in list(axes.flat)[used:]:
        ax.set_visible(False)
    legend = {}
    for ax in axes.flat:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.legend(list(legend.values()), list(legend), loc="upper center", ncol=max(1, len(legend)),
               fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.2 / axes.shape[0]))
    _save(fig, os.path.join(folder, name), plt)
    return name


def _plot_oblong_ratios(cells: list[dict], folder: str, plt) -> str | None:
    """oblong_ratio.png: for each op, dtype, batch and n of the oblong cells timed at three
    m / n or more (the grid's sweep: n fixed, m = n * ratio), ms against m / n, a line per
    implementation (JAX, PyTorch, `auto` and the QR-first SVD). The file name, or None where
    there is nothing to draw."""
    panels = {}
    for c in cells:
        panels.setdefault((c["op"], c["dtype"], c["batch"], c["n"]), []).append(c)
    panels = {key: group for key, group in panels.items()
              if len({c["m"] / c["n"] for c in group}) >= 3}
    if not panels:
        return None
    fig, axes = _panels(len(panels), plt, 3.4, 2.7, 3)
    names = ("jax", "torch", "jcm:auto", "jcm:blocked")
    for ax, ((op, dtype, batch, n), group) in zip(axes.flat, panels.items()):
        group = sorted(group, key=lambda c: c["m"] / c["n"])
        for color, name in enumerate(names):
            points = [(c["m"] / c["n"], t) for c in group if (t := _median(c, name))]
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, color=f"C{color}",
                        label={"jcm:blocked": "jcm QR-first"}.get(name, name.replace(":", " ")),
                        linewidth=2 if name in ("jax", "jcm:auto") else 1)
        _log_axes(ax, f"{op} {dtype} batch {batch}, n {n}", "m / n", 2)
    return _finish_panels(fig, axes, len(panels), folder, "oblong_ratio.png", plt)


# --- docs/benchmarks.md -------------------------------------------------------------------------

_METHOD = """\
## How it is measured

- **Cells.** A square cell is one op, dtype, batch B and order n: B random n x n matrices
  (symmetric positive definite for the Cholesky ops, symmetric for eigh and LDL^T, scaled to
  |det| = 1 for det), fresh for every cell. Each cell times JAX's own function
  (`jax.numpy.linalg`, `jax.scipy.linalg`, `jax.lax.linalg`), jax-cusolver-ms under `auto` and
  `torch.linalg` where PyTorch is importable, on the same inputs.
- **Times.** Device-side: CUDA events recorded on XLA's stream around the compiled call
  (`jax_cusolver_ms.timing.device_time_ms`), after warm-up; the median of repeated calls (10 by
  default, fewer for calls of seconds). Cells under 2 ms are timed in five pooled rounds, JAX
  and ours alternating, because there the host's launch gaps are most of the time. Where
  `auto` runs JAX's own lowering and the compiled program is the very one JAX compiles, it is
  timed once, as JAX's (1.00x by construction); where it runs JAX's lowering inside the NaN
  guard and the two are more than 5% apart, they get the five rounds too, and if still apart,
  at least 15 single calls each, interleaved one by one, replace their times.
- **Checks.** Every answer is checked: reconstruction (`PA = LU`, `QR = A`, `A V = V diag(w)`),
  backward error of a solve, `A X = I`, determinant per unit of condition number. An answer of
  ours fails when its error exceeds max(20 x the same measure of JAX's answer, a floor per
  dtype); a failed check is marked WRONG in the report and its time is not counted.
- **Speed-up** = JAX's median / ours. JAX has no LDL^T: those cells set ours against JAX's LU
  of the same matrix (and its solve). Cells are skipped where inputs exceed 8 GB or JAX took
  over 20 s a call at a smaller cell of the same op. PyTorch, which loops per matrix for some
  ops (qr), is not timed past 20 s a call: its one call's time shows as "N s", an estimate as
  "~N s" (from a smaller batch of the same shape, or a call on 1/16 of the batch, scaled).
- **Matmul.** `jcm.matmul` against `jnp.matmul` (XLA's cuBLASLt call) and `torch.matmul`, 20
  calls back to back per timed region (a single call would add ~0.3 ms of dispatch), answers
  checked against XLA's.
"""


_RANDOM = """\
## Random shapes

The grid's cells are square and real; users call more. The random part of a report draws shapes
from the calls users make of every op JAX has too (all but LDL^T and the QR-iteration SVD, plus
`lstsq` and `pinv`): float32, float64, complex64 and complex128 (Hermitian, and positive
definite, where the op needs it); n log-uniform in 2..4096; for qr, qr_r, svd, svdvals, lstsq
and pinv half the time a rectangular m x n, m/n log-uniform within 1/16..16; 1 to 256
right-hand sides for solve, cho_solve, qr_multiply and lstsq; the batch log-uniform from 1 up to
10^5 where the larger side is up to 32, 4096 up to 128, 256 up to 1024 and 16 above, a shape
whose inputs exceed `--max-input-gb` drawn again
([benchmarks/random_shapes.py](../benchmarks/random_shapes.py)). The same seed draws the same
shapes. Each is timed and checked as a grid cell, `auto` against
JAX's function; a shape where one JAX call takes over `--jax-limit-s` is skipped and listed.

```bash
python -m benchmarks.report --random 300 --seed 1 --out DIR   # this part alone
python -m benchmarks.report --show DIR/report.json            # its summary
```

The full grid has it (300 shapes, seed 1); `--budget-s` and `--resume` work as for the grid
(shapes already measured with the same seed are kept; a `--resume` without `--random`,
`--seed`, `--ops` or `--dtypes` goes on with the resumed report's draw). Reading it: the
summary line gives the geometric mean of the speed-up over JAX and how many shapes are below
0.95x and below 0.90x; then every shape below 0.95x, slowest first, with what `auto` ran; then
every shape in the order drawn (`#` is its index in the draw).
"""


_REGENERATE = """\
## Regenerating a report

On a machine with the GPU, from the repository root (installed as in the README, with `[bench]`
for the figures):

```bash
python -m benchmarks.report --grid full     # measure; replace benchmarks/results/<GPU>/ and this page
```

The full grid takes hours. Where a command may only run for minutes, run it in steps: the first
step starts a new report, each later one goes on with it.

```bash
python -m benchmarks.report --grid full --budget-s 500
python -m benchmarks.report --grid full --budget-s 500 --resume     # until it says complete
```

`--budget-s` starts no cell after its time; a cell that runs on and on would still take the
command's whole time with it. `--cell-limit-s S` stops the run when one cell or shape is still
running after S seconds: the report is written with that cell skipped (and says so), the exit
status is 75, and `--resume` goes on with the next cell.

Without a GPU, `python -m benchmarks.report --render benchmarks/results/<GPU>/report.json`
redraws a report's Markdown, figures and this page from its JSON. `python -m benchmarks.report`
alone runs the quick grid (the smoke grid without a GPU) into a temporary folder, or into
`--out`; `bash benchmarks/gpu_session.sh [GRID]` builds, tests and benchmarks on a bare GPU
machine. A report is replaced, never appended to. The grids are defined in
[benchmarks/grids.toml](../benchmarks/grids.toml); `python -m benchmarks.report --help` lists
the options.
"""


def docs_page(reports: list[tuple[str, dict]], headline=()) -> str:
    """docs/benchmarks.md from every GPU's report: (folder name, report.json document)."""
    lines = ["# Benchmarks", "",
             "<!-- Generated by `python -m benchmarks.report` from benchmarks/results/*/"
             "report.json: edit benchmarks/render.py, not this page. -->", "",
             "jax-cusolver-ms against JAX's own linear algebra (and PyTorch's) on each GPU "
             "model that has a report. One report per GPU lives in "
             "[benchmarks/results/](../benchmarks/results/): `report.json` (per cell the median "
             "and min ms of each implementation, the error and what `auto` picked), "
             "`report.md` (every cell) and `figures/`.", ""]
    for folder, doc in reports:
        square, mm, rnd = doc.get("square"), doc.get("matmul"), doc.get("random")
        env = (square or mm or rnd or {}).get("environment", {})
        base = f"../benchmarks/results/{folder}"
        lines += [f"## {doc['gpu']}", "", f"{_versions(env)}; last run {env.get('date', '?')}. "
                  f"Every cell: [report.md]({base}/report.md).", ""]
        if square:
            s = square["summary"]
            measured = sum(e["cells"] for e in s["per_op"])
            lines += [f"Square grid: {measured} cells measured, {len(s['skipped'])} skipped; "
                      "geometric mean of the speed-up over JAX: " + ", ".join(
                          f"{d} {_x(g)}" for d, g in s["geomean_vs_jax"].items())
                      + f"; cells below {s['parity_bar']}x of JAX: "
                      f"{len(s['cells_below_parity']) or 'none'}.", ""]
            loops = loops_lines(s)
            if loops:
                lines += [loops[0], " ".join(loops[1:]), ""]
            if os.path.exists(os.path.join(RESULTS_DIR, folder, "figures", "overview.png")):
                lines += [f"![speed-up over JAX per op]({base}/figures/overview.png)", ""]
            rows = headline_rows(square["cells"], headline)
            if rows:
                lines += ["### Headline cells", "", headline_markdown(rows)]
            lines += ["### Per op", "", per_op_markdown(s)]
            below = s["cells_below_parity"]
            if below:
                lines += [f"Cells below {s['parity_bar']}x of JAX:", ""]
                for b in below:
                    why = (f"; {b['reference']}" if b.get("reference") else
                           "; JAX's own lowering" if b["parity"] else "")
                    lines.append(f"- {b['cell']}: {b['speedup']:.2f}x (auto: "
                                 f"{b['auto_picks']}{why})")
                lines.append("")
            ops = list(dict.fromkeys(c["op"] for c in square["cells"]))
            heat = [f"[{op}]({base}/figures/{op}_speedup.png)" for op in ops
                    if os.path.exists(os.path.join(RESULTS_DIR, folder, "figures",
                                                   f"{op}_speedup.png"))]
            if heat:
                lines += ["Speed-up heat maps (batch x n): " + ", ".join(heat) + ".", ""]
        if mm:
            s = mm["summary"]
            lines += ["### Matmul", "",
                      f"{s['cells']} cells, jcm / XLA geometric mean {_x(s['geomean_vs_xla'])} "
                      f"(min {_x(s['min_vs_xla'])}, max {_x(s['max_vs_xla'])}); missing the "
                      f"bar: {', '.join(s['missing_the_bar']) or 'none'}.", "",
                      matmul_brief_markdown(mm["cells"])]
        if doc.get("sharded"):
            lines += [f"### A sharded batch: one device against {doc['sharded']['devices']}",
                      "", sharded_markdown(doc["sharded"])]
        tiny = tiny_markdown(square["cells"], doc["gpu"]) if square else ""
        if tiny:
            lines += ["### Tiny matrices", "", tiny]
        if doc.get("oblong"):
            lines += ["### Tall-skinny and wide", "", oblong_markdown(doc["oblong"])]
            if os.path.exists(os.path.join(RESULTS_DIR, folder, "figures", "oblong_ratio.png")):
                lines += [f"![ms against m / n]({base}/figures/oblong_ratio.png)", ""]
        if rnd:
            lines += ["### Random shapes", "", random_summary_line(rnd), ""]
            lines += [f"- {b['shape']}: {b['speedup']:.2f}x (auto: {b['auto_picks']})"
                      for b in rnd["summary"]["below_parity"]]
            lines += [""] if rnd["summary"]["below_parity"] else []
    lines += [_METHOD, _RANDOM, _REGENERATE]
    return "\n".join(lines)


def docs_text(headline=()) -> str:
    """docs/benchmarks.md as the reports in benchmarks/results/<GPU>/report.json make it."""
    reports = []
    for file in sorted(glob.glob(os.path.join(RESULTS_DIR, "*", "report.json"))):
        with open(file) as f:
            reports.append((os.path.basename(os.path.dirname(file)), json.load(f)))
    return docs_page(reports, headline)


def write_docs(path: str = DOCS_PAGE, headline=()) -> str:
    """Writes docs_text() to `path` (docs/benchmarks.md)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(docs_text(headline))
    return path
