"""NumPy model of a blocked LDL^T (lower), LAPACK ?sytrf's own blocking: ?lasyf factors a panel
of up to nb columns while keeping W = L D for the panel (each column first brought up to date by a
GEMV with the panel's earlier columns), then the trailing matrix gets one rank-nb update
A22 -= L21 W21^T over its lower triangle (GEMMs), then the panel's row interchanges are partly
undone so that L is stored as ?sytf2 stores it. The tail (n - k <= nb) is ?sytf2, the
unblocked kernel's model (ldl_kernel_model.py), whose pivot rules this shares.

The design for the GPU (issue 4: ldl 64 x 1024 is bound by one SM's bandwidth per matrix in the
unblocked kernel): the panel in a kernel (one block per matrix, the panel and W streamed through
L2), the trailing update as strided-batched GEMMs over the triangle (as the blocked Cholesky).
This model pins down the step order: checked against SciPy's LAPACK ?sytrf (identical pivots,
LD to rounding) for real and complex symmetric matrices, with and without zero diagonals.

    python benchmarks/diag/ldl_blocked_model.py
"""
from __future__ import annotations

import numpy as np
import scipy.linalg.lapack as lapack

# The unblocked ?sytf2 (the GPU kernel's model) and the pivot rules both share.
from ldl_kernel_model import abs1, bunch_kaufman, sytrf as sytf2_lower, two_by_two


def panel_steps(a, j0, w, ipiv, more):
    """?lasyf's column steps on the whole matrix a from column j0 while more(k), W = L D of the
    panel in w (column c = k - j0, one spare for the row of a 1x1 pivot's candidate): each column
    brought up to date by a GEMV with the panel's earlier ones, Bunch-Kaufman pivoting, rows kk
    and kp swapped in the panel's L so far and in W. Returns (k_end, info or 0), 1-based info."""
    n = a.shape[0]
    info = 0
    k = j0
    while more(k):
        c = k - j0
        w[k:, c] = a[k:, k] - a[k:, j0:k] @ w[k, :c]
        kstep = 1
        absakk = abs1(w[k, c])
        if k < n - 1:
            imax = k + 1 + int(np.argmax(abs1(w[k + 1:, c])))
            colmax = abs1(w[imax, c])
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            info = info or k + 1
            kp = k
            a[k:, k] = w[k:, c]
        else:
            def row_imax():
                # Row imax of the up-to-date trailing matrix, into column c + 1 of W.
                w[k:imax, c + 1] = a[imax, k:imax]
                w[imax:, c + 1] = a[imax:, imax]
                w[k:, c + 1] -= a[k:, j0:k] @ w[imax, :c]
                rowmax = abs1(w[k:imax, c + 1]).max()
                if imax < n - 1:
                    rowmax = max(rowmax, abs1(w[imax + 1:, c + 1]).max())
                return rowmax, abs1(w[imax, c + 1])

            swap, kstep = bunch_kaufman(absakk, colmax, row_imax)
            kp = imax if swap else k
            if swap and kstep == 1:
                w[k:, c] = w[k:, c + 1]
            kk = k + kstep - 1
            if kp != kk:
                # The not-yet-updated column kk moves to kp (columns k.. of A are rewritten from
                # W below); rows kk and kp swap in the panel's L so far and in W.
                a[kp, kp] = a[kk, kk]
                a[kp, kk + 1:kp] = a[kk + 1:kp, kk]
                a[kp + 1:, kp] = a[kp + 1:, kk]
                a[[kk, kp], j0:k] = a[[kp, kk], j0:k]
                w[[kk, kp], :c + kstep] = w[[kp, kk], :c + kstep]
            if kstep == 1:
                a[k:, k] = w[k:, c]
                if k < n - 1:
                    a[k + 1:, k] *= 1 / a[k, k]
            else:
                if k < n - 2:
                    d11, d22, d21 = two_by_two(w[k, c], w[k + 1, c], w[k + 1, c + 1])
                    a[k + 2:, k] = d21 * (d11 * w[k + 2:, c] - w[k + 2:, c + 1])
                    a[k + 2:, k + 1] = d21 * (d22 * w[k + 2:, c + 1] - w[k + 2:, c])
                a[k, k], a[k + 1, k], a[k + 1, k + 1] = w[k, c], w[k + 1, c], w[k + 1, c + 1]
        if kstep == 1:
            ipiv[k] = kp + 1
        else:
            ipiv[k] = ipiv[k + 1] = -(kp + 1)
        k += kstep
    return k, info


def undo_interchanges(a, j0, k, ipiv):
    """L as ?sytf2 stores it: each of the panel's interchanges (columns j0..k) undone in the
    panel columns left of its own step."""
    j = k  # 1-based index of the last factored column
    while j > j0:
        jj, jp = j, ipiv[j - 1]
        if jp < 0:
            jp = -jp
            j -= 1
        j -= 1
        if jp != jj and j > j0:
            a[[jp - 1, jj - 1], j0:j] = a[[jj - 1, jp - 1], j0:j]


