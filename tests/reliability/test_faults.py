"""Faults: malformed pivots, a workspace larger than the memory left, injected library failures,
shutdown, interpreter exit with calls pending or threads still calling, and os.fork().

Each must end in a clear Python exception or a correct result: never a crash, a hang, a device
fault, or a pool left unusable. Interpreter-level cases run in child interpreters under a
timeout (a hang fails the test). What needs the extension's test hooks (`_ffi.inject_failure`,
`_ffi.shutdown`) or a GPU skips elsewhere; the exit and fork cases run on the CPU too.
"""
import concurrent.futures
import functools
import os
import subprocess

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import jax_cusolver_ms as jcm
from jax_cusolver_ms import _ffi
from conftest import ALL_STRATEGIES, random_matrix, random_rhs, rel_err
from _util import GPU, hooks_available, requires_gpu, requires_hooks, run_python

# A child interpreter that imports JAX and runs a few small ops finishes in seconds: this is the
# bound on "promptly" (JAX's import and first compile included).
EXIT_TIMEOUT = 90


# ---------------------------------------------------------------------------------------------
# Malformed pivots: the item's values are unspecified, no out-of-bounds access, neighbours exact
# ---------------------------------------------------------------------------------------------

BAD_PIVOTS = {"too_large": lambda n: np.full(n, n + 5), "negative": lambda n: np.full(n, -7),
              "huge": lambda n: np.full(n, 2**30)}


@pytest.mark.parametrize("how", sorted(BAD_PIVOTS))
@pytest.mark.parametrize("n", [8, 70])  # the one-launch kernel (n <= 64) and the library paths
@pytest.mark.parametrize("strategy", ALL_STRATEGIES if GPU else ("looped",))
def test_lu_solve_out_of_range_pivots(rng, strategy, n, how):
    a = random_matrix(rng, (3, n, n), np.float64, "well_conditioned")
    b = random_rhs(rng, (3, n, 2), np.float64)
    lu, piv = jsl.lu_factor(a)
    piv = np.array(piv)
    piv[1] = BAD_PIVOTS[how](n)
    solve = jax.jit(functools.partial(jcm.lu_solve, strategy=strategy))
    x = np.asarray(solve((lu, piv), b))
    good = [0, 2]
    assert rel_err(x[good], np.linalg.solve(a[good], b[good])) <= 1e-10, \
        "a malformed pivot in one matrix changed its neighbours"
    # The device is still healthy: the next call (valid pivots) is right.
    piv_ok = np.asarray(jsl.lu_factor(a)[1])
    x = np.asarray(solve((lu, piv_ok), b))
    assert rel_err(x, np.linalg.solve(a, b)) <= 1e-10


# ---------------------------------------------------------------------------------------------
# Injected cuSOLVER / cuBLAS failures: the error names the routine, the pool stays usable
# ---------------------------------------------------------------------------------------------

# (case id, routine substring to fail, the call, its input builder (rng) -> args, reference)
def _square(n, kind="well_conditioned", batch=8, dtype=np.float32):
    return lambda rng: (random_matrix(rng, (batch, n, n), dtype, kind),)


INJECTIONS = [
    # cuSOLVER on lanes (the worker threads), and inline on XLA's stream.
    ("getrf-looped", "getrf", functools.partial(jcm.lu_factor, strategy="looped", lanes=4),
     _square(40), jsl.lu_factor),
    ("getrf-sequential", "getrf", functools.partial(jcm.lu_factor, strategy="sequential"),
     _square(40), jsl.lu_factor),
    ("syevd-looped", "syevd", functools.partial(jcm.eigvalsh, strategy="looped", lanes=4),
     _square(48, "spd"), jnp.linalg.eigvalsh),
    ("gesvdj-looped", "gesvdj", functools.partial(jcm.svdvals, strategy="looped", lanes=4),
     _square(40), jnp.linalg.svdvals),
    # cuBLAS: getrfBatched (n > 64, past the one-launch kernel), the blocked Cholesky's
    # trsmBatched panels, cuBLASLt's matmul.
    ("getrfBatched", "getrfBatched", functools.partial(jcm.lu_factor, strategy="batched"),
     _square(80), jsl.lu_factor),
    ("trsmBatched-blocked", "trsmBatched",
     functools.partial(jcm.cholesky, strategy="blocked"), _square(320, "spd", batch=2),
     jnp.linalg.cholesky),
    # algorithm=0: cuBLASLt's first candidate (autotuning may pick cuBLAS's own GEMM instead).
    ("cublasLtMatmul", "cublasLtMatmul",
     lambda a: jcm.matmul(a, a, precision="highest", algorithm=0), _square(64),
     lambda a: jnp.matmul(a, a, precision="highest")),
]


@requires_hooks("inject_failure")
@pytest.mark.parametrize("case,routine,call,build,reference", INJECTIONS,
                         ids=[c[0] for c in INJECTIONS])
