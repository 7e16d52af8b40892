"""NumPy model of a blocked ?sytrs (lower) on LAPACK ?sytrf's factor as it is stored (interchanges
interleaved with L's columns, no ?syconv), for the LDL^T solve of one to a few matrices.

Why: the GPU's solve kernel (ffi/ldl_kernels.cu sytrs_lower_kernel) is ?sytrs step by step, one
block per (matrix, right-hand-side chunk): n dependent steps, each a pass over the rest of B with
a barrier. A single matrix cannot hide that (H100 float32 ldl_solve 1x2048: 25.5 ms against JAX's
LU solve 5.3, the factor 13.5 of it). Blocked, the work becomes per block of nb columns one GEMV
(GEMM for several right-hand sides) over the rows below the block, which the whole GPU shares, and
nb short steps on the block's own rows.

The catch is ?sytrs's interchanges: step k swaps B(k) with B(kp), kp >= k, which may lie below
the block, where the block's updates are deferred. The model keeps, per row below the block that
a swap touched, the step from which its pending updates start:

- forward (B := L^-1 P B): before a swap brings row kp (below the block) into the block, row kp is
  brought up to date from its start to the current step (a dot product of <= nb); after the swap
  the value moved there is current up to this step, so its start becomes this step. At the block's
  end one GEMV applies the block's columns to every row below, and the touched rows get back what
  the GEMV applied before their start.
- backward (B := P^T L^-T B): one GEMV^T gives every column of the block its dot product with the
  rows below as they were; each step adds what the swaps of later steps in the block changed there
  (value now minus value then, for the touched rows).

Checked against SciPy's LAPACK ?sytrs for real and complex symmetric matrices, several
right-hand sides, block widths that split 2x2 pivots (the block then takes one column more); so
is sytrs_lower_kernels, the form the GPU's blocked solve takes (cuts common to a batch, padded
GEMMs, the fix-ups added before the GEMM: ffi/ldl_kernels.cu, session 10).

    python benchmarks/diag/ldl_solve_blocked_model.py
"""
from __future__ import annotations

import numpy as np
import scipy.linalg.lapack as lapack

from ldl_blocked_model import symmetric_case


def _pivot_steps(ipiv, k0, k1):
    """The steps (k, size, kp) of ?sytrs's forward loop that start in [k0, k1), 0-based, and the
    block's real end (a 2x2 pivot starting at k1 - 1 takes one column more)."""
    steps, k = [], k0
    while k < k1:
        if ipiv[k] > 0:
            steps.append((k, 1, ipiv[k] - 1))
            k += 1
        else:
            steps.append((k, 2, -ipiv[k] - 1))
            k += 2
    return steps, k


def forward(ld, ipiv, b, nb):
    """B := L^-1 P B as ?sytrs's first loop, in blocks of nb columns."""
    n = ld.shape[0]
    k0 = 0
    while k0 < n:
        steps, k1 = _pivot_steps(ipiv, k0, min(n, k0 + nb))
        start = {}  # row below the block -> the first block column still to apply to it
        for k, size, kp in steps:
            swap_row = k + size - 1  # the row ?sytrs swaps with kp at this step
            if kp != swap_row:
                if kp >= k1:
                    # Row kp brought up to date with the block's columns start..k - 1.
                    s = start.get(kp, k0)
                    b[kp] -= ld[kp, s:k] @ b[s:k]
                    start[kp] = k
                b[[swap_row, kp]] = b[[kp, swap_row]]
            # The step's own update, eager on the block's rows only.
            b[k + size:k1] -= ld[k + size:k1, k:k + size] @ b[k:k + size]
        if k1 < n:
            # Every row below: the block's columns in one GEMV; the touched rows had theirs from
            # k0 to their start already.
            b[k1:] -= ld[k1:, k0:k1] @ b[k0:k1]
            for r, s in start.items():
                b[r] += ld[r, k0:s] @ b[k0:s]
        k0 = k1
    return b


