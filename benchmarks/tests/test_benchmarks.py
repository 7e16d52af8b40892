"""Tests of benchmarks/: the benchmark runner (bench.py), the report (report.py) and the table
builder (build_table.py).

Everything here runs on a CPU: the report's --cpu-smoke grid, the bench's --cpu-smoke mode and
fake timers.
"""
import dataclasses
import importlib
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_cusolver_ms as jcm

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def _auto_reads_no_table():
    """`auto` reads no measured table: what a test asserts must not depend on the table of the
    GPU it runs on."""
    from jax_cusolver_ms import tables

    with tables.using():
        yield


def _cell(op, batch, n, jax_ms, auto_ms, picks="batched", torch_ms=None, dtype="float32"):
    impls = {"jax": {"median_ms": jax_ms}, "jcm:auto": {"median_ms": auto_ms, "ok": True}}
    if torch_ms:
        impls["torch"] = {"median_ms": torch_ms}
    return {"op": op, "dtype": dtype, "batch": batch, "n": n, "impls": impls, "status": "ok",
            "explain": {"strategy": picks, "lanes": 1}}

def test_report_summary():
    report = importlib.import_module("benchmarks.report")
    cells = [_cell("lu_factor", 1, 64, 1.0, 1.0, "xla"),
             _cell("lu_factor", 16, 64, 1.0, 1.1, "xla"),
             _cell("lu_factor", 16, 2048, 700.0, 7.0, "looped", torch_ms=70.0),
             _cell("qr", 16, 64, 4.0, 1.0, "looped"), _cell("qr", 16, 128, 1.0, 1.25, "looped"),
             {"op": "qr", "dtype": "float32", "batch": 256, "n": 2048, "impls": {},
              "status": "skipped", "note": "JAX took 25 s per call at 64x2048 (> 20 s)"}]
    summary = report.summarize(cells)
    per_op = {e["op"]: e for e in summary["per_op"]}
    assert per_op["lu_factor"]["geomean_vs_jax"] == pytest.approx((1 / 1.1 * 100) ** (1 / 3))
    assert per_op["lu_factor"]["geomean_vs_torch"] == pytest.approx(10.0)
    assert per_op["qr"]["geomean_vs_jax"] == pytest.approx(math.sqrt(4 * 0.8))
    assert [b["cell"] for b in summary["cells_below_parity"]] == \
        ["lu_factor float32 16x64", "qr float32 16x128"]
    assert [b["parity"] for b in summary["cells_below_parity"]] == [True, False]
    assert summary["batch1_min_vs_jax"] == 1.0
    assert summary["skipped"] == ["qr float32 256x2048: JAX took 25 s per call at 64x2048 (> 20 s)"]
    # An op whose JAX column is another algorithm (LDL^T against JAX's LU) is counted apart.
    summary = report.summarize(cells + [_cell("ldl_solve", 1, 1024, 1.0, 4.0, "blocked")])
    assert summary["batch1_min_vs_jax"] == 0.25 and summary["batch1_min_vs_jax_same_op"] == 1.0
    text = report.summary_markdown(summary, {"gpu": "G", "driver": "1", "versions": {}}, {}, None)
    assert "lowest speed-up 0.25x (1.00x over the ops JAX has)" in text
    assert "Cells below 0.95x of JAX: 3 (1 where `auto` runs JAX's own lowering, 1 where " \
        "JAX's column is another algorithm, 1 other)" in text


def test_report_skips_cells_beyond_a_slow_jax_one():
    report = importlib.import_module("benchmarks.report")
    slow = {("qr", "float32"): [(16, 1024, 25.0)]}
    assert report._too_slow_before(slow, "qr", "float32", 16, 2048)
    assert report._too_slow_before(slow, "qr", "float32", 64, 1024)
    assert not report._too_slow_before(slow, "qr", "float32", 4, 2048)
    assert not report._too_slow_before(slow, "qr", "float64", 64, 2048)


@pytest.mark.parametrize("fast_ms, rounds", [(0.1, 5), (2.0, 1)])
def test_bench_pools_alternating_rounds_for_small_cells(monkeypatch, fast_ms, rounds):
    bench = importlib.import_module("benchmarks.bench")
    calls = []

    def fake_timer(fn, *inputs, repeats, warmup):
        calls.append(fn)
        return [fast_ms] * repeats

    monkeypatch.setattr(bench, "device_time_ms", fake_timer)
    args = bench.parse_args(["--cpu-smoke"])
    assert args.small_rounds == 5 and args.rounds == 1
    impls = {"jax": {**bench._summary([fast_ms] * 4)},
             "jcm:auto": {**bench._summary([fast_ms * 2] * 4)},
             "jcm:looped": {"failed": "x"}}
    jax_fn, ours_fn = object(), object()
    bench.extra_rounds(impls, {"jax": jax_fn, "jcm:auto": ours_fn}, (), args)
    assert len(calls) == 2 * (rounds - 1)
    # Alternating order: ours first in odd rounds, JAX first in even ones.
    assert calls[:4] == ([ours_fn, jax_fn, jax_fn, ours_fn] if rounds > 1 else [])
    assert len(impls["jax"]["times_ms"]) == 4 * rounds
    assert impls["jax"].get("rounds", 1) == rounds and "rounds" not in impls["jcm:looped"]


@pytest.mark.parametrize("explicit", [1, 3])
def test_the_small_rounds_leave_out_an_impl_far_behind(monkeypatch, explicit):
    # JAX at seconds a call, ours at a tenth of a millisecond: the rounds the small cell adds
    # time ours alone; rounds asked for with --rounds time both.
    bench = importlib.import_module("benchmarks.bench")
    calls = []
    monkeypatch.setattr(bench, "device_time_ms",
                        lambda fn, *a, repeats, warmup: calls.append(fn) or [1.0] * repeats)
    args = bench.parse_args(["--cpu-smoke", "--rounds", str(explicit)])
    impls = {"jax": bench._summary([5000.0] * 3), "jcm:auto": bench._summary([0.1] * 3)}
    bench.extra_rounds(impls, {"jax": "j", "jcm:auto": "o"}, (), args)
    assert calls.count("o") == args.small_rounds - 1
    assert calls.count("j") == explicit - 1
    assert impls["jax"].get("rounds", 1) == explicit


@pytest.mark.parametrize("ours_ms, same, rounds", [
    (6.0, True, 5), (4.0, True, 5), (5.1, True, 1), (6.0, False, 1)])
def test_bench_pools_rounds_where_the_same_lowering_disagrees(monkeypatch, ours_ms, same,
                                                               rounds):
    bench = importlib.import_module("benchmarks.bench")
    calls = []
    monkeypatch.setattr(bench, "device_time_ms",
                        lambda fn, *a, repeats, warmup: calls.append(fn) or [5.0] * repeats)
    args = bench.parse_args(["--cpu-smoke"])
    impls = {"jax": bench._summary([5.0] * 3), "jcm:auto": bench._summary([ours_ms] * 3)}
    bench.extra_rounds(impls, {"jax": "j", "jcm:auto": "o"}, (), args, same_lowering=same)
    assert len(calls) == 2 * (rounds - 1)