def test_injected_library_failure(rng, case, routine, call, build, reference):
    args = build(rng)
    f = jax.jit(call)
    expected = jax.tree.map(np.asarray, reference(*args))
    first = jax.tree.map(np.asarray, f(*args))  # compiled, warm: the failure hits a run
    try:
        _ffi.inject_failure(routine, 1)
        with pytest.raises(Exception) as info:
            jax.block_until_ready(f(*args))
    finally:
        _ffi.inject_failure(routine, 0)
    message = str(info.value)
    assert routine in message and "injected" in message, message
    # The pool is usable: the same call again, and again with the lanes it used, is right.
    for _ in range(2):
        again = jax.tree.map(np.asarray, f(*args))
        for g, r, w in zip(jax.tree.leaves(again), jax.tree.leaves(expected),
                           jax.tree.leaves(first)):
            np.testing.assert_array_equal(g, w)  # as before the failure, bit for bit
            if np.issubdtype(r.dtype, np.inexact) and case.startswith(("syevd", "gesvdj",
                                                                         "cublasLt")):
                assert rel_err(g, r, core_ndim=min(2, g.ndim)) <= 1e-3
    if hooks_available("resource_counts"):
        assert _ffi.resource_counts()["leased_lanes"] == 0, "a failed call kept lanes leased"


# ---------------------------------------------------------------------------------------------
# A workspace larger than the memory left
# ---------------------------------------------------------------------------------------------


def _gpu_total_bytes():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,"
                              "nounits", "-i", "0"], capture_output=True, text=True, timeout=30)
        return int(out.stdout.split()[0]) * 2**20
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


@requires_gpu
def test_workspace_larger_than_free_memory():
    """XLA's pool is limited to 1.5 GiB (XLA_PYTHON_CLIENT_MEM_FRACTION from the GPU's size, so
    the same on any GPU); eigh of 32 float32 2048 x 2048 matrices on 32 lanes needs 32
    workspaces of ?syevd (about 2 n^2 elements each, 1 GiB in all) on top of 0.5 GiB of input
    and as much of output: the call cannot fit. It must raise a Python exception that says it
    could not allocate; the next (small) call must work."""
    total = _gpu_total_bytes()
    if total is None:
        pytest.skip("nvidia-smi does not report the GPU's memory")
    fraction = 1.5 * 2**30 / total
    child = run_python("""
        import numpy as np, jax, jax.numpy as jnp
        import jax_cusolver_ms as jcm
        a = jnp.eye(2048, dtype=jnp.float32) * jnp.arange(1, 33, dtype=jnp.float32)[:, None, None]
        try:
            w = jcm.eigvalsh(a, strategy="looped", lanes=32)
            jax.block_until_ready(w)
            print("NO ERROR")
        except Exception as exc:
            print("RAISED", type(exc).__name__, str(exc).replace(chr(10), " ")[:500])
        del a
        x = np.diag(np.arange(1.0, 9.0, dtype=np.float32))[None].repeat(4, 0)
        w = np.asarray(jcm.eigvalsh(x, strategy="looped", lanes=32))
        assert np.allclose(w, np.arange(1.0, 9.0)), w
        print("NEXT OK")
    """, timeout=300, XLA_PYTHON_CLIENT_PREALLOCATE="true",
        XLA_PYTHON_CLIENT_MEM_FRACTION=f"{fraction:.4f}")
    assert child.rc == 0, child
    assert "RAISED" in child.stdout, child
    raised = child.stdout.split("RAISED", 1)[1].lower()
    assert any(w in raised for w in ("resource_exhausted", "unable to allocate", "out of memory",
                                     "allocat")), child
    assert "NEXT OK" in child.stdout, child


# ---------------------------------------------------------------------------------------------
# Shutdown
# ---------------------------------------------------------------------------------------------


@requires_hooks("shutdown")
def test_calls_after_shutdown_raise_a_clean_error():
    child = run_python("""
        import numpy as np, jax
        import jax_cusolver_ms as jcm
        from jax_cusolver_ms import _ffi
        a = np.eye(40, dtype=np.float32)[None].repeat(4, 0) * 2
        f = jax.jit(lambda a: jcm.lu_factor(a, strategy="looped", lanes=4)[0])
        np.asarray(f(a))
        _ffi.shutdown()
        for call in (f, jax.jit(lambda a: jcm.svdvals(a, strategy="looped", lanes=2))):
            try:
                jax.block_until_ready(call(a))
                print("NO ERROR")
            except Exception as exc:
                print("RAISED", str(exc).replace(chr(10), " ")[:300])
    """, timeout=EXIT_TIMEOUT)
    assert child.rc == 0, child
    lines = [l for l in child.stdout.splitlines() if l.startswith(("RAISED", "NO ERROR"))]
    assert len(lines) == 2 and all("shut down" in l for l in lines), child


# ---------------------------------------------------------------------------------------------
# Interpreter exit
# ---------------------------------------------------------------------------------------------

_PRELUDE = """
    import sys, threading, time
    import numpy as np, jax, jax.numpy as jnp
    import jax_cusolver_ms as jcm
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 48, 48)).astype(np.float32)
"""


