"""Tests of the random-shape benchmark: the draw (random_shapes.py), the inputs and error
measures of rectangular, complex and several-right-hand-side calls (bench.py), and the report's
random part (report.py, render.py). On a CPU.
"""
import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import random_shapes  # noqa: E402
# The module's own autouse fixture (pytest takes fixtures from a module's namespace): `auto`
# reads no measured table here either.
from test_benchmarks import _auto_reads_no_table, _exit_recorded  # noqa: E402, F401


# --- the draw -----------------------------------------------------------------------------------

def test_draw_is_reproducible_and_a_larger_count_extends_it():
    first = random_shapes.draw_shapes(50, seed=1)
    assert first == random_shapes.draw_shapes(50, seed=1) and len(first) == 50
    assert random_shapes.draw_shapes(80, seed=1)[:50] == first
    assert random_shapes.draw_shapes(50, seed=2) != first
    assert random_shapes.draw_shapes(0, seed=1) == []


def test_draw_respects_every_bound():
    shapes = random_shapes.draw_shapes(4000, seed=3)
    assert len(shapes) == 4000
    for s in shapes:
        assert set(s) == {"op", "dtype", "batch", "m", "n", "nrhs"}
        assert s["op"] in random_shapes.OPS and s["dtype"] in random_shapes.DTYPES
        assert 2 <= s["n"] <= 4096 and 2 <= s["m"] <= 4096
        if s["op"] in random_shapes.RECTANGULAR:
            assert s["m"] <= 16 * s["n"] and s["n"] <= 16 * s["m"]
        else:
            assert s["m"] == s["n"]
        assert 1 <= s["nrhs"] <= 256 if s["op"] in random_shapes.SOLVES else s["nrhs"] == 1
        assert 1 <= s["batch"] <= random_shapes.batch_cap(max(s["m"], s["n"]))
        assert random_shapes.input_bytes(s) <= 8e9
    # The caps: 10^5 up to 32, 4096 up to 128, 256 up to 1024, 16 beyond.
    assert [random_shapes.batch_cap(k) for k in (2, 32, 33, 128, 129, 1024, 1025, 4096)] == \
        [100_000, 100_000, 4096, 4096, 256, 256, 16, 16]
    # Every op and dtype drawn; n log-uniform: P(n <= 64) = log(65 / 2) / log(4097 / 2).
    assert {s["op"] for s in shapes} == set(random_shapes.OPS)
    assert {s["dtype"] for s in shapes} == set(random_shapes.DTYPES)
    small = sum(s["n"] <= 64 for s in shapes) / len(shapes)
    assert small == pytest.approx(math.log(65 / 2) / math.log(4097 / 2), abs=0.04)
    # About half the rectangular ops' draws square; tall and wide ones both; batches up to 10^5.
    rect = [s for s in shapes if s["op"] in random_shapes.RECTANGULAR]
    assert 0.4 < sum(s["m"] == s["n"] for s in rect) / len(rect) < 0.65
    assert any(s["m"] >= 8 * s["n"] for s in rect) and any(s["n"] >= 8 * s["m"] for s in rect)
    assert max(s["batch"] for s in shapes) > 10_000
    assert max(s["nrhs"] for s in shapes) > 100


def test_draw_takes_only_the_ops_jax_has_and_the_dtypes_the_package_takes():
    bench = importlib.import_module("benchmarks.bench")
    from jax_cusolver_ms._primitive import SOLVER_DTYPES

    assert set(random_shapes.OPS) <= set(bench.OPS)
    assert not {"ldl_factor", "ldl_solve", "svd_qr"} & set(random_shapes.OPS)
    assert {"lstsq", "pinv"} <= set(random_shapes.OPS)
    assert {np.dtype(d) for d in random_shapes.DTYPES} <= set(SOLVER_DTYPES)


