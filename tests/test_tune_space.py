"""The space tune() measures (coarse cells, their order, the input cap), the cells it refines
between neighbouring points that decide differently, and its command line.

Everything runs on a CPU: the space is a pure listing, the refinement is driven by a fake
_measure_cell, and one tiny tune times JAX's CPU fallback (tune's test-only CPU mode).
"""
import importlib
import inspect
import json
from collections import defaultdict

import pytest

import jax_cusolver_ms as jcm
from jax_cusolver_ms import tables
from jax_cusolver_ms.tables import Point, Table

tune_module = importlib.import_module("jax_cusolver_ms._tune")
Cell = tune_module.Cell

RECTANGULAR = {"geqrf", "ormqr", "orgqr", "gesvdj", "gesvd"}
SOLVES = {"getrs", "potrs", "sytrs", "trsm"}


@pytest.fixture(scope="module")
def default_space():
    return tune_module.space()


def test_the_default_space_covers_every_routine_and_dtype(default_space):
    cells, _ = default_space
    found = defaultdict(set)
    for c in cells:
        found[c.routine].add(c.dtype)
    assert set(found) == {"getrf", "getrs", "potrf", "potrs", "geqrf", "orgqr", "ormqr", "sytrf",
                          "sytrs", "syevj", "syevd", "gesvdj", "gesvd", "geev", "trsm",
                          "sygvd"}
    assert all(d == set(tune_module.DTYPES) for d in found.values())
    assert tune_module.DTYPES == ("float32", "float64", "complex64", "complex128")
    # n: the ladder from 2 to 4096 for every op.
    for op in tune_module.WORKLOADS:
        ns = {c.n for c in cells if c.op == op}
        assert min(ns) == 2 and max(ns) == 4096 and ns <= set(tune_module.SIZES), op


def test_big_batches_only_for_small_matrices(default_space):
    cells, _ = default_space
    assert {c.batch for c in cells if c.n > 32} == set(tune_module.BATCHES)
    for n in (2, 4, 8, 16, 32):
        batches = {c.batch for c in cells if c.n == n and c.op == "lu_factor"}
        assert batches == set(tune_module.BATCHES) | {4096, 16384, 100000}


def test_aspects_only_for_the_qr_and_svd_routines(default_space):
    cells, _ = default_space
    aspects = defaultdict(set)
    for c in cells:
        aspects[c.routine].add(c.aspect)
    for routine, found in aspects.items():
        if routine == "orgqr":  # householder_product takes m >= n only
            assert found == {1, 2, 4, 16, 64}
        elif routine in RECTANGULAR:
            assert found == {1 / 64, 1 / 16, 1 / 4, 1 / 2, 1, 2, 4, 16, 64}, routine
        else:
            assert found == {1}, routine
    # n is the larger dimension, the smaller side never under MIN_SIDE.
    for c in cells:
        assert c.n == max(c.rows, c.cols) and min(c.rows, c.cols) >= tune_module.MIN_SIDE
    assert Cell("qr", "float32", 4, 4096, 256) in cells
    assert Cell("qr", "float32", 4, 256, 4096) in cells
    # One column is a cell (MIN_SIDE 1); a smaller side that is no whole number is none.
    assert Cell("qr", "float32", 4, 16, 1) in cells and Cell("svd", "float32", 4, 1, 16) in cells
    assert not any(c.n == 8 and c.aspect == 16 for c in cells)


def test_right_hand_sides_only_for_the_solves(default_space):
    cells, _ = default_space
    counts = defaultdict(set)
    for c in cells:
        counts[c.routine].add(c.nrhs)
    for routine, found in counts.items():
        assert found == ({1, 8, 64} if routine in SOLVES else {1}), routine