def test_bench_interleaves_the_same_lowering_still_apart_after_the_rounds(monkeypatch):
    # A GPU whose state changes with each block of repeats, so that every block of the rounds
    # found JAX's program fast and the same program under auto slow; one call at a time, the
    # state flips after every pair of calls, and interleaved both meet both states alike.
    bench = importlib.import_module("benchmarks.bench")
    count = [0]

    def flipping(fn, *a, repeats, warmup):
        if repeats > 1:
            return [10.0 if fn == "j" else 14.0] * repeats
        count[0] += 1
        return [10.0 if ((count[0] - 1) // 2) % 2 else 14.0]

    monkeypatch.setattr(bench, "device_time_ms", flipping)
    args = bench.parse_args(["--cpu-smoke"])
    impls = {"jax": bench._summary([10.0] * 3), "jcm:auto": bench._summary([14.0] * 3)}
    bench.extra_rounds(impls, {"jax": "j", "jcm:auto": "o"}, (), args, same_lowering=True)
    assert impls["jax"]["interleaved"] == impls["jcm:auto"]["interleaved"] >= 15
    assert len(impls["jax"]["times_ms"]) == impls["jax"]["interleaved"]
    assert sorted(impls["jax"]["times_ms"]) == sorted(impls["jcm:auto"]["times_ms"])
    # Not for two different programs, nor where the rounds already agree.
    for same, ours in ((False, 14.0), (True, 10.0)):
        impls = {"jax": bench._summary([10.0] * 3), "jcm:auto": bench._summary([ours] * 3)}
        monkeypatch.setattr(bench, "device_time_ms",
                            lambda fn, *a, repeats, warmup: [10.0 if fn == "j" else ours] * repeats)
        bench.extra_rounds(impls, {"jax": "j", "jcm:auto": "o"}, (), args, same_lowering=same)
        assert "interleaved" not in impls["jax"]


def test_bench_det_error_is_per_unit_of_condition():
    # JAX's answer passes det's own floor; one flipped sign or a 1% error everywhere fails it,
    # while the same 1% on an ill-conditioned matrix alone weighs less than on a benign one.
    bench = importlib.import_module("benchmarks.bench")
    op = bench.OPS["det"]
    (a,), truth = op.build(jax.random.key(3), 8, 64, np.float32)
    d_true, cond = (np.asarray(x) for x in truth)
    assert np.all(cond >= 1) and d_true.shape == cond.shape == (8,)
    floor = op.error_floor["float32"]
    assert float(op.error((a,), truth, jnp.linalg.det(a))) <= floor
    d = np.asarray(jnp.linalg.det(a))
    assert float(op.error((a,), truth, d * np.where(np.arange(8) == 2, -1, 1))) > floor
    assert float(op.error((a,), truth, d * 1.01)) > floor
    worst, best = int(np.argmax(cond)), int(np.argmin(cond))
    one_off = [float(op.error((a,), truth, np.where(np.arange(8) == i, d_true * 1.01, d_true)))
               for i in (worst, best)]
    assert one_off[0] < one_off[1]


def test_report_forwards_min_repeats_and_no_torch():
    report = importlib.import_module("benchmarks.report")
    _, bench_args = report.parse_args(["--min-repeats", "2", "--no-torch"])
    assert bench_args.min_repeats == 2 and bench_args.no_torch
    _, bench_args = report.parse_args([])
    assert bench_args.min_repeats == 3 and not bench_args.no_torch


def test_report_grid_resumes_and_skips_beyond_slow_jax(monkeypatch):
    report = importlib.import_module("benchmarks.report")
    ran = []

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed):
        ran.append((batch, n))
        probe = 30e3 if (batch, n) == (1, 64) else 1.0  # JAX over the limit at 1x64
        return {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": probe, "probe_ms": probe}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)
    args = type("Args", (), dict(ops=["lu_factor"], dtypes=["float32"], batches=[1, 4],
                                 sizes=[16, 64, 128], jax_limit_s=20.0))()
    bench_args = type("BenchArgs", (), dict(seed=0))()
    done = [{"op": "lu_factor", "dtype": "float32", "batch": 1, "n": 16, "status": "ok",
             "impls": {}, "seconds": 1.0}]
    cells = report.run_grid(args, bench_args, None, lambda cells, total: None, done)
    assert ran == [(1, 64), (4, 16)]  # 1x16 from the earlier run; 1x128, 4x64, 4x128 skipped
    assert [c["status"] for c in cells] == ["ok", "ok", "skipped", "ok", "skipped", "skipped"]
    assert "JAX took 30 s per call at 1x64 (> 20 s)" in cells[2]["note"]


def test_report_resume_measures_again_cells_whose_plan_changed_or_were_slow(monkeypatch):
    report = importlib.import_module("benchmarks.report")
    ran = []

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed):
        ran.append((batch, n))
        return {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 1.0}, "jcm:auto": {"median_ms": 1.0}}}

    def plan(batch, n):  # what auto picks now: lanes from n = 64
        return {"strategy": "looped", "lanes": 4} if n >= 64 else {"strategy": "xla", "lanes": 1}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report.bench, "auto_plan", lambda op, shape, dtype, a: plan(*shape[:2]))
    monkeypatch.setattr(report.bench, "first_operand_shape", lambda op, d, b, n: (b, n, n))
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)

    def earlier(n, strategy, ours_ms):
        return {"op": "lu_factor", "dtype": "float32", "batch": 4, "n": n, "status": "ok",
                "explain": {"strategy": strategy, "lanes": 1},
                "impls": {"jax": {"median_ms": 1.0}, "jcm:auto": {"median_ms": ours_ms}}}

    done = [earlier(16, "xla", 1.0), earlier(32, "xla", 1.25), earlier(64, "xla", 1.0)]
    for redo_below, redo_ops, max_n, min_n, redo_batches, expected in [
            (None, None, None, None, None, [(4, 64)]),
            (0.95, None, None, None, None, [(4, 32), (4, 64)]),
            (None, ["lu_factor"], None, None, None, [(4, 16), (4, 32), (4, 64)]),
            (None, ["lu_factor"], 16, None, None, [(4, 16), (4, 64)]),
            (None, ["lu_factor"], None, 32, None, [(4, 32), (4, 64)]),
            (None, ["lu_factor"], None, 32, [4, 16], [(4, 32), (4, 64)]),
            (None, ["lu_factor"], None, None, [16], [(4, 64)]),
            (None, ["qr"], None, None, None, [(4, 64)])]:
        ran.clear()
        args = type("Args", (), dict(ops=["lu_factor"], dtypes=["float32"], batches=[4],
                                     sizes=[16, 32, 64], jax_limit_s=20.0,
                                     redo_below=redo_below, redo_ops=redo_ops,
                                     redo_max_n=max_n, redo_min_n=min_n,
                                     redo_batches=redo_batches))()
        report.run_grid(args, type("B", (), dict(seed=0))(), None, lambda c, t: None, done)
        assert ran == expected  # 4x64: auto picks lanes now; 4x32: 0.8x before; --redo-ops


