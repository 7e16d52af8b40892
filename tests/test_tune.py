"""Measured strategy tables, `auto` on them, explain(), the tuned cache and tune().

Everything here runs on a CPU: tables are installed with tables.using(...) and tune() runs its
test-only CPU mode. The report and the table builder are tested in benchmarks/tests/.
"""
import importlib
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

import jax_cusolver_ms as jcm
from jax_cusolver_ms import strategy, tables
from jax_cusolver_ms._tune import shape_of
from jax_cusolver_ms.tables import Point, Table

from conftest import requires_extension

tune_module = importlib.import_module("jax_cusolver_ms._tune")
H100 = "NVIDIA H100 80GB HBM3"


def make_table(points, routine="getrf", dtype="float32", source="shipped table Fake GPU",
               key=None):
    return Table("Fake GPU", source, {(routine, dtype): [Point(b, n, t) for b, n, t in points]},
                 key)


def power_law(batch, n, scale, power):
    return scale * batch * n ** power


# A grid where "batched:1" grows as n^4 and "looped:8" as n^2 (more lanes: flat in batch up to
# the lane count): they cross at n = 256. "xla" is batched plus 20% (beyond XLA_MARGIN).
def crossing_grid(batches=(4, 16, 64), sizes=(64, 128, 256, 512, 1024)):
    points = []
    for b in batches:
        for n in sizes:
            batched = power_law(b, n, 1e-8, 4)
            looped = power_law(b, n, 1e-8 * 256 ** 2, 2)
            points.append((b, n, {"batched:1": batched, "looped:8": looped, "xla": batched * 1.2}))
    return points


# --- lookup and interpolation -------------------------------------------------------------------

def test_exact_point_is_the_measurement():
    table = make_table([(64, 512, {"xla": 10.0, "batched:1": 9.0, "looped:8": 20.0})])
    est = table.estimate("getrf", "float32", 64, 512)
    assert est.best == "batched:1"
    assert dict(est.times_ms) == pytest.approx({"xla": 10.0, "batched:1": 9.0, "looped:8": 20.0})
    assert [c for c, _ in est.times_ms] == ["batched:1", "xla", "looped:8"]  # fastest first
    assert est.basis.startswith("measured at 64x512;") and est.rule == tables.AGREED


@pytest.mark.parametrize("batch,n", [(8, 90), (32, 300), (4, 64), (50, 1000), (10, 700)])
def test_interpolation_is_exact_for_power_laws(batch, n):
    # Log-time bilinear in (log2 batch, log2 n) reproduces t = c b n^p between grid points.
    table = make_table(crossing_grid())
    est = table.estimate("getrf", "float32", batch, n)
    times = dict(est.times_ms)
    assert times["batched:1"] == pytest.approx(power_law(batch, n, 1e-8, 4), rel=1e-9)
    assert times["looped:8"] == pytest.approx(power_law(batch, n, 1e-8 * 256 ** 2, 2), rel=1e-9)
    assert est.basis.startswith("interpolated between") or est.basis.startswith("measured at")


@pytest.mark.parametrize("n,expected", [(100, "batched:1"), (200, "batched:1"),
                                        (300, "looped:8"), (900, "looped:8")])
def test_choice_follows_the_crossover(n, expected):
    # Below the crossing at n = 256 batched is fastest (JAX's own 20% behind it), above it lanes.
    table = make_table(crossing_grid())
    assert table.estimate("getrf", "float32", 16, n).best == expected


def test_outside_the_measured_range_there_is_no_answer():
    # Measured: batch 4-64, n 64-1024. Nothing is extrapolated: one step beyond an edge along
    # any axis and the table does not answer; `auto` then takes JAX's own lowering.
    table = make_table(crossing_grid())
    assert table.estimate("getrf", "float32", 64, 1024).best == "looped:8"
    # (A larger batch has bounds of its own: the tests of carried batches below.)
    for batch, n, axis in [(64, 1025, "n"), (4, 63, "n"), (3, 128, "batch")]:
        est = table.estimate("getrf", "float32", batch, n)
        assert est.best is None and est.rule == tables.OUTSIDE and est.basis.startswith(axis)
    with tables.using(table):
        plan = strategy.choose("getrf", 64, (2048, 2048), "float32")
    assert (plan.strategy, plan.source, plan.rule) == ("xla", "unmeasured", tables.OUTSIDE)
    assert "n 2048 beyond the measured (largest 1024)" in plan.reason


def test_outside_names_the_nearest_measured_slice_that_falls_short():
    # Batch 64 measured up to n 1024, batch 256 up to n 256 only.
    table = make_table(crossing_grid(batches=(64,)) + crossing_grid(
        batches=(256,), sizes=(64, 128, 256)))
    # (JAX's lowering not a candidate: nothing carried from batch 64.)
    est = table.estimate("getrf", "float32", 128, 512, allowed=lambda c: c != "xla")
    assert est.rule == tables.OUTSIDE
    assert est.basis.startswith("at batch 256: n 512 beyond the measured (largest 256)")
    est = table.estimate("getrf", "float32", 64, 2048)  # the call's own batch: no "at"
    assert est.basis.startswith("n 2048 beyond the measured (largest 1024)")


def svd_grid(batches=(16, 256), sizes=(64, 128), xla_factor=50.0):
    # gesvdj above n = 32: JAX's lowering makes one call per matrix, linear in the batch.
    return [(b, n, {"batched:1": power_law(b, n, 1e-6, 2),
                    "xla": xla_factor * power_law(b, n, 1e-6, 2)})
            for b in batches for n in sizes]


@pytest.mark.parametrize("batch", [257, 1024, 100000])
def test_a_win_carries_to_larger_batches_where_jax_loops_per_matrix(batch):
    table = make_table(svd_grid(), routine="gesvdj")
    est = table.estimate("gesvdj", "float32", batch, 100)
    assert est.best == "batched:1" and est.rule == tables.CARRIED
    assert "one gesvdj call per matrix: the times at batch 256" in est.basis
    # The times are the largest measured batch's, in proportion to the call's batch.
    at_256 = dict(table.estimate("gesvdj", "float32", 256, 100).times_ms)
    times = dict(est.times_ms)
    for candidate in ("batched:1", "xla"):
        assert times[candidate] == pytest.approx(at_256[candidate] * batch / 256, rel=1e-9)
    with tables.using(table):
        plan = strategy.choose("gesvdj", batch, (100, 100), "float32")
    assert (plan.strategy, plan.rule) == ("batched", tables.CARRIED)


def test_a_batch_is_carried_from_the_largest_one_that_brackets_the_call():
    # Batch 1024 has n = 64 only: n = 100 is bracketed at 256, the batch carried from there.
    table = make_table(svd_grid() + [(1024, 64, {"batched:1": 4.0, "xla": 200.0})],
                       routine="gesvdj")
    est = table.estimate("gesvdj", "float32", 2000, 100)
    assert est.rule == tables.CARRIED and "the times at batch 256, x7.81" in est.basis


def unsaturated(points, below=64):
    """The points with JAX's time below batch `below` that of batch `below` (same n): JAX's
    batched call did not grow with the batch up to there (a GPU not yet full)."""
    at = {n: t["xla"] for b, n, t in points if b == below}
    return [(b, n, dict(t, xla=at[n]) if b < below else t) for b, n, t in points]