def test_draw_redraws_what_exceeds_the_input_cap_and_filters():
    cap_gb = 2e-4  # 200 kB: most of the full space's draws are over it
    shapes = random_shapes.draw_shapes(300, seed=4, max_input_gb=cap_gb)
    assert len(shapes) == 300
    assert all(random_shapes.input_bytes(s) <= cap_gb * 1e9 for s in shapes)
    uncapped = random_shapes.draw_shapes(300, seed=4)
    assert sum(random_shapes.input_bytes(s) > cap_gb * 1e9 for s in uncapped) > 100
    shapes = random_shapes.draw_shapes(200, seed=5, ops=["qr", "lstsq"], dtypes=["complex64"],
                                       max_n=24, max_batch=8)
    assert {s["op"] for s in shapes} == {"qr", "lstsq"} and {s["dtype"] for s in shapes} == \
        {"complex64"}
    assert all(max(s["m"], s["n"]) <= 24 and s["batch"] <= 8 for s in shapes)
    for bad in (dict(ops=["ldl_factor"]), dict(dtypes=["float16"]), dict(ops=[]),
                dict(max_input_gb=1e-12), dict(max_n=8192)):
        with pytest.raises(ValueError):
            random_shapes.draw_shapes(3, seed=0, **bad)


def test_input_bytes_is_what_the_builders_make():
    bench = importlib.import_module("benchmarks.bench")
    for s in random_shapes.draw_shapes(200, seed=6, max_n=64):
        op = bench.OPS[s["op"]]
        shapes = jax.eval_shape(lambda: op.build(jax.random.key(0), s["batch"], s["n"],
                                                 s["dtype"], rows=s["m"], nrhs=s["nrhs"])[0])
        assert sum(x.size * x.dtype.itemsize for x in shapes) == random_shapes.input_bytes(s), s
        assert shapes[0].shape == (s["batch"], s["m"], s["n"]) and shapes[0].dtype == s["dtype"]


# --- inputs and error measures ------------------------------------------------------------------

def test_builders_make_rectangular_complex_hermitian_and_several_rhs_inputs():
    bench = importlib.import_module("benchmarks.bench")
    key = jax.random.key(1)
    (a,), _ = bench.OPS["qr"].build(key, 3, 7, "complex64", rows=20)
    assert a.shape == (3, 20, 7) and a.dtype == jnp.complex64
    assert np.abs(np.asarray(a).imag).max() > 0.1
    (a, b), _ = bench.OPS["lstsq"].build(key, 3, 9, "float64", rows=4, nrhs=5)
    assert a.shape == (3, 4, 9) and b.shape == (3, 4, 5)
    for name in ("eigh", "eigvalsh", "cholesky", "cho_solve"):
        a = np.asarray(bench.OPS[name].build(key, 4, 12, "complex128", nrhs=3)[0][0])
        assert np.abs(a.imag).max() > 0.1
        np.testing.assert_allclose(a, np.conj(np.swapaxes(a, -1, -2)), atol=1e-12)
        if name.startswith("cho"):
            assert np.linalg.eigvalsh(a).min() > 0.5  # A A^H / n + I
    (a, b), x = bench.OPS["solve"].build(key, 2, 10, "complex64", nrhs=6)
    assert b.shape == x.shape == (2, 10, 6)
    np.testing.assert_allclose(np.asarray(a, np.complex128) @ np.asarray(x, np.complex128), b,
                               rtol=1e-5, atol=1e-5)
    (a, c), _ = bench.OPS["qr_multiply"].build(key, 2, 10, "float32", nrhs=4)
    assert c.shape == (2, 10, 4)
    (a,), (d, cond) = bench.OPS["det"].build(key, 2, 10, "complex64")
    np.testing.assert_allclose(np.abs(np.asarray(d)), 1.0, rtol=1e-4)
    assert np.iscomplexobj(np.asarray(d)) and np.all(np.asarray(cond) >= 1)


def _wrong(out, key):
    """Every floating leaf of an answer off by a random 50% per entry."""
    leaves, tree = jax.tree.flatten(out)
    keys = jax.random.split(key, len(leaves))
    return tree.unflatten([
        x * (1 + 0.5 * jax.random.normal(k, x.shape)).astype(x.dtype)
        if jnp.issubdtype(x.dtype, jnp.inexact) else x for x, k in zip(leaves, keys)])


