"""NumPy model of the Jacobi eigh kernel (ffi/eigh_kernels.cu syevj_small_kernel) as it stores
the matrix: by position in the round-robin order. And a count of the kernel's shared-memory
wavefronts (bank conflicts), which chose its leading dimension per m (kJacobiLd).

  python benchmarks/diag/jacobi_model.py          # the model against numpy.linalg.eigvalsh
  python benchmarks/diag/jacobi_model.py --banks  # kJacobiLd: per even m, the ld in [m, 2m] with
                                                  # the fewest wavefronts, float + double (~25 s)

The count: a warp's 4-byte access takes as many wavefronts as the most distinct words in one
bank; an 8-byte access is two half-warps, each counted so. Layout "index" is the kernel before
session 18 (by index, each pair sorted, ld = m + 1, thread (tid % pairs, tid / pairs)); "position"
is the kernel's now.
"""
import argparse
import math

import numpy as np

NEGLIGIBLE = 5.9666725849601654e-154  # jacobi.cuh negligible_of(double)


def circle_index(pos, rnd, m):
    """jacobi.cuh circle_index: the index at position pos of round rnd."""
    turned = pos - 1 + rnd
    return 0 if pos == 0 else 1 + (turned - (m - 1) if turned >= m - 1 else turned)


def moved(x, m):
    """Where the entry at position x goes for the next round."""
    return 0 if x == 0 else m - 1 if x == 1 else x - 1


def rotation_for(app, aqq, g):
    """jacobi.cuh rotation_for: (c, s, shift, se, ce)."""
    size = abs(g)
    if not size >= NEGLIGIBLE:
        return 1.0, 0.0, 0.0, 0.0 * g, 1.0 + 0.0 * g
    e = np.conj(g) / size if np.iscomplexobj(g) else (-1.0 if g < 0 else 1.0)
    d = aqq - app
    r = 1 / np.sqrt(d * d + 4 * size * size)
    c2 = 0.5 + 0.5 * abs(d) * r
    rc = 1 / np.sqrt(c2)
    c = c2 * rc
    s = size * r * rc
    s = -s if d < 0 else s
    return c, s, size * s * rc, s * e, c * e


def model(a, max_sweeps=40):
    """Eigenvalues (ascending), eigenvectors and sweeps, round by round as the kernel runs."""
    n = a.shape[0]
    m = n + (n & 1)
    pairs = m // 2
    cur = np.zeros((m, m), a.dtype)
    cur[:n, :n] = a
    v = np.eye(m, dtype=a.dtype)
    tolerance2 = np.finfo(float).eps ** 2 * np.sum(abs(cur) ** 2)
    for sweep in range(max_sweeps):
        if np.sum(abs(cur - np.diag(np.diag(cur))) ** 2) <= tolerance2:
            break
        for rnd in range(m - 1):
            rot = [rotation_for(cur[k, k].real, cur[m - 1 - k, m - 1 - k].real, cur[k, m - 1 - k])
                   for k in range(pairs)]
            nxt = np.full((m, m), np.nan, a.dtype)
            for kp in range(pairs):
                for kq in range(pairs):
                    p1, q1, p2, q2 = kp, m - 1 - kp, kq, m - 1 - kq
                    n_p1, n_q1, n_p2, n_q2 = (moved(x, m) for x in (p1, q1, p2, q2))
                    c1, s1, shift1, se1, ce1 = rot[kp]
                    c, s, _, se, ce = rot[kq]
                    if kp == kq:
                        nxt[n_p1, n_p1] = cur[p1, p1].real - shift1
                        nxt[n_q1, n_q1] = cur[q1, q1].real + shift1
                        nxt[n_p1, n_q1] = nxt[n_q1, n_p1] = 0
                    else:
                        x00 = c * cur[p1, p2] - se * cur[p1, q2]
                        x01 = s * cur[p1, p2] + ce * cur[p1, q2]
                        x10 = c * cur[q1, p2] - se * cur[q1, q2]
                        x11 = s * cur[q1, p2] + ce * cur[q1, q2]
                        se1, ce1 = np.conj(se1), np.conj(ce1)
                        nxt[n_p1, n_p2] = c1 * x00 - se1 * x10
                        nxt[n_q1, n_p2] = s1 * x00 + ce1 * x10
                        nxt[n_p1, n_q2] = c1 * x01 - se1 * x11
                        nxt[n_q1, n_q2] = s1 * x01 + ce1 * x11
                    i2, j2 = circle_index(p2, rnd, m), circle_index(q2, rnd, m)
                    for row in (p1, q1):
                        v0, v1 = v[row, i2], v[row, j2]
                        v[row, i2], v[row, j2] = c * v0 - se * v1, s * v0 + ce * v1
            assert not np.isnan(nxt).any(), "a round left an entry unwritten"
            cur = nxt
    w = np.diag(cur).real[:n]
    order = np.argsort(w, kind="stable")
    return w[order], v[:n, :n][:, order], sweep