def test_a_win_carries_by_bounds_where_jax_runs_one_batched_call():
    # getrf at n 1024 from batch 64 up is JAX's getrfBatched (1024 // 64 <= 128): its time at
    # batch 64 bounds its time at 65 from below, a candidate's at 64 doubled bounds its own from
    # above (two calls of 64 hold 65). JAX's time did not grow from batch 16 to 64 here.
    table = make_table(unsaturated(crossing_grid()))
    est = table.estimate("getrf", "float32", 65, 1024)
    assert est.best == "looped:8" and est.rule == tables.CARRIED
    assert "makes one batched getrf call: the times at batch 64" in est.basis
    at_64, times = dict(table.estimate("getrf", "float32", 64, 1024).times_ms), dict(est.times_ms)
    assert times["xla"] == pytest.approx(at_64["xla"], rel=1e-9)
    assert times["looped:8"] == pytest.approx(2 * at_64["looped:8"], rel=1e-9)
    # batched:1 beats JAX by 1.2x at n 128: not by the factor 2 the bounds cost.
    est = table.estimate("getrf", "float32", 65, 128)
    assert est.best == "xla" and est.rule == tables.DISAGREED
    # looped:8 beats JAX by 19.2x at n 1024: carried to 10 times the batch, not to 25 times.
    assert table.estimate("getrf", "float32", 640, 1024).best == "looped:8"
    assert table.estimate("getrf", "float32", 64 * 25, 1024).best == "xla"


@pytest.mark.parametrize("exponent,carried", [(1.0, True), (0.8, True), (0.4, False)])
def test_a_win_carries_at_the_pace_jax_grew_where_its_batched_call_grows(exponent, carried):
    # The tiny grid: at 10^4 and 10^5 matrices JAX's one batched call grows as batch^exponent;
    # the kernel is 4x faster at 10^5. Growing (exponent >= PACE_MIN), JAX's time at 10^7 is
    # bounded from below by its pace (x100^exponent), the kernel's from above by 100 calls of
    # 10^5: the kernel stays where it still wins by those bounds (x100^0.8 = 40 > 100 / 4).
    # Growing slower, only JAX's time at 10^5 bounds it: JAX's lowering.
    xla = {10**4: 1.0, 10**5: 10.0 ** exponent}
    table = make_table([(b, 4, {"batched:1": xla[b] / 4, "xla": xla[b]}) for b in xla])
    est = table.estimate("getrf", "float32", 10**7, 4)
    assert est.rule == (tables.CARRIED if carried else tables.DISAGREED), est.basis
    assert est.best == ("batched:1" if carried else "xla")
    times = dict(est.times_ms)
    assert times["batched:1"] == pytest.approx(100 * xla[10**5] / 4)
    if carried:
        assert times["xla"] == pytest.approx(xla[10**5] * 100 ** min(exponent, 1.0))
        assert f"grew as the batch^{exponent:.2f} from batch 10000 to 100000" in est.basis
    else:
        assert times["xla"] == pytest.approx(xla[10**5])


def test_nothing_carries_across_a_change_of_jax_lowering():
    # At batch 4, n 1024 JAX loops (1024 // 4 > 128); at 16 it makes one getrfBatched call,
    # whose time the loop's says nothing about.
    table = make_table(crossing_grid(batches=(4,)))
    assert table.estimate("getrf", "float32", 16, 1024).rule == tables.OUTSIDE
    # ... nor from points around the call where it loops: at batch 16 from n 2064 up, while at
    # batch 32 and n 2048 it is one getrfBatched call.
    table = make_table(crossing_grid(batches=(4, 16), sizes=(1024, 4096)))
    assert table.estimate("getrf", "float32", 32, 2048).rule == tables.OUTSIDE
    # A batch of one is one gesvdj call, gesvdjBatched from two up (n <= 32): another routine.
    table = make_table(svd_grid(batches=(1,), sizes=(16, 32)), routine="gesvdj")
    assert table.estimate("gesvdj", "float32", 1024, 24).rule == tables.OUTSIDE
    # ... and nothing below the smallest batch, nor beyond the largest n.
    table = make_table(svd_grid(), routine="gesvdj")
    for batch, n in [(8, 100), (512, 129)]:
        assert table.estimate("gesvdj", "float32", batch, n).rule == tables.OUTSIDE


def test_a_carried_batch_still_needs_the_win_by_the_margin():
    table = make_table(svd_grid(xla_factor=0.9), routine="gesvdj")
    est = table.estimate("gesvdj", "float32", 4096, 100)
    assert est.best == "xla" and est.rule == tables.DISAGREED
    assert est.basis.startswith("batch 4096 beyond the measured")


def test_nothing_carries_without_jax_lowering_among_the_candidates():
    # The argument compares each candidate with JAX's time: with lanes asked for, no answer.
    table = make_table(svd_grid(), routine="gesvdj")
    est = table.estimate("gesvdj", "float32", 4096, 100, allowed=lambda c: c != "xla")
    assert est.best is None and est.rule == tables.OUTSIDE


# svd at batch 256 on either side of JAX's switch at n = 32: gesvdjBatched at n = 32 (fast, and
# faster than "blocked"), one gesvdj call per matrix at n = 64 (slow).
ACROSS_SVD_SWITCH = [(256, 32, {"xla": 0.3, "blocked": 0.5}),
                     (256, 64, {"xla": 250.0, "blocked": 0.9})]


def test_where_jax_loops_a_point_on_its_batched_side_need_not_be_beaten():
    table = make_table(ACROSS_SVD_SWITCH, routine="gesvdj")
    est = table.estimate("gesvdj", "float32", 256, 48)
    assert est.best == "blocked" and est.rule == tables.AGREED
    assert "JAX's own is one batched gesvdj call at 256x32" in est.basis
    # JAX's time at the call is its looping time, not one interpolated with the batched call's.
    assert dict(est.times_ms)["xla"] == pytest.approx(250.0)
    # Where the call is on the batched side too, every point must be beaten as before.
    est = table.estimate("gesvdj", "float32", 256, 32)
    assert est.best == "xla"
    table = make_table([(256, 16, {"xla": 0.2, "blocked": 0.4})] + ACROSS_SVD_SWITCH,
                       routine="gesvdj")
    assert table.estimate("gesvdj", "float32", 256, 24).best == "xla"


def test_the_looping_points_must_still_be_beaten():
    table = make_table([(256, 32, {"xla": 0.3, "blocked": 0.5}),
                        (256, 64, {"xla": 250.0, "blocked": 240.0})], routine="gesvdj")
    est = table.estimate("gesvdj", "float32", 256, 48)
    assert est.best == "xla" and est.rule == tables.DISAGREED
    assert "at 256x64, short of" in est.basis


def test_only_a_switch_to_a_slower_loop_sets_points_apart():
    # getrf's switch (n // batch > 128: cuBLAS getrfBatched below, cuSOLVER getrf per matrix
    # above) is not one to a slower call: its points all count. Batch 8 loops at n 2048, batch
    # 16 does not.
    table = make_table([(b, n, {"xla": 10.0 * b, "looped:8": 5.0 * b if b == 8 else 20.0 * b})
                        for b in (8, 16) for n in (1024, 2048)])
    est = table.estimate("getrf", "float32", 12, 2048)
    assert est.best == "xla" and est.rule == tables.DISAGREED
    assert "batched" not in est.basis
    # A batch of one is the loop's own per-matrix call: not set apart either.
    table = make_table([(1, 64, {"xla": 1.0, "blocked": 2.0}), (16, 64, {"xla": 16.0,
                                                                        "blocked": 1.0})],
                       routine="gesvdj")
    assert table.estimate("gesvdj", "float32", 4, 64).best == "xla"


