"""Matmul benchmark: jax_cusolver_ms.matmul (cuBLASLt through the project's handler) against
XLA's own jnp.matmul / dot_general, and torch.matmul when importable, side by side in one run.

    python -m benchmarks.bench_matmul                 # the full grid (GPU)
    python -m benchmarks.bench_matmul --quick         # a few cells
    python -m benchmarks.bench_matmul --cells square-bf16-8192,odd-fp32-1000

Each measurement times CALLS (default 20) calls back to back inside one timed region (device
events around the whole jitted function, jax_cusolver_ms.timing.device_time_ms): a single call
would add ~0.3 ms of dispatch. The CALLS calls read CALLS distinct `a` operands (separate
arguments, so XLA can neither merge the calls nor insert copies), and return every result.
Reported per call: median (and min) ms over repeats, TFLOP/s next to the chip's peak, and our
speed relative to XLA, checked against the acceptance bar (>= 0.97x on large cells, >= 0.9x on
small ones). Every answer is checked against XLA's. JSON and Markdown go to --out; the table is
printed last.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import sys
import time
import traceback

from .bench import TIMER, _import_torch, _short, device_time_ms, environment, jax, jcm, jnp, np

CALLS = 20
LARGE_FLOPS = 1.6e10       # cells at or above this many flops per call are "large"
BAR = {"large": 0.97, "small": 0.90}  # our speed / XLA's, at least

# Dense peak TFLOP/s (no sparsity) by device kind, per compute mode (NVIDIA's data sheets).
_H100_SXM = {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9, "fp64": 66.9}
_H100_PCIE = {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.2, "fp64": 51.2}
PEAKS = (("H100 PCIe", _H100_PCIE), ("H100", _H100_SXM), ("H200", _H100_SXM))

DTYPES = {"bf16": jnp.bfloat16, "fp16": jnp.float16, "fp32": jnp.float32,
          "fp32-highest": jnp.float32, "fp64": jnp.float64}


@dataclasses.dataclass(frozen=True)
class Cell:
    """act(a @ b + bias) with a (batch x) m x k, b (batch x) k x n."""
    kind: str
    dtype: str  # a key of DTYPES; "fp32" is default precision (TF32), "fp32-highest" full
    m: int
    k: int
    n: int
    batch: int = 0  # 0: no batch dim
    epilogue: bool = False  # bias + gelu (tanh)

    @property
    def name(self):
        size = self.m if self.m == self.k == self.n else f"{self.m}x{self.k}x{self.n}"
        return f"{self.kind}-{self.dtype}-{f'{self.batch}x' if self.batch else ''}{size}"

    @property
    def flops(self):
        return 2.0 * max(self.batch, 1) * self.m * self.k * self.n

    @property
    def size_class(self):
        return "large" if self.flops >= LARGE_FLOPS else "small"

    @property
    def precision(self):
        return "highest" if self.dtype == "fp32-highest" else None

    @property
    def peak_mode(self):
        return {"fp32": "tf32", "fp32-highest": "fp32"}.get(self.dtype, self.dtype)


GRID = (
    [Cell("square", d, s, s, s) for d in DTYPES for s in (1024, 2048, 4096, 8192)]
    + [Cell("batched", d, 512, 512, 512, batch=64) for d in ("bf16", "fp32")]
    + [Cell("tall", d, 65536, 4096, 128) for d in ("bf16", "fp32")]
    + [Cell("odd", d, 1000, 1000, 1000) for d in ("bf16", "fp32", "fp64")]
    + [Cell("bias-gelu", "bf16", s, s, s, epilogue=True) for s in (4096, 8192)]
    + [Cell("bias-gelu", "fp32", 4096, 4096, 4096, epilogue=True)]
)
QUICK = ("square-bf16-4096", "square-bf16-8192", "square-fp32-4096", "batched-bf16-64x512",
         "odd-fp32-1000", "bias-gelu-bf16-4096")
SMOKE = (Cell("square", "fp32", 64, 64, 64), Cell("batched", "bf16", 32, 16, 24, batch=3),
         Cell("bias-gelu", "fp32", 48, 32, 40, epilogue=True))


def peak_tflops(device_kind: str, mode: str):
    for name, table in PEAKS:
        if name in device_kind:
            return table[mode]
    return None


# ---------------------------------------------------------------------------------------------
# The three implementations of one cell: f(a, b, bias) -> result.


def xla_fn(cell):
    precision = cell.precision

    def f(a, b, bias):
        z = jnp.matmul(a, b, precision=precision)
        return jax.nn.gelu(z + bias, approximate=True) if cell.epilogue else z

    return f


def jcm_fn(cell):
    def f(a, b, bias):
        return jcm.matmul(a, b, bias=bias if cell.epilogue else None,
                          activation="gelu" if cell.epilogue else None, precision=cell.precision)

    return f


def torch_fn(torch, cell):
    def f(a, b, bias):
        if cell.epilogue:
            return torch.nn.functional.gelu(torch.addmm(bias, a, b), approximate="tanh")
        return torch.matmul(a, b)

    return f


def back_to_back(fn, calls):
    """One function running fn on `calls` distinct a's (separate arguments) and shared b, bias."""
    def many(*args):
        *a_list, b, bias = args
        return [fn(a, b, bias) for a in a_list]

    return many