def test_report_resume_redo_missing_measures_cells_without_a_column(monkeypatch):
    report = importlib.import_module("benchmarks.report")
    ran = []

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed):
        ran.append(n)
        return {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 1.0}, "jcm:auto": {"median_ms": 1.0},
                          "jcm:enabled": {"median_ms": 1.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report.bench, "auto_plan", lambda *a, **k: {"strategy": "xla"})
    monkeypatch.setattr(report.bench, "first_operand_shape", lambda op, d, b, n: (b, n, n))
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)

    def earlier(n, impls, status="ok"):
        return {"op": "lu_factor", "dtype": "float32", "batch": 4, "n": n, "status": status,
                "explain": {"strategy": "xla", "lanes": 1},
                "impls": {"jax": {"median_ms": 1.0}, **impls}}

    done = [earlier(16, {"jcm:auto": {"median_ms": 1.0}}),
            earlier(32, {"jcm:auto": {"median_ms": 1.0}, "jcm:enabled": {"failed": "x"}}),
            earlier(64, {"jcm:auto": {"median_ms": 1.0}}, status="skipped")]
    bench_args = type("B", (), dict(seed=0, strategies=["auto", "enabled"]))()
    for redo_missing, expected in [(False, []), (True, [16])]:
        ran.clear()
        args = type("Args", (), dict(ops=["lu_factor"], dtypes=["float32"], batches=[4],
                                     sizes=[16, 32, 64], jax_limit_s=20.0,
                                     redo_missing=redo_missing))()
        cells = report.run_grid(args, bench_args, None, lambda c, t: None, done)
        assert ran == expected  # 32 has its enabled column (failed); 64 was skipped
        assert all("jcm:enabled" in c["impls"] for c in cells[:1]) == redo_missing


def test_bench_skips_a_cell_whose_first_jax_call_is_over_the_limit():
    bench = importlib.import_module("benchmarks.bench")
    args = bench.parse_args(["--cpu-smoke", "--jax-limit-s", "1e-9", "--no-torch"])
    cell = bench.run_cell(bench.OPS["lu_factor"], "float32", 2, 8, args, None, seed=0)
    assert cell["status"] == "skipped" and cell["note"].startswith("JAX: one call took")
    assert list(cell["impls"]) == ["jax"] and cell["impls"]["jax"]["probe_ms"] > 0
    args = bench.parse_args(["--cpu-smoke", "--no-torch"])
    cell = bench.run_cell(bench.OPS["lu_factor"], "float32", 2, 8, args, None, seed=0)
    assert cell["status"] == "ok" and "jcm:auto" in cell["impls"]


class _FakeTorch:
    """What bench.run_cell uses of torch, around a "linalg.lu_factor" that sleeps `call_s`
    and counts its calls."""

    def __init__(self, call_s):
        import time
        import types

        self.calls = 0

        def lu_factor(a):
            self.calls += 1
            time.sleep(call_s)
            return a

        class Event:
            def __init__(self, enable_timing):
                self.at = None

            def record(self):
                self.at = time.perf_counter()

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return (end.at - self.at) * 1e3

        self.linalg = types.SimpleNamespace(lu_factor=lu_factor)
        self.cuda = types.SimpleNamespace(synchronize=lambda: None, Event=Event,
                                          empty_cache=lambda: None)

    @staticmethod
    def from_dlpack(x):
        array = np.asarray(x)
        return type("Tensor", (), {"clone": lambda self: array})()


def test_bench_does_not_time_pytorch_past_the_limit():
    bench = importlib.import_module("benchmarks.bench")
    render = importlib.import_module("benchmarks.render")
    args = bench.parse_args(["--cpu-smoke", "--repeats", "2"])
    op = dataclasses.replace(bench.OPS["lu_factor"], torch="linalg.lu_factor")
    # A first call over the limit: not called again, shown as its time in seconds.
    torch = _FakeTorch(0.05)
    args.jax_limit_s = 0.02
    cell = bench.run_cell(op, "float32", 2, 8, args, torch, seed=0)
    assert torch.calls == 1 and cell["status"] == "ok"
    assert cell["impls"]["torch"]["over_limit_ms"] >= 50
    assert render._ms(cell["impls"]["torch"]).endswith(" s")
    # Under the limit: timed, and remembered; a batch it scales to over the limit is not called.
    torch = _FakeTorch(0.01)
    args.jax_limit_s = 1.0
    cell = bench.run_cell(op, "float32", 2, 8, args, torch, seed=0)
    assert torch.calls >= 3 and cell["impls"]["torch"]["median_ms"] >= 10
    calls = torch.calls
    cell = bench.run_cell(op, "float32", 400, 8, args, torch, seed=0)
    assert torch.calls == calls and cell["impls"]["torch"]["estimated"]
    assert cell["impls"]["torch"]["over_limit_ms"] == pytest.approx(
        200 * args.torch_seen[("lu_factor", "float32", 8, None, None)][2])
    assert render._ms(cell["impls"]["torch"]).startswith("~")


def test_enabled_compiles_jaxs_own_code_under_enable_and_switches_back():
    bench = importlib.import_module("benchmarks.bench")
    args = bench.parse_args(["--cpu-smoke", "--no-torch", "--strategies", "auto,enabled"])
    seen = []

    def reference(a):  # traced once, at the compile compile_enabled makes
        seen.append(jcm.enabled())
        return jnp.linalg.inv(a)

    a = jnp.eye(4) * 2
    timed = bench.compile_enabled(reference, (a,))
    assert seen == [True] and not jcm.enabled() and timed is not reference
    result, out = bench.measure_jax(timed, (a,), args)
    np.testing.assert_allclose(out, np.eye(4) / 2)
    assert result["median_ms"] > 0
    # Timed again (--rounds), the program compiled under enable() is reused, not retraced.
    bench.device_time_ms(timed, a, repeats=2, warmup=0)
    assert seen == [True]


def test_enabled_with_jaxs_very_program_takes_jaxs_time(monkeypatch):
    # On the CPU enable() changes nothing: JAX's program, timed once, as JAX's.
    bench = importlib.import_module("benchmarks.bench")
    args = bench.parse_args(["--cpu-smoke", "--no-torch", "--strategies", "auto,enabled"])
    cell = bench.run_cell(bench.OPS["solve"], "float32", 4, 8, args, None, seed=0)
    enabled, jax_ = cell["impls"]["jcm:enabled"], cell["impls"]["jax"]
    assert enabled["same_program_as"] == "jax" and enabled["ok"]
    assert enabled["median_ms"] == jax_["median_ms"] and enabled["times_ms"] == jax_["times_ms"]
    # A program of its own is timed on its own.
    monkeypatch.setattr(bench, "same_program", lambda *a: False)
    cell = bench.run_cell(bench.OPS["solve"], "float32", 4, 8, args, None, seed=0)
    assert "same_program_as" not in cell["impls"]["jcm:enabled"]
    assert cell["impls"]["jcm:enabled"]["median_ms"] > 0