def test_points_around_the_call_must_agree():
    # Lanes win 2x at 64x512 and lose at 64x1024: between them the interpolated time of lanes
    # is lower, but the points do not agree, so JAX's own lowering.
    table = make_table([(64, 512, {"xla": 10.0, "looped:8": 5.0}),
                        (64, 1024, {"xla": 40.0, "looped:8": 42.0})])
    est = table.estimate("getrf", "float32", 64, 600)
    assert dict(est.times_ms)["looped:8"] < dict(est.times_ms)["xla"]
    assert est.best == "xla" and est.rule == tables.DISAGREED
    assert "looped:8 is 0.952x JAX's at 64x1024, short of the 1.10x it must be" in est.basis
    assert table.estimate("getrf", "float32", 64, 512).best == "looped:8"
    # A win short of the margin at one corner is no agreement either.
    table = make_table([(64, 512, {"xla": 10.0, "looped:8": 5.0}),
                        (64, 1024, {"xla": 40.0, "looped:8": 38.0})])
    assert table.estimate("getrf", "float32", 64, 600).best == "xla"


def test_refined_points_bracket_within_each_slice():
    # Batch 16 was refined (n 1024 added), batch 64 was not: each slice brackets n on its own.
    win = {"xla": 10.0, "looped:8": 2.0}
    table = make_table([(16, 512, win), (16, 1024, win), (16, 2048, win),
                        (64, 512, win), (64, 2048, win)])
    est = table.estimate("getrf", "float32", 32, 1500)
    assert est.best == "looped:8"
    assert est.basis.startswith("interpolated between 16x1024, 16x2048, 64x512, 64x2048")
    # A slice that cannot bracket the call is passed over for the next one outward.
    table = make_table([(4, 512, win), (4, 2048, win), (16, 512, win), (64, 512, win),
                        (64, 2048, win)])
    est = table.estimate("getrf", "float32", 8, 1024)
    assert est.basis.startswith("interpolated between 4x512, 4x2048, 64x512, 64x2048")
    # ... and where none outward can, the call is outside (but for a carried batch).
    assert table.estimate("getrf", "float32", 100, 1024, lambda c: c != "xla").best is None


@pytest.mark.parametrize("axis,inside,outside", [("nrhs", 8, 128), ("aspect", 2.0, 0.5)])
def test_nrhs_and_aspect_are_axes_like_the_others(axis, inside, outside):
    win = {"xla": 10.0, "looped:8": 2.0}
    lose = {"xla": 10.0, "looped:8": 12.0}
    far = {"nrhs": 64, "aspect": 4.0}[axis]
    points = []
    for n in (512, 1024):
        points += [Point(64, n, win), Point(64, n, win, **{axis: far})]
    table = Table("Fake GPU", "shipped table Fake GPU", {("getrs", "float32"): points})
    kw = {axis: inside}
    est = table.estimate("getrs", "float32", 64, 700, **kw)
    assert est.best == "looped:8" and est.rule == tables.AGREED
    name = "nrhs 64" if axis == "nrhs" else "rows/cols 4"
    assert f"64x512 {name}" in est.basis
    est = table.estimate("getrs", "float32", 64, 700, **{axis: outside})
    assert est.best is None and est.basis.startswith(axis)
    # One side losing along the outer axis is no agreement.
    points = [p if p.coord(axis) == 1 else dataclasses.replace(p, times_ms=lose) for p in points]
    table = Table("Fake GPU", "shipped table Fake GPU", {("getrs", "float32"): points})
    assert table.estimate("getrs", "float32", 64, 700, **kw).best == "xla"


def test_a_single_matrix_is_the_end_of_the_batch_axis():
    table = make_table([(1, 64, {"xla": 1.0, "sequential": 0.5}),
                        (4, 64, {"xla": 1.0, "sequential": 0.6, "looped:4": 0.1})])
    assert table.estimate("getrf", "float32", 1, 64).best == "sequential"
    assert table.estimate("getrf", "float32", 4, 64).best == "looped:4"
    # Between them only what both measured: looped has no time at batch 1.
    est = table.estimate("getrf", "float32", 2, 64)
    assert est.best == "sequential" and "looped:4" not in dict(est.times_ms)


def test_lanes_beyond_the_batch_read_the_capped_candidate():
    # At batch 4, looped:16 runs looped:4: between batch 4 and 16, looped:16 interpolates from it.
    table = make_table([(4, 256, {"xla": 10.0, "looped:4": 2.0}),
                        (16, 256, {"xla": 40.0, "looped:4": 8.0, "looped:16": 4.0})])
    times = dict(table.estimate("getrf", "float32", 8, 256).times_ms)
    assert times["looped:16"] == pytest.approx(math.sqrt(2.0 * 4.0))
    assert Point(4, 256, {"looped:4": 2.0}).time("looped:16") == 2.0
    assert Point(4, 256, {"looped:4": 2.0}).time("looped:2") is None


@pytest.mark.parametrize("candidate_ms,expected", [(9.9, "xla"), (9.2, "xla"), (8.9, "looped:8"),
                                                   (10.5, "xla")])
def test_xla_wins_within_noise(candidate_ms, expected):
    table = make_table([(64, 512, {"xla": 10.0, "looped:8": candidate_ms})])
    assert table.estimate("getrf", "float32", 64, 512).best == expected


@pytest.mark.parametrize("xla_ms,candidate_ms,expected", [
    (0.12, 0.10, "xla"), (0.12, 0.085, "looped:8"), (1.2, 1.0, "looped:8")])
def test_tiny_cells_need_a_larger_win_to_leave_xla(xla_ms, candidate_ms, expected):
    table = make_table([(16, 32, {"xla": xla_ms, "looped:8": candidate_ms})])
    assert table.estimate("getrf", "float32", 16, 32).best == expected


@pytest.mark.parametrize("routine,n,kernel_ms,expected", [
    ("syevj", 32, 0.128, "batched:1"), ("syevj", 64, 0.128, "xla"),
    ("getrf", 64, 0.128, "batched:1"), ("getrf", 128, 0.128, "xla"),
    ("getrf", 4, 0.136, "batched:1"), ("getrf", 4, 0.142, "batched:1"),
    ("getrf", 4, 0.144, "xla")])
def test_an_unguarded_kernel_leaves_xla_unless_slower_by_the_margin(routine, n, kernel_ms,
                                                                    expected):
    # Up to the kernel's n, auto's "xla" is JAX's lowering inside the guard (one more kernel
    # than the "xla" time): the kernel level with JAX's own plus the guard's least cost, or
    # behind that within MARGIN, is taken ((0.136 + 0.004) x 1.02 = 0.1428 ms). Above that n,
    # a tiny cell's margin.
    table = make_table([(64, n, {"xla": 0.136, "batched:1": kernel_ms})], routine=routine)
    assert table.estimate(routine, "float32", 64, n).best == expected


@pytest.mark.parametrize("xla_ms,kernel_ms,expected", [
    (10.0, 10.2, "batched:1"), (10.0, 10.25, "xla"), (0.02, 0.0244, "batched:1"),
    (0.02, 0.0246, "xla")])
