"""What the reliability tests share: the GPU / hook checks, child interpreters, process gauges.

The hooks (`_ffi.inject_failure`, `_ffi.resource_counts`, `_ffi.shutdown`) exist only where the
CUDA extension is built and loaded; the tests that need them skip cleanly elsewhere.
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import jax
import pytest

import jax_cusolver_ms as jcm
from jax_cusolver_ms import _ffi

GPU = jcm.gpu_available()
# Where the package under test lives: children import the same one (installed or source).
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(jcm.__file__)))


def hooks_available(*names):
    return _ffi.extension_loaded() and _ffi.gpu_available() and all(
        callable(getattr(_ffi, n, None)) for n in names)


def requires_hooks(*names):
    return pytest.mark.skipif(
        not hooks_available(*names),
        reason=f"needs a GPU and the extension's test hooks ({', '.join(names)})")


requires_gpu = pytest.mark.skipif(
    not GPU, reason="needs a CUDA GPU and the jax_cusolver_ms CUDA extension")


def child_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [PACKAGE_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Child:
    """A finished child interpreter: rc (None: killed at the timeout), output and wall time."""

    def __init__(self, rc, stdout, stderr, seconds):
        self.rc, self.stdout, self.stderr, self.seconds = rc, stdout, stderr, seconds

    @property
    def timed_out(self):
        return self.rc is None

    def __repr__(self):
        return (f"Child(rc={self.rc}, {self.seconds:.1f}s)\n--- stdout\n{self.stdout[-2000:]}"
                f"\n--- stderr\n{self.stderr[-4000:]}")


def run_python(code, timeout=120, **env):
    """Runs `code` (dedented) in a fresh interpreter from a neutral folder; never raises on a
    timeout (the child is killed and rc is None), so a test can assert on a hang."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=child_env(**env),
                            cwd=tempfile.gettempdir(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        rc = None
    return Child(rc, out, err, time.monotonic() - start)


def rss_bytes():
    """This process's resident set size (Linux /proc)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def thread_count():
    return len(os.listdir("/proc/self/task"))


def device_bytes_in_use():
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("bytes_in_use", 0)
