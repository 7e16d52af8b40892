"""Load: 16 Python threads, each making CALLS calls that cycle over every op of the contract
table on 32 lanes (strategy looped: each call asks for every lane of the pool, so the threads
outnumber and contend for them), while one more thread runs plain XLA work (matmuls) on the same
device. Every result is checked against its reference; the whole run is under a watchdog: a
thread still running at the deadline fails the test (a deadlock, or a stall).

On a GPU: 16 threads x 200 calls, 32 matrices per call. On the CPU (JAX's own implementations
behind every op) 16 threads x 8 calls of small ones, without the ops that run host callbacks
(jax.pure_callback from many threads can deadlock JAX's CPU client, also without this package).
"""
import functools
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

from conftest import FULL_GRID
from test_contract import OPS, assert_matches, leaves, strategies_of
from _util import GPU

THREADS = 16
CALLS = 200 if GPU else 8
LANES = 32
BATCH, N = ((32,), 16) if GPU else ((4,), 6)
INPUTS_PER_OP = 3
DEADLINE_S = 240
LOAD_OPS = [op for op in OPS if GPU or not op.host_callback]


def _options(op):
    s = strategies_of(op)
    if s == (None,):
        return {}
    return dict(strategy="looped", lanes=LANES) if "looped" in s else dict(strategy=s[0])


def run_load(ops, threads, calls, deadline_s, rng):
    """Returns (failures, threads still alive at the deadline, XLA thread's own failures)."""
    jitted = [jax.jit(functools.partial(op.call, **_options(op))) for op in ops]
    dtypes = [np.dtype(op.dtypes[i % len(op.dtypes)]) for i, op in enumerate(ops)]
    inputs = [[op.build(rng, d, BATCH, N) for _ in range(INPUTS_PER_OP)]
              for op, d in zip(ops, dtypes)]
    refs = [[op.reference(*args) for args in per_op] for op, per_op in zip(ops, inputs)]
    for f, per_op in zip(jitted, inputs):  # compile outside the timed, contended part
        jax.block_until_ready(f(*per_op[0]))

    failures, lock = [], threading.Lock()
    start = threading.Barrier(threads + 2)  # the workers, the XLA thread, this one
    stop = threading.Event()

    def worker(t):
        start.wait()
        for i in range(calls):
            k = (7 * t + i) % len(ops)
            j = (t + i) % INPUTS_PER_OP
            op = ops[k]
            try:
                out = jitted[k](*inputs[k][j])
                assert_matches(op, inputs[k][j], out, refs[k][j], dtypes[k],
                               len(BATCH) if op.batched else 0, f"{op}: thread {t}, call {i}")
            except Exception as exc:  # noqa: BLE001 - collected and reported below
                with lock:
                    failures.append(f"thread {t} call {i} {op}: {type(exc).__name__}: {exc}"[:600])

    xla_failures = []

    def xla_work():
        x = jnp.asarray(rng.standard_normal((256, 256)), jnp.float32)
        expected = np.asarray(x, np.float64) @ np.asarray(x, np.float64)
        mm = jax.jit(lambda x: jnp.matmul(x, x, precision="highest"))
        start.wait()
        while not stop.is_set():
            y = np.asarray(mm(x))
            if not np.allclose(y, expected, rtol=1e-4, atol=1e-3):
                xla_failures.append("XLA matmul wrong under load")
                return

    pool = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(threads)]
    side = threading.Thread(target=xla_work, daemon=True)
    for th in pool + [side]:
        th.start()
    start.wait()
    end = time.monotonic() + deadline_s
    for th in pool:
        th.join(max(0.0, end - time.monotonic()))
    stop.set()
    side.join(max(1.0, end - time.monotonic()))
    alive = [th for th in pool + [side] if th.is_alive()]
    return failures, alive, xla_failures


def test_threads_saturating_lanes_with_xla_work(rng):
    failures, alive, xla_failures = run_load(LOAD_OPS, THREADS, CALLS, DEADLINE_S, rng)
    assert not alive, f"{len(alive)} thread(s) still running after {DEADLINE_S} s: deadlock?"
    assert not failures, f"{len(failures)} wrong or failed calls, first: {failures[:3]}"
    assert not xla_failures, xla_failures


def test_the_load_check_sees_a_wrong_result(rng):
    import dataclasses
    from test_contract import OPS_BY_NAME
    import jax_cusolver_ms as jcm

    wrong = dataclasses.replace(OPS_BY_NAME["inv"], call=lambda a, **kw: jcm.inv(a, **kw) * 1.01)
    failures, alive, _ = run_load([wrong], 2, 2, 60, rng)
    assert not alive and len(failures) == 4
