"""Defaults for `strategy=` and `lanes=`: environment variables, then `config(...)` blocks.

The values are read when an op is traced, so a function jitted before a `config` block keeps
the choice it was traced with. The strategy names and the most lanes a call may take are the
extension's (ffi/core/limits.h, read through `_jcm_limits`); without a build of it every op runs
JAX's own implementation, and any strategy name is accepted (there is nothing to check it
against).
"""
from __future__ import annotations

import contextlib
import os
import threading

from . import _ffi

# "auto" and the extension's strategies, in the order of their FFI attribute values.
STRATEGIES = ("auto",) + (tuple(_ffi.limits.strategies()) if _ffi.limits is not None else ())
# The lane count of `auto`'s heuristic rules where no table says otherwise.
DEFAULT_LANES = 8
# The most lanes one call may take: the C++ pool's cap per device (None without the extension).
MAX_LANES = _ffi.limits.constants()["max_lanes"] if _ffi.limits is not None else None

_ENV_STRATEGY = "JAX_CUSOLVER_MS_STRATEGY"
_ENV_LANES = "JAX_CUSOLVER_MS_LANES"


def _prefix(op: str | None) -> str:
    return f"{op}: " if op else ""


def check_strategy(strategy, op: str | None = None) -> str:
    """`strategy` if it is a strategy's name, else a ValueError naming `op`."""
    unchecked = _ffi.limits is None and isinstance(strategy, str) and strategy
    if not unchecked and strategy not in STRATEGIES:
        raise ValueError(f"{_prefix(op)}strategy must be one of {STRATEGIES}, got {strategy!r}")
    return strategy


def check_lanes(lanes, op: str | None = None) -> int:
    """`lanes` if it is a lane count the extension takes, else a ValueError naming `op`."""
    most = MAX_LANES if MAX_LANES is not None else float("inf")
    if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= most:
        span = f"[1, {MAX_LANES}]" if MAX_LANES is not None else ">= 1"
        raise ValueError(f"{_prefix(op)}lanes must be an int in {span}, got {lanes!r}")
    return lanes


def _from_env():
    strategy = check_strategy(os.environ.get(_ENV_STRATEGY, "auto").strip().lower())
    lanes_text = os.environ.get(_ENV_LANES)
    try:
        lanes = check_lanes(int(lanes_text)) if lanes_text else None
    except ValueError as exc:
        raise ValueError(f"{_ENV_LANES}={lanes_text!r}: {exc}") from None
    return strategy, lanes


class _State(threading.local):
    def __init__(self):
        self.stack = [_from_env()]


_state = _State()


def current() -> tuple[str, int | None]:
    """(strategy, lanes) in force; lanes None means `auto` picks the lane count."""
    return _state.stack[-1]


@contextlib.contextmanager
def config(strategy: str | None = None, lanes: int | None = None):
    """Sets default `strategy` / `lanes` for ops traced inside the block (this thread)."""
    old_strategy, old_lanes = current()
    new = (check_strategy(strategy) if strategy is not None else old_strategy,
           check_lanes(lanes) if lanes is not None else old_lanes)
    _state.stack.append(new)
    try:
        yield
    finally:
        _state.stack.pop()


def resolve(strategy: str | None, lanes: int | None,
            op: str | None = None) -> tuple[str, int | None]:
    """Per-call keywords override the defaults in force; errors name `op`."""
    default_strategy, default_lanes = current()
    return (check_strategy(strategy, op) if strategy is not None else default_strategy,
            check_lanes(lanes, op) if lanes is not None else default_lanes)