def test_the_guard_floor_counts_where_jax_is_fast(xla_ms, kernel_ms, expected):
    # The floor is a launch: 2% of a 0.02 ms call by itself, nothing at 10 ms.
    table = make_table([(64, 4, {"xla": xla_ms, "batched:1": kernel_ms})])
    assert table.estimate("getrf", "float32", 64, 4).best == expected


def test_fewer_lanes_win_within_noise():
    table = make_table([(64, 1024, {"xla": 80.0, "looped:8": 43.8, "looped:16": 43.6})])
    assert table.estimate("getrf", "float32", 64, 1024).best == "looped:8"


def test_allowed_filters_candidates_and_nothing_left_is_none():
    table = make_table([(64, 512, {"xla": 10.0, "batched:1": 5.0, "looped:8": 8.0})])
    est = table.estimate("getrf", "float32", 64, 512, allowed=lambda c: c != "batched:1")
    assert est.best == "looped:8" and "batched:1" not in dict(est.times_ms)
    assert table.estimate("getrf", "float32", 64, 512, allowed=lambda c: False) is None
    assert table.estimate("potrf", "float32", 64, 512) is None
    assert table.estimate("getrf", "float64", 64, 512) is None


@pytest.mark.parametrize("name,parsed", [("xla", ("xla", 1)), ("sequential", ("sequential", 1)),
                                         ("looped:16", ("looped", 16)),
                                         ("batched:1", ("batched", 1))])
def test_candidate_names_round_trip(name, parsed):
    assert tables.parse_candidate(name) == parsed
    assert tables.candidate_name(*parsed) == name


@pytest.mark.parametrize("bad", ["looped", "batched:0", "xla:2", "auto", "looped:x"])
def test_bad_candidate_names_are_refused(bad):
    with pytest.raises(ValueError):
        tables.parse_candidate(bad)


# --- auto on the tables: choose() and explain() --------------------------------------------------

def test_explain_reports_the_table_source_and_times():
    table = make_table([(64, 1024, {"xla": 82.0, "batched:1": 82.0, "looped:8": 43.0})])
    with tables.using(table):
        plan = jcm.explain("lu_factor", (64, 1024, 1024), np.float32)
    assert (plan.strategy, plan.lanes) == ("looped", 8)
    assert plan.source == "shipped table Fake GPU"
    assert dict(plan.times_ms) == pytest.approx({"xla": 82.0, "batched:1": 82.0, "looped:8": 43.0})
    assert "43" in plan.reason and "82" in plan.reason and "looped:8 43" in str(plan)


def test_tuned_table_overrides_the_shipped_one_where_it_has_data():
    shipped = make_table([(64, 512, {"xla": 10.0, "looped:8": 5.0})])
    tuned = make_table([(64, 512, {"xla": 10.0, "batched:2": 4.0})], source="tuned /x/t.json")
    with tables.using(tuned, shipped):
        assert jcm.explain("lu_factor", (64, 512, 512), "float32").source == "tuned /x/t.json"
        assert jcm.explain("lu_factor", (64, 512, 512), "float32").strategy == "batched"
        # float64 is only in neither: the heuristic.
        assert jcm.explain("lu_factor", (64, 512, 512), "float64").source == "unmeasured"


def test_a_partial_tuned_table_is_laid_over_the_shipped_one():
    # The shipped table knows lanes win at 16x2048; a tune of small n only must not answer
    # for 16x2048 by clamping to its own edge.
    shipped = make_table([(16, 64, {"xla": 0.1, "looped:8": 0.5}),
                          (16, 2048, {"xla": 700.0, "looped:8": 23.0})],
                         source="shipped table Fake GPU (fake.json)")
    tuned = make_table([(16, 64, {"xla": 0.1, "looped:8": 0.09}),
                        (16, 32, {"xla": 0.05, "looped:8": 0.2})],
                       source="tuned /x/t.json", key={"gpu": "Fake GPU"})
    (merged,) = tables.overlay(tuned, shipped)
    assert merged.source == "tuned /x/t.json over shipped table Fake GPU (fake.json)"
    with tables.using(merged):
        far = jcm.explain("lu_factor", (16, 2048, 2048), "float32")
        assert (far.strategy, far.lanes) == ("looped", 8)
        # At 16x64 the tuned time of looped:8 wins over the shipped one (0.09 vs 0.5).
        near = dict(jcm.explain("lu_factor", (16, 64, 64), "float32").times_ms)
        assert near["looped:8"] == pytest.approx(0.09)
    assert tables.overlay(None, shipped) == (shipped,) and tables.overlay(tuned, None) == (tuned,)
    assert tables.overlay(None, None) == ()


def test_without_tables_auto_is_jax_lowering_except_where_jax_has_none():
    with tables.using():
        plan = jcm.explain("lu_factor", (16, 2048, 2048), np.float32)
        assert (plan.strategy, plan.source, plan.rule) == ("xla", "unmeasured", tables.OUTSIDE)
        assert plan.times_ms == () and "no table has getrf float32 points" in plan.reason
        # JAX has no LDL^T: the hand-written rules answer.
        plan = jcm.explain("ldl_factor", (16, 2048, 2048), np.float32)
        assert plan.strategy != "xla" and plan.source == plan.rule == "heuristic"


def test_a_requested_strategy_ignores_the_table():
    table = make_table([(64, 512, {"xla": 10.0, "looped:8": 5.0})])
    with tables.using(table):
        plan = jcm.explain("lu_factor", (64, 512, 512), "float32", strategy="batched")
    assert (plan.strategy, plan.source) == ("batched", "user")


def test_lanes_given_with_auto_restrict_the_candidates():
    table = make_table([(64, 512, {"xla": 10.0, "looped:8": 5.0, "looped:4": 6.0,
                                   "batched:4": 7.0})])
    with tables.using(table):
        plan = jcm.explain("lu_factor", (64, 512, 512), "float32", lanes=4)
        assert (plan.strategy, plan.lanes) == ("looped", 4)
        assert "xla" not in dict(plan.times_ms)  # lanes given: our FFI path, never JAX's
        plan = jcm.explain("lu_factor", (64, 512, 512), "float32", lanes=2)
    assert plan.source == "heuristic" and plan.lanes == 2  # nothing measured on 2 lanes


def test_no_batched_candidate_where_no_batched_api_fits():
    # getrfBatched takes square matrices only: a measured "batched" time is not a candidate for
    # a rectangular call.
    times = {"xla": 10.0, "batched:1": 1.0, "looped:8": 5.0}
    table = Table("Fake GPU", "shipped table Fake GPU", {("getrf", "float32"): [
        Point(64, 512, times), Point(64, 512, times, aspect=2.0)]})
    with tables.using(table):
        assert strategy.choose("getrf", 64, (512, 400), "float32").strategy == "looped"
        assert strategy.choose("getrf", 64, (512, 512), "float32").strategy == "batched"


def test_right_hand_sides_beyond_the_measured_are_jax_lowering():
    table = Table("Fake GPU", "shipped table Fake GPU",
                  {("getrs", "float32"): [Point(64, 512, {"xla": 10.0, "looped:8": 1.0})]})
    with tables.using(table):
        assert strategy.choose("getrs", 64, (512, 512), "float32", nrhs=64).strategy == "xla"
        assert strategy.choose("getrs", 64, (512, 512), "float32", nrhs=1).strategy == "looped"