def inputs(cell, calls, seed):
    dtype = DTYPES[cell.dtype]
    lead = (cell.batch,) if cell.batch else ()
    keys = jax.random.split(jax.random.key(seed), calls + 2)
    normal = lambda key, shape: jax.random.normal(key, shape, jnp.float32).astype(dtype)
    a_list = [normal(keys[i], lead + (cell.m, cell.k)) for i in range(calls)]
    b = normal(keys[calls], lead + (cell.k, cell.n))
    bias = normal(keys[calls + 1], (cell.n,))
    return jax.block_until_ready(a_list + [b, bias])


def _stats(per_call_ms, cell):
    median = float(np.median(per_call_ms))
    return {"per_call_ms": [float(t) for t in per_call_ms], "median_ms": median,
            "min_ms": float(np.min(per_call_ms)), "tflops": cell.flops / median / 1e9}


def measure_jax(fn, args, cell, opts):
    many = back_to_back(fn, len(args) - 2)
    first = jax.block_until_ready(jax.jit(many)(*args))[0]
    times = device_time_ms(many, *args, repeats=opts.repeats, warmup=opts.warmup)
    return _stats([t / (len(args) - 2) for t in times], cell), first


def measure_torch(torch, fn, args, cell, opts):
    *a_list, b, bias = [torch.from_dlpack(x) for x in args]  # shares JAX's buffers
    torch.backends.cuda.matmul.allow_tf32 = cell.dtype == "fp32"
    with torch.no_grad():
        for _ in range(opts.warmup):
            [fn(a, b, bias) for a in a_list]
        torch.cuda.synchronize()
        times = []
        for _ in range(opts.repeats):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for a in a_list:
                fn(a, b, bias)
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / len(a_list))
    return _stats(times, cell)


def rel_error(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))


# Our answer against XLA's: both round to the dtype; TF32 and half precisions differ more.
ERROR_BAR = {"bf16": 3e-2, "fp16": 5e-3, "fp32": 1e-2, "fp32-highest": 1e-5, "fp64": 1e-12}


def run_cell(cell, opts, torch, peak):
    row = {"cell": cell.name, **dataclasses.asdict(cell), "flops": cell.flops,
           "size_class": cell.size_class, "peak_tflops": peak, "impls": {}}
    args = inputs(cell, opts.calls, opts.seed)
    xla, ref = measure_jax(xla_fn(cell), args, cell, opts)
    row["impls"]["xla"] = xla
    try:
        ours, out = measure_jax(jcm_fn(cell), args, cell, opts)
        ours["error_vs_xla"] = rel_error(out, ref)
        ours["ok"] = bool(ours["error_vs_xla"] <= ERROR_BAR[cell.dtype])
        row["impls"]["jcm"] = ours
        row["speed_vs_xla"] = xla["median_ms"] / ours["median_ms"]
        row["meets_bar"] = bool(ours["ok"] and row["speed_vs_xla"] >= BAR[cell.size_class])
    except Exception as exc:  # noqa: BLE001
        row["impls"]["jcm"] = {"failed": _short(exc), "traceback": traceback.format_exc()}
        row["meets_bar"] = False
    if torch is not None:
        try:
            row["impls"]["torch"] = measure_torch(torch, torch_fn(torch, cell), args, cell, opts)
        except Exception as exc:  # noqa: BLE001
            row["impls"]["torch"] = {"failed": _short(exc)}
    return row


# ---------------------------------------------------------------------------------------------
# Output.


def _tf(r):
    if not r:
        return "-"
    if "failed" in r:
        return "error"
    return f"{r['tflops']:.0f}" if r["tflops"] >= 10 else f"{r['tflops']:.3g}"


def _ms(r):
    if not r or "failed" in r:
        return "-" if not r else "error"
    return f"{r['median_ms']:.4g}"


