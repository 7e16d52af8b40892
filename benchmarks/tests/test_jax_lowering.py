"""Tests of benchmarks/jax_lowering.py (where JAX's GPU lowering loops over the matrices of a
batch) and of the report's figures over those cells. CPU only: nothing is measured."""
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import bench, jax_lowering, render  # noqa: E402


def test_every_op_of_the_grid_has_a_rule():
    assert set(jax_lowering.ROUTINES) == set(bench.OPS)


@pytest.mark.parametrize("op", sorted(bench.OPS))
def test_a_batch_of_one_never_loops(op):
    assert not jax_lowering.jax_loops(op, "float32", 1, 4096)


@pytest.mark.parametrize("op", ["lu_factor", "solve", "inv", "det", "ldl_factor", "ldl_solve",
                                "qr_r"])
@pytest.mark.parametrize("batch, n, loops", [
    (4, 512, False), (4, 515, False), (4, 516, True), (4, 1024, True),  # n // batch > 128
    (16, 2048, False), (16, 2064, True), (2, 257, False), (2, 258, True), (256, 2048, False)])
def test_lu_and_qr_loop_where_n_over_the_batch_exceeds_128(op, batch, n, loops):
    assert jax_lowering.jax_loops(op, "float64", batch, n) is loops


@pytest.mark.parametrize("op", ["qr", "qr_multiply"])
@pytest.mark.parametrize("batch, n, loops", [
    (4, 128, False), (4, 129, True), (256, 2048, True), (2, 258, True), (64, 64, False)])
def test_qr_with_its_householder_step_loops_above_128(op, batch, n, loops):
    # geqrf's rule (n // batch > 128) or orgqr / ormqr's (n > 128): either loop is JAX's.
    assert jax_lowering.jax_loops(op, "float64", batch, n) is loops


@pytest.mark.parametrize("op", ["cholesky", "cho_solve"])
@pytest.mark.parametrize("batch, n", [(2, 16), (4, 4096), (256, 2048)])
def test_cholesky_is_always_batched(op, batch, n):
    assert not jax_lowering.jax_loops(op, "float32", batch, n)


@pytest.mark.parametrize("op", ["eigh", "eigvalsh"])
@pytest.mark.parametrize("dtype, batch, n, loops", [
    ("float32", 4, 32, False), ("float32", 4, 33, False), ("float64", 256, 2048, False),
    # XsyevBatched's chunks hold at most INT_MAX bytes: one matrix a chunk is Xsyevd per matrix.
    ("float64", 2, 11585, False), ("float64", 2, 11586, True), ("float32", 2, 11586, False),
    ("float32", 2, 16385, True), ("complex64", 2, 11586, True)])
def test_eigh_loops_only_where_a_chunk_holds_one_matrix(op, dtype, batch, n, loops):
    assert jax_lowering.jax_loops(op, dtype, batch, n) is loops


@pytest.mark.parametrize("op", ["svd", "svdvals", "lstsq", "pinv"])
@pytest.mark.parametrize("batch, n, loops", [
    (2, 16, False), (256, 32, False), (2, 33, True), (4, 1024, True), (4, 1025, True)])
def test_the_default_svd_loops_above_32(op, batch, n, loops):
    assert jax_lowering.jax_loops(op, "float32", batch, n) is loops


@pytest.mark.parametrize("op", ["eig", "eigvals", "svd_qr"])
@pytest.mark.parametrize("batch, n", [(2, 2), (4, 16), (256, 2048)])
def test_geev_and_gesvd_always_loop(op, batch, n):
    assert jax_lowering.jax_loops(op, "float32", batch, n)


def test_an_op_without_a_rule_is_an_error():
    with pytest.raises(KeyError):
        jax_lowering.jax_loops("no_such_op", "float32", 4, 64)


def _cell(op, batch, n, jax_ms, auto_ms, dtype="float32"):
    return {"op": op, "dtype": dtype, "batch": batch, "n": n, "status": "ok",
            "explain": {"strategy": "looped", "lanes": 1},
            "impls": {"jax": {"median_ms": jax_ms},
                      "jcm:auto": {"median_ms": auto_ms, "ok": True}}}


CELLS = [
    _cell("lu_factor", 4, 1024, 8.0, 1.0),     # loops: 8x
    _cell("lu_factor", 4, 512, 100.0, 1.0),    # getrfBatched: not counted
    _cell("eig", 4, 64, 2.0, 1.0),             # loops: 2x
    _cell("eig", 1, 64, 50.0, 1.0),            # one matrix: not counted
    _cell("svd", 16, 32, 10.0, 1.0),           # gesvdjBatched: not counted
    _cell("svd", 16, 64, 4.5, 1.0),            # loops: 4.5x
    _cell("svd", 64, 128, 3.0, 1.5),           # loops: 2x
    _cell("cholesky", 256, 2048, 1.0, 1.0),    # potrfBatched: not counted
    _cell("eig", 16, 16, 3.0, 1.0, "float64"),  # loops: 3x
    _cell("lu_factor", 16, 64, 1.0, 2.0, "float64"),
    {"op": "eig", "dtype": "float64", "batch": 256, "n": 2048, "impls": {}, "status": "skipped",
     "note": "JAX took 25 s"},
]