@pytest.mark.parametrize("op, dtype, rows, n, nrhs", [
    ("lu_factor", "complex128", None, 12, None), ("solve", "complex64", None, 12, 5),
    ("inv", "complex64", None, 12, None), ("det", "complex128", None, 12, None),
    ("cholesky", "complex64", None, 12, None), ("cho_solve", "complex128", None, 12, 3),
    ("qr", "complex64", 40, 12, None), ("qr", "float64", 5, 12, None),
    ("qr_r", "complex128", 30, 10, None), ("qr_multiply", "complex64", None, 12, 4),
    ("eigh", "complex64", None, 12, None), ("eigvalsh", "complex128", None, 12, None),
    ("eig", "complex64", None, 12, None), ("eigvals", "complex128", None, 12, None),
    ("svd", "complex64", 36, 12, None), ("svd", "float32", 6, 12, None),
    ("svdvals", "complex128", 4, 12, None), ("lstsq", "complex64", 30, 10, 3),
    ("lstsq", "float64", 6, 12, 4), ("pinv", "complex64", 20, 8, None),
    ("pinv", "float32", 5, 12, None)])
def test_errors_are_small_on_jax_answers_and_large_on_wrong_ones(op, dtype, rows, n, nrhs):
    bench = importlib.import_module("benchmarks.bench")
    o = bench.OPS[op]
    args, truth = o.build(jax.random.key(2), 3, n, dtype, **bench._shape_kw(rows, nrhs))
    out = o.reference(*args)
    error = float(o.error(args, truth, out))
    assert error <= o.floor(dtype) / 100
    wrong = float(o.error(args, truth, _wrong(out, jax.random.key(3))))
    assert wrong > max(o.floor(dtype), bench.ERROR_RATIO * error)


def test_lstsq_error_asks_the_minimum_norm_solution_of_a_wide_system():
    # x plus a vector of A's null space solves A x = b as well: only the minimum norm tells.
    bench = importlib.import_module("benchmarks.bench")
    o = bench.OPS["lstsq"]
    (a, b), truth = o.build(jax.random.key(4), 2, 12, "float64", rows=5, nrhs=2)
    x = o.reference(a, b)[0]
    null = jax.vmap(lambda m: jnp.linalg.svd(m)[2][-1])(a)  # A v = 0
    assert float(jnp.max(jnp.abs(jnp.einsum("bij,bj->bi", a, null)))) < 1e-12
    off = x + null[..., None]
    assert float(o.error((a, b), truth, (x,))) < 1e-13
    assert float(o.error((a, b), truth, (off,))) > 0.1


def test_complex_dtypes_take_their_real_counterparts_floor():
    bench = importlib.import_module("benchmarks.bench")
    assert bench.OPS["qr"].floor("complex64") == bench.ERROR_FLOOR["float32"]
    assert bench.OPS["det"].floor("complex128") == bench.OPS["det"].error_floor["float64"]


# --- the report's random part -------------------------------------------------------------------

def _entry(index, op, jax_ms, ours_ms, status="ok", ok=True, note=None, m=8, n=8, nrhs=1):
    e = {"index": index, "op": op, "dtype": "float32", "batch": 4, "m": m, "n": n, "nrhs": nrhs,
         "status": status, "explain": {"strategy": "batched", "lanes": 1}, "error_bar": 1e-3,
         "impls": {"jax": {"median_ms": jax_ms, "min_ms": jax_ms, "error": 1e-7},
                   "jcm:auto": {"median_ms": ours_ms, "min_ms": ours_ms, "error": 1e-7,
                                "ok": ok}}}
    if status == "skipped":
        e["impls"], e["note"] = {"jax": {"probe_ms": 30e3}}, note
    return e