def test_the_input_cap_leaves_out_the_largest_cells(default_space):
    cells, left_out = default_space
    cap = tune_module.MAX_INPUT_GB * 1e9
    for c in cells:
        assert c.batch * tune_module._bytes_per_matrix(c.op, c.rows, c.cols, c.nrhs,
                                                       c.dtype) <= cap
    # 1024 complex128 matrices of 512: 4.3 GB; 100000 of 32 with 64 right-hand sides: 4.9 GB.
    assert Cell("lu_factor", "complex128", 1024, 512, 512) not in cells
    assert Cell("lu_factor", "complex64", 1024, 512, 512) in cells
    assert "lu_factor complex128 1024x512x512: inputs 4.29 GB > 4 GB" in left_out
    assert any(s.startswith("cho_solve complex128 100000x32x32 nrhs 64: inputs") for s in left_out)
    assert not any("4096x4096" in str(c) and c.batch >= 64 for c in cells)


def test_a_lower_cap_counts_every_input(monkeypatch):
    # lu_solve float32 8x8 with 2 right-hand sides: the LU (256 B), the pivots (32 B) and b (64 B)
    # per matrix.
    monkeypatch.setattr(tune_module, "MAX_INPUT_GB", 352 * 4 / 1e9)
    cells, left_out = tune_module.space(["lu_solve"], ["float32"], [8], [4, 5], (), [2])
    assert cells == [Cell("lu_solve", "float32", 4, 8, 8, 2)]
    assert left_out == ["lu_solve float32 5x8x8 nrhs 2: inputs 1.76e-06 GB > 1.408e-06 GB"]


def test_small_cells_come_first(default_space):
    cells, _ = default_space
    order = [(c.n, c.batch) for c in cells]
    assert order == sorted(order)
    first = cells[:len(tune_module.WORKLOADS) * 4]
    assert {c.op for c in first} == set(tune_module.WORKLOADS)
    assert all(c.n == 2 and c.batch == 1 for c in first)


def test_given_batches_are_taken_at_every_n():
    cells, _ = tune_module.space(["lu_factor"], ["float32"], [8, 64], [2, 3], ())
    assert [(c.batch, c.n) for c in cells] == [(2, 8), (3, 8), (2, 64), (3, 64)]


@pytest.mark.parametrize("n,aspect,shape", [(64, 4, (64, 16)), (64, 1 / 16, (4, 64)),
                                            (8, 16, None), (96, 16, (96, 6)), (91, 16, None),
                                            (5, 1, (5, 5))])
def test_shape_of_keeps_the_aspect_exact(n, aspect, shape):
    assert tune_module.shape_of(n, aspect) == shape


@pytest.mark.parametrize("lo,hi,mid", [
    (Cell("lu_factor", "float32", 4, 64, 64), Cell("lu_factor", "float32", 4, 128, 128),
     Cell("lu_factor", "float32", 4, 91, 91)),
    (Cell("lu_factor", "float32", 16, 8, 8), Cell("lu_factor", "float32", 64, 8, 8),
     Cell("lu_factor", "float32", 32, 8, 8)),
    # The aspect stays exact: 96 x 6 between 64 x 4 and 128 x 8 (sqrt(64 128) = 90.5).
    (Cell("qr", "float32", 4, 64, 4), Cell("qr", "float32", 4, 128, 8),
     Cell("qr", "float32", 4, 96, 6)),
    (Cell("cho_solve", "float32", 4, 8, 8, 8), Cell("cho_solve", "float32", 4, 16, 16, 8),
     Cell("cho_solve", "float32", 4, 11, 11, 8)),
    (Cell("lu_factor", "float32", 1, 8, 8), Cell("lu_factor", "float32", 2, 8, 8), None),
    (Cell("lu_factor", "float32", 4, 8, 8), Cell("lu_factor", "float32", 4, 9, 9), None),
])
def test_the_midpoint_is_geometric_and_whole(lo, hi, mid):
    assert tune_module.midpoint(lo, hi) == mid