def test_estimate_first_skips_where_jax_loops_and_a_smaller_batch_says_too_slow(monkeypatch):
    bench = importlib.import_module("benchmarks.bench")
    # The estimate itself: one call at a sixteenth of the batch, scaled by the batch.
    ms, probed = bench.estimated_jax_ms(bench.OPS["eig"], "float32", 32, 4, seed=0)
    assert probed == 2 and ms > 0
    args = bench.parse_args(["--cpu-smoke", "--jax-limit-s", "1", "--no-torch",
                             "--estimate-first"])
    asked, estimate = [], {"ms": 5000.0}

    def fake(op, dtype, batch, n, seed, rows=None, nrhs=None):
        asked.append((op.name, batch))
        return estimate["ms"], batch // 16

    monkeypatch.setattr(bench, "estimated_jax_ms", fake)
    cell = bench.run_cell(bench.OPS["eig"], "float32", 32, 4, args, None, seed=0)
    assert cell["status"] == "skipped" and list(cell["impls"]) == []
    assert cell["note"] == "JAX: one call estimated at 5 s from a batch of 2 (> 2 x 1 s)"
    # Not where JAX runs the batch in one call (cholesky), nor for a batch under 16.
    for op, batch in [("cholesky", 32), ("eig", 8)]:
        assert bench.run_cell(bench.OPS[op], "float32", batch, 4, args, None,
                              seed=0)["status"] == "ok"
    assert asked == [("eig", 32)]
    # Under twice the limit the cell is measured, and so it is without the option.
    estimate["ms"] = 1500.0
    assert bench.run_cell(bench.OPS["eig"], "float32", 32, 4, args, None, seed=0)["status"] == "ok"
    args.estimate_first, estimate["ms"] = False, 5000.0
    assert bench.run_cell(bench.OPS["eig"], "float32", 32, 4, args, None, seed=0)["status"] == "ok"
    assert asked == [("eig", 32)] * 2


def test_report_render_merges_runs_without_measuring(tmp_path):
    report = importlib.import_module("benchmarks.report")
    env = {"gpu": "Fake GPU", "driver": "1", "versions": {"jax": "0"}, "timer": "t"}
    args = {"ops": ["lu_factor", "qr"], "dtypes": ["float32"], "batches": [4], "sizes": [16],
            "strategies": ["auto"]}

    def cell(op, jax_ms, ours_ms):
        return {"op": op, "dtype": "float32", "batch": 4, "n": 16, "status": "ok",
                "impls": {"jax": {"median_ms": jax_ms, "min_ms": jax_ms, "error": 0.0},
                          "jcm:auto": {"median_ms": ours_ms, "min_ms": ours_ms, "ok": True,
                                       "error": 0.0}}}

    runs = [{"environment": env, "args": args, "cells": [cell("lu_factor", 1.0, 2.0)]},
            {"environment": env, "args": args, "cells": [cell("qr", 4.0, 1.0),
                                                         cell("lu_factor", 1.0, 1.0)]}]
    paths = []
    for i, run in enumerate(runs):
        paths.append(tmp_path / f"run{i}.json")
        paths[-1].write_text(json.dumps(run))
    out = tmp_path / "out"
    assert report.main(["--render", *map(str, paths), "--out", str(out), "--no-plots"]) == 0
    doc = json.loads((out / "report.json").read_text())
    sq = doc["square"]
    assert sq["complete"] and [c["op"] for c in sq["cells"]] == ["lu_factor", "qr"]
    per_op = {e["op"]: e["geomean_vs_jax"] for e in sq["summary"]["per_op"]}
    assert per_op == {"lu_factor": 1.0, "qr": 4.0}
    assert "| qr | float32 | 1 | 4.00x |" in (out / "report.md").read_text()
    # The report renders from itself to the same cells.
    out2 = tmp_path / "out2"
    assert report.main(["--render", str(out / "report.json"), "--out", str(out2), "--no-plots"]) == 0
    assert json.loads((out2 / "report.json").read_text())["square"]["cells"] == sq["cells"]
    other = dict(runs[0], environment=dict(env, gpu="Other GPU"))
    paths[0].write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="one GPU"):
        report.main(["--render", *map(str, paths), "--out", str(out), "--no-plots"])


def _exit_recorded(monkeypatch, report):
    """report's exit at --cell-limit-s recorded instead of taken (its codes), and an event set
    then, which a fake cell stuck until the limit waits for; no progress bar."""
    stopped, codes = threading.Event(), []

    def fake_exit(code):
        codes.append(code)
        stopped.set()

    monkeypatch.setattr(report, "_exit", fake_exit)
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)
    return stopped, codes


def test_report_grid_stops_at_a_cell_past_the_cell_limit_and_records_it(monkeypatch):
    # The grid's cell still running after --cell-limit-s: the stop's checkpoint lists it as
    # skipped between the cells done and the earlier run's cells not reached, and the process
    # exits (here: the exit recorded, the stuck call then let go).
    report = importlib.import_module("benchmarks.report")
    stopped, codes = _exit_recorded(monkeypatch, report)

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed):
        if n == 64:
            assert stopped.wait(10), "the cell limit did not fire"
        return {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 1.0, "probe_ms": 1.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    earlier = [{"op": "lu_factor", "dtype": "float32", "batch": 1, "n": 128, "status": "ok",
                "impls": {"jax": {"median_ms": 1.0}}, "mark": "kept"}]
    args = type("Args", (), dict(ops=["lu_factor"], dtypes=["float32"], batches=[1],
                                 sizes=[16, 64, 128], jax_limit_s=20.0, cell_limit_s=0.2))()
    written = []
    report.run_grid(args, type("BenchArgs", (), dict(seed=0))(), None,
                    lambda cells, total: written.append(list(cells)), earlier)
    assert codes == [report.EXIT_CELL_LIMIT]
    at_stop = written[1]  # after the first cell's checkpoint, the stop's
    assert [(c["n"], c["status"]) for c in at_stop] == [(16, "ok"), (64, "skipped"), (128, "ok")]
    assert "--cell-limit-s 0.2" in at_stop[1]["note"] and at_stop[2]["mark"] == "kept"


def test_report_grid_stops_starting_cells_when_its_budget_is_spent(monkeypatch):
    report = importlib.import_module("benchmarks.report")
    clock = [0.0]

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed):
        clock[0] += 10.0  # each cell takes 10 s
        return {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 1.0, "probe_ms": 1.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)
    args = type("Args", (), dict(ops=["lu_factor"], dtypes=["float32"], batches=[1, 4],
                                 sizes=[16, 64, 128], jax_limit_s=20.0, budget_s=25.0))()
    cells = report.run_grid(args, type("BenchArgs", (), dict(seed=0))(), None,
                            lambda cells, total: None)
    # Cells start at 0, 10 and 20 s; the fourth would start at 30 s, past the budget.
    assert [(c["batch"], c["n"]) for c in cells] == [(1, 16), (1, 64), (1, 128)]
    # Resumed: the earlier run's cells the budget does not reach stay in the output as they were
    # (budget 0: nothing measured, the earlier run written again).
    earlier = [{"op": "lu_factor", "dtype": "float32", "batch": b, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 1.0}}, "mark": f"{b}x{n}"}
               for b, n in [(4, 64), (1, 16)]]
    for budget, expected in [(0.0, ["1x16", "4x64"]), (5.0, ["1x16", None, "4x64"])]:
        clock[0] = 0.0
        args.budget_s = budget
        written = []
        cells = report.run_grid(args, type("BenchArgs", (), dict(seed=0))(), None,
                                lambda cells, total: written.append(len(cells)), earlier)
        kept = [c.get("mark") for c in cells]
        # Grid order; 1x16 kept, not measured again; with 5 s, 1x64 measured before the stop.
        assert kept == expected
        assert written[-1] == len(expected)