def test_random_summary_lists_every_shape_below_parity():
    render = importlib.import_module("benchmarks.render")
    shapes = [_entry(0, "qr", 1.0, 2.0), _entry(1, "solve", 1.0, 1.0, nrhs=3),
              _entry(2, "svd", 1.0, 1.08, m=40), _entry(3, "eigh", 4.0, 1.0),
              _entry(4, "eig", 0, 0, status="skipped", note="JAX: one call took 30 s (> 20 s)"),
              _entry(5, "inv", 1.0, 1.02), _entry(6, "lu_factor", 1.0, 0.5, ok=False)]
    s = render.summarize_random(shapes)
    assert s["shapes"] == 7 and s["measured"] == 5
    assert s["geomean_vs_jax"] == pytest.approx((0.5 * 1 / 1.08 * 4 / 1.02) ** (1 / 5))
    assert [b["index"] for b in s["below_parity"]] == [0, 2]  # slowest first; 5 is 0.98x
    assert s["below_parity"][1]["shape"] == "svd float32 4x40x8"
    assert s["below_low_bar"] == 1 and s["failures"] == 1
    assert s["skipped"] == ["eig float32 4x8x8: JAX: one call took 30 s (> 20 s)"]
    part = {"args": {"count": 8, "seed": 3, "ops": ["qr"], "dtypes": ["float32"], "max_n": 64},
            "complete": False, "total": 8, "summary": s, "shapes": shapes}
    md = render.random_markdown(part)
    assert "7 shapes drawn with seed 3: geometric mean of the speed-up over JAX **" in md
    assert "below 0.95x: 2, below 0.90x: 1; skipped: 1; failures: 1." in md
    assert "**Partial: 7 of 8 shapes.**" in md
    assert "| 0 | qr float32 4x8x8 | 0.50x | batched |" in md
    assert "| 1 | solve | float32 | 4 | 8x8 | 3 |" in md and "WRONG auto" in md
    brief = render.brief({"gpu": "G", "grid": "x", "random": part})
    assert "random: 7 shapes drawn with seed 3" in brief and "#2 svd float32 4x40x8" in brief
    page = render.docs_page([("G", {"gpu": "G", "random": part})])
    assert "### Random shapes" in page and "- svd float32 4x40x8: 0.93x (auto: batched)" in page


def test_report_random_alone_writes_its_part_shows_it_and_resumes(tmp_path, monkeypatch,
                                                                  capsys):
    out = tmp_path / "out"
    report = importlib.import_module("benchmarks.report")
    # Both runs in this process: the resume keeps a shape only where `auto` still makes the
    # plan recorded for it, and here `auto` reads no table (_auto_reads_no_table), where a
    # process of its own on a GPU would read the GPU's. The smoke grid's space on any platform:
    # a GPU's default grid draws batches in the thousands.
    smoke = ["--grid", "smoke", "--only", "random"]
    assert report.main([*smoke, "--random", "4", "--seed", "0", "--out", str(out),
                        "--no-torch", "--no-plots"]) == 0
    stdout = capsys.readouterr().out
    doc = json.loads((out / "report.json").read_text())
    assert "square" not in doc and "matmul" not in doc
    part = doc["random"]
    drawn = random_shapes.draw_shapes(4, 0, max_n=24, max_batch=8)  # the smoke grid's space
    assert part["complete"] and part["args"]["seed"] == 0 and part["args"]["count"] == 4
    assert [{k: e[k] for k in drawn[0]} for e in part["shapes"]] == drawn
    assert [e["index"] for e in part["shapes"]] == [0, 1, 2, 3]
    assert all(e["status"] == "ok" and e["impls"]["jcm:auto"]["ok"] for e in part["shapes"])
    assert part["summary"]["measured"] == 4 and part["summary"]["geomean_vs_jax"] > 0
    md = (out / "report.md").read_text()
    assert "## Random shapes" in md and "### Every shape" in md
    assert "4 shapes drawn with seed 0: geometric mean" in md
    assert "random: 4 shapes drawn with seed 0" in stdout

    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert report.main(["--show", str(out / "report.json")]) == 0

    # Resumed with two more: the four kept as they were, the two new ones measured.
    seeds = []
    real = report.bench.run_cell

    def counting(*a, seed, **kw):
        seeds.append(seed)
        return real(*a, seed=seed, **kw)

    monkeypatch.setattr(report.bench, "run_cell", counting)
    argv = [*smoke, "--random", "6", "--seed", "0", "--out", str(out), "--no-torch", "--no-plots",
            "--resume"]
    assert report.main(argv) == 0
    assert seeds == [4, 5]
    again = json.loads((out / "report.json").read_text())["random"]
    assert again["shapes"][:4] == part["shapes"] and len(again["shapes"]) == 6
    # Another seed draws other shapes: nothing is kept.
    seeds.clear()
    assert report.main([*smoke, "--random", "2", "--seed", "9", "--out", str(out), "--no-torch",
                        "--no-plots", "--resume"]) == 0
    assert seeds == [0, 1]
    # Resumed without --random or --seed: that draw goes on (not the grid's 4 with seed 0).
    seeds.clear()
    assert report.main([*smoke, "--out", str(out), "--no-torch", "--no-plots", "--resume"]) == 0
    assert seeds == []
    args = json.loads((out / "report.json").read_text())["random"]["args"]
    assert (args["count"], args["seed"]) == (2, 9)