def test_neighbours_along_n_and_batch_within_one_routine():
    cells, _ = tune_module.space(["eigh"], ["float32"], [16, 32, 64], [1, 4], ())
    pairs = {(lo.batch, lo.n, hi.batch, hi.n) for lo, hi in tune_module.neighbours(cells)}
    # 32 -> 64 changes routine (syevj -> syevd): no pair across it.
    assert pairs == {(1, 16, 1, 32), (4, 16, 4, 32), (1, 16, 4, 16), (1, 32, 4, 32),
                     (1, 64, 4, 64)}


def test_candidates_follow_the_shape_and_the_right_hand_sides():
    candidates = lambda cell: set(tune_module.candidates(cell, (1, 2, 4)))
    # potrsBatched takes one right-hand side; the one-launch kernel (n <= 64) up to 64.
    assert "batched:1" in candidates(Cell("cho_solve", "float32", 4, 128, 128, 1))
    assert not any(c.startswith("batched") for c in
                   candidates(Cell("cho_solve", "float32", 4, 128, 128, 8)))
    assert "batched:1" in candidates(Cell("cho_solve", "float32", 4, 32, 32, 8))
    # The QR kernel takes tall matrices up to its n, wide ones only within it.
    assert "batched:4" in candidates(Cell("qr", "float32", 4, 4096, 256))
    assert candidates(Cell("qr", "float32", 4, 256, 4096)) == {"xla", "sequential", "looped:2",
                                                               "looped:4"}


@pytest.mark.parametrize("routine,times,decision", [
    ("getrf", {"xla": 10.0, "looped:8": 8.9}, "looped"),
    ("getrf", {"xla": 10.0, "looped:8": 9.2}, "xla"),      # within XLA_MARGIN
    ("getrf", {"xla": 0.12, "looped:8": 0.10}, "xla"),     # a tiny cell needs 35%
    ("getrf", {"xla": 0.12, "looped:8": 0.085, "blocked": 0.0851}, "blocked"),  # simpler
    ("syevj", {"xla": 0.136, "batched:1": 0.128}, "batched"),  # the unguarded kernel: 2%
    ("sytrf", {"batched:1": 1.0, "blocked": 1.01, "looped:8": 0.5}, "looped"),  # no JAX
    ("sytrf", {"batched:1": 1.0, "blocked": 1.01}, "batched"),  # within MARGIN: the simplest
])
def test_point_decision(routine, times, decision):
    n = 32 if routine == "syevj" else 64
    assert tables.point_decision(routine, Point(16, n, times)) == decision


def test_point_decision_is_what_the_table_answers_at_the_point(rng):
    names = ["xla", "sequential", "blocked", "looped:2", "looped:8", "batched:1", "batched:4"]
    for _ in range(200):
        times = {c: float(rng.lognormal(0, 0.3)) for c in names if c == "xla" or rng.random() < .6}
        point = Point(16, 256, times)
        table = tables.Table("Fake GPU", "fake", {("getrf", "float32"): [point]})
        best = table.estimate("getrf", "float32", 16, 256).best
        assert tables.point_decision("getrf", point) == tables.parse_candidate(best)[0]


# --- tune(): on the CPU, and with a fake measurement --------------------------------------------

def test_tune_signature_stays_compatible():
    params = list(inspect.signature(jcm.tune).parameters.values())
    assert [p.name for p in params[:12]] == [
        "ops", "dtypes", "sizes", "batches", "budget_s", "lanes", "path", "repeats", "warmup",
        "remeasure", "resume_from", "progress"]
    new = {p.name: p for p in params[12:]}
    assert {"aspects", "nrhs", "refine"} <= set(new)
    assert all(p.kind == p.KEYWORD_ONLY for p in new.values())
    assert new["refine"].default is True