def diagonal(ld, ipiv, b):
    """B := D^-1 B, D's 1x1 and 2x2 blocks as ?sytrs divides by them."""
    n = ld.shape[0]
    k = 0
    while k < n:
        if ipiv[k] > 0:
            b[k] /= ld[k, k]
            k += 1
        else:
            akm1k = ld[k + 1, k]
            akm1 = ld[k, k] / akm1k
            ak = ld[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1
            bkm1 = b[k] / akm1k
            bk = b[k + 1] / akm1k
            b[k] = (ak * bkm1 - bk) / denom
            b[k + 1] = (akm1 * bk - bkm1) / denom
            k += 2
    return b


def backward(ld, ipiv, b, nb):
    """B := P^T L^-T B as ?sytrs's second loop (k from n down), in blocks of nb columns taken
    from the bottom; a block never splits a 2x2 pivot."""
    n = ld.shape[0]
    # The blocks as the forward loop cuts them, walked from the last.
    blocks, k0 = [], 0
    while k0 < n:
        steps, k1 = _pivot_steps(ipiv, k0, min(n, k0 + nb))
        blocks.append((k0, k1, steps))
        k0 = k1
    for k0, k1, steps in reversed(blocks):
        # Each block column's dot product with the rows below as they are now.
        below = b[k1:].copy()
        t = ld[k1:, k0:k1].T @ below if k1 < n else np.zeros((k1 - k0,) + b.shape[1:], b.dtype)
        changed = {}  # row below the block -> its value when t was taken
        for k, size, kp in reversed(steps):
            cols = slice(k, k + size)
            # B(k..) -= L(rows > k + size - 1, k..)^T B(those rows): the block's own rows now,
            # the rows below from t, plus what the swaps of later steps changed there.
            b[cols] -= ld[k + size:k1, cols].T @ b[k + size:k1] + t[k - k0:k - k0 + size]
            for r, then in changed.items():
                b[cols] -= np.outer(ld[r, cols], b[r] - then).reshape(b[cols].shape)
            swap_row = k + size - 1
            if kp != swap_row:
                if kp >= k1 and kp not in changed:
                    changed[kp] = below[kp - k1].copy()
                b[[swap_row, kp]] = b[[kp, swap_row]]
    return b


def sytrs_lower(ld, ipiv, b, nb=32):
    """LAPACK ?sytrs (UPLO = 'L') on ?sytrf's 1-based ipiv, blocked as above."""
    b = np.array(b, dtype=np.result_type(ld, b), copy=True)
    ipiv = np.asarray(ipiv)
    forward(ld, ipiv, b, nb)
    diagonal(ld, ipiv, b)
    backward(ld, ipiv, b, nb)
    return b


# --- The form the GPU kernels take (ffi/ldl_kernels.cu sytrs_*_block_kernel, ldl_ops.cc
# sytrs_blocked): cuts common to the batch at K0 = 0, nb, 2 nb, ..., moved down one column for a
# matrix whose 2x2 pivot straddles one; GEMMs over the common columns K0..K0 + nb (the block's
# values zero-padded there) and rows from K1 + 1; row K1 and the touched rows' fix-ups (added
# before the GEMM) by the kernels. Step by step as the kernels, one matrix.


def kernel_cuts(ipiv, n, K0, K1):
    """The block's [k0, k1): K0 / K1, or one more where the run of negative pivots before it has
    odd length (a 2x2 pivot starts just before the cut)."""
    last0 = max((j for j in range(min(K0, n)) if ipiv[j] > 0), default=-1)
    last1 = max((j for j in range(min(K1, n)) if ipiv[j] > 0), default=-1)
    k0 = 0 if K0 == 0 else K0 + ((K0 - 1 - last0) & 1)
    k1 = n if K1 >= n else K1 + ((K1 - 1 - last1) & 1)
    return k0, k1


def kernel_forward(ld, ipiv, b, nb, K0, y):
    n = ld.shape[0]
    K1 = min(n, K0 + nb)
    k0, k1 = kernel_cuts(ipiv, n, K0, K1)
    bs = b[k0:k1].copy()
    start = {}  # touched row below the block -> its start
    k = k0
    while k < k1:
        size = 1 if ipiv[k] > 0 else 2
        kp, swap_row = abs(ipiv[k]) - 1, k + size - 1
        if kp != swap_row:
            if kp >= k1:
                s = start.get(kp, k0)
                v = b[kp] - ld[kp, s:k] @ bs[s - k0:k - k0]
                b[kp] = bs[swap_row - k0]
                bs[swap_row - k0] = v
                start[kp] = k
            else:
                bs[[swap_row - k0, kp - k0]] = bs[[kp - k0, swap_row - k0]]
        bs[k + size - k0:] -= ld[k + size:k1, k:k + size] @ bs[k - k0:k + size - k0]
        k += size
    b[k0:k1] = bs
    if k1 == K1 < n:  # row K1 lies below the block but above the GEMM's rows
        s = start.get(K1, k0)
        b[K1] -= ld[K1, s:k1] @ bs[s - k0:]
    for r, s in start.items():
        if r > K1:  # what the GEMM subtracts again
            b[r] += ld[r, k0:s] @ bs[:s - k0]
    if K1 + 1 < n:
        y[:] = 0
        y[k0 - K0:k1 - K0] = bs


def kernel_backward(ld, ipiv, b, nb, K0, t):
    n = ld.shape[0]
    K1 = min(n, K0 + nb)
    k0, k1 = kernel_cuts(ipiv, n, K0, K1)
    steps, k = [], k0
    while k < k1:
        steps.append(k)
        k += 1 if ipiv[k] > 0 else 2
    dots = t[k0 - K0:k1 - K0].copy() if t is not None else np.zeros_like(b[k0:k1])
    if k1 == K1 < n:
        dots += np.outer(ld[K1, k0:k1], b[K1]).reshape(dots.shape)
    bs = diagonal(ld, ipiv, b.copy())[k0:k1]  # D^-1 on the block's rows (their steps only)
    before = {}
    for k in reversed(steps):
        size = 1 if ipiv[k] > 0 else 2
        kp, swap_row = abs(ipiv[k]) - 1, k + size - 1
        cols = slice(k - k0, k + size - k0)
        v = dots[cols] + ld[k + size:k1, k:k + size].T @ bs[k + size - k0:]
        for r, then in before.items():
            v += np.outer(ld[r, k:k + size], b[r] - then).reshape(v.shape)
        bs[cols] -= v
        if kp != swap_row:
            if kp >= k1:
                before.setdefault(kp, b[kp].copy())
                b[kp], bs[swap_row - k0] = bs[swap_row - k0].copy(), b[kp].copy()
            else:
                bs[[swap_row - k0, kp - k0]] = bs[[kp - k0, swap_row - k0]]
    b[k0:k1] = bs


def sytrs_lower_kernels(ld, ipiv, b, nb=64):
    """?sytrs (UPLO = 'L') as the GPU's blocked solve runs it: forward kernel + GEMM per block,
    then GEMM (the dot products) + backward kernel per block from the last."""
    b = np.array(b, dtype=np.result_type(ld, b), copy=True)
    ipiv = np.asarray(ipiv)
    n = ld.shape[0]
    y = np.zeros((nb + 1,) + b.shape[1:], b.dtype)
    for K0 in range(0, n, nb):
        kernel_forward(ld, ipiv, b, nb, K0, y)
        if K0 + nb + 1 < n:
            b[K0 + nb + 1:] -= ld[K0 + nb + 1:, K0:K0 + nb + 1] @ y
    for K0 in range((n - 1) // nb * nb, -1, -nb):
        below = K0 + nb + 1
        t = ld[below:, K0:below].T @ b[below:] if below < n else None
        kernel_backward(ld, ipiv, b, nb, K0, t)
    return b


def main():
    rng = np.random.default_rng(0)
    worst, cases, two_by_two = 0.0, 0, 0
    for dtype in (np.float64, np.complex128):
        for n in (1, 5, 31, 32, 33, 64, 65, 66, 100, 129, 257):
            for kind in ("indefinite", "zero_diagonal") if n > 1 else ("indefinite",):
                a = symmetric_case(rng, n, dtype, kind)
                sytrf, sytrs = lapack.get_lapack_funcs(("sytrf", "sytrs"), dtype=dtype)
                ld, ipiv, info = sytrf(a, lower=1)
                assert info == 0, (dtype, n, kind, info)
                two_by_two += int(np.sum(ipiv < 0))
                for nrhs in (1, 3):
                    b = rng.standard_normal((n, nrhs)).astype(dtype)
                    ref, info = sytrs(ld, ipiv, b, lower=1)
                    assert info == 0
                    # Block widths that split the matrix many times, and 2x2 pivots with it.
                    errs = {nb: np.linalg.norm(sytrs_lower(np.tril(ld), ipiv, b, nb) - ref)
                            / np.linalg.norm(ref) for nb in (1, 2, 7, 32)}
                    # The kernels' form: common cuts, the row below the cut, padded GEMMs.
                    errs.update({f"kernels:{nb}": np.linalg.norm(
                        sytrs_lower_kernels(np.tril(ld), ipiv, b, nb) - ref)
                        / np.linalg.norm(ref) for nb in (2, 3, 8, 64)})
                    assert max(errs.values()) < 1e-9, (dtype, n, kind, nrhs, errs)
                    worst, cases = max(worst, *errs.values()), cases + len(errs)
    print(f"blocked ?sytrs model == LAPACK ?sytrs on {cases} cases ({two_by_two} 2x2 pivots in "
          f"the factors; worst relative difference {worst:.1e})")


if __name__ == "__main__":
    main()
