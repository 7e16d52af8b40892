"""NumPy model of the warp-per-matrix LDL^T kernel for n <= 32 (ffi/ldl_kernels.cu
sytrf_small_kernel): lane i keeps physical row i of the whole symmetric matrix in registers, and
nothing ever moves. LAPACK ?sytf2's interchanges only relabel rows and columns of the trailing
matrix, so each lane carries its row's logical position (`pos`), and an interchange swaps two
labels. A step reads its pivot column from each lane's own row (the matrix is symmetric) and its
pivot row by shuffles from the pivot's lane; it updates both copies of every entry with the
formula ?sytf2 applies to the copy in the lower triangle (the row is the larger label), so the
two copies stay equal to the bit; and it writes column k of L (and D) out at once, at the rows'
labels of that moment (?sytf2 never swaps the columns left of the current one).

Checked here against ldl_kernel_model.sytrf (the step-by-step model of the block-per-matrix
kernel, itself checked against LAPACK): identical pivots and info, and LD to the bit in float64
(complex: to rounding, as NumPy's vector loops round complex products unlike its scalars).

    python benchmarks/diag/ldl_warp_model.py
"""
from __future__ import annotations

import numpy as np

from ldl_kernel_model import ALPHA, abs1, sytrf as sytf2_model, two_by_two


def argmax(values, labels, begin):
    """The first (smallest label) largest value; NaN never wins; none: (0, begin)."""
    best, best_label = -1.0, begin
    for v, lab in sorted(zip(values, labels), key=lambda t: t[1]):
        if v > best:
            best, best_label = v, lab
    return (0.0 if best < 0 else best), (begin if best < 0 else best_label)


def sytrf_lanes(a_in):
    n = a_in.shape[0]
    # lane i: row i of the symmetric matrix read from the lower triangle
    rows = np.tril(a_in) + np.tril(a_in, -1).T
    pos = list(range(n))  # each physical row's label
    out = np.tril(a_in).copy()  # the output buffer (column k written at step k)
    ipiv = np.zeros(n, int)
    info = 0
    k = 0

    def lane_of(label):
        return pos.index(label)

    while k < n:
        p = lane_of(k)
        live = [i for i in range(n) if pos[i] > k]
        colmax, imax = argmax([abs1(rows[i, p]) for i in live], [pos[i] for i in live], k + 1)
        absakk = abs1(rows[p, p])
        kp, kstep = k, 1
        zero = (absakk == 0 and colmax == 0) or np.isnan(absakk)
        if zero:
            if info == 0:
                info = k + 1
        elif not (absakk >= ALPHA * colmax):
            q = lane_of(imax)
            others = [i for i in range(n) if pos[i] >= k and i != q]
            rowmax, _ = argmax([abs1(rows[i, q]) for i in others], [pos[i] for i in others], k)
            if absakk >= ALPHA * colmax * (colmax / rowmax):
                kp = k
            elif abs1(rows[q, q]) >= ALPHA * rowmax:
                kp = imax
            else:
                kp, kstep = imax, 2
        if not zero:
            kk = k + kstep - 1
            if kp != kk:  # relabel: nothing moves
                a_, b_ = lane_of(kk), lane_of(kp)
                pos[a_], pos[b_] = kp, kk
        p0 = lane_of(k)
        if zero:
            for i in range(n):
                if pos[i] >= k:
                    out[pos[i], k] = rows[i, p0]
        elif kstep == 1:
            d = rows[p0, p0]
            out[k, k] = d
            if k + 1 < n:
                r1 = 1 / d
                x = rows[:, p0].copy()  # A(i, k) on each lane (its own row)
                new = rows.copy()
                for i in range(n):
                    if pos[i] <= k:
                        continue
                    for j in range(n):
                        if pos[j] <= k:
                            continue
                        if pos[j] <= pos[i]:  # lane i holds the lower copy
                            new[i, j] = rows[i, j] - x[i] * (r1 * x[j])
                        else:
                            new[i, j] = rows[i, j] - x[j] * (r1 * x[i])
                for i in range(n):
                    if pos[i] > k:
                        out[pos[i], k] = x[i] * r1
                rows = new
        else:
            p1 = lane_of(k + 1)
            out[k, k], out[k + 1, k], out[k + 1, k + 1] = rows[p0, p0], rows[p1, p0], rows[p1, p1]
            if k + 2 < n:
                d11, d22, d21 = two_by_two(rows[p0, p0], rows[p1, p0], rows[p1, p1])
                x, y = rows[:, p0].copy(), rows[:, p1].copy()
                # element by element, as the kernel's lanes
                w = np.array([d21 * (d11 * x[i] - y[i]) for i in range(n)], rows.dtype)
                w2 = np.array([d21 * (d22 * y[i] - x[i]) for i in range(n)], rows.dtype)
                new = rows.copy()
                for i in range(n):
                    if pos[i] < k + 2:
                        continue
                    for j in range(n):
                        if pos[j] < k + 2:
                            continue
                        if pos[j] <= pos[i]:
                            new[i, j] = rows[i, j] - x[i] * w[j] - y[i] * w2[j]
                        else:
                            new[i, j] = rows[i, j] - x[j] * w[i] - y[j] * w2[i]
                for i in range(n):
                    if pos[i] >= k + 2:
                        out[pos[i], k], out[pos[i], k + 1] = w[i], w2[i]
                rows = new
        if kstep == 1:
            ipiv[k] = kp + 1
        else:
            ipiv[k] = ipiv[k + 1] = -(kp + 1)
        k += kstep
    return np.tril(out), ipiv, info


def main():
    rng = np.random.default_rng(1)
    cases = 0
    twos = 0
    for trial in range(200):
        n = int(rng.integers(1, 33))
        for dt in (np.float64, np.complex128):
            a = rng.standard_normal((n, n))
            if dt == np.complex128:
                a = a + 1j * rng.standard_normal((n, n))
            a = (a + a.T).astype(dt)
            if trial % 3 == 0:
                np.fill_diagonal(a, 1e-3 * np.diag(a))  # 2x2 pivots
            if trial % 5 == 0:
                np.fill_diagonal(a, 0)
            if trial % 7 == 0 and n > 2:
                a[:, 1] = 0
                a[1, :] = 0  # a zero column
            if trial % 11 == 0 and n > 3:
                a[3, 2] = a[2, 3] = np.nan
            # garbage above the diagonal: only the lower triangle may be read
            a_in = np.tril(a) + np.triu(np.full((n, n), 7.0, dt), 1)
            ld, piv, info = sytrf_lanes(a_in)
            ref_ld, ref_piv, ref_info = sytf2_model(np.tril(a) + np.tril(a, -1).T)
            assert np.array_equal(piv, ref_piv), (trial, n, piv, ref_piv)
            assert info == ref_info, (trial, info, ref_info)
            if dt == np.float64:
                assert np.array_equal(ld, ref_ld, equal_nan=True), (trial, n)
            else:  # NumPy's complex vector loops round differently from its scalars
                same = np.isclose(ld, ref_ld, rtol=1e-14, atol=1e-14 * np.nanmax(abs(ref_ld)),
                                  equal_nan=True)
                assert same.all(), (trial, n, np.nanmax(abs(ld - ref_ld)))
            cases += 1
            twos += int(np.sum(piv < 0))
    print(f"{cases} matrices (n 1..32, real and complex symmetric, {twos} 2x2 pivot entries): "
          "pivots and info identical to ldl_kernel_model.sytrf, LD too (complex: to rounding)")


if __name__ == "__main__":
    main()
