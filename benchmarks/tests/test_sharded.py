"""benchmarks.sharded on four CPU host devices: the table, and no collective around our calls."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sharded_benchmark_measures_one_device_against_four(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4")
    r = subprocess.run([sys.executable, "-m", "benchmarks.sharded", "--platform", "cpu",
                        "--batch", "8", "--ops", "lu_factor:8,eigh:8,matmul:8", "--repeats", "1",
                        "--warmup", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "sharded.json").read_text())["sharded"]
    assert doc["devices"] == 4 and [row["op"] for row in doc["rows"]] == [
        "lu_factor", "eigh", "matmul"]
    for row in doc["rows"]:
        for label in ("ours", "jax"):
            result = row[label]
            assert result["one"]["ms"] > 0 and result["sharded"]["ms"] > 0
            # The share: 2 of the 8 matrices, alone on one device.
            assert result["efficiency"] == result["share"]["ms"] / result["sharded"]["ms"]
            assert result["share"]["device_bytes"] < result["one"]["device_bytes"], row["op"]
            assert result["sharded"]["collectives"] == {}, (row["op"], label)
    text = (tmp_path / "sharded.md").read_text()
    assert "sharded over all of them" in text and "| lu_factor 8x8 |" in text
    # Merged into a report by --render: the report gains the section.
    out = tmp_path / "report"
    r = subprocess.run([sys.executable, "-m", "benchmarks.report", "--render",
                        str(tmp_path / "sharded.json"), "--out", str(out), "--no-plots",
                        "--no-docs"], capture_output=True, text=True, timeout=600, cwd=ROOT,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((out / "report.json").read_text())["sharded"]["devices"] == 4
    assert "## A sharded batch: one device against 4" in (out / "report.md").read_text()


def _part(date, devices, rows):
    return {"environment": {"date": date}, "devices": devices, "platform": "gpu",
            "dtype": "float32", "rows": [dict(op=op, batch=b, n=n, dtype="float32", ms=ms)
                                         for op, b, n, ms in rows]}


def test_render_merges_the_rows_of_several_sharded_runs():
    from benchmarks import render, report
    first = _part("d1", 2, [("lu_factor", 128, 1024, 1.0), ("eigh", 128, 512, 2.0)])
    second = _part("d2", 2, [("eigh", 128, 512, 3.0), ("eigh", 512, 512, 4.0)])
    other_count = _part("d3", 4, [("lu_factor", 128, 1024, 9.0)])
    merged = report.merged_sharded([other_count, first, second])
    assert [(r["op"], r["batch"], r["ms"], r["date"]) for r in merged["rows"]] == [
        ("lu_factor", 128, 1.0, "d1"), ("eigh", 128, 3.0, "d2"), ("eigh", 512, 4.0, "d2")]
    assert merged["devices"] == 2 and merged["environment"]["date"] == "d2"
    assert render._run_dates(merged) == "d1, d2 (each row's in its own run)"
    assert render._run_dates(second) == "d2"