def random_table(rng, routine="getrf"):
    """Random times of every candidate tune() would measure (no more lanes than matrices)."""
    names = ["xla", "sequential", "looped:2", "looped:8", "looped:16", "batched:1", "batched:4"]
    points = []
    for b in (1, 4, 16, 64, 256):
        for n in (16, 64, 256, 1024):
            fits = [c for c in names if tables.parse_candidate(c)[1] <= b
                    and not (b == 1 and c.startswith("looped"))]
            times = {c: float(rng.lognormal(0, 1)) for c in fits if c == "xla" or rng.random() < .8}
            points.append((b, n, times))
    return make_table(points, routine)


def test_auto_never_picks_a_candidate_measured_slower_than_xla(rng):
    for _ in range(5):
        table = random_table(rng)
        with tables.using(table):
            for b in (1, 3, 4, 10, 64, 300):
                for n in (8, 16, 40, 64, 200, 1024, 3000):
                    plan = strategy.choose("getrf", b, (n, n), "float32")
                    # Up to n = 64 getrf's batched path is the one-launch kernel: no lanes.
                    kernel = strategy.small_kernel("getrf", n, n)
                    estimate = table.estimate(
                        "getrf", "float32", b, n,
                        lambda c: not (kernel and c.startswith("batched:") and c != "batched:1"))
                    if estimate is None or estimate.best is None:  # JAX's lowering
                        assert (plan.strategy, plan.source) == ("xla", "unmeasured")
                        continue
                    times = dict(plan.times_ms)
                    assert plan.source == "shipped table Fake GPU"
                    assert plan.times_ms == estimate.times_ms
                    assert times[estimate.best] <= times["xla"]
                    # What runs is the estimate's best, its lanes capped at the batch.
                    kind, lanes = tables.parse_candidate(estimate.best)
                    assert (plan.strategy, plan.lanes) == (kind, min(lanes, b))
                    # Where the table measured this very cell, the choice was no slower there.
                    measured = {(p.batch, p.n): p for p in table.entries[("getrf", "float32")]}
                    if (b, n) in measured:
                        point = measured[(b, n)]
                        assert point.time(estimate.best) <= point.times_ms["xla"]
                    # Off JAX's lowering only where every point around the call agrees.
                    if estimate.best != "xla":
                        points = table.entries[("getrf", "float32")]
                        coords = dict(nrhs=1, aspect=1.0, batch=b, n=n)
                        around, _ = tables.bracket(points, coords)
                        scale = xla_scale = 1.0
                        if around is None:  # carried from a smaller batch, by its bounds
                            around, _, scale, xla_scale, _ = tables._carried_batch(
                                "getrf", "float32", points, coords, lambda c: True)
                        for point, _ in around:
                            assert scale * point.time(estimate.best) * (1 + tables.MARGIN) < \
                                xla_scale * point.times_ms["xla"]


def test_the_choice_is_deterministic(rng):
    table = random_table(rng)
    with tables.using(table):
        plans = [strategy.choose("getrf", 24, (300, 300), "float32") for _ in range(3)]
    again = Table.from_json(json.loads(json.dumps(table.to_json())), table.source)
    with tables.using(again):
        plans.append(strategy.choose("getrf", 24, (300, 300), "float32"))
    assert all(p == plans[0] for p in plans)


SHIPPED_GPUS = sorted(json.loads(path.read_text())["gpu"]
                      for path in Path(tables.SHIPPED_DIR).glob("*.json"))


def test_the_shipped_tables_include_the_h100():
    assert H100 in SHIPPED_GPUS


@pytest.mark.parametrize("gpu", SHIPPED_GPUS)
def test_each_shipped_table_parses_and_never_loses_to_jax_where_measured(gpu):
    shipped = tables.read_shipped(gpu)
    assert shipped is not None and shipped.source.startswith(f"shipped table {gpu}")
    for (routine, dtype), points in shipped.entries.items():
        for p in points:
            shape = shape_of(p.n, p.aspect)
            nrhs = p.nrhs if routine in ("getrs", "potrs", "sytrs", "trsm") else 0
            with tables.using(shipped):
                plan = strategy.choose(routine, p.batch, shape, dtype, nrhs=nrhs)
            measured = p.time(tables.candidate_name(plan.strategy, plan.lanes))
            if "xla" not in p.times_ms:  # LDL^T (sytrf, sytrs): JAX has none to lose to
                assert plan.strategy != "xla", (routine, dtype, p)
                continue
            # An unguarded kernel stands against JAX's own inside the guard, which costs more.
            unguarded = plan.strategy == "batched" and p.n <= tables.unguarded_max_n(routine)
            floor = tables.GUARD_FLOOR_MS if unguarded else 0.0
            assert measured <= (p.times_ms["xla"] + floor) * (1 + tables.MARGIN), \
                (routine, dtype, p)


def test_explain_for_another_gpu_model_reads_its_shipped_table():
    plan = jcm.explain("lu_factor", (16, 2048, 2048), np.float32, gpu=H100)
    assert plan.source.startswith(f"shipped table {H100}") and plan.strategy == "blocked"
    with pytest.warns(UserWarning, match="no strategy table is shipped"):
        plan = jcm.explain("lu_factor", (16, 2048, 2048), np.float32, gpu="No Such GPU")
    assert plan.source == "unmeasured"


@pytest.mark.parametrize("arch,stands_in", [
    ({"compute_capability": "9.0", "sm_count": 132}, True),   # an H200: the H100's processor
    ({"compute_capability": "9.0", "sm_count": 114}, False),  # an H100 PCIe: fewer SMs
    ({"compute_capability": "8.0", "sm_count": 132}, False),
    ({}, False)])
def test_a_shipped_table_stands_in_only_for_the_same_processor(arch, stands_in, tmp_path):
    (tmp_path / "h100.json").write_text((Path(tables.SHIPPED_DIR) / "h100.json").read_text())
    table = tables.read_shipped("NVIDIA H200", tmp_path, arch=arch)
    assert (table is not None) == stands_in
    if stands_in:
        assert table.gpu == H100 and table.source.startswith(f"shipped table {H100}")
        assert "standing in for NVIDIA H200" in table.source
        assert table.entries == tables.read_shipped(H100, tmp_path).entries
    # The model's own table always comes first, whatever the processor says.
    assert tables.read_shipped(H100, tmp_path, arch=arch).source == \
        f"shipped table {H100} (h100.json)"


def test_a_models_own_partial_table_is_laid_over_the_stand_in(tmp_path):
    arch = {"compute_capability": "9.0", "sm_count": 132}
    common, stand_in_only, own_only = (1, 64), (16, 256), (100000, 4)
    stand_in = make_table([(*common, {"xla": 1.0, "batched:1": 2.0}),
                           (*stand_in_only, {"xla": 3.0, "looped:4": 1.0})])
    own = make_table([(*common, {"xla": 1.0, "batched:1": 0.5}),
                      (*own_only, {"xla": 2.0, "batched:1": 0.1})])
    for name, gpu, table in (("a.json", H100, stand_in), ("b.json", "NVIDIA H200", own)):
        doc = {**table.to_json(), "gpu": gpu, "arch": arch}
        (tmp_path / name).write_text(json.dumps(doc))
    merged = tables.read_shipped("NVIDIA H200", tmp_path, arch=arch)
    assert merged.gpu == "NVIDIA H200" and merged.source.startswith("shipped table NVIDIA H200")
    assert "standing in for NVIDIA H200" in merged.source
    times = {(p.batch, p.n): p.times_ms for p in merged.entries[("getrf", "float32")]}
    assert times == {common: {"xla": 1.0, "batched:1": 0.5},
                     stand_in_only: {"xla": 3.0, "looped:4": 1.0},
                     own_only: {"xla": 2.0, "batched:1": 0.1}}
    # Without `arch`, the own file's says which processor it is.
    assert tables.read_shipped("NVIDIA H200", tmp_path).entries == merged.entries
    # A file without "arch", and no `arch`: the model's own points alone.
    doc = json.loads((tmp_path / "b.json").read_text())
    del doc["arch"]
    (tmp_path / "b.json").write_text(json.dumps(doc))
    alone = tables.read_shipped("NVIDIA H200", tmp_path)
    assert {(p.batch, p.n) for p in alone.entries[("getrf", "float32")]} == {common, own_only}