def markdown(rows, env, opts):
    head = ["cell", "shape", "XLA ms", "XLA TFLOP/s", "jcm ms", "jcm TFLOP/s", "jcm / XLA",
            "bar", "torch TFLOP/s", "peak", "check"]
    lines = [f"### matmul: {env['gpu']}, jax {env['versions']['jax']}, per call, median of "
             f"{opts.repeats} x {opts.calls} back-to-back calls (timer: {env['timer']})", "",
             "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        impls = r["impls"]
        ours = impls.get("jcm", {})
        shape = (f"{r['batch']}x" if r["batch"] else "") + f"{r['m']}x{r['k']}x{r['n']}"
        ratio = f"{r['speed_vs_xla']:.3f}x" if "speed_vs_xla" in r else "-"
        bar = f"{BAR[r['size_class']]:.2f} {'ok' if r.get('meets_bar') else 'MISS'}"
        if "failed" in ours:
            check = "ERROR"
        elif "error_vs_xla" in ours:
            check = f"{'ok' if ours['ok'] else 'WRONG'} ({ours['error_vs_xla']:.0e})"
        else:
            check = "-"
        peak = f"{r['peak_tflops']:g}" if r["peak_tflops"] else "-"
        lines.append("| " + " | ".join([
            r["cell"], shape, _ms(impls.get("xla")), _tf(impls.get("xla")), _ms(ours), _tf(ours),
            ratio, bar, _tf(impls.get("torch")), peak, check]) + " |")
    missed = [r["cell"] for r in rows if not r.get("meets_bar")]
    lines += ["", f"Bar: jcm / XLA speed >= {BAR['large']} on large cells (>= {LARGE_FLOPS:.1e} "
              f"flops per call), >= {BAR['small']} on small ones, and the answer within "
              f"the dtype's error bar of XLA's. fp32 is default precision (TF32, as XLA on this "
              f"GPU), fp32-highest full float32; peak: the chip's dense peak for the mode. "
              f"Cells missing the bar: {', '.join(missed) if missed else 'none'}."]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_matmul",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", default=None,
                   help="comma-separated cell names (default: all; see --list)")
    p.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    p.add_argument("--list", action="store_true", help="print the cell names and exit")
    p.add_argument("--calls", type=int, default=CALLS, help="calls per timed region")
    p.add_argument("--repeats", type=int, default=10, help="timed regions per measurement")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny cells (the default without GPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.path.join("benchmarks", "results"))
    p.add_argument("--tag", default=None, help="file-name prefix (default: a timestamp)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    opts = parse_args(argv)
    if opts.list:
        print("\n".join(c.name for c in GRID))
        return 0
    smoke = opts.cpu_smoke or jax.default_backend() != "gpu"
    cells = list(SMOKE) if smoke else list(GRID)
    wanted = opts.cells.split(",") if opts.cells else (QUICK if opts.quick else None)
    if wanted and not smoke:
        unknown = set(wanted) - {c.name for c in GRID}
        if unknown:
            raise SystemExit(f"unknown cells {sorted(unknown)}; --list shows them")
        cells = [c for c in cells if c.name in wanted]
    if smoke:
        opts.calls, opts.repeats = min(opts.calls, 3), min(opts.repeats, 2)
    torch_module, torch_note = _import_torch(argparse.Namespace(no_torch=opts.no_torch))
    env = environment(torch_module)
    if torch_note:
        env["torch_skipped"] = torch_note
    print(f"# device: {env['gpu']}, jax backend {env['jax_backend']}, timer: {TIMER}",
          flush=True)
    if jcm is None or not env.get("jcm_gpu_available"):
        print("# WARNING: jax_cusolver_ms's CUDA extension is not in use: the jcm column "
              "times XLA's fallback" + (" (no GPU: a smoke check of the runner)" if smoke else ""),
              flush=True)
    peak_kind = env.get("gpu") or env.get("device_kind") or ""
    rows, started = [], time.perf_counter()
    for i, cell in enumerate(cells):
        t0 = time.perf_counter()
        try:
            row = run_cell(cell, opts, torch_module, peak_tflops(peak_kind, cell.peak_mode))
        except Exception as exc:  # noqa: BLE001  (a runner bug or XLA failing: record, go on)
            row = {"cell": cell.name, **dataclasses.asdict(cell), "flops": cell.flops,
                   "size_class": cell.size_class, "peak_tflops": None, "meets_bar": False,
                   "impls": {"xla": {"failed": _short(exc)}}, "traceback": traceback.format_exc()}
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        summary = " ".join(f"{k}={_ms(v)}ms/{_tf(v)}TF" for k, v in row["impls"].items())
        print(f"[{i + 1}/{len(cells)}] {cell.name}: {summary} "
              f"{'' if row.get('meets_bar') else 'MISS'} ({row['seconds']} s)", flush=True)

    table = markdown(rows, env, opts)
    slug = re.sub(r"[^A-Za-z0-9.-]+", "-", str(env["gpu"])).strip("-") or "unknown"
    stem = (f"{opts.tag or datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}_matmul_{slug}")
    os.makedirs(opts.out, exist_ok=True)
    with open(os.path.join(opts.out, stem + ".json"), "w") as f:
        json.dump({"environment": env, "args": vars(opts), "cells": rows,
                   "seconds": round(time.perf_counter() - started, 1)}, f, indent=1)
    with open(os.path.join(opts.out, stem + ".md"), "w") as f:
        f.write(table)
    print(f"\n# wrote {os.path.join(opts.out, stem)}.{{json,md}}\n")
    print(table, flush=True)
    return 0 if all(r.get("meets_bar") for r in rows) or smoke else 1


if __name__ == "__main__":
    sys.exit(main())