def test_tune_on_cpu_writes_aspect_nrhs_and_routine_and_resumes(tmp_path, monkeypatch):
    calls = []
    real = tune_module._median_ms
    monkeypatch.setattr(tune_module, "_median_ms", lambda fn, inputs, *a: (
        calls.append(inputs[0].shape) or real(fn, inputs, *a)))
    path = tmp_path / "t.json"
    kwargs = dict(ops=["qr", "cho_solve"], dtypes=["complex64"], sizes=[8], batches=[2],
                  aspects=[4], nrhs=[1, 3], lanes=(2,), repeats=1, warmup=0, path=path,
                  progress=False, refine=False, _allow_cpu=True)
    result = jcm.tune(**kwargs)
    assert result.skipped == [] and result.refined == []
    entries = json.loads(path.read_text())["entries"]
    assert set(entries) == {"geqrf", "potrs"}
    geqrf = entries["geqrf"]["complex64"]
    assert sorted((p["batch"], p["n"], p.get("aspect", 1)) for p in geqrf) == [(2, 8, 1),
                                                                               (2, 8, 4.0)]
    potrs = entries["potrs"]["complex64"]
    assert sorted((p["batch"], p["n"], p.get("nrhs", 1)) for p in potrs) == [(2, 8, 1),
                                                                              (2, 8, 3)]
    assert all("aspect" not in p for p in potrs) and all("nrhs" not in p for p in geqrf)
    assert all("xla" in p["times_ms"] and "looped:2" in p["times_ms"] for p in geqrf + potrs)
    read = tables.read_tuned(path, tables.current_key(tables.gpu_name() or "cpu"))
    assert {p.key for p in read.entries[("geqrf", "complex64")]} == {(1, 1.0, 2, 8),
                                                                     (1, 4.0, 2, 8)}
    measured = len(calls)
    assert measured and {(2, 8, 2)} <= set(calls)  # the tall 8 x 2 QR
    jcm.tune(**kwargs)
    assert len(calls) == measured  # every cell is in the file: nothing measured again


def fake_measure(winner):
    """A _measure_cell whose looped:2 beats JAX's 1 ms by half where winner(cell), and loses by
    twice elsewhere; records the cells it was asked for."""
    cells = []

    def measure(workload, cell, *args):
        cells.append((cell.batch, cell.n))
        return {"xla": 1.0, "looped:2": 0.5 if winner(cell) else 2.0}

    return measure, cells


def refine_tune(tmp_path, monkeypatch, winner, **kwargs):
    measure, cells = fake_measure(winner)
    monkeypatch.setattr(tune_module, "_measure_cell", measure)
    kwargs = {**dict(ops=["lu_factor"], dtypes=["float32"], path=tmp_path / "t.json",
                     progress=False, _allow_cpu=True), **kwargs}
    return jcm.tune(**kwargs), cells


def test_refinement_bisects_where_the_winner_changes_along_n(tmp_path, monkeypatch):
    flips = lambda cell: cell.n >= 48
    result, cells = refine_tune(tmp_path, monkeypatch, flips, sizes=[16, 64, 256], batches=[4])
    # 16 (JAX) | 64 (lanes): 32 (JAX), then 45 between 32 and 64 (JAX); 64 | 256 agree.
    assert cells == [(4, 16), (4, 64), (4, 256), (4, 32), (4, 45)]
    assert [(c.batch, c.n) for c in result.refined] == [(4, 32), (4, 45)]
    points = {p.n for p in result.table.entries[("getrf", "float32")]}
    assert points == {16, 32, 45, 64, 256}
    # Again on the same file: the coarse cells and the midpoints are all there.
    _, again = refine_tune(tmp_path, monkeypatch, flips, sizes=[16, 64, 256], batches=[4])
    assert again == []


def test_refinement_bisects_where_the_winner_changes_along_the_batch(tmp_path, monkeypatch):
    result, cells = refine_tune(tmp_path, monkeypatch, lambda cell: cell.batch >= 20,
                                sizes=[16], batches=[1, 64, 256])
    assert cells == [(1, 16), (64, 16), (256, 16), (8, 16), (23, 16)]