def test_the_stand_in_gives_no_point_within_a_column_the_model_measured(tmp_path):
    arch = {"compute_capability": "9.0", "sm_count": 132}
    # The model's own column at n = 64 spans batches 16 to 256; the stand-in's points at 64
    # (between them) and 16 (at one of them, with a candidate the model did not time) would
    # decide calls there with another GPU's times. At batch 4 and 1024 (beyond the model's
    # range) and at n = 128 (a column the model has none of) the stand-in still answers.
    stand_in = make_table([(4, 64, {"xla": 2.0, "looped:4": 1.0}),
                           (16, 64, {"xla": 9.0, "looped:8": 3.0}),
                           (64, 64, {"xla": 12.0, "looped:8": 4.0}),
                           (1024, 64, {"xla": 90.0, "looped:8": 30.0}),
                           (64, 128, {"xla": 20.0, "looped:8": 5.0})])
    own = make_table([(16, 64, {"xla": 9.5, "batched:1": 0.6}),
                      (256, 64, {"xla": 60.0, "batched:1": 1.2})])
    for name, gpu, table in (("a.json", H100, stand_in), ("b.json", "NVIDIA H200", own)):
        (tmp_path / name).write_text(json.dumps({**table.to_json(), "gpu": gpu, "arch": arch}))
    merged = tables.read_shipped("NVIDIA H200", tmp_path, arch=arch)
    times = {(p.batch, p.n): p.times_ms for p in merged.entries[("getrf", "float32")]}
    assert times == {(4, 64): {"xla": 2.0, "looped:4": 1.0},
                     (16, 64): {"xla": 9.5, "batched:1": 0.6},
                     (256, 64): {"xla": 60.0, "batched:1": 1.2},
                     (1024, 64): {"xla": 90.0, "looped:8": 30.0},
                     (64, 128): {"xla": 20.0, "looped:8": 5.0}}
    # A call between the model's points is decided by them alone.
    estimate = merged.estimate("getrf", "float32", 64, 64)
    assert estimate.best == "batched:1" and "16x64, 256x64" in estimate.basis


def test_this_machine_loads_a_stand_in_table_for_the_same_processor(monkeypatch):
    monkeypatch.setattr(tables, "gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(tables, "gpu_arch", lambda: {"compute_capability": "9.0",
                                                     "sm_count": 132})
    monkeypatch.setenv(tables.CACHE_ENV, "/nonexistent-cache")
    tables.reload()
    try:
        with tables.using_machine():
            plan = jcm.explain("lu_factor", (16, 2048, 2048), np.float32)
        assert plan.strategy == "blocked" and "standing in for NVIDIA H200" in plan.source
    finally:
        tables.reload()


def test_the_arch_survives_a_round_trip():
    shipped = tables.read_shipped(H100)
    assert shipped.arch == {"compute_capability": "9.0", "sm_count": 132}
    again = Table.from_json(json.loads(json.dumps(shipped.to_json())), "x")
    assert again.arch == shipped.arch and again.entries == shipped.entries


@pytest.mark.parametrize("op,routine", [("eigh", "syevj"), ("eigvalsh", "syevj"),
                                        ("svd", "gesvdj"), ("lu_factor", "getrf")])
def test_explain_names_the_routine_that_runs(op, routine):
    assert jcm.explain(op, (8, 16, 16), np.float32).op == routine
    assert jcm.explain("eigh", (8, 64, 64), np.float32).op == "syevd"


def _lowered(fn, *args):
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


@requires_extension
def test_the_table_choice_is_what_lowers():
    a = np.ones((4, 16, 16), np.float32)
    lanes = make_table([(4, 16, {"xla": 1.0, "looped:4": 0.5, "batched:1": 2.0})])
    with tables.using(lanes):
        text = _lowered(lambda x: jcm.lu_factor(x), a)
    assert "jcm_getrf" in text and "lanes = 4" in text
    jax_own = make_table([(4, 16, {"xla": 1.0, "looped:4": 1.5})])
    with tables.using(jax_own):
        text = _lowered(lambda x: jcm.lu_factor(x), a)
    assert "jcm_getrf" not in text and "cusolver_getrf" in text


# --- files: the tuned cache ----------------------------------------------------------------------

KEY = {"format": 1, "gpu": "Fake GPU", "cusolver": 12004, "cublas": 130100, "jax": "0.11.2"}


def test_cache_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(tables.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tables.cache_path("NVIDIA H100 80GB HBM3") == \
        tmp_path / "xdg" / "jax_cusolver_ms" / "tuned_NVIDIA-H100-80GB-HBM3.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert tables.cache_dir() == Path(os.path.expanduser("~")) / ".cache" / "jax_cusolver_ms"
    monkeypatch.setenv(tables.CACHE_ENV, str(tmp_path / "mine"))
    assert tables.cache_path("x").parent == tmp_path / "mine"


def test_tuned_table_round_trips(tmp_path):
    table = make_table(crossing_grid(), key=KEY)
    path = tables.write_atomic(tmp_path / "sub" / "t.json", table.to_json())
    read = tables.read_tuned(path, KEY)
    assert read.source == f"tuned {path}" and read.key == KEY
    assert read.to_json() == table.to_json()
    assert [p.name for p in path.parent.iterdir()] == ["t.json"]  # no temporary left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tables.write_atomic(tmp_path / "t.json", {"old": 1})
    with pytest.raises(TypeError):
        tables.write_atomic(path, {"new": object()})  # not JSON: fails half-way through
    assert json.loads(path.read_text()) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": 99}),
                                     json.dumps({"format": 1, "gpu": "g", "entries": {
                                         "getrf": {"float32": [{"batch": 4, "n": 16,
                                                                "times_ms": {"xla": -1}}]}}}),
                                     json.dumps({"format": 1, "gpu": "g", "entries": {
                                         "getrf": {"float32": [{"batch": 4, "n": 16,
                                                                "times_ms": {"bogus": 1}}]}}})])
def test_a_corrupt_tuned_file_is_ignored_with_a_warning(tmp_path, content):
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.warns(RuntimeWarning, match="ignoring the unreadable tuned table"):
        assert tables.read_tuned(path, KEY) is None


@pytest.mark.parametrize("field,value", [("gpu", "Other GPU"), ("cusolver", 12005),
                                         ("cublas", 130200), ("jax", "0.12.0")])
