"""Runs JAX's own tests/linalg_test.py against this package, for the families it implements.

The file is JAX's, obtained for the run (it is not part of this repository), and is run three
times, each in its own pytest process:

  jax         as it is: JAX's own count, the bar;
  namespaces  the test module's `jnp`, `jsp` and `lax` see jax_cusolver_ms.numpy / .scipy /
              .lax in place of their `linalg` (the literal import swap);
  enable      unchanged, under jax_cusolver_ms.enable().

    python tests/jax_linalg_suite.py PATH/TO/linalg_test.py [--modes jax,namespaces,enable]
        [--out DIR] [-- more pytest arguments]

Prints each mode's pytest summary line, then every case that passes for JAX and fails in a
mode; exit status 1 if there is one. JAX's test utilities need absl-py importable.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import types

# The tests of the families this package implements (det, slogdet, inv, solve, cholesky, qr,
# svd, eig, pinv, matrix_rank, lstsq, cond, lu, lu_factor, lu_solve, cho_solve, and the QR
# helpers householder_product, ormqr, qr_multiply), by test-method name.
FAMILIES = re.compile(
    r"::test(Cholesky|Cond|Det|Eig|Inv\d|Lstsq|MatrixRank|Pinv|Qr|NumpyQrModes|ScipyQrModes|"
    r"SVD|JspSVD|Slogdet|Solve\d|SolveBroadcasting|ChoSolve|Lu(?!PivotsToPermutation)|"
    r"HouseholderProduct|Ormqr)")
MODES = ("jax", "namespaces", "enable")
ENV_MODE, ENV_OUTCOMES = "JCM_JAX_SUITE_MODE", "JCM_JAX_SUITE_OUTCOMES"


class _WithLinalg(types.ModuleType):
    """A stand-in for jax.numpy / jax.scipy / jax.lax whose `linalg` is this package's mirror;
    every other name is the real module's."""

    def __init__(self, real, linalg):
        super().__init__(real.__name__)
        self._real, self.linalg = real, linalg

    def __getattr__(self, name):
        return getattr(self._real, name)


# --- the pytest plugin (this module, loaded with -p in each run) ------------------------------

def pytest_collection_modifyitems(config, items):
    selected = [item for item in items if FAMILIES.search(item.nodeid)]
    config.hook.pytest_deselected(items=[item for item in items if item not in selected])
    items[:] = selected
    mode = os.environ.get(ENV_MODE, "jax")
    if mode == "namespaces":
        import jax
        import jax_cusolver_ms.lax
        import jax_cusolver_ms.numpy
        import jax_cusolver_ms.scipy
        for module in {item.module for item in selected}:
            module.jnp = _WithLinalg(jax.numpy, jax_cusolver_ms.numpy.linalg)
            module.jsp = _WithLinalg(jax.scipy, jax_cusolver_ms.scipy.linalg)
            module.lax = _WithLinalg(jax.lax, jax_cusolver_ms.lax.linalg)
    elif mode == "enable":
        import jax_cusolver_ms
        jax_cusolver_ms.enable()


_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes.setdefault(report.nodeid, report.outcome)
        if report.outcome == "failed":
            _outcomes[report.nodeid] = "failed"


def pytest_sessionfinish(session):
    path = os.environ.get(ENV_OUTCOMES)
    if path:
        with open(path, "w") as f:
            json.dump(_outcomes, f, indent=0, sort_keys=True)


# --- the driver ---------------------------------------------------------------------------------

def run_mode(test_file: str, mode: str, out: str, pytest_args: list[str]) -> tuple[str, dict]:
    outcomes = os.path.join(out, f"outcomes-{mode}.json")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, **{ENV_MODE: mode, ENV_OUTCOMES: outcomes})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    folder, name = os.path.split(os.path.abspath(test_file))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "jax_linalg_suite", name, *pytest_args],
        cwd=folder, env=env, capture_output=True, text=True)
    with open(os.path.join(out, f"pytest-{mode}.log"), "w") as f:
        f.write(proc.stdout + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    summary = lines[-1] if lines else f"no output (exit {proc.returncode}): {proc.stderr[-300:]}"
    try:
        with open(outcomes) as f:
            return summary, json.load(f)
    except FileNotFoundError:
        return summary, {}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("test_file", help="JAX's tests/linalg_test.py")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--out", default=None, help="folder for the logs (default: a temporary one)")
    args, pytest_args = p.parse_known_args(argv)
    pytest_args = [a for a in pytest_args if a != "--"]
    modes = args.modes.split(",")
    if set(modes) - set(MODES):
        p.error(f"--modes: from {', '.join(MODES)}")
    out = args.out or tempfile.mkdtemp(prefix="jcm-jax-suite-")
    os.makedirs(out, exist_ok=True)
    results = {}
    for mode in modes:
        summary, outcomes = run_mode(args.test_file, mode, out, pytest_args)
        results[mode] = outcomes
        print(f"{mode:>10}: {summary}", flush=True)
    regressions = 0
    if "jax" in results:
        for mode in modes:
            if mode == "jax":
                continue
            lost = sorted(k for k, v in results[mode].items()
                          if v == "failed" and results["jax"].get(k) == "passed")
            regressions += len(lost)
            print(f"\n{mode}: {len(lost)} case(s) that pass for JAX fail here")
            for nodeid in lost:
                print(f"  {nodeid}")
    print(f"\nlogs: {out}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
