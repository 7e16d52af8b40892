"""Determinism: the same call with the same strategy gives bitwise-identical results, call after
call and after a fresh compile, for every op of the contract table and every strategy it has (on
a GPU; on the CPU each op meets one strategy, rotated, and runs JAX's own implementation).
Lanes finish in any order, but each matrix is computed by one library call whatever lane runs it,
and the lanes' workspaces are per lane: nothing may depend on the order."""
import functools

import jax
import numpy as np
import pytest

from conftest import FULL_GRID
from test_contract import OPS, rotated_strategy, run_options, strategies_of

BATCH, N = ((16,), 40) if FULL_GRID else ((3,), 6)
LANES = 4
CALLS = 3


def params():
    out = []
    for i, op in enumerate(OPS):
        picked = strategies_of(op) if FULL_GRID else (rotated_strategy(i, op)[1],)
        dtype = np.dtype(op.dtypes[i % len(op.dtypes)])
        out += [pytest.param(op, s, dtype, id=f"{op.name}-{s or 'default'}-{dtype.name}")
                for s in picked]
    return out


def assert_bitwise_equal(a, b, what):
    a_leaves, b_leaves = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(a_leaves) == len(b_leaves), what
    for k, (x, y) in enumerate(zip(a_leaves, b_leaves)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, (what, k)
        # Bit patterns, so that NaN payloads and signed zeros count too.
        same = x.tobytes() == y.tobytes()
        if not same:
            diff = np.argwhere(x.view(np.uint8).reshape(x.shape + (-1,)) !=
                               y.view(np.uint8).reshape(y.shape + (-1,)))
            raise AssertionError(f"{what}: output {k} differs at {tuple(int(i) for i in diff[0][:-1])}")


@pytest.mark.parametrize("op,strategy,dtype", params())
def test_same_call_same_bits(rng, op, strategy, dtype):
    args = op.build(rng, dtype, BATCH, N)
    call = functools.partial(op.call, **run_options(strategy, LANES))
    f = jax.jit(call)
    first = jax.tree.map(np.asarray, f(*args))
    for i in range(1, CALLS):
        assert_bitwise_equal(first, f(*args), f"{op} ({strategy}): call {i}")
    # A fresh trace and compile of the same call.
    assert_bitwise_equal(first, jax.jit(lambda *x: call(*x))(*args),
                         f"{op} ({strategy}): after a fresh compile")


def test_the_check_sees_one_bit():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = x.copy()
    y.view(np.uint32)[1, 2] ^= 1
    with pytest.raises(AssertionError, match=r"differs at \(1, 2\)"):
        assert_bitwise_equal((x,), (y,), "one bit")
    assert_bitwise_equal((x,), (x.copy(),), "same")