def test_report_resume_keeps_the_earlier_cells_outside_this_runs_grid(monkeypatch):
    report = importlib.import_module("benchmarks.report")
    ran = []

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed):
        ran.append((dtype, batch, n))
        return {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 1.0, "probe_ms": 1.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)
    f32 = [{"op": op, "dtype": "float32", "batch": 4, "n": 16, "status": "ok", "mark": op,
            "impls": {"jax": {"median_ms": 1.0}}} for op in ("lu_factor", "qr")]
    for budget, measured in [(None, [("float64", 4, 16), ("float64", 4, 32)]),
                             (0.0, [])]:
        ran.clear()
        totals = []
        args = type("Args", (), dict(ops=["lu_factor"], dtypes=["float64"], batches=[4],
                                     sizes=[16, 32], jax_limit_s=20.0, budget_s=budget))()
        cells = report.run_grid(args, type("B", (), dict(seed=0))(), None,
                                lambda cells, total: totals.append((len(cells), total)), f32)
        assert ran == measured
        assert [c.get("mark") for c in cells if c["dtype"] == "float32"] == ["lu_factor", "qr"]
        assert len(cells) == 2 + len(measured) and totals[-1] == (len(cells), 4)


def test_report_checkpoints_keep_the_earlier_cells_not_reached_yet(monkeypatch):
    # A run killed mid-cell leaves its last checkpoint: the earlier run's cells of this grid that
    # it had not reached yet must be in it (a resumed grid once lost 177 cells so).
    report = importlib.import_module("benchmarks.report")

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed):
        if n == 64:
            raise KeyboardInterrupt  # the kill, during the third cell
        return {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 1.0, "probe_ms": 1.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)
    monkeypatch.setattr(report, "_stale", lambda cell, args, bench_args: True)  # all measured
    earlier = [{"op": "lu_factor", "dtype": "float32", "batch": 4, "n": n, "status": "ok",
                "mark": n, "impls": {"jax": {"median_ms": 1.0}}} for n in (16, 32, 64, 128)]
    args = type("Args", (), dict(ops=["lu_factor"], dtypes=["float32"], batches=[4],
                                 sizes=[16, 32, 64, 128], jax_limit_s=20.0))()
    written = []
    with pytest.raises(KeyboardInterrupt):
        report.run_grid(args, type("B", (), dict(seed=0))(), None,
                        lambda cells, total: written.append(list(cells)), earlier)
    last = {c["n"]: c.get("mark") for c in written[-1]}
    assert last == {16: None, 32: None, 64: 64, 128: 128}, last


def test_report_shards_split_the_grid_and_render_takes_each_cells_newest(monkeypatch, tmp_path):
    report = importlib.import_module("benchmarks.report")
    ran = {}

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed):
        ran[(batch, n)] = seed
        return {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 2.0, "min_ms": 2.0, "probe_ms": 2.0, "error": 0.0},
                          "jcm:auto": {"median_ms": 1.0, "min_ms": 1.0, "ok": True, "error": 0.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)
    stale = [{"op": "lu_factor", "dtype": "float32", "batch": b, "n": n, "status": "ok",
              "impls": {"jax": {"median_ms": 1.0, "min_ms": 1.0, "error": 0.0},
                        "jcm:auto": {"median_ms": 4.0, "min_ms": 4.0, "ok": True, "error": 0.0}},
              "explain": {"strategy": "xla", "lanes": 1}}
             for b in (1, 4) for n in (16, 64)]
    env = {"gpu": "Fake GPU", "driver": "1", "versions": {"jax": "0"}, "timer": "t"}
    run_args = {"ops": ["lu_factor"], "dtypes": ["float32"], "batches": [1, 4],
                "sizes": [16, 64], "strategies": ["auto"]}
    paths = []
    for k in range(2):
        args = type("Args", (), dict(ops=["lu_factor"], dtypes=["float32"], batches=[1, 4],
                                     sizes=[16, 64], jax_limit_s=20.0, redo_below=0.95,
                                     shard=(k, 2)))()
        cells = report.run_grid(args, type("B", (), dict(seed=100))(), None, lambda c, t: None, stale)
        assert len(cells) == 4
        doc = {"format": 1, "gpu": "Fake GPU",
               "square": report.square_part(env, run_args, cells, 4)}
        paths.append(tmp_path / f"shard{k}" / "report.json")
        paths[-1].parent.mkdir()
        paths[-1].write_text(json.dumps(doc))
    assert ran == {(1, 16): 100, (4, 16): 102, (1, 64): 101, (4, 64): 103}
    for order in (paths, paths[::-1]):
        out = tmp_path / "out"
        assert report.main(["--render", *map(str, order), "--out", str(out), "--no-plots"]) == 0
        doc = json.loads((out / "report.json").read_text())
        assert [c["impls"]["jcm:auto"]["median_ms"] for c in doc["square"]["cells"]] == [1.0] * 4
    with pytest.raises(SystemExit):
        report.parse_args(["--shard", "2/2"])


def test_program_signature_drops_metadata_with_nested_braces():
    # Names and metadata differ, nested braces and a quoted brace included: the same program.
    bench = importlib.import_module("benchmarks.bench")
    line = ('  %{name} = f32[3,16,16]{{2,1,0}} fusion(%p.{k}), kind=kLoop, calls=%fused.{k}, '
            'metadata={{op_name="jit(f)/{op}" extra={{a="}}" b=1}} source_line={k}}}, '
            'backend_config={{"x":"0"}}')
    a = "ENTRY %main.1 {\n" + line.format(name="fusion.1", k=1, op="cholesky") + "\n}"
    b = "ENTRY %main.9 {\n" + line.format(name="fusion.7", k=7, op="jcm_potrf") + "\n}"
    assert bench.text_signature(a) == bench.text_signature(b)
    assert "metadata" not in bench.text_signature(a) and "backend_config" in bench.text_signature(a)
    other = b.replace("kind=kLoop", "kind=kInput")
    assert bench.text_signature(a) != bench.text_signature(other)


def test_program_signature_ignores_the_timer_stamps_slots():
    # On the GPU the timed programs differ in their stamps' slot numbers only (H100).
    bench = importlib.import_module("benchmarks.bench")
    stamp = ('  %s.{k} = f32[3]{{0}} custom-call(%p), custom_call_target="jcm_timer_stamp", '
             'backend_config={{slot = {slot} : i64}}')
    a = "ENTRY %main {\n" + stamp.format(k=1, slot=3) + "\n}"
    b = "ENTRY %main {\n" + stamp.format(k=2, slot=1) + "\n}"
    assert bench.text_signature(a) == bench.text_signature(b)
    assert bench.text_signature(a) != bench.text_signature(a.replace("f32[3]", "f32[4]"))


def test_bench_tells_the_same_compiled_program_from_another():
    # Where auto runs JAX's own lowering with nothing of ours around it (cholesky), the compiled
    # programs are the same (names and source locations aside): a gap there is timer noise.
    bench = importlib.import_module("benchmarks.bench")
    from jax_cusolver_ms import tables
    # n = 128: above the small kernel's n, where the hand-written rules run JAX's potrfBatched.
    a = jnp.eye(128, dtype=jnp.float32)[None] * 4 + jnp.ones((3, 128, 128), jnp.float32)
    with tables.using():  # the hand-written rules, not the GPU's table
        assert bench.same_program(jnp.linalg.cholesky, jcm.cholesky, [a]) is True
    assert bench.same_program(jnp.linalg.cholesky, lambda x: jnp.linalg.cholesky(x) * 2,
                              [a]) is False
    assert bench.same_program(jnp.linalg.cholesky, lambda x: x.no_such_method(), [a]) is None


