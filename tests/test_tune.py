"""Measured strategy tables, `auto` on them, explain(), the tuned cache, tune() and the report.

Everything here runs on a CPU: tables are installed with tables.using(...), tune() runs its
test-only CPU mode, and the report its --cpu-smoke grid.
"""
import dataclasses
import importlib
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_cusolver_ms as jcm
from jax_cusolver_ms import strategy, tables
from jax_cusolver_ms.tables import Point, Table

from conftest import requires_extension

tune_module = importlib.import_module("jax_cusolver_ms._tune")
ROOT = Path(__file__).resolve().parents[1]
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
    assert est.basis == "measured at 64x512"


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


def test_outside_the_measured_range_clamps_to_the_edge_within_reach():
    # Measured: batch 4-64, n 64-1024. Within 4x the batch and 2x n beyond: the edge answers.
    table = make_table(crossing_grid())
    assert table.estimate("getrf", "float32", 256, 2048).best == "looped:8"
    assert table.estimate("getrf", "float32", 2, 32).best == "batched:1"
    edge = dict(table.estimate("getrf", "float32", 64, 1024).times_ms)
    assert dict(table.estimate("getrf", "float32", 256, 2048).times_ms) == edge
    # Further out the table does not answer (the heuristic does).
    for batch, n in [(257, 1024), (64, 2049), (4, 31), (16, 16)]:
        assert table.estimate("getrf", "float32", batch, n) is None
    with tables.using(table):
        assert strategy.choose("getrf", 1024, (4096, 4096), "float32").source == "heuristic"


def test_scattered_points_use_the_nearest_n_counting_more():
    table = make_table([(64, 512, {"xla": 10.0, "looped:8": 20.0}),
                        (16, 2048, {"xla": 700.0, "looped:8": 23.0})])
    # 16 x 512: as far from 64x512 in log2 batch (2) as from 16x2048 in log2 n (2), but n
    # counts twice as much: the 64x512 point answers.
    est = table.estimate("getrf", "float32", 16, 512)
    assert est.basis == "nearest measured point 64x512" and est.best == "xla"
    est = table.estimate("getrf", "float32", 32, 2048)
    assert est.basis == "nearest measured point 16x2048" and est.best == "looped:8"


def test_a_single_matrix_is_its_own_regime():
    batch_points = [(4, 64, {"xla": 1.0, "looped:4": 0.1})]
    table = make_table(batch_points)
    assert table.estimate("getrf", "float32", 1, 64) is None  # never from batch points
    table = make_table(batch_points + [(1, 64, {"xla": 1.0, "sequential": 0.5})])
    assert table.estimate("getrf", "float32", 1, 64).best == "sequential"
    assert table.estimate("getrf", "float32", 4, 64).best == "looped:4"  # never from batch 1


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


@pytest.mark.parametrize("routine,n,expected", [("syevj", 32, "batched:1"), ("syevj", 64, "xla"),
                                                ("getrf", 64, "batched:1"), ("getrf", 128, "xla")])
def test_an_unguarded_kernel_needs_only_margin_to_leave_xla(routine, n, expected):
    # Up to UNGUARDED_KERNELS' n, auto's "xla" is JAX's lowering inside the guard (one more
    # kernel than the "xla" time): a 6% win of the kernel is a win. Above it, a tiny cell's.
    table = make_table([(64, n, {"xla": 0.136, "batched:1": 0.128})], routine=routine)
    assert table.estimate(routine, "float32", 64, n).best == expected


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
        assert jcm.explain("lu_factor", (64, 512, 512), "float64").source == "heuristic"


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


def test_without_tables_auto_is_the_heuristic():
    with tables.using():
        plan = jcm.explain("lu_factor", (16, 2048, 2048), np.float32)
    assert plan.source == "heuristic" and plan.times_ms == ()
    assert (plan.strategy, plan.lanes) == ("looped", 8)


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
    table = make_table([(64, 512, {"xla": 10.0, "batched:1": 1.0, "looped:8": 5.0})])
    with tables.using(table):
        assert strategy.choose("getrf", 64, (512, 400), "float32").strategy == "looped"
        assert strategy.choose("getrf", 64, (512, 512), "float32").strategy == "batched"


