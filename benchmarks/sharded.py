"""One device against a batch sharded over several: each op jitted, `auto` and JAX's own side
by side, the batch on one device and then sharded over N (`P('b')` on a one-axis mesh).

    python -m benchmarks.sharded                       # every GPU of this host, the issue's set
    python -m benchmarks.sharded --ops lu_factor:1024,svd:256 --batch 64 --devices 2
    python -m benchmarks.sharded --platform cpu --batch 8 --ops lu_factor:16   # (tests)

Per op and implementation: the wall time of a call (median after warm-up; the sharded call
ends when every device is done), the speed-up of N devices over one, the efficiency (one
device's share of the batch, B/N, alone on one device, over the sharded call: 1 when sharding
costs nothing), the collectives in the compiled sharded program (all-gather, all-to-all,
all-reduce, collective-permute, reduce-scatter: none is needed for a batch), and the memory one
device holds for the call (XLA's memory analysis: arguments, outputs and temporaries). Writes
sharded.json (a report of this one part: `python -m benchmarks.report --render REPORT.json
sharded.json` merges it into the GPU's report) and sharded.md under --out, and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from benchmarks import bench, render

# The set: batch 128 of lu_factor 1024, qr 512, svd 256, eigh 512, eig 256, matmul 1024.
DEFAULT_OPS = "lu_factor:1024,qr:512,svd:256,eigh:512,eig:256,matmul:1024"
COLLECTIVES = ("all-gather", "all-to-all", "all-reduce", "collective-permute", "reduce-scatter")


def programs(name: str):
    """(ours, JAX's, build(key, batch, n, dtype) -> operands) of one op."""
    if name == "matmul":
        def build(key, batch, n, dtype):
            ka, kb = jax.random.split(key)
            return (jax.random.normal(ka, (batch, n, n), dtype),
                    jax.random.normal(kb, (batch, n, n), dtype))
        # Both at full float32 precision, as every other op here: by default jcm.matmul, like
        # XLA's dot on the GPU, rounds float32 operands to TF32.
        return (lambda a, b: bench.jcm.matmul(a, b, precision="highest"),
                lambda a, b: jnp.matmul(a, b, precision="highest"), build)
    op = bench.OPS[name]
    return (op.our_fn("auto", None), op.reference,
            lambda key, batch, n, dtype: op.build(key, batch, n, dtype)[0])


def collectives(text: str) -> dict:
    return {c: text.count(f" {c}(") + text.count(f" {c}-start(") for c in COLLECTIVES
            if f" {c}(" in text or f" {c}-start(" in text}


def device_bytes(compiled) -> int | None:
    """What one device holds for the call: arguments, outputs and temporaries (XLA's own
    analysis of the per-device program)."""
    try:
        m = compiled.memory_analysis()
        return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes)
    except Exception:  # noqa: BLE001  (a backend without the analysis)
        return None


def wall_ms(fn, args, repeats: int, warmup: int) -> float:
    """The median wall time of a call: a sharded call ends when every device is done."""
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    return statistics.median(bench._wall_ms(lambda: fn(*args)) for _ in range(repeats))


def measure(fn, operands, repeats, warmup) -> dict:
    compiled = jax.jit(fn).lower(*operands).compile()
    return {"ms": wall_ms(compiled, operands, repeats, warmup),
            "collectives": collectives(compiled.as_text()), "device_bytes": device_bytes(compiled)}


def run(args) -> dict:
    devices = jax.devices(args.platform)[:args.devices or None]
    if len(devices) < 2:
        raise SystemExit(f"sharded: needs two {args.platform} devices or more, has {len(devices)}")
    mesh = Mesh(np.array(devices), ("b",))
    sharding, one = NamedSharding(mesh, P("b")), devices[0]
    rows = []
    for spec in args.ops.split(","):
        name, _, n = spec.partition(":")
        ours, theirs, build = programs(name)
        operands = build(jax.random.key(0), args.batch, int(n), np.dtype(args.dtype))
        row = {"op": name, "batch": args.batch, "n": int(n), "dtype": args.dtype}
        # One device's share of the batch, alone on one device: the sharded call's ideal. An op
        # whose time grows less than its batch (a batched kernel not yet filling the GPU at B)
        # cannot speed up N-fold however well it is sharded; this says whether sharding costs.
        share = [x[:args.batch // len(devices)] for x in operands]
        for label, fn in (("ours", ours), ("jax", theirs)):
            try:
                single = measure(fn, [jax.device_put(x, one) for x in operands], args.repeats,
                                 args.warmup)
                spread = measure(fn, [jax.device_put(x, sharding) for x in operands],
                                 args.repeats, args.warmup)
                alone = measure(fn, [jax.device_put(x, one) for x in share], args.repeats,
                                args.warmup)
                row[label] = {"one": single, "sharded": spread, "share": alone,
                              "speedup": single["ms"] / spread["ms"],
                              "efficiency": alone["ms"] / spread["ms"]}
            except Exception as exc:  # noqa: BLE001  (recorded; the next op still runs)
                row[label] = {"failed": bench.short(exc)}
        rows.append(row)
        print(render.sharded_row(row), flush=True)
    return {"environment": bench.environment(None), "devices": len(devices),
            "platform": args.platform, "dtype": args.dtype, "rows": rows}


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.sharded", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", default=DEFAULT_OPS, help="op:n,... (default: %(default)s)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--devices", type=int, default=None, help="how many (default: all)")
    p.add_argument("--platform", default="gpu")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", default=None, help="folder for sharded.json and sharded.md")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    part = run(args)
    text = render.sharded_markdown(part)
    print(text)
    if args.out:
        # A report.json of this one part: `python -m benchmarks.report --render` merges it into
        # the GPU's report.
        os.makedirs(args.out, exist_ok=True)
        doc = {"format": render.FORMAT, "gpu": part["environment"].get("gpu"), "sharded": part}
        with open(os.path.join(args.out, "sharded.json"), "w") as f:
            json.dump(doc, f, indent=1)
        with open(os.path.join(args.out, "sharded.md"), "w") as f:
            f.write(text)
    failed = [r["op"] for r in part["rows"] if any("failed" in r[k] for k in ("ours", "jax"))]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