def test_summary_gives_the_geometric_mean_where_jax_loops():
    loops = render.summarize(CELLS)["jax_loops"]
    assert loops["cells"] == {"float32": 4, "float64": 1}
    assert loops["geomean_vs_jax"]["float32"] == pytest.approx((8 * 2 * 4.5 * 2) ** (1 / 4))
    assert loops["geomean_vs_jax"]["float64"] == pytest.approx(3.0)
    assert loops["where"] == [
        {"ops": ["lu_factor"], "batches": [4, 4], "sizes": [1024, 1024]},
        {"ops": ["eig"], "batches": [4, 16], "sizes": [16, 64]},
        {"ops": ["svd"], "batches": [16, 64], "sizes": [64, 128]}]
    # A dtype with no such cell has no mean, and the count says so.
    loops = render.summarize([CELLS[1]])["jax_loops"]
    assert loops == {"geomean_vs_jax": {"float32": None}, "cells": {"float32": 0}, "where": []}


def test_the_mean_where_jax_loops_leaves_out_other_computations():
    # JAX loops at each (LU, batch 4, n 2048), but the mixed-precision solve and LDL^T (against
    # JAX's LU) compare more than the strategy.
    others = [_cell("solve_mixed_cond1e8", 4, 2048, 1.0, 2.0, "float64"),
              _cell("solve_mixed", 4, 2048, 1.0, 2.0, "float64"),
              _cell("ldl_factor", 4, 2048, 1.0, 2.0, "float64")]
    same = _cell("solve", 4, 2048, 4.0, 1.0, "float64")
    loops = render.summarize(others + [same])["jax_loops"]
    assert loops["cells"] == {"float64": 1}
    assert loops["geomean_vs_jax"]["float64"] == pytest.approx(4.0)
    assert loops["where"] == [{"ops": ["solve"], "batches": [4, 4], "sizes": [2048, 2048]}]
    # Each of them alone still loops in JAX: only the statistic leaves them out.
    assert all(jax_lowering.jax_loops(c["op"], "float64", 4, 2048) for c in others)


def test_the_report_and_the_docs_page_show_the_mean_where_jax_loops():
    report = importlib.import_module("benchmarks.report")
    summary = render.summarize(CELLS)
    mean32 = (8 * 2 * 4.5 * 2) ** (1 / 4)
    line = (f"Where JAX loops per matrix: float32 **{mean32:.2f}x** over 4 cells, float64 "
            "**3.00x** over 1 cell.")
    which = ("Those cells: lu_factor at batch 4, n 1024; eig at batch 4-16, n 16-64; svd at "
             "batch 16-64, n 64-128. JAX's GPU lowering makes one cuSOLVER call per matrix")
    env = {"gpu": "Fake GPU", "driver": "1", "versions": {"jax": "0"}}
    text = report.summary_markdown(summary, env, {}, None)
    assert line in text and which in text
    # The whole grid's mean stays, in plain figures.
    assert "Geometric mean over the grid: float32 " in text
    square = {"environment": env, "args": {}, "complete": True, "summary": summary,
              "cells": CELLS}
    page = render.docs_page([("Fake", {"gpu": "Fake GPU", "square": square})])
    assert line in page and which in page
    brief = render.brief({"gpu": "Fake GPU", "square": square})
    assert f"  Where JAX loops per matrix: float32 {mean32:.2f}x over 4 cells" in brief
    assert "  Those cells: lu_factor at batch 4, n 1024;" in brief


def test_a_report_written_before_the_split_shows_without_it():
    summary = render.summarize(CELLS)
    del summary["jax_loops"]
    square = {"environment": {}, "args": {}, "complete": True, "summary": summary, "cells": CELLS}
    assert "loops" not in render.brief({"gpu": "Fake GPU", "square": square})


def test_the_runner_imports_the_package_through_the_installed_first_path():
    """`python -m benchmarks.report` runs from the repository root, whose source folder has no
    compiled extension: the package's first import must be bench._import_package's, which
    prefers the installed copy. A module importing jax_cusolver_ms at its top, ahead of bench,
    makes the runner time JAX's fallback on the GPU."""
    probe = (
        "import sys, traceback\n"
        "first = []\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'jax_cusolver_ms' and not first:\n"
        "            first.append([f.name for f in traceback.extract_stack()])\n"
        "        return None\n"
        "sys.meta_path.insert(0, Spy())\n"
        "import benchmarks.report\n"
        "print('_import_package' in first[0] if first else 'never')\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "True", done.stdout
