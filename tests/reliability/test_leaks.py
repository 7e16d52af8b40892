"""Leaks: many calls per op, cycling shapes, strategies and lane counts; after a warm-up (one
pass over every variant) the pool's resources, device memory, host RSS and the thread count stay
within the bounds below until the end.

CALLS_PER_OP calls (10^4) run for one op per distinct C++ path (DISTINCT_PATHS: each FFI target
family and the kernels behind it); every other op of the contract table shares its handlers
with one of those and runs CALLS_OTHER (10^3), which keeps the whole test near three minutes on
an H100. GPU only, in the slow set; it needs the extension's `_ffi.resource_counts` hook.

Bounds after the warm-up:
  resource_counts(): lanes, workspace cache entries, host workspace bytes, matmul plans and
                     handles, timer events: unchanged (every shape was seen in the warm-up;
                     caches are keyed by shape); leased lanes 0; not shut down
  device memory      bytes_in_use (XLA's allocator) grows by at most DEVICE_SLACK
  host RSS           grows by at most RSS_SLACK (Python's and JAX's caches settle in the warm-up)
  threads            grow by at most THREAD_SLACK: the lanes' workers are persistent (one per
                     lane, and lanes are flat), but XLA's own pools start threads lazily (one
                     more during lu_solve's 10^4 calls on the H200, with lanes unchanged)
"""
import functools
import gc

import jax
import numpy as np
import pytest

from test_contract import OPS, strategies_of
from _util import device_bytes_in_use, requires_hooks, rss_bytes, thread_count

CALLS_PER_OP = 10_000
CALLS_OTHER = 1_000
DISTINCT_PATHS = {"lu_factor", "lu_solve", "cholesky", "cho_solve", "qr", "qr_multiply",
                  "householder_product", "ldl_factor", "ldl_solve", "eigh", "eig", "svd",
                  "svd_qr", "matmul"}
SHAPES = (((32,), 8), ((4,), 40), ((2,), 72))  # (batch, n): kernels, lanes, library batched
LANES = (1, 4, 32)
BLOCK_EVERY = 200  # calls between waits, so the queue stays bounded
DEVICE_SLACK = 16 * 2**20
RSS_SLACK = 64 * 2**20
THREAD_SLACK = 4
FLAT_KEYS = ("lanes", "workspace_cache_entries", "host_workspace_bytes", "matmul_plans",
             "matmul_handles", "timer_events")


def variants(op):
    """(strategy keywords) the op cycles through."""
    out = []
    for s in strategies_of(op):
        if s is None:
            out.append({})
        elif s in ("looped", "batched"):
            out += [dict(strategy=s, lanes=l) for l in LANES]
        else:
            out.append(dict(strategy=s))
    return out


def gauges():
    from jax_cusolver_ms import _ffi
    gc.collect()
    return dict(_ffi.resource_counts(), device=device_bytes_in_use(), rss=rss_bytes(),
                threads=thread_count())


@requires_hooks("resource_counts")
@pytest.mark.slow
@pytest.mark.parametrize("op", OPS, ids=str)
def test_no_growth_over_many_calls(rng, op):
    calls = CALLS_PER_OP if op.name in DISTINCT_PATHS else CALLS_OTHER
    dtype = np.dtype(np.float32 if np.float32 in op.dtypes else op.dtypes[0])
    plan = []
    for batch, n in SHAPES:
        args = op.build(rng, dtype, batch, n)
        for kw in variants(op):
            f = jax.jit(functools.partial(op.call, **kw))
            try:
                jax.block_until_ready(f(*args))  # the warm-up: compile, lanes, workspaces
            except ValueError as exc:
                if "cannot run a" in str(exc):
                    continue  # infeasible for this shape: not a variant
                raise
            plan.append((f, args))
    assert plan
    before = gauges()
    out = None
    for i in range(calls):
        f, args = plan[i % len(plan)]
        out = f(*args)
        if i % BLOCK_EVERY == BLOCK_EVERY - 1:
            jax.block_until_ready(out)
    jax.block_until_ready(out)
    del out
    after = gauges()
    what = f"{op}: {calls} calls over {len(plan)} variants, before {before}, after {after}"
    mib = lambda key: f"{before[key] / 2**20:.1f} -> {after[key] / 2**20:.1f} MiB"
    # The figures of the run (shown with pytest -rP).
    print(f"{op}: {calls} calls, {len(plan)} variants; device {mib('device')}, RSS {mib('rss')}, "
          f"threads {before['threads']} -> {after['threads']}, lanes {before['lanes']} -> "
          f"{after['lanes']}")
    assert after["leased_lanes"] == 0 and not after["shut_down"], what
    for key in FLAT_KEYS:
        assert after[key] <= before[key], f"{key} grew: {what}"
    assert after["device"] <= before["device"] + DEVICE_SLACK, f"device memory grew: {what}"
    assert after["rss"] <= before["rss"] + RSS_SLACK, f"host RSS grew: {what}"
    assert after["threads"] <= before["threads"] + THREAD_SLACK, f"threads grew: {what}"