def test_report_says_which_cells_below_parity_are_the_same_program():
    report = importlib.import_module("benchmarks.report")

    def cell(n, same):
        return {"op": "cholesky", "dtype": "float64", "batch": 256, "n": n, "status": "ok",
                "same_program": same, "explain": {"strategy": "xla", "lanes": 1},
                "impls": {"jax": {"median_ms": 0.04}, "jcm:auto": {"median_ms": 0.05}}}

    summary = report.summarize([cell(16, True), cell(32, False)])
    env = {"gpu": "Fake GPU", "driver": "1", "versions": {"jax": "0"}}
    text = report.summary_markdown(summary, env, {}, None)
    assert "Of these, 1 run the very program JAX compiles" in text
    assert "cholesky float64 256x16: 0.80x (auto runs JAX's own lowering: the same compiled " \
           "program, timer noise)" in text
    assert "256x32: 0.80x (auto runs JAX's own lowering inside this project's " in text


def test_bench_times_jax_once_where_auto_runs_its_very_program():
    # cholesky of one matrix above the small kernel's n: auto runs JAX's own lowering with
    # nothing around it (the same compiled program): ours is checked for its error but not timed
    # again, its time is JAX's. With something of ours around it the program differs: both timed.
    bench = importlib.import_module("benchmarks.bench")
    args = bench.parse_args(["--cpu-smoke", "--no-torch", "--strategies", "auto"])
    n = 80
    cell = bench.run_cell(bench.OPS["cholesky"], "float32", 1, n, args, None, seed=0)
    ours, theirs = cell["impls"]["jcm:auto"], cell["impls"]["jax"]
    assert cell["status"] == "ok" and cell["same_program"] is True
    assert ours["same_program_as"] == "jax" and ours["ok"] is True
    assert ours["times_ms"] == theirs["times_ms"] and ours["median_ms"] == theirs["median_ms"]
    wrapped = dataclasses.replace(bench.OPS["cholesky"],
                                  ours=lambda a, **kw: jnp.tril(jcm.cholesky(a, **kw)))
    cell = bench.run_cell(wrapped, "float32", 1, n, args, None, seed=0)
    assert cell["same_program"] is False and "same_program_as" not in cell["impls"]["jcm:auto"]
    assert cell["impls"]["jcm:auto"]["ok"] is True
    report = importlib.import_module("benchmarks.report")
    assert report.summarize([dict(cell, impls={"jax": {"median_ms": 1.0},
                                               "jcm:auto": {"median_ms": 1.0,
                                                            "same_program_as": "jax"}})]
                            )["same_program_cells"] == 1


@pytest.mark.parametrize("with_plots", [True, False])
def test_report_smoke_grid_writes_json_markdown_and_figures(tmp_path, with_plots):
    if with_plots:
        pytest.importorskip("matplotlib")  # the [bench] extra; without it the report says so
    out = tmp_path / "out"
    args = [sys.executable, "-m", "benchmarks.report", "--grid", "smoke", "--only", "square",
            "--ops", "lu_factor", "--sizes", "8", "--batches", "1,2", "--out", str(out)]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if not with_plots:
        (tmp_path / "hide").mkdir()
        (tmp_path / "hide" / "matplotlib.py").write_text("raise ImportError('hidden by test')")
        env["PYTHONPATH"] = str(tmp_path / "hide")
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((out / "report.json").read_text())
    sq = doc["square"]
    assert sq["complete"] and len(sq["cells"]) == 2 and "matmul" not in doc
    assert all("times_ms" not in i for c in sq["cells"] for i in c["impls"].values())
    assert {e["op"] for e in sq["summary"]["per_op"]} == {"lu_factor"}
    # The smoke grid times JAX's own code under enable() too ("enabled"), its answer checked.
    assert all(c["impls"]["jcm:enabled"]["ok"] for c in sq["cells"])
    md = (out / "report.md").read_text()
    assert "geomean vs JAX" in md and "| lu_factor | float32 | 2 |" in md
    assert "| enabled vs jax |" in md and "compiled under jax_cusolver_ms.enable()" in md
    pngs = sorted(p.name for p in (out / "figures").glob("*.png")) if (out / "figures").exists() else []
    if with_plots:
        assert pngs == ["lu_factor_speedup.png", "lu_factor_times.png", "overview.png"]
    else:
        assert pngs == [] and "matplotlib is not importable" in md
        assert "matplotlib is not importable" in r.stdout