def test_refinement_stops_at_its_depth_and_where_decisions_agree(tmp_path, monkeypatch):
    flips = lambda cell: cell.n >= 48
    _, cells = refine_tune(tmp_path, monkeypatch, flips, sizes=[16, 64, 256], batches=[4],
                           refine_depth=1)
    assert cells == [(4, 16), (4, 64), (4, 256), (4, 32)]
    _, cells = refine_tune(tmp_path / "agree", monkeypatch, lambda cell: True,
                           sizes=[16, 64, 256], batches=[1, 4])
    assert len(cells) == 6  # the coarse cells only
    _, cells = refine_tune(tmp_path / "off", monkeypatch, flips, sizes=[16, 64, 256],
                           batches=[4], refine=False)
    assert cells == [(4, 16), (4, 64), (4, 256)]


def test_refinement_keeps_to_the_budget(tmp_path, monkeypatch):
    clock = iter(range(1000))
    monkeypatch.setattr(tune_module.time, "perf_counter", lambda: float(next(clock)))
    # Each cell costs a "second" of the fake clock: the budget ends inside the refinement.
    result, cells = refine_tune(tmp_path, monkeypatch, lambda cell: cell.n >= 48,
                                sizes=[16, 64, 256], batches=[4], budget_s=3.5)
    assert cells == [(4, 16), (4, 64), (4, 256)]
    assert result.skipped == ["lu_factor float32 4x32x32: budget of 3.5 s spent"]


def test_command_line_passes_the_space(tmp_path, monkeypatch):
    seen = {}

    def fake_tune(**kwargs):
        seen.update(kwargs)
        return tune_module.TuneResult(tables.Table("cpu", "fake", {}), tmp_path / "t.json", [],
                                      0.0)

    monkeypatch.setattr(tune_module, "tune", fake_tune)
    assert tune_module.main(["--dtypes", "complex64,complex128", "--aspects", "1/4,16",
                             "--nrhs", "1,8", "--no-refine", "--sizes", "8,16",
                             "--no-square"]) == 0
    assert seen["dtypes"] == ["complex64", "complex128"] and seen["aspects"] == [0.25, 16.0]
    assert seen["nrhs"] == [1, 8] and seen["refine"] is False and seen["sizes"] == [8, 16]
    assert seen["square"] is False
    tune_module.main([])
    assert seen["refine"] is True and seen["aspects"] is None and seen["dtypes"] is None
    assert seen["square"] is True


def test_no_square_leaves_only_the_aspects_given():
    with_square, _ = tune_module.space(["svd", "lu_factor"], ["float32"], [64], [4], [4, 1 / 4])
    oblong, _ = tune_module.space(["svd", "lu_factor"], ["float32"], [64], [4], [4, 1 / 4],
                                  square=False)
    assert {(c.rows, c.cols) for c in with_square} == {(64, 64), (64, 16), (16, 64)}
    assert [(c.op, c.rows, c.cols) for c in oblong] == [("svd", 64, 16), ("svd", 16, 64)]


def test_ship_keeps_the_shipped_points_and_adds_the_missing_cells(tmp_path, monkeypatch):
    measure, cells = fake_measure(lambda cell: False)
    monkeypatch.setattr(tune_module, "_measure_cell", measure)
    path = tmp_path / "gpu.json"
    gpu = tables.gpu_name() or "cpu"  # what tune() measures on: this GPU, or the CPU fallback
    shipped = Table(gpu, "shipped", {("getrf", "float32"): [Point(4, 16, {"xla": 7.0})]}, {})
    path.write_text(json.dumps(shipped.to_json()))
    kwargs = dict(ops=["lu_factor"], dtypes=["float32"], sizes=[16, 64], batches=[4],
                  path=path, progress=False, refine=False, _allow_cpu=True)
    jcm.tune(ship=True, **kwargs)
    assert cells == [(4, 64)]  # 4x16 was shipped: kept, not measured again
    table = Table.from_json(json.loads(path.read_text()), "x")
    points = {p.key: p for p in table.entries[("getrf", "float32")]}
    assert points[(1, 1.0, 4, 16)].times_ms == {"xla": 7.0} and (1, 1.0, 4, 64) in points
    # The versions that measured it are recorded: the same versions resume it as a tuned table.
    assert table.key == tables.current_key(gpu)
    jcm.tune(**kwargs)
    assert cells == [(4, 64)]
    path.write_text(json.dumps(Table("Other GPU", "x", {}, {}).to_json()))
    with pytest.raises(ValueError, match="table of 'Other GPU'"):
        jcm.tune(ship=True, **kwargs)
    with pytest.raises(ValueError, match="needs the shipped table's path"):
        jcm.tune(ship=True, **dict(kwargs, path=None))


