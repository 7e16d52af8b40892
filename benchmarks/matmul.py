"""The matmul cells of a benchmark grid: jax_cusolver_ms.matmul (cuBLASLt through this project's
handler) against XLA's own jnp.matmul, and torch.matmul when importable, side by side.

The cells are defined in benchmarks/grids.toml ([[matmul_cells]]); benchmarks.report runs them.
Each measurement times `calls` calls back to back inside one timed region (device events around
the whole jitted function, jax_cusolver_ms.timing.device_time_ms): a single call would add
~0.3 ms of dispatch. The calls read distinct `a` operands (separate arguments, so XLA can neither
merge the calls nor insert copies) and return every result. Reported per call: median and min ms
over repeats, TFLOP/s next to the chip's peak, and our speed relative to XLA's, checked against
the bar (>= 0.97x on large cells, >= 0.9x on small ones). Every answer is checked against XLA's.
"""
from __future__ import annotations

import dataclasses
import time
import traceback

from .bench import device_time_ms, jax, jcm, jnp, np, short

CALLS = 20
REPEATS = 10
WARMUP = 2
LARGE_FLOPS = 1.6e10       # cells at or above this many flops per call are "large"
BAR = {"large": 0.97, "small": 0.90}  # our speed / XLA's, at least

# Dense peak TFLOP/s (no sparsity) by device kind, per compute mode (NVIDIA's data sheets).
_H100_SXM = {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9, "fp64": 66.9}
_H100_PCIE = {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.2, "fp64": 51.2}
PEAKS = (("H100 PCIe", _H100_PCIE), ("H100", _H100_SXM), ("H200", _H100_SXM))

DTYPES = {"bf16": jnp.bfloat16, "fp16": jnp.float16, "fp32": jnp.float32,
          "fp32-highest": jnp.float32, "fp64": jnp.float64}
# Our answer against XLA's: both round to the dtype; TF32 and half precisions differ more.
ERROR_BAR = {"bf16": 3e-2, "fp16": 5e-3, "fp32": 1e-2, "fp32-highest": 1e-5, "fp64": 1e-12}


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
    smoke: bool = False  # a tiny cell for the CPU smoke grid

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


def cells_from(families: list[dict]) -> dict[str, Cell]:
    """The cells of grids.toml's [[matmul_cells]] families, by name."""
    cells = {}
    for family in families:
        for dtype in family["dtypes"]:
            if dtype not in DTYPES:
                raise ValueError(f"grids.toml: matmul dtype {dtype!r} is not one of "
                                 f"{', '.join(DTYPES)}")
            for m, k, n in family["shapes"]:
                cell = Cell(family["kind"], dtype, m, k, n, batch=family.get("batch", 0),
                            epilogue=family.get("epilogue", False),
                            smoke=family.get("smoke", False))
                cells[cell.name] = cell
    return cells


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
    return {"median_ms": median, "min_ms": float(np.min(per_call_ms)),
            "tflops": cell.flops / median / 1e9}


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


def _row(cell, peak):
    return {"cell": cell.name, **{k: v for k, v in dataclasses.asdict(cell).items()
                                  if k != "smoke"},
            "flops": cell.flops, "size_class": cell.size_class, "peak_tflops": peak, "impls": {}}


def run_cell(cell, opts, torch, peak) -> dict:
    """One cell: XLA's time, ours (checked against XLA's answer) and torch's."""
    row = _row(cell, peak)
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
        row["impls"]["jcm"] = {"failed": short(exc)}
        row["meets_bar"] = False
    if torch is not None:
        try:
            row["impls"]["torch"] = measure_torch(torch, torch_fn(torch, cell), args, cell, opts)
        except Exception as exc:  # noqa: BLE001
            row["impls"]["torch"] = {"failed": short(exc)}
    return row


def run(cells, opts, torch, device_kind, done=(), on_row=None, deadline=None) -> list[dict]:
    """Every cell (a cell of `done`, an earlier run's, is kept instead of measured); `on_row`
    after each, e.g. a checkpoint; no cell is started after `deadline` (time.perf_counter())."""
    earlier = {r["cell"]: r for r in done}
    rows = []
    for i, cell in enumerate(cells):
        if cell.name in earlier and "failed" not in earlier[cell.name]["impls"].get("jcm", {}):
            rows.append(earlier[cell.name])
            continue
        if deadline is not None and time.perf_counter() >= deadline:
            print(f"# budget spent: matmul cells from {cell.name} on not measured", flush=True)
            rows += [earlier[c.name] for c in cells[i:] if c.name in earlier]
            break
        t0 = time.perf_counter()
        peak = peak_tflops(device_kind, cell.peak_mode)
        try:
            row = run_cell(cell, opts, torch, peak)
        except Exception as exc:  # noqa: BLE001  (a runner bug or XLA failing: record, go on)
            row = _row(cell, peak)
            row.update(meets_bar=False, impls={"xla": {"failed": short(exc)}},
                       traceback=traceback.format_exc())
        row["seconds"] = round(time.perf_counter() - t0, 1)
        row["measured_at"] = round(time.time(), 1)
        rows.append(row)
        summary = " ".join(f"{k}={_ms(v)}ms/{_tf(v)}TF" for k, v in row["impls"].items())
        print(f"[matmul {i + 1}/{len(cells)}] {cell.name}: {summary} "
              f"{'' if row.get('meets_bar') else 'MISS'} ({row['seconds']} s)", flush=True)
        if on_row is not None:
            on_row(rows)
    return rows


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


def markdown(rows, args: dict) -> str:
    """The table of every matmul cell, and the bar."""
    head = ["cell", "shape", "XLA ms", "XLA TFLOP/s", "jcm ms", "jcm TFLOP/s", "jcm / XLA",
            "bar", "torch TFLOP/s", "peak", "check"]
    lines = [f"Per call, median of {args.get('repeats', REPEATS)} x {args.get('calls', CALLS)} "
             "back-to-back calls.", "",
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
              f"the dtype's error bar of XLA's. fp32 is default precision (TF32, as XLA on the "
              f"GPU), fp32-highest full float32; peak: the chip's dense peak for the mode. "
              f"Cells missing the bar: {', '.join(missed) if missed else 'none'}."]
    return "\n".join(lines) + "\n"