def test_report_on_cpu_writes_nothing_into_the_tree(tmp_path):
    before = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT,
                            capture_output=True, text=True).stdout
    r = subprocess.run([sys.executable, "-m", "benchmarks.report", "--grid", "smoke",
                        "--ops", "cholesky", "--sizes", "8", "--batches", "1",
                        "--matmul-cells", "smoke-fp32-64", "--no-plots"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env=dict(os.environ, JAX_PLATFORMS="cpu", TMPDIR=str(tmp_path),
                                PYTHONDONTWRITEBYTECODE="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    after = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT,
                           capture_output=True, text=True).stdout
    assert after == before
    (report,) = tmp_path.glob("jcm-report-smoke-*/report.json")
    doc = json.loads(report.read_text())
    assert len(doc["square"]["cells"]) == 1 and len(doc["matmul"]["cells"]) == 1


def test_gpu_model_names_the_results_folder():
    render = importlib.import_module("benchmarks.render")
    assert render.gpu_model("NVIDIA H100 80GB HBM3") == "H100"
    assert render.gpu_model("NVIDIA H100 PCIe") == "H100-PCIe"
    assert render.gpu_model("NVIDIA A100-SXM4-80GB") == "A100"


def test_grids_file_is_consistent():
    report = importlib.import_module("benchmarks.report")
    known = report.load_grids()
    assert {"full", "quick", "smoke"} <= set(known["grids"])
    assert len([c for c in known["matmul_cells"].values() if not c.smoke]) == 30


def test_docs_benchmarks_page_is_generated_from_the_report():
    # docs/benchmarks.md is the report rendered, never edited by hand: regenerate, compare.
    report = importlib.import_module("benchmarks.report")
    render = importlib.import_module("benchmarks.render")
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert render.docs_text(report.load_grids()["headline"]) == page
    assert "H100" in page and "geomean" in page.lower()


def test_tiny_section_times_each_batch_and_the_rate_against_the_peak():
    render = importlib.import_module("benchmarks.render")

    def cell(op, n, batch, ours_ms, nbytes, status="ok"):
        # A skipped cell has no times; one whose PyTorch call failed ("error") has ours.
        impls = {} if status == "skipped" else {
            "jax": {"median_ms": 2 * ours_ms}, "torch": {"failed": "CUSOLVER internal error"},
            "jcm:auto": {"median_ms": ours_ms}}
        return {"op": op, "dtype": "float32", "n": n, "batch": batch, "status": status,
                "bytes": nbytes, "impls": impls}
    cells = [cell("lu_factor", 4, 100, 0.01, 7_200),
             cell("lu_factor", 4, 10**6, 0.02, 72_000_000),
             cell("eigh", 3, 10**6, 0.5, 48_000_000, "error"),
             cell("eigh", 3, 100, 0.5, 4800, "skipped"),
             cell("qr", 16, 10**6, 1.0, 10**9)]
    text = render.tiny_markdown(cells, "NVIDIA H200")
    rows = [line for line in text.splitlines() if line.startswith("| lu_factor") or
            line.startswith("| eigh") or line.startswith("| qr")]
    # 72 MB in 0.02 ms: 3600 GB/s, 75% of the H200's 4.8 TB/s; n = 16 is not tiny.
    assert rows[0] == ("| lu_factor | float32 | 4 | 0.02 / error / 0.01 | 0.04 / error / 0.02 "
                       "| 3600 (75%) |")
    assert rows[1] == "| eigh | float32 | 3 | - | 1 / error / 0.5 | 96 (2%) |"
    assert len(rows) == 2 and "4.8 TB/s" in text
    assert "of peak" in text and render.tiny_markdown(cells, "Unknown GPU").count("%") == 0
    assert render.tiny_markdown(cells[-1:], "NVIDIA H200") == ""


def test_oblong_cells_and_sweep_expand_and_bad_ones_are_refused():
    report = importlib.import_module("benchmarks.report")
    shapes = report.oblong_shapes({
        "cells": [["svd", "float32", 300, 900, 100], ["qr", "float64", 4, 2048, 64]],
        "sweep": {"ops": ["lstsq", "qr"], "dtype": "float64", "batch": 4, "n": 64,
                  "ratios": [0.125, 1, 32]}})
    assert shapes[0] == {"op": "svd", "dtype": "float32", "batch": 300, "m": 900, "n": 100,
                         "nrhs": None}
    assert [(s["op"], s["m"], s["nrhs"]) for s in shapes[1:]] == [  # qr 4x2048x64 once
        ("qr", 2048, None), ("lstsq", 8, 1), ("lstsq", 64, 1), ("lstsq", 2048, 1),
        ("qr", 8, None), ("qr", 64, None)]
    for bad, match in (({"cells": [["svd", "float32", 3, 9]]}, "op, dtype, batch, m, n"),
                       ({"cells": [["nope", "float32", 3, 9, 3]]}, "unknown oblong op"),
                       ({"cells": [["svd", "float16", 3, 9, 3]]}, "dtype"),
                       ({"sweep": {"ops": ["svd"]}}, "sweep takes exactly"),
                       ({"cell": []}, "unknown oblong keys")):
        with pytest.raises(ValueError, match=match):
            report.oblong_shapes(bad)
    assert report.load_grids()["grids"]["oblong"]["oblong"]["cells"]


@pytest.mark.parametrize("op,m,n,blocked", [("svd", 900, 100, True), ("svd", 10, 20, True),
                                            ("svd", 64, 64, False), ("pinv", 64, 33, False),
                                            ("lstsq", 1024, 64, True), ("qr", 2048, 64, False),
                                            ("lstsq_auto", 1024, 64, False)])
def test_oblong_cells_time_the_qr_first_svd_where_it_runs(op, m, n, blocked):
    report = importlib.import_module("benchmarks.report")
    strategies = report.oblong_strategies({"op": op, "m": m, "n": n})
    assert strategies == ["auto"] + ["blocked"] * blocked


def test_oblong_section_gives_each_cells_times_and_speedups():
    render = importlib.import_module("benchmarks.render")
    cell = {"op": "svd", "dtype": "float32", "batch": 300, "m": 900, "n": 100, "status": "ok",
            "explain": {"strategy": "looped", "lanes": 8},
            "impls": {"jax": {"median_ms": 1150.0}, "torch": {"median_ms": 1180.0},
                      "jcm:auto": {"median_ms": 211.0, "ok": True},
                      "jcm:blocked": {"median_ms": 46.0, "ok": True}}}
    text = render.oblong_markdown({"cells": [cell]})
    assert ("| svd | float32 | 300x900x100 | 9 | 1150 | 1180 | 211 | 46 | 5.45x | 25.00x | "
            "looped |") in text
    doc = {"gpu": "NVIDIA H200", "oblong": {"cells": [cell]}}
    assert "## Tall-skinny and wide" in render.report_markdown(doc, {}, None)
    assert "oblong: 1 cells, auto vs JAX geomean 5.45x, min 5.45x; 0 failures" in \
        render.brief(doc)


def test_tiny_cells_at_several_batches_get_a_time_against_batch_figure(tmp_path):
    pytest.importorskip("matplotlib")
    render = importlib.import_module("benchmarks.render")
    plt = render.import_pyplot()[0]

    def cell(op, n, batch):
        return {"op": op, "dtype": "float32", "n": n, "batch": batch, "bytes": 32 * batch,
                "impls": {"jax": {"median_ms": 0.01 * batch}, "jcm:auto": {"median_ms": 0.001}}}
    one_batch = [cell("svd", 3, 100), cell("svd", 16, 100), cell("svd", 16, 1000)]
    assert render._plot_tiny_batches(one_batch, str(tmp_path), plt, "NVIDIA H200") is None
    cells = one_batch + [cell("svd", 3, 1000), cell("svd", 2, 10)]
    figures = render.plot(cells, [], str(tmp_path), plt, "NVIDIA H200")
    assert figures["tiny"] == ["tiny_batch.png"] and (tmp_path / "tiny_batch.png").exists()


def test_an_oblong_sweep_gets_a_time_against_ratio_figure(tmp_path):
    pytest.importorskip("matplotlib")
    render = importlib.import_module("benchmarks.render")
    plt = render.import_pyplot()[0]

    def cell(op, m, n=64):
        return {"op": op, "dtype": "float32", "batch": 64, "m": m, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 0.1 * m}, "jcm:auto": {"median_ms": 0.05 * m},
                          "jcm:blocked": {"median_ms": 0.01 * m}}}
    two_ratios = [cell("svd", 64), cell("svd", 128), cell("qr", 64), cell("qr", 128, 32)]
    assert render._plot_oblong_ratios(two_ratios, str(tmp_path), plt) is None
    figures = render.plot([], [], str(tmp_path), plt, "NVIDIA H200", two_ratios + [cell("svd", 8)])
    assert figures["oblong"] == ["oblong_ratio.png"] and (tmp_path / "oblong_ratio.png").exists()


def test_a_peers_failure_is_listed_apart_and_fails_no_run():
    from benchmarks import render
    cells = [{"op": "eigh", "dtype": "float32", "batch": 1000000, "n": 3,
              "impls": {"jax": {"median_ms": 1.0}, "auto": {"median_ms": 0.5},
                        "torch": {"failed": "OutOfMemoryError: CUDA out of memory"}}},
             {"op": "svd", "dtype": "float32", "batch": 4, "n": 8,
              "impls": {"auto": {"failed": "RuntimeError: boom"}}}]
    assert render.failures(cells) == ["ERROR svd float32 4x8 auto: RuntimeError: boom"]
    assert render.failures(cells, peers=True) == [
        "ERROR eigh float32 1000000x3 torch: OutOfMemoryError: CUDA out of memory"]
    assert render.failures(cells[:1]) == []