def test_exit_with_calls_pending():
    """Calls dispatched and never awaited: the interpreter exits 0, promptly."""
    child = run_python(_PRELUDE + """
    f = jax.jit(lambda a: jcm.svd(a, strategy="looped", lanes=4)[1])
    outs = [f(a + i) for i in range(20)]
    print("dispatched")
    """, timeout=EXIT_TIMEOUT)
    assert child.rc == 0 and "dispatched" in child.stdout, child


def test_exit_after_threads_finish():
    """8 non-daemon threads each make their calls; the main thread returns without joining."""
    child = run_python(_PRELUDE + """
    f = jax.jit(lambda a: jcm.inv(a, strategy="looped", lanes=4))
    g = jax.jit(lambda a: jcm.svdvals(a, strategy="looped", lanes=4))
    def work(t):
        for i in range(10):
            (f if (t + i) % 2 else g)(a + t).block_until_ready()
    for t in range(8):
        threading.Thread(target=work, args=(t,)).start()
    print("started")
    """, timeout=EXIT_TIMEOUT)
    assert child.rc == 0 and "started" in child.stdout, child


_DAEMONS = _PRELUDE + """
    f = jax.jit(lambda a: {call})
    f(a).block_until_ready()
    def work():
        while True:
            f(a).block_until_ready()
    for _ in range(4):
        threading.Thread(target=work, daemon=True).start()
    time.sleep(1.0)
    print("exiting")
"""


@requires_gpu
def test_exit_with_daemon_threads_calling_is_no_worse_than_jax():
    """4 daemon threads still calling a looped op when the interpreter exits: no crash, no hang,
    and wherever JAX alone (the same script with jnp.linalg.svd) exits 0, ours does too."""
    runs = 3
    ours = [run_python(_DAEMONS.format(call='jcm.svd(a, strategy="looped", lanes=4)[1]'),
                       timeout=EXIT_TIMEOUT) for _ in range(runs)]
    jax_alone = [run_python(_DAEMONS.format(call="jnp.linalg.svd(a)[1]"), timeout=EXIT_TIMEOUT)
                 for _ in range(runs)]
    for child in ours:
        assert not child.timed_out, f"hung at exit: {child}"
        assert child.rc not in (-11, -6, -7, 139, 134), f"crashed at exit: {child}"
    if all(c.rc == 0 for c in jax_alone):
        assert all(c.rc == 0 for c in ours), (ours, jax_alone)


# ---------------------------------------------------------------------------------------------
# os.fork()
# ---------------------------------------------------------------------------------------------

_FORK = """
    import os, sys, time, signal
    import numpy as np, jax, jax.numpy as jnp
    import jax_cusolver_ms as jcm
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((4, 40, 40)) + 40 * np.eye(40)).astype(np.float32)
    ref = np.linalg.inv(a.astype(np.float64))
    op = {op}
    if {warm}:  # the parent has run the op on its device before forking
        np.asarray(op(a))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            x = np.asarray(op(a))
            msg = "ok" if np.allclose(x, ref, rtol=1e-3, atol=1e-3) else "wrong"
        except Exception as exc:
            msg = "error " + type(exc).__name__ + ": " + str(exc).replace(chr(10), " ")[:300]
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.2)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = None
    if status is None:
        print("CHILD hang")
    elif os.WIFSIGNALED(status):
        print("CHILD crash signal", os.WTERMSIG(status))
    else:
        print("CHILD", os.read(r, 4096).decode() or "no answer")
    # The parent's own pool is untouched by the child.
    assert np.allclose(np.asarray(op(a)), ref, rtol=1e-3, atol=1e-3)
    print("PARENT ok")
"""
OURS = 'jax.jit(lambda a: jcm.inv(a, strategy="looped", lanes=2))'
JAX_ALONE = "jax.jit(jnp.linalg.inv)"


def _fork_outcome(op, warm):
    child = run_python(_FORK.format(op=op, warm=warm), timeout=150)
    assert child.rc == 0 and "PARENT ok" in child.stdout, child
    line = next(l for l in child.stdout.splitlines() if l.startswith("CHILD"))
    return line.split(" ", 1)[1], child


def _acceptable(outcome):
    """The right values, or a clear exception (a message that says something)."""
    return outcome == "ok" or (outcome.startswith("error ") and len(outcome) > 20)


def test_fork_after_import():
    """The parent imported the package but ran nothing: the child gets a working (fresh) pool
    or a clear error, never a hang or a crash."""
    outcome, child = _fork_outcome(OURS, warm=False)
    assert _acceptable(outcome), child


@pytest.mark.skipif(not GPU, reason="on the CPU both sides run JAX's own implementation")
def test_fork_after_use_is_no_worse_than_jax():
    """The parent ran an op on the GPU before forking. JAX itself may hang or fail in such a
    child (CUDA does not survive fork): the child using this package must never do worse than
    the same child using jnp.linalg.inv, and never hang or crash where JAX alone does not."""
    # Both at once: each may wait out its child's hang (60 s).
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(_fork_outcome, op, True) for op in (OURS, JAX_ALONE)]
        (ours, child), (jax_alone, _) = (run.result() for run in runs)
    if _acceptable(jax_alone):
        assert _acceptable(ours), (ours, jax_alone, child)
    assert not ours.startswith("crash") or jax_alone.startswith("crash"), (ours, jax_alone)