def test_many_right_hand_sides_keep_their_rule():
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
                    if estimate is None:  # beyond the table's reach: the heuristic answers
                        assert plan.source == "heuristic"
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


def test_the_choice_is_deterministic(rng):
    table = random_table(rng)
    with tables.using(table):
        plans = [strategy.choose("getrf", 24, (300, 300), "float32") for _ in range(3)]
    again = Table.from_json(json.loads(json.dumps(table.to_json())), table.source)
    with tables.using(again):
        plans.append(strategy.choose("getrf", 24, (300, 300), "float32"))
    assert all(p == plans[0] for p in plans)


def test_the_shipped_h100_table_parses_and_never_loses_to_jax_where_measured():
    shipped = tables.read_shipped(H100)
    assert shipped is not None and shipped.source.startswith(f"shipped table {H100}")
    for (routine, dtype), points in shipped.entries.items():
        for p in points:
            with tables.using(shipped):
                plan = strategy.choose(routine, p.batch, (p.n, p.n), dtype)
            measured = p.time(tables.candidate_name(plan.strategy, plan.lanes))
            assert measured <= p.times_ms["xla"] * (1 + tables.MARGIN), (routine, dtype, p)


def test_explain_for_another_gpu_model_reads_its_shipped_table():
    plan = jcm.explain("lu_factor", (16, 2048, 2048), np.float32, gpu=H100)
    assert plan.source.startswith(f"shipped table {H100}") and plan.strategy == "blocked"
    with pytest.warns(UserWarning, match="no strategy table is shipped"):
        plan = jcm.explain("lu_factor", (16, 2048, 2048), np.float32, gpu="No Such GPU")
    assert plan.source == "heuristic"


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
            assert strategy.choose("getrf", 64, (512, 512), "float64").source == "heuristic"
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
        assert jcm.explain("lu_factor", (64, 512, 512), "float32").source == "heuristic"


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
    ("eig", 4, 64, {"xla", "sequential", "looped:2", "looped:4"}),  # geev: no batched API
    ("svd", 4, 64, {"xla", "sequential", "looped:2", "looped:4"}),  # gesvdjBatched: n <= 32
])
def test_candidates_never_exceed_the_batch_and_exist(op, batch, n, expected):
    assert set(tune_module.candidates(op, batch, n, "float32", (1, 2, 4, 8, 16))) == expected


