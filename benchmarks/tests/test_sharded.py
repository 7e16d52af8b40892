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