def test_a_stale_tuned_file_is_ignored_with_a_warning(tmp_path, field, value):
    path = tables.write_atomic(tmp_path / "t.json", make_table(crossing_grid(), key=KEY).to_json())
    with pytest.warns(RuntimeWarning, match=f"stale tuned table.*{field}"):
        assert tables.read_tuned(path, {**KEY, field: value}) is None


def test_a_missing_tuned_file_is_silently_absent(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tables.read_tuned(tmp_path / "none.json", KEY) is None


def test_this_machines_tables_load_tuned_first(monkeypatch, tmp_path):
    """The loading itself: a fake GPU name, a shipped folder and a cache folder of our own."""
    shipped_dir = tmp_path / "shipped"
    shipped = make_table([(64, 512, {"xla": 10.0, "looped:8": 5.0}),
                          (64, 2048, {"xla": 10.0, "looped:8": 5.0})])
    tables.write_atomic(shipped_dir / "fake.json", shipped.to_json())
    monkeypatch.setattr(tables, "SHIPPED_DIR", shipped_dir)
    monkeypatch.setenv(tables.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(tables, "gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(tables, "current_key", lambda gpu: {**KEY, "gpu": gpu})
    tuned = make_table([(64, 512, {"xla": 10.0, "batched:1": 4.0})], key=KEY)
    tables.write_atomic(tables.cache_path("Fake GPU"), tuned.to_json())
    tables.reload()
    try:
        with tables.using_machine():
            near = strategy.choose("getrf", 64, (512, 512), "float32")
            assert near.source == (f"tuned {tables.cache_path('Fake GPU')} over "
                                   "shipped table Fake GPU (fake.json)")
            assert near.strategy == "batched"
            # At 64x2048 the shipped point answers (the tuned table has none there).
            far = strategy.choose("getrf", 64, (2048, 2048), "float32")
            assert (far.strategy, far.lanes) == ("looped", 8) and far.source.startswith("tuned")
            assert strategy.choose("getrf", 64, (512, 512), "float64").source == "unmeasured"
        # A stale tuned file: the shipped table, and a warning.
        monkeypatch.setattr(tables, "current_key", lambda gpu: {**KEY, "jax": "9.9"})
        tables.reload()
        with tables.using_machine(), pytest.warns(RuntimeWarning, match="stale"):
            assert strategy.choose("getrf", 64, (512, 512), "float32").source == \
                "shipped table Fake GPU (fake.json)"
    finally:
        tables.reload()


def test_no_gpu_means_no_tables():
    # On this CPU machine nothing is loaded: the heuristic.
    if jcm.gpu_available():
        pytest.skip("this machine has a GPU")
    with tables.using_machine():
        assert tables.active() == ()
        assert jcm.explain("lu_factor", (64, 512, 512), "float32").source == "unmeasured"


# --- tune() --------------------------------------------------------------------------------------

def test_tune_needs_a_gpu():
    if jcm.gpu_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="on a GPU"):
        jcm.tune(ops=["lu_factor"])


@pytest.mark.parametrize("op,batch,n,expected", [
    ("lu_factor", 1, 128, {"xla", "sequential"}),
    # Up to n = 64 getrf's batched path is the one-launch kernel: single matrices too, no lanes.
    ("lu_factor", 1, 64, {"xla", "sequential", "batched:1"}),
    ("lu_factor", 4, 64, {"xla", "sequential", "blocked", "looped:2", "looped:4", "batched:1"}),
    ("lu_factor", 4, 128, {"xla", "sequential", "blocked", "looped:2", "looped:4", "batched:1",
                           "batched:2", "batched:4"}),
    ("eig", 4, 64, {"xla", "sequential", "looped:2", "looped:4"}),  # geev: batched up to n 4
    ("eig", 4, 4, {"xla", "sequential", "looped:2", "looped:4", "batched:1"}),
    # Up to n = 128 gesvdj's batched path is the one-launch Jacobi kernel: no lanes.
    ("svd", 4, 64, {"xla", "sequential", "looped:2", "looped:4", "batched:1"}),
    ("svd", 4, 256, {"xla", "sequential", "looped:2", "looped:4"}),
])
def test_candidates_never_exceed_the_batch_and_exist(op, batch, n, expected):
    cell = tune_module.Cell(op, "float32", batch, n, n)
    assert set(tune_module.candidates(cell, (1, 2, 4, 8, 16))) == expected


def test_ldl_solve_is_tuned_as_sytrs_with_its_kernels_for_single_matrices():
    # The LDL^T solve's kernels (unblocked and blocked) also take one matrix; JAX has none.
    assert tune_module.WORKLOADS["ldl_solve"].reference is None
    single, four = (tune_module.Cell("ldl_solve", "float32", batch, 600, 600) for batch in (1, 4))
    assert set(tune_module.candidates(single, (1, 2, 4), with_xla=False)) == {
        "sequential", "blocked", "batched:1"}
    assert set(tune_module.candidates(four, (1, 2, 4), with_xla=False)) == {
        "sequential", "blocked", "batched:1", "batched:2", "batched:4", "looped:2", "looped:4"}


def test_tune_on_cpu_writes_merges_and_is_read_back(tmp_path):
    path = tmp_path / "tuned.json"
    first = jcm.tune(ops=["lu_factor"], dtypes=["float32"], sizes=[8], batches=[1, 2],
                     lanes=(1, 2, 4), repeats=1, warmup=0, path=path, progress=False,
                     _allow_cpu=True)
    assert first.path == path and first.skipped == []
    doc = json.loads(path.read_text())
    device = tables.gpu_name() or "cpu"  # on a GPU machine it measures the GPU
    assert doc["gpu"] == device and doc["key"] == tables.current_key(device)
    points = doc["entries"]["getrf"]["float32"]
    assert {(p["batch"], p["n"]) for p in points} == {(1, 8), (2, 8)}
    times = {p["batch"]: p["times_ms"] for p in points}
    by_batch = {batch: set(t) for batch, t in times.items()}
    assert by_batch[1] == {"xla", "sequential", "batched:1"}  # n = 8: the one-launch kernel
    # Per matrix, sequential is left out at batch 2 where it lost by DOMINATED_FACTOR at 1 (on
    # a GPU: the one-launch kernel is far faster there).
    dominated = times[1]["sequential"] > tune_module.DOMINATED_FACTOR * min(times[1].values())
    assert by_batch[2] == ({"xla", "blocked", "looped:2", "batched:1"} |
                           (set() if dominated else {"sequential"}))
    second = jcm.tune(ops=["eigh"], dtypes=["float32"], sizes=[8], batches=[2], lanes=(2,),
                      repeats=1, warmup=0, path=path, progress=False, _allow_cpu=True)
    assert set(second.table.entries) == {("getrf", "float32"), ("syevj", "float32")}
    read = tables.read_tuned(path, tables.current_key(device))
    assert set(read.entries) == {("getrf", "float32"), ("syevj", "float32")}
    with tables.using(read):
        assert strategy.choose("getrf", 2, (8, 8), "float32").source == f"tuned {path}"


def test_tune_goes_on_where_it_stopped(tmp_path, monkeypatch):
    calls = []
    real = tune_module._median_ms
    monkeypatch.setattr(tune_module, "_median_ms", lambda fn, inputs, *a: (
        calls.append(inputs[0].shape) or real(fn, inputs, *a)))
    # Without the refinement, which could measure a cell between 8 and 12 (tests of its own in
    # test_tune_space.py).
    kwargs = dict(ops=["cholesky"], dtypes=["float32"], sizes=[8], batches=[2], lanes=(2,),
                  repeats=1, warmup=0, path=tmp_path / "t.json", progress=False, refine=False,
                  _allow_cpu=True)
    jcm.tune(**kwargs)
    first = len(calls)
    assert first == 5  # xla, sequential, blocked, looped:2, batched:2
    jcm.tune(**kwargs)
    assert len(calls) == first  # the file holds the cell: nothing measured again
    jcm.tune(**kwargs, remeasure=True)
    assert len(calls) == 2 * first
    jcm.tune(**{**kwargs, "sizes": [8, 12]})
    assert len(calls) == 3 * first  # only the new cell
    # From a copy elsewhere (a file carried to another machine) to a new output file.
    moved = jcm.tune(**{**kwargs, "sizes": [8, 12], "path": tmp_path / "out" / "t.json",
                        "resume_from": tmp_path / "t.json"})
    assert len(calls) == 3 * first
    assert json.loads((tmp_path / "out" / "t.json").read_text())["entries"] == \
        json.loads((tmp_path / "t.json").read_text())["entries"]
    assert moved.path == tmp_path / "out" / "t.json"


@pytest.mark.parametrize("call_s, fastest_ms, repeats", [
    (0.06, 1.0, 1),         # 60 ms where the cell's fastest took 1 ms: timed once
    (0.06, 10.0, 7),        # 6x the fastest: the full count
    (0.06, math.inf, 7),    # the cell's first candidate
    (0.02, 0.1, 7),         # far behind, but too short for one call to say its time
])
def test_a_candidate_far_behind_the_cells_fastest_is_timed_once(monkeypatch, call_s, fastest_ms,
                                                                 repeats):
    def slow_call(*inputs):
        time.sleep(call_s)
        return jax.numpy.zeros(())

    asked = []
    monkeypatch.setattr(tune_module._timing, "compiled_for_timing", lambda fn, *a: slow_call)
    monkeypatch.setattr(tune_module._timing, "device_time_ms", lambda fn, *a, repeats, warmup: (
        asked.append((repeats, warmup)) or [call_s * 1e3] * repeats))
    ms, measured_s = tune_module._median_ms(None, (), 7, 2, fastest_ms)
    assert asked == [(repeats, 0 if repeats == 1 else 2)]
    assert ms == pytest.approx(call_s * 1e3) and measured_s >= call_s


def test_a_cell_times_the_usually_fastest_kinds_first():
    names = ["xla", "sequential", "looped:2", "looped:8", "blocked", "batched:1"]
    assert sorted(names, key=tune_module._timing_order) == [
        "batched:1", "blocked", "looped:8", "looped:2", "xla", "sequential"]


def test_tune_leaves_out_a_candidate_beyond_a_too_slow_call(tmp_path, monkeypatch):
    # Every call "takes" 30 s on the wall clock: after the first cell, no candidate is measured
    # at larger cells of the same op and dtype, and each is listed with the reason.
    monkeypatch.setattr(tune_module, "_median_ms", lambda fn, inputs, *a: (1.0, 30.0))
    result = jcm.tune(ops=["cholesky"], dtypes=["float32"], sizes=[8, 16], batches=[2],
                      lanes=(2,), path=tmp_path / "t.json", progress=False, _allow_cpu=True)
    points = result.table.entries[("potrf", "float32")]
    assert [(p.batch, p.n) for p in points] == [(2, 8)]
    assert len(result.skipped) == 5  # xla, sequential, blocked, looped:2, batched:2
    assert all("2x16" in s and "took over 20 s at 2x8" in s for s in result.skipped)


def test_a_too_slow_jax_call_leaves_its_time_as_a_lower_bound(tmp_path, monkeypatch):
    # JAX's own takes 30 s a call (25 s on the device), the others a millisecond: at the larger
    # cell JAX is not run again, its time at the smaller one kept as a lower bound, where its
    # lowering runs both alike (potrfBatched: one call for the batch), so that the others can
    # win there; with no bound, JAX's own would run where it is slowest.
    def timed(workload):
        return lambda fn, inputs, *a: (25e3, 30.0) if fn is workload.reference else (1.0, 1e-3)

    monkeypatch.setattr(tune_module, "_median_ms", timed(tune_module.WORKLOADS["cholesky"]))
    result = jcm.tune(ops=["cholesky"], dtypes=["float32"], sizes=[8, 16], batches=[2],
                      lanes=(2,), path=tmp_path / "t.json", progress=False, _allow_cpu=True)
    points = {p.n: p.times_ms for p in result.table.entries[("potrf", "float32")]}
    assert points[16]["xla"] == 25e3 and points[16]["batched:1"] == 1.0
    assert result.skipped == ["cholesky float32 2x16x16 xla: one call took over 20 s at 2x8x8; "
                              "2.5e+04 ms kept as a lower bound"]
    with tables.using(result.table):
        assert strategy.choose("potrf", 2, (12, 12), "float32").strategy != "xla"
    # geqrf of 2 matrices is geqrfBatched at n 256 (256 // 2 <= 128), a geqrf per matrix at
    # 512: another program, whose time the batched call's does not bound.
    monkeypatch.setattr(tune_module, "_median_ms", timed(tune_module.WORKLOADS["qr"]))
    result = jcm.tune(ops=["qr"], dtypes=["float32"], sizes=[256, 512], batches=[2], aspects=(),
                      lanes=(2,), path=tmp_path / "q.json", progress=False, _allow_cpu=True,
                      refine=False)
    points = {p.n: p.times_ms for p in result.table.entries[("geqrf", "float32")]}
    assert "xla" in points[256] and "xla" not in points[512] and points[512]
    assert any("2x512x512 xla: one call took over 20 s at 2x256x256" in s and "bound" not in s
               for s in result.skipped)
    # ... nor does a batch of one (one geqrf) bound a batch of two (geqrfBatched).
    result = jcm.tune(ops=["qr"], dtypes=["float32"], sizes=[8], batches=[1, 2], aspects=(),
                      lanes=(2,), path=tmp_path / "b.json", progress=False, _allow_cpu=True,
                      refine=False)
    points = {p.batch: p.times_ms for p in result.table.entries[("geqrf", "float32")]}
    assert "xla" in points[1] and "xla" not in points[2] and points[2]


def test_tune_within_budget_lists_what_it_left(tmp_path):
    result = jcm.tune(ops=["lu_factor", "cholesky"], dtypes=["float32"], sizes=[8, 16],
                      batches=[2], budget_s=0, path=tmp_path / "t.json", progress=False,
                      _allow_cpu=True)
    assert len(result.skipped) == 4 and all("budget" in s for s in result.skipped)


@pytest.mark.parametrize("kwargs,match", [({"ops": ["nope"]}, "unknown ops"),
                                          ({"sizes": [0]}, ">= 1")])
def test_tune_refuses_bad_arguments(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        jcm.tune(path=tmp_path / "t.json", _allow_cpu=True, **kwargs)


def test_tune_command_line_help():
    out = subprocess.run([sys.executable, "-m", "jax_cusolver_ms.tune", "--help"],
                         capture_output=True, text=True, timeout=120, check=True)
    for option in ("--budget-s", "--lanes", "--dtypes", "--aspects", "--nrhs", "--no-refine",
                   "--refine-depth"):
        assert option in out.stdout
    assert "RuntimeWarning" not in out.stderr
    assert callable(jcm.tune)