def test_ldl_solve_is_tuned_as_sytrs_with_its_kernels_for_single_matrices():
    # The LDL^T solve's kernels (unblocked and blocked) also take one matrix; JAX has none.
    assert tune_module.WORKLOADS["ldl_solve"].reference is None
    assert set(tune_module.candidates("ldl_solve", 1, 600, "float32", (1, 2, 4),
                                      with_xla=False)) == {"sequential", "blocked", "batched:1"}
    assert set(tune_module.candidates("ldl_solve", 4, 600, "float32", (1, 2, 4),
                                      with_xla=False)) == {
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
    by_batch = {p["batch"]: set(p["times_ms"]) for p in points}
    assert by_batch[1] == {"xla", "sequential", "batched:1"}  # n = 8: the one-launch kernel
    assert by_batch[2] == {"xla", "sequential", "blocked", "looped:2", "batched:1"}
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
    kwargs = dict(ops=["cholesky"], dtypes=["float32"], sizes=[8], batches=[2], lanes=(2,),
                  repeats=1, warmup=0, path=tmp_path / "t.json", progress=False, _allow_cpu=True)
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
    assert "--budget-s" in out.stdout and "--lanes" in out.stdout
    assert "RuntimeWarning" not in out.stderr
    assert callable(jcm.tune)


# --- the report and the table builder ------------------------------------------------------------

sys.path.insert(0, str(ROOT))


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


def test_build_table_resolves_what_each_strategy_ran():
    build_table = importlib.import_module("benchmarks.build_table")
    cell = {"op": "eig", "dtype": "float32", "batch": 16, "n": 256, "impls": {
        "jax": {"median_ms": 100.0},
        "jcm:looped": {"median_ms": 20.0, "ok": True},     # the run's default lanes: 8
        "jcm:looped:16": {"median_ms": 15.0, "ok": True},
        "jcm:sequential": {"median_ms": 90.0, "ok": False},  # a wrong answer does not count
        "jcm:auto": {"median_ms": 21.0, "ok": True}},
        "explain": {"strategy": "looped", "lanes": 8}}
    times = build_table.cell_times(cell, "geev", None)
    assert times == {"xla": 100.0, "looped:8": 20.0, "looped:16": 15.0}


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


def test_build_table_merges_tuned_tables_later_files_winning(tmp_path):
    build_table = importlib.import_module("benchmarks.build_table")
    gpu = "NVIDIA Test GPU"
    bench_doc = {"environment": {"jax_backend": "gpu", "device_kind": gpu}, "args": {},
                 "cells": [{"op": "lu_factor", "dtype": "float32", "batch": 64, "n": 512,
                            "impls": {"jax": {"median_ms": 10.0},
                                      "jcm:looped:8": {"median_ms": 24.0, "ok": True}}}]}
    tuned = {"format": 1, "gpu": gpu, "key": {"jax": "x"}, "entries": {"getrf": {"float32": [
        {"batch": 64, "n": 512, "times_ms": {"looped:8": 20.0}},
        {"batch": 4, "n": 512, "times_ms": {"xla": 7.0, "looped:4": 1.5}}]}}}
    paths = [tmp_path / "bench.json", tmp_path / "tuned.json"]
    for path, doc in zip(paths, (bench_doc, tuned)):
        path.write_text(json.dumps(doc))
    doc = build_table.build([str(p) for p in paths])
    points = {(p["batch"], p["n"]): p["times_ms"] for p in doc["entries"]["getrf"]["float32"]}
    assert points == {(64, 512): {"xla": 10.0, "looped:8": 20.0},
                      (4, 512): {"xla": 7.0, "looped:4": 1.5}}
    assert doc["built_from"] == [str(p) for p in paths]
    other = dict(tuned, gpu="NVIDIA Other GPU")
    paths[1].write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="one GPU model"):
        build_table.build([str(p) for p in paths])