def wavefronts(offsets, elem):
    """Shared-memory wavefronts of one warp's access (element offsets, None: inactive lane)."""
    groups = [offsets] if elem == 4 else [offsets[:16], offsets[16:]]
    total = 0
    for group in groups:
        banks = {}
        for offset in group:
            if offset is None:
                continue
            for w in range(elem // 4):
                word = offset * (elem // 4) + w
                banks.setdefault(word % 32, set()).add(word)
        total += max((len(words) for words in banks.values()), default=0)
    return total


def warp_accesses(m, ld, layout, rnd, warp):
    """Each shared access of the round, as 32 lanes' element offsets."""
    pairs = m // 2
    names = ["a(p,p)", "a(q,q)", "a(p,q)"] + [f"{k}{i}" for k in "anv" for i in range(4)]
    acc = {name: [None] * 32 for name in names}
    per_warp = 32 // pairs
    for lane in range(32):
        if layout == "position":
            kp, kq = lane % pairs, warp * per_warp + lane // pairs
            works = lane < per_warp * pairs and kq < pairs
            p, q = kp, m - 1 - kp
        else:
            tid = warp * 32 + lane
            works = tid < pairs * pairs
            kp, kq = (tid % pairs, tid // pairs) if works else (0, 0)
            own = lane % pairs
            p, q = sorted((circle_index(own, rnd, m), circle_index(m - 1 - own, rnd, m)))
        acc["a(p,p)"][lane] = p + ld * p
        acc["a(q,q)"][lane] = q + ld * q
        acc["a(p,q)"][lane] = p + ld * q
        if not works:
            continue
        if layout == "position":
            p1, q1, p2, q2 = kp, m - 1 - kp, kq, m - 1 - kq
            block = [(p1, p2), (p1, q2), (q1, p2), (q1, q2)]
            written = [(moved(x, m), moved(y, m)) for x, y in block]
            i2, j2 = circle_index(p2, rnd, m), circle_index(q2, rnd, m)
            vblock = [(p1, i2), (p1, j2), (q1, i2), (q1, j2)]
        else:
            def pair(k):
                return sorted((circle_index(k, rnd, m), circle_index(m - 1 - k, rnd, m)))
            (p1, q1), (p2, q2) = pair(kp), pair(kq)
            block = written = vblock = [(p1, p2), (p1, q2), (q1, p2), (q1, q2)]
        for i in range(4):
            acc[f"a{i}"][lane] = block[i][0] + ld * block[i][1]
            acc[f"n{i}"][lane] = written[i][0] + ld * written[i][1]
            acc[f"v{i}"][lane] = vblock[i][0] + ld * vblock[i][1]
    return acc


def count(m, ld, elem, layout):
    """Shared-memory wavefronts of one sweep's rounds, over the launch's warps."""
    pairs = m // 2
    if layout == "position":
        per_warp = 32 // pairs
        warps = math.ceil(pairs / per_warp)
    else:
        warps = max(1, math.ceil(pairs * pairs / 32))
    total = 0
    for rnd in range(m - 1):
        for warp in range(warps):
            for offsets in warp_accesses(m, ld, layout, rnd, warp).values():
                if any(o is not None for o in offsets):
                    total += wavefronts(offsets, elem)
    return total


def check_model():
    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 5, 8, 15, 16, 17, 32):
        for cplx in (False, True):
            x = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if cplx else 0)
            x = (x + x.conj().T) / 2
            w, v, sweeps = model(x)
            ref = np.linalg.eigvalsh(x)
            err = np.max(abs(w - ref)) / max(1, np.max(abs(ref)))
            res = np.linalg.norm(x @ v - v * w) / np.linalg.norm(x) if n else 0.0
            orth = np.linalg.norm(v.conj().T @ v - np.eye(n))
            print(f"n={n:2d} {'complex' if cplx else 'real   '} sweeps {sweeps} eigenvalues "
                  f"{err:.1e} residual {res:.1e} orthogonality {orth:.1e}")
            assert err < 1e-13 and res < 1e-13 and orth < 1e-12


def best_leading_dimensions():
    table = {}
    for m in range(2, 33, 2):
        both = {ld: count(m, ld, 4, "position") + count(m, ld, 8, "position")
                for ld in range(m, 2 * m + 1)}
        best = min(both, key=lambda ld: (both[ld], ld))
        before = count(m, m + 1, 4, "index") + count(m, m + 1, 8, "index")
        table[m] = best
        print(f"m={m:2d} ld={best:2d} wavefronts {both[best]:6d}; by index (ld m + 1) {before:6d}")
    print("kJacobiLd (index m / 2):", [0] + [table[m] for m in range(2, 33, 2)])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--banks", action="store_true")
    if parser.parse_args().banks:
        best_leading_dimensions()
    else:
        check_model()