def test_report_random_stops_at_its_budget_and_keeps_the_earlier_shapes(monkeypatch):
    report = importlib.import_module("benchmarks.report")
    clock = [0.0]

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed, rows, nrhs):
        clock[0] += 10.0
        return {"op": op.name, "dtype": dtype, "batch": batch, "m": rows, "n": n, "nrhs": nrhs,
                "status": "ok", "impls": {"jax": {"median_ms": 1.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)
    shapes = random_shapes.draw_shapes(5, seed=2, max_n=16)
    earlier = [dict(shapes[4], index=4, status="ok", impls={}, mark="kept")]
    args = type("Args", (), dict(budget_s=25.0))()
    written = []
    entries = report.run_random(args, type("B", (), dict(seed=0, lanes=None))(), shapes,
                                written.append, earlier)
    # Shapes start at 0, 10 and 20 s; the fourth would start at 30 s; the fifth is kept.
    assert [e["index"] for e in entries] == [0, 1, 2, 4] and entries[-1]["mark"] == "kept"
    assert [e["index"] for e in written[0]] == [0, 4]  # a checkpoint keeps the unreached one
    assert [e["index"] for e in written[-1]] == [0, 1, 2, 4]


def test_report_random_stops_at_a_shape_past_the_cell_limit_and_records_it(monkeypatch):
    # A shape still running after --cell-limit-s: the checkpoint lists it as skipped, the
    # earlier shapes after it kept, and the process exits (here: the exit recorded, the stuck
    # call then let go). A --resume keeps the skipped shape and goes on past it.
    report = importlib.import_module("benchmarks.report")
    stopped, codes = _exit_recorded(monkeypatch, report)

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed, rows, nrhs):
        if seed == 1:
            assert stopped.wait(10), "the cell limit did not fire"
        return {"op": op.name, "dtype": dtype, "batch": batch, "m": rows, "n": n, "nrhs": nrhs,
                "status": "ok", "impls": {"jax": {"median_ms": 1.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    shapes = random_shapes.draw_shapes(3, seed=2, max_n=16)
    earlier = [dict(shapes[2], index=2, status="ok", impls={}, mark="kept")]
    args = type("Args", (), dict(budget_s=None, cell_limit_s=0.2))()
    written = []
    report.run_random(args, type("B", (), dict(seed=0, lanes=None))(), shapes,
                      written.append, earlier)
    assert codes == [report.EXIT_CELL_LIMIT]
    at_stop = written[1]  # after shape 0's checkpoint, the stop's
    assert [(e["index"], e["status"]) for e in at_stop] == [(0, "ok"), (1, "skipped"), (2, "ok")]
    assert "--cell-limit-s 0.2" in at_stop[1]["note"] and at_stop[2]["mark"] == "kept"
    assert at_stop[1]["op"] == shapes[1]["op"] and at_stop[1]["impls"] == {}
    stopped.clear()
    again = report.run_random(args, type("B", (), dict(seed=0, lanes=None))(), shapes,
                              lambda e: None, at_stop)
    assert [e["status"] for e in again] == ["ok", "skipped", "ok"] and not stopped.is_set()


def test_report_random_shards_measure_their_shapes_and_keep_the_others(monkeypatch):
    # One process per GPU: shard k of 2 measures shapes k, k + 2, ...; the other shard's
    # earlier results ride along, each entry says its own index.
    report = importlib.import_module("benchmarks.report")
    measured = []

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed, rows, nrhs):
        measured.append(seed)
        return {"op": op.name, "dtype": dtype, "batch": batch, "m": rows, "n": n, "nrhs": nrhs,
                "status": "ok", "impls": {"jax": {"median_ms": 1.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)
    shapes = random_shapes.draw_shapes(5, seed=2, max_n=16)
    earlier = [dict(shapes[2], index=2, status="ok", impls={}, mark="kept")]
    args = type("Args", (), dict(budget_s=None, shard=(1, 2)))()
    entries = report.run_random(args, type("B", (), dict(seed=100, lanes=None))(), shapes,
                                lambda e: None, earlier)
    assert measured == [101, 103]
    assert [e["index"] for e in entries] == [1, 2, 3] and entries[1]["mark"] == "kept"
    assert all(e["op"] == shapes[e["index"]]["op"] for e in entries)


def test_report_random_options_and_grids():
    report = importlib.import_module("benchmarks.report")
    args, _ = report.parse_args(["--random", "5"])
    assert args.only == "random" and args.ops == [] and args.matmul_cells == []
    assert args.random_args["count"] == 5 and args.random_args["seed"] == 0
    assert args.random_bench_args.strategies == ["auto"] and args.random_bench_args.no_torch
    args, _ = report.parse_args(["--grid", "smoke", "--random", "7", "--seed", "3",
                                 "--ops", "lu_factor,ldl_factor"])
    assert args.ops == ["lu_factor", "ldl_factor"] and args.random_args["ops"] == ["lu_factor"]
    assert args.random_args["count"] == 7 and args.random_args["seed"] == 3
    args, _ = report.parse_args(["--grid", "smoke", "--only", "square"])
    assert args.random_args is None
    for argv in (["--random", "3", "--ops", "ldl_factor"], ["--grid", "quick", "--only", "random"]):
        with pytest.raises(SystemExit):
            report.parse_args(argv)
    grids = report.load_grids()["grids"]
    assert grids["full"]["random"] == {"count": 300, "seed": 1}
    assert grids["smoke"]["random"]["count"] > 0 and grids["smoke"]["random"]["max_n"] <= 32


@pytest.mark.parametrize("text, message", [
    ('random.count = 3\nrandom.size = 4', "unknown random keys"),
    ('random.count = 3\nrandom.ops = ["ldl_solve"]', "cannot draw"),
])
def test_grids_file_refuses_a_random_part_it_cannot_run(tmp_path, text, message):
    report = importlib.import_module("benchmarks.report")
    path = tmp_path / "grids.toml"
    path.write_text(f'[g]\ndescription = "x"\n{text}\n')
    with pytest.raises(ValueError, match=message):
        report.load_grids(str(path))


def test_render_merges_random_parts_of_the_same_draw(tmp_path):
    report = importlib.import_module("benchmarks.report")
    env = {"gpu": "Fake GPU", "driver": "1", "versions": {"jax": "0"}, "timer": "t"}
    draw = {"count": 3, "seed": 1, "ops": ["qr"], "dtypes": ["float32"], "max_n": 64,
            "max_batch": None, "max_input_gb": 8.0}

    def doc(entries, **changes):
        return {"format": 1, "gpu": "Fake GPU",
                "random": {"environment": env, "args": dict(draw, **changes),
                           "shapes": entries}}

    older = [dict(_entry(0, "qr", 1.0, 2.0), measured_at=1), dict(_entry(1, "qr", 1.0, 1.0),
                                                                   measured_at=1)]
    newer = [dict(_entry(0, "qr", 1.0, 1.0), measured_at=2), dict(_entry(2, "qr", 3.0, 1.0),
                                                                   measured_at=2)]
    other = [dict(_entry(1, "qr", 9.0, 1.0), measured_at=3)]
    paths = []
    for i, d in enumerate([doc(older), doc(newer), doc(other, seed=2)]):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(d))
    out = tmp_path / "out"
    assert report.main(["--render", *map(str, paths[:2]), "--out", str(out), "--no-plots"]) == 0
    part = json.loads((out / "report.json").read_text())["random"]
    assert part["complete"] and [e["index"] for e in part["shapes"]] == [0, 1, 2]
    assert [e["impls"]["jcm:auto"]["median_ms"] for e in part["shapes"]] == [1.0, 1.0, 1.0]
    assert "## Random shapes" in (out / "report.md").read_text()
    # A part of another draw is not merged into the last file's.
    assert report.main(["--render", *map(str, paths), "--out", str(out), "--no-plots"]) == 0
    part = json.loads((out / "report.json").read_text())["random"]
    assert [e["index"] for e in part["shapes"]] == [1] and not part["complete"]