@pytest.mark.parametrize("with_plots", [True, False])
def test_report_cpu_smoke_writes_json_markdown_and_figures(tmp_path, with_plots):
    args = [sys.executable, "-m", "benchmarks.report", "--cpu-smoke", "--ops", "lu_factor",
            "--sizes", "8", "--batches", "1,2", "--out", str(tmp_path), "--tag", "t"]
    env = dict(os.environ, JAX_PLATFORMS="cpu")  # the CPU smoke check, also on a GPU machine
    if not with_plots:
        # A matplotlib that cannot be imported: the report says so and still writes the rest.
        (tmp_path / "hide").mkdir()
        (tmp_path / "hide" / "matplotlib.py").write_text("raise ImportError('hidden by test')")
        env["PYTHONPATH"] = str(tmp_path / "hide")
    out = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads((tmp_path / "t_cpu.json").read_text())
    assert doc["complete"] and len(doc["cells"]) == 2
    assert {e["op"] for e in doc["summary"]["per_op"]} == {"lu_factor"}
    md = (tmp_path / "t_cpu.md").read_text()
    assert "geomean vs JAX" in md and "| lu_factor | float32 | 2 |" in md
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    try:
        import matplotlib  # noqa: F401
        have_matplotlib = True
    except ImportError:
        have_matplotlib = False
    if with_plots and have_matplotlib:
        assert pngs == ["t_cpu_lu_factor_speedup.png", "t_cpu_lu_factor_times.png"]
        assert all((tmp_path / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    else:
        assert pngs == [] and "matplotlib is not importable" in md
        assert "matplotlib is not importable" in out.stdout


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


def test_bench_skips_a_cell_whose_first_jax_call_is_over_the_limit():
    bench = importlib.import_module("benchmarks.bench")
    args = bench.parse_args(["--cpu-smoke", "--jax-limit-s", "1e-9", "--no-torch"])
    cell = bench.run_cell(bench.OPS["lu_factor"], "float32", 2, 8, args, None, seed=0)
    assert cell["status"] == "skipped" and cell["note"].startswith("JAX: one call took")
    assert list(cell["impls"]) == ["jax"] and cell["impls"]["jax"]["probe_ms"] > 0
    args = bench.parse_args(["--cpu-smoke", "--no-torch"])
    cell = bench.run_cell(bench.OPS["lu_factor"], "float32", 2, 8, args, None, seed=0)
    assert cell["status"] == "ok" and "jcm:auto" in cell["impls"]


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
    assert report.main(["--render", *map(str, paths), "--tag", "m", "--out", str(out),
                        "--no-plots"]) == 0
    doc = json.loads((out / "m_Fake-GPU.json").read_text())
    assert doc["complete"] and [c["op"] for c in doc["cells"]] == ["lu_factor", "qr"]
    per_op = {e["op"]: e["geomean_vs_jax"] for e in doc["summary"]["per_op"]}
    assert per_op == {"lu_factor": 1.0, "qr": 4.0}  # the later run's lu_factor cell won
    assert "| qr | float32 | 1 | 4.00x |" in (out / "m_Fake-GPU.md").read_text()
    other = dict(runs[0], environment=dict(env, gpu="Other GPU"))
    paths[0].write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="one GPU"):
        report.main(["--render", *map(str, paths), "--out", str(out), "--no-plots"])


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
    # Two shards of one run: every other cell each, the inputs' seeds those of the whole grid;
    # each shard's file carries the other's cells as they were, and --render keeps the version
    # measured last whatever the order of the files.
    report = importlib.import_module("benchmarks.report")
    ran = {}

    def fake_run_cell(op, dtype, batch, n, bench_args, torch, seed):
        ran[(batch, n)] = seed
        return {"op": op.name, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
                "impls": {"jax": {"median_ms": 2.0, "min_ms": 2.0, "probe_ms": 2.0,
                                  "error": 0.0},
                          "jcm:auto": {"median_ms": 1.0, "min_ms": 1.0, "ok": True,
                                       "error": 0.0}}}

    monkeypatch.setattr(report.bench, "run_cell", fake_run_cell)
    monkeypatch.setattr(report, "_progress", lambda total, desc: None)
    stale = [{"op": "lu_factor", "dtype": "float32", "batch": b, "n": n, "status": "ok",
              "impls": {"jax": {"median_ms": 1.0, "min_ms": 1.0, "error": 0.0},
                        "jcm:auto": {"median_ms": 4.0, "min_ms": 4.0, "ok": True,
                                     "error": 0.0}},
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
        cells = report.run_grid(args, type("B", (), dict(seed=100))(), None,
                                lambda c, t: None, stale)
        assert len(cells) == 4  # its two cells measured, the other two carried as they were
        paths.append(tmp_path / f"shard{k}.json")
        paths[-1].write_text(json.dumps({"environment": env, "args": run_args, "cells": cells}))
    assert ran == {(1, 16): 100, (4, 16): 102, (1, 64): 101, (4, 64): 103}
    for order in (paths, paths[::-1]):
        out = tmp_path / "out"
        assert report.main(["--render", *map(str, order), "--tag", "m", "--out", str(out),
                            "--no-plots"]) == 0
        doc = json.loads((out / "m_Fake-GPU.json").read_text())
        assert [c["impls"]["jcm:auto"]["median_ms"] for c in doc["cells"]] == [1.0] * 4
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
    a = jnp.eye(16, dtype=jnp.float32)[None] * 4 + jnp.ones((3, 16, 16), jnp.float32)
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