def test_lstsq_auto_x_times_the_solution_alone_and_checks_it():
    bench = importlib.import_module("benchmarks.bench")
    args = bench.parse_args(["--cpu-smoke", "--no-torch"])
    cell = bench.run_cell(bench.OPS["lstsq_auto_x"], "float32", 4, 8, args, None, seed=0,
                          rows=32, nrhs=1)
    assert cell["status"] == "ok" and cell["impls"]["jcm:auto"]["ok"] is True
    a, b = bench.OPS["lstsq_auto_x"].build(jax.random.key(0), 2, 8, "float32", rows=16)[0]
    (x,) = bench.OPS["lstsq_auto_x"].our_fn("auto", None)(a, b)
    assert a.shape == (2, 16, 8) and x.shape == (2, 8, 1)


def test_a_strategy_this_build_lacks_is_not_timed():
    import types
    bench = importlib.import_module("benchmarks.bench")
    limits = {"sygvd": {"strategies": ("looped", "sequential")}}
    fake = types.SimpleNamespace(strategy=types.SimpleNamespace(limits=lambda: limits))
    assert not bench.built_with(fake, "sygvd", "batched")
    assert bench.built_with(fake, "sygvd", "looped")
    assert bench.built_with(fake, "sygvd", "auto") and bench.built_with(fake, None, "batched")
    assert bench.built_with(fake, "getrf", "batched")  # a routine the limits do not list


def test_a_resumed_report_drops_the_strategies_this_build_lacks(monkeypatch):
    # An earlier build's times (or refusals) of a strategy this build has not: neither measured
    # again nor kept beside this run's.
    import types
    bench = importlib.import_module("benchmarks.bench")
    limits = {"sygvd": {"strategies": ("looped", "sequential")}}
    monkeypatch.setattr(bench, "jcm", types.SimpleNamespace(
        strategy=types.SimpleNamespace(limits=lambda: limits)))
    impls = {"jax": {"median_ms": 1.0}, "jcm:auto": {"median_ms": 1.0},
             "jcm:looped:8": {"median_ms": 2.0}, "jcm:batched": {"failed": "ValueError"},
             f"jcm:{bench.ENABLED}": {"median_ms": 1.0}}
    cells = [{"op": "generalized_eigh", "impls": dict(impls)}, {"op": "qr", "impls": dict(impls)}]
    bench.drop_unbuilt(cells)
    assert set(cells[0]["impls"]) == set(impls) - {"jcm:batched"}
    assert cells[1]["impls"] == impls  # geqrf's strategies are not in these limits: all kept


def test_pytorch_past_the_limit_is_estimated_from_a_resumed_report():
    bench = importlib.import_module("benchmarks.bench")
    seen = {}
    earlier = [{"op": "qr", "dtype": "float32", "batch": 1000, "n": 4,
                "impls": {"torch": {"median_ms": 30.0}}},
               {"op": "qr", "dtype": "float32", "batch": 100, "n": 4, "impls": {"jax": {}}}]
    bench.remember_torch(seen, earlier)
    assert seen == {("qr", "float32", 4, None, None): {1000: 30.0}}
    # 10^7 matrices: 10^4 times the 30 ms of 1000, far past a 20 s limit.
    assert bench._torch_estimate_ms(seen, ("qr", "float32", 4, None, None), 10**7) == 3e5


def test_an_op_no_gpu_library_has_is_timed_against_scipy_on_the_cpu():
    # generalized eigh: SciPy's eigh(a, b) per matrix beside JAX's reduction by hand, its
    # answer held to the same error measure; past the limit it is estimated, not made.
    bench = importlib.import_module("benchmarks.bench")
    render = importlib.import_module("benchmarks.render")
    args = bench.parse_args(["--cpu-smoke", "--no-torch"])
    cell = bench.run_cell(bench.OPS["generalized_eigh"], "float64", 3, 8, args, None, seed=0)
    host = cell["impls"][bench.HOST]
    assert host["median_ms"] > 0 and host["error"] < 1e-10
    assert "| scipy cpu |" in render.cells_markdown([render.compact_cell(cell)], ["auto"])
    args = bench.parse_args(["--cpu-smoke", "--no-torch", "--jax-limit-s", "1e-9"])
    host, out = bench.measure_host(bench.OPS["generalized_eigh"].host,
                                   [np.eye(4)[None].repeat(5, 0)] * 2, args, 1e-9)
    assert out is None and host["estimated"] and host["over_limit_ms"] > 0
    args = bench.parse_args(["--cpu-smoke", "--no-torch", "--no-host"])
    cell = bench.run_cell(bench.OPS["generalized_eigh"], "float64", 3, 8, args, None, seed=0)
    assert bench.HOST not in cell["impls"]


def test_pytorch_is_probed_at_a_fraction_of_a_large_batch_nothing_smaller_timed():
    # No smaller batch of the shape timed (a run of 10^7 matrices alone): one call at 1/16 of
    # the batch, scaled, stands for PyTorch's time past the limit; the full call is not made.
    import types
    bench = importlib.import_module("benchmarks.bench")
    calls = []

    def qr(a):
        calls.append(a.shape[0])
        time.sleep(0.02)
        return a

    fake = types.SimpleNamespace(
        linalg=types.SimpleNamespace(qr=qr),
        from_dlpack=lambda x: types.SimpleNamespace(clone=lambda: np.asarray(x)),
        cuda=types.SimpleNamespace(synchronize=lambda: None, empty_cache=lambda: None,
                                   Event=lambda **kw: types.SimpleNamespace(
                                       record=lambda: None, synchronize=lambda: None,
                                       elapsed_time=lambda other: 20.0)))
    args = bench.parse_args(["--cpu-smoke", "--jax-limit-s", "0.05"])
    args.torch_seen = {}
    cell = bench.run_cell(bench.OPS["qr"], "float32", 64, 4, args, fake, seed=0)
    torch = cell["impls"]["torch"]
    assert torch["estimated"] and torch["over_limit_ms"] >= 16 * 20
    assert calls == [4, 4]  # the probe's first call and the one timed
    # Under the limit scaled, PyTorch is timed at the full batch as before.
    args = bench.parse_args(["--cpu-smoke", "--jax-limit-s", "100"])
    args.torch_seen = {}
    calls.clear()
    cell = bench.run_cell(bench.OPS["qr"], "float32", 64, 4, args, fake, seed=0)
    assert "median_ms" in cell["impls"]["torch"] and calls[:2] == [4, 4] and 64 in calls


def test_the_plan_recorded_for_det_is_dets_own():
    # Up to n 3 auto runs the closed form, whatever getrf's choice: the report's "auto picks"
    # (and --resume's stale check) must say so.
    bench = importlib.import_module("benchmarks.bench")
    args = bench.parse_args(["--cpu-smoke"])
    small = bench.auto_plan(bench.OPS["det"], (10000, 2, 2), "float64", args)
    assert "closed form" in small["text"] and small["strategy"] == "xla"
    large = bench.auto_plan(bench.OPS["det"], (16, 64, 64), "float64", args)
    assert "closed form" not in large["text"]
