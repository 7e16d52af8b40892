"""The shapes of the random-shape benchmark: `draw_shapes(count, seed)` draws the calls users
make of the ops JAX has too, reproducibly, for benchmarks.report's `--random N --seed S`.

A shape is a dict {op, dtype, batch, m, n, nrhs}: `batch` matrices of m x n (m == n but for the
ops that take rectangular ones) and, for the solves, right-hand sides of `nrhs` columns (1 for
the other ops). Pure Python: nothing here imports JAX.
"""
from __future__ import annotations

import math
import random

# The ops of benchmarks.bench.OPS whose JAX column is the same factorization: not ldl_factor /
# ldl_solve (JAX has no LDL^T: its column there is an LU) nor svd_qr (an algorithm choice, not a
# call of its own).
OPS = ("lu_factor", "solve", "inv", "det", "cholesky", "cho_solve", "qr", "qr_r", "qr_multiply",
       "eigh", "eigvalsh", "eig", "eigvals", "svd", "svdvals", "lstsq", "pinv")
# Every one of them takes all four (jax_cusolver_ms's solver dtypes).
DTYPES = ("float32", "float64", "complex64", "complex128")
RECTANGULAR = frozenset({"qr", "qr_r", "svd", "svdvals", "lstsq", "pinv"})
# The right-hand side's rows: n (A x = b, Q c) or m (lstsq's b).
SOLVES = frozenset({"solve", "cho_solve", "qr_multiply", "lstsq"})

MIN_N, MAX_N = 2, 4096
MAX_RATIO = 16  # rows / cols, both ways, for the rectangular ops
SQUARE_SHARE = 0.5  # of the rectangular ops' draws
MAX_NRHS = 256
# The largest batch drawn for matrices whose larger side is up to `size`: a batch of 10^5 small
# matrices is a common call; one of 10^5 matrices of 1024 is not (nor does it fit).
BATCH_CAPS = ((32, 100_000), (128, 4096), (1024, 256), (MAX_N, 16))
ITEMSIZE = {"float32": 4, "float64": 8, "complex64": 8, "complex128": 16}


def batch_cap(size: int) -> int:
    """The largest batch drawn for matrices whose larger side is `size`."""
    return next(cap for up_to, cap in BATCH_CAPS if size <= up_to)


def input_bytes(shape: dict) -> int:
    """The bytes of a shape's inputs: the matrices and the right-hand sides."""
    rhs_rows = shape["m"] if shape["op"] == "lstsq" else shape["n"]
    elements = shape["m"] * shape["n"] + (rhs_rows * shape["nrhs"] if shape["op"] in SOLVES
                                          else 0)
    return shape["batch"] * elements * ITEMSIZE[shape["dtype"]]


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _log_int(rng: random.Random, low: int, high: int) -> int:
    """An integer in [low, high], log-uniform (each of [k, k+1) weighs log((k+1)/k))."""
    return min(high, int(_log_uniform(rng, low, high + 1)))


def _draw(rng: random.Random, ops, dtypes, max_n: int, max_batch: int | None) -> dict:
    op = rng.choice(ops)
    dtype = rng.choice(dtypes)
    n = _log_int(rng, MIN_N, max_n)
    m = n
    if op in RECTANGULAR and rng.random() >= SQUARE_SHARE:
        # The ratio within what keeps m in [MIN_N, max_n]: n stays log-uniform. Rounding may
        # step past a bound (the ratio's too): m is put back inside.
        ratio = _log_uniform(rng, max(1 / MAX_RATIO, MIN_N / n), min(MAX_RATIO, max_n / n))
        m = min(max_n, MAX_RATIO * n, max(MIN_N, math.ceil(n / MAX_RATIO), round(n * ratio)))
    nrhs = _log_int(rng, 1, MAX_NRHS) if op in SOLVES else 1
    cap = batch_cap(max(m, n))
    batch = _log_int(rng, 1, min(cap, max_batch) if max_batch else cap)
    return {"op": op, "dtype": dtype, "batch": batch, "m": m, "n": n, "nrhs": nrhs}


def draw_shapes(count: int, seed: int, ops=None, dtypes=None, *, max_n: int = MAX_N,
                max_batch: int | None = None, max_input_gb: float = 8.0) -> list[dict]:
    """`count` shapes drawn with `seed`: the op and dtype uniformly (from `ops` / `dtypes` where
    given, a subset of OPS / DTYPES), n log-uniform in [2, max_n], for the rectangular ops half
    the time m = n and else m / n log-uniform within 1/16..16, nrhs log-uniform in [1, 256] for
    the solves, the batch log-uniform from 1 to batch_cap(max(m, n)) (and max_batch). A shape
    whose inputs exceed max_input_gb is drawn again, so that there are `count` of them.

    The same arguments give the same shapes, and a larger count the same first ones."""
    ops = tuple(OPS if ops is None else ops)
    dtypes = tuple(DTYPES if dtypes is None else dtypes)
    unknown = sorted(set(ops) - set(OPS)) + sorted(set(dtypes) - set(DTYPES))
    if unknown:
        raise ValueError(f"draw_shapes: cannot draw {unknown}; ops from {', '.join(OPS)}, "
                         f"dtypes from {', '.join(DTYPES)}")
    if not ops or not dtypes:
        raise ValueError("draw_shapes: no op or no dtype to draw from")
    if not MIN_N <= max_n <= MAX_N:
        raise ValueError(f"draw_shapes: max_n must be in [{MIN_N}, {MAX_N}], got {max_n}")
    smallest = min(input_bytes({"op": op, "dtype": dtype, "batch": 1, "m": MIN_N, "n": MIN_N,
                                "nrhs": 1}) for op in ops for dtype in dtypes)
    if smallest > max_input_gb * 1e9:  # every draw would be drawn again, for ever
        raise ValueError(f"draw_shapes: no shape fits in {max_input_gb:g} GB")
    rng = random.Random(seed)
    shapes = []
    while len(shapes) < count:
        shape = _draw(rng, ops, dtypes, max_n, max_batch)
        if input_bytes(shape) <= max_input_gb * 1e9:
            shapes.append(shape)
    return shapes


def label(shape: dict) -> str:
    """"op dtype BxMxN", and for the solves the right-hand sides: "solve float32 64x8x8, nrhs 3"."""
    text = f"{shape['op']} {shape['dtype']} {shape['batch']}x{shape['m']}x{shape['n']}"
    return text + (f", nrhs {shape['nrhs']}" if shape["op"] in SOLVES else "")