def test_candidates_compile_together_and_one_failing_leaves_the_others(monkeypatch):
    # Every candidate is compiled before any is timed; a candidate whose compile fails is
    # listed as skipped and the others are measured.
    timing = importlib.import_module("jax_cusolver_ms.timing")
    events = []
    real_compile = timing.compiled_for_timing

    def compile_(fn, *args):
        events.append("compile")
        if (getattr(fn, "__kwdefaults__", None) or {}).get("s") == "sequential":
            raise RuntimeError("no kernel for this")
        return real_compile(fn, *args)

    monkeypatch.setattr(timing, "compiled_for_timing", compile_)
    monkeypatch.setattr(tune_module, "_median_ms",
                        lambda fn, inputs, *a: (events.append("time") or 1.0, 0.0))
    cell = tune_module.Cell("lu_factor", "float32", 4, 8, 8, 1)
    skipped = []
    times = tune_module._measure_cell(tune_module.WORKLOADS["lu_factor"], cell, (2,), 1, 0, 0,
                                      {}, skipped)
    compiles = events.count("compile")
    assert compiles >= 3 and events[:compiles] == ["compile"] * compiles
    assert len(skipped) == 1 and "failed: RuntimeError: no kernel for this" in skipped[0]
    assert len(times) == compiles - 1 and all(t == 1.0 for t in times.values())


def test_a_per_matrix_candidate_far_behind_is_left_out_at_larger_batches(monkeypatch):
    # sequential and looped make one call per matrix: 10x behind the best at one batch, they
    # are not measured at larger batches of that shape (other shapes and batched candidates
    # still are).
    def median(fn, inputs, *a):
        strategy = (getattr(fn, "__kwdefaults__", None) or {}).get("s")
        return {"sequential": 50.0, "looped": 5.0}.get(strategy, 1.0), 0.0

    monkeypatch.setattr(tune_module, "_median_ms", median)
    run = lambda batch, n=8, dominated=None: tune_module._measure_cell(
        tune_module.WORKLOADS["lu_factor"], tune_module.Cell("lu_factor", "float32", batch, n, n),
        (2,), 1, 0, 0, {}, [], dominated)
    dominated = {}
    first = run(4, dominated=dominated)
    assert {"sequential", "looped:2", "batched:1", "xla"} <= set(first)
    assert dominated == {("lu_factor", "float32", 8, 8, 1, "sequential"): 4}
    later = run(16, dominated=dominated)
    assert "sequential" not in later and {"looped:2", "batched:1", "xla"} <= set(later)
    assert "sequential" in run(2, dominated=dominated) and "sequential" in run(16, 16, dominated)
    assert "sequential" in run(16)  # nothing recorded: every candidate