def lasyf_lower(a, nb):
    """LAPACK ?lasyf (lower) in place on a (the trailing n x n matrix): factors kb <= nb columns,
    updates the rest; returns (kb, ipiv[:kb] 1-based, info)."""
    n = a.shape[0]
    w = np.zeros((n, nb), a.dtype)
    ipiv = np.zeros(n, int)
    k, info = panel_steps(a, 0, w, ipiv, lambda k: not ((k >= nb - 1 and nb < n) or k >= n))
    # A22 -= L21 W21^T over the lower triangle (on the GPU: strided-batched GEMMs).
    for j in range(k, n):
        a[j:, j] -= a[j:, :k] @ w[j, :k]
    undo_interchanges(a, 0, k, ipiv)
    return k, ipiv[:k], info


def sytrf_lower(a, nb=64):
    """LAPACK ?sytrf (lower): ?lasyf panels while more than nb columns are left, ?sytf2 after."""
    a = a.copy()
    n = a.shape[0]
    ipiv = np.zeros(n, int)
    info = 0
    k = 0
    while k < n:
        if k < n - nb:
            kb, sub, sub_info = lasyf_lower(a[k:, k:], nb)
        else:
            a[k:, k:], sub, sub_info = sytf2_lower(a[k:, k:])
            kb = n - k
        if sub_info and not info:
            info = sub_info + k
        ipiv[k:k + kb] = np.where(sub > 0, sub + k, sub - k)
        k += kb
    return np.tril(a), ipiv, info


def panel_to_target(a, j0, t, w, ipiv):
    """The GPU's panel step (ffi/ldl_kernels.cu lasyf_lower_kernel), in global indices on the whole
    matrix: ?lasyf's column steps from column j0 while k < t, so a 2x2 pivot at t - 1 ends the
    panel at t + 1 (not, as LAPACK, at t - 1): every matrix of a batch then ends its panel at t or
    t + 1, and one uniform rank-(nb + 1) GEMM over rows and columns t.. updates them all. w is
    (n, nb + 1), its rows the matrix's. Returns (k_end, info or 0)."""
    return panel_steps(a, j0, w, ipiv, lambda k: k < t)


def sytrf_lower_uniform(a, nb=32):
    """The GPU's blocked LDL^T (ffi/ldl_ops.cc sytrf_blocked), one matrix of the batch: panels
    to the uniform targets t = nb, 2 nb, ... while n - t >= nb, each followed by the trailing
    update from zero-padded copies of L and W (what the strided-batched GEMMs read), then the
    panel's interchanges partly undone; the tail by ?sytf2 from the matrix's own progress."""
    a = a.copy()
    n = a.shape[0]
    ipiv = np.zeros(n, int)
    info = 0
    k = 0
    t = nb
    while n - t >= nb:
        j0 = k
        w = np.zeros((n, nb + 1), a.dtype)
        k, panel_info = panel_to_target(a, j0, t, w, ipiv)
        info = info or panel_info
        kb = k - j0
        lp = np.zeros((n, nb + 1), a.dtype)
        wp = np.zeros((n, nb + 1), a.dtype)
        lp[k:, :kb] = a[k:, j0:k]
        wp[k:, :kb] = w[k:, :kb]
        # Lower triangle of rows/columns t.. (rows < k are zero in lp and wp: untouched).
        for j in range(t, n):
            a[j:, j] -= lp[j:] @ wp[j]
        undo_interchanges(a, j0, k, ipiv)
        t += nb
    if k < n:
        a[k:, k:], sub, sub_info = sytf2_lower(a[k:, k:])
        ipiv[k:] = np.where(sub > 0, sub + k, sub - k)
        if sub_info and not info:
            info = sub_info + k
    return np.tril(a), ipiv, info


def symmetric_case(rng, n, dtype, kind):
    """A random symmetric (complex symmetric) n x n test matrix: "indefinite", "zero_diagonal"
    (2x2 pivots galore) or "singular" (a zero row and column)."""
    x = rng.standard_normal((n, n))
    if dtype == np.complex128:
        x = x + 1j * rng.standard_normal((n, n))
    a = (x + x.T).astype(dtype)
    if kind == "zero_diagonal":
        a[np.diag_indices(n)] = 0
    elif kind == "singular":
        j = rng.integers(n)
        a[j, :] = a[:, j] = 0
    return a


def main():
    rng = np.random.default_rng(0)
    worst = 0.0
    cases = 0
    for dtype in (np.float64, np.complex128):
        for n in (5, 63, 64, 65, 130, 200, 257):
            for kind in ("indefinite", "zero_diagonal", "singular"):
                a = symmetric_case(rng, n, dtype, kind)
                sytrf = lapack.get_lapack_funcs("sytrf", dtype=dtype)
                ld_ref, ipiv_ref, info_ref = sytrf(a, lower=1)
                for model in (sytrf_lower, sytrf_lower_uniform):
                    ld, ipiv, info = model(a)
                    assert np.array_equal(ipiv, ipiv_ref), (model, dtype, n, kind, "pivots")
                    assert info == info_ref, (model, dtype, n, kind, info, info_ref)
                    err = np.linalg.norm(ld - np.tril(ld_ref)) / np.linalg.norm(ld_ref)
                    assert err < 1e-10, (model, dtype, n, kind, err)
                    worst = max(worst, err)
                    cases += 1
    print(f"blocked LDL^T models == LAPACK ?sytrf on {cases} cases (pivots identical, info "
          f"identical, LD to {worst:.1e})")


if __name__ == "__main__":
    main()
