"""Defaults for `strategy=` and `lanes=`: environment variables, then `config(...)` blocks.

The values are read when an op is traced, so a function jitted before a `config` block keeps
the choice it was traced with.
"""
from __future__ import annotations

import contextlib
import os
import threading

STRATEGIES = ("auto", "looped", "sequential", "batched", "blocked")
DEFAULT_LANES = 8
MAX_LANES = 32  # the C++ pool's cap per device

_ENV_STRATEGY = "JAX_CUSOLVER_MS_STRATEGY"
_ENV_LANES = "JAX_CUSOLVER_MS_LANES"


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    return strategy


def check_lanes(lanes) -> int:
    if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= MAX_LANES:
        raise ValueError(f"lanes must be an int in [1, {MAX_LANES}], got {lanes!r}")
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


def resolve(strategy: str | None, lanes: int | None) -> tuple[str, int | None]:
    """Per-call keywords override the defaults in force."""
    default_strategy, default_lanes = current()
    return (check_strategy(strategy) if strategy is not None else default_strategy,
            check_lanes(lanes) if lanes is not None else default_lanes)