def test_a_per_matrix_candidate_far_behind_in_the_table_is_left_out(monkeypatch, tmp_path):
    # The same rule from the points of an earlier run: a run of large batches alone does not
    # time sequential where the table has it 10x behind at a smaller batch of that shape.
    timed = []

    def median(fn, inputs, *a):
        timed.append((getattr(fn, "__kwdefaults__", None) or {}).get("s", "xla"))
        return 1.0, 0.0

    monkeypatch.setattr(tune_module, "_median_ms", median)
    point = tables.Point(4, 8, {"xla": 1.0, "batched:1": 1.0, "sequential": 50.0,
                                "looped:2": 5.0})
    table = tables.Table("GPU", "test", {("getrf", "float32"): [point]})
    run = tune_module._Run(table, tmp_path / "t.json", "GPU", {}, (2,), 1, 0, False, 60.0)
    run.measure(tune_module.Cell("lu_factor", "float32", 16, 8, 8))
    assert "batched" in timed and "looped" in timed and "sequential" not in timed
    timed.clear()
    run.measure(tune_module.Cell("lu_factor", "float32", 16, 16, 16))  # another shape
    assert "sequential" in timed
    timed.clear()
    run.measure(tune_module.Cell("lu_factor", "float32", 2, 8, 8))  # a smaller batch
    assert "sequential" in timed


def test_a_per_matrix_candidate_is_bounded_by_its_time_per_call_at_a_smaller_batch(tmp_path):
    # The table has looped:4 and sequential at batch 1024, 500x behind the kernel: at 10^7
    # matrices no lane count of either can come within DOMINATED_FACTOR of the kernel's time
    # there times the chunks, so none is timed (each would take seconds a call).
    point = tables.Point(1024, 2, {"xla": 0.036, "batched:1": 0.024, "looped:4": 12.0,
                                   "sequential": 29.0})
    table = tables.Table("GPU", "test", {("getrf", "float32"): [point]})
    run = tune_module._Run(table, tmp_path / "t.json", "GPU", {}, (1, 2, 4, 8, 16), 1, 0,
                           False, 60.0)
    cell = tune_module.Cell("lu_factor", "float32", 10**7, 2, 2)
    run._dominated_before(cell)
    per_matrix = {name for name in tune_module.candidates(cell, (1, 2, 4, 8, 16))
                  if tune_module._per_matrix(name)}
    assert per_matrix >= {"sequential", "looped:2", "looped:16"}
    assert {key[-1] for key in run.dominated} == per_matrix
    # Close behind at 1024 (looped:4 at 2x the kernel's time per matrix): lanes of 4 and more
    # are bounded and still may win with more lanes; fewer lanes are not bounded by them.
    near = tables.Point(1024, 2, {"xla": 0.036, "batched:1": 0.024, "looped:4": 0.048})
    run = tune_module._Run(tables.Table("GPU", "test", {("getrf", "float32"): [near]}),
                           tmp_path / "u.json", "GPU", {}, (1, 2, 4, 8, 16), 1, 0, False, 60.0)
    run._dominated_before(tune_module.Cell("lu_factor", "float32", 4096, 2, 2))
    assert run.dominated == {}


def test_a_per_matrix_candidate_is_bounded_from_the_neighbouring_orders(tmp_path):
    # No point of n = 3 at all: the call per matrix costs at least what it cost at n = 2, and
    # the best at n = 4 bounds the best at n = 3 from above, so at 10^7 matrices no per-matrix
    # candidate is timed. Neither neighbour alone bounds anything.
    smaller = tables.Point(1024, 2, {"xla": 0.036, "batched:1": 0.024, "looped:4": 12.0,
                                     "sequential": 29.0})
    larger = tables.Point(10**6, 4, {"xla": 0.19, "batched:1": 0.14})
    cell = tune_module.Cell("lu_factor", "float32", 10**7, 3, 3)
    per_matrix = {name for name in tune_module.candidates(cell, (1, 2, 4, 8, 16))
                  if tune_module._per_matrix(name)}
    for points, expected in (([smaller, larger], per_matrix), ([smaller], set()),
                             ([larger], set())):
        table = tables.Table("GPU", "test", {("getrf", "float32"): points})
        run = tune_module._Run(table, tmp_path / "t.json", "GPU", {}, (1, 2, 4, 8, 16), 1, 0,
                               False, 60.0)
        run._dominated_before(cell)
        assert {key[-1] for key in run.dominated} == expected
