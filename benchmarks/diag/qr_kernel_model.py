"""NumPy model of ffi/qr_kernels.cu (same steps, same order, sequential): ?geqr2, ?org2r /
?ung2r and ?orm2r / ?unm2r, checked against LAPACK ?geqrf / ?orgqr / ?ungqr / ?ormqr / ?unmqr
from SciPy before the kernels first ran on a GPU. Run: python benchmarks/diag/qr_kernel_model.py"""
import numpy as np
import scipy.linalg.lapack as lapack


def apply_reflector_left(A, c, t):
    m, n = A.shape
    v = A[c:, c].copy()
    v[0] = 1
    u = np.array([A[c, j] + np.conj(A[c + 1:, c]) @ A[c + 1:, j] for j in range(c + 1, n)])
    if n > c + 1:
        A[c:, c + 1:] -= t * np.outer(v, u)


def geqr2(A):
    A = A.copy()
    m, n = A.shape
    k = min(m, n)
    tau = np.zeros(k, A.dtype)
    cplx = np.iscomplexobj(A)
    for c in range(k):
        sum_sq = float(np.sum(np.abs(A[c + 1:, c]) ** 2))
        alpha = A[c, c]
        alphr, alphi = alpha.real, alpha.imag if cplx else 0.0
        xnorm = np.sqrt(sum_sq)
        t = 0
        identity = (xnorm == 0 and alphi == 0) or (not cplx and m - c <= 1)
        if not identity:
            beta = -np.copysign(np.hypot(np.hypot(alphr, alphi), xnorm), alphr)
            t = complex((beta - alphr) / beta, -alphi / beta) if cplx else (beta - alphr) / beta
            scale = 1 / (alpha - beta)
            A[c, c] = beta
        tau[c] = t
        if t == 0:
            continue
        A[c + 1:, c] *= scale
        apply_reflector_left(A, c, np.conj(t))
    return A, tau


def org2r(A, tau):
    A = A.copy()
    m, n = A.shape
    k = len(tau)
    A[:, k:] = np.eye(m, n)[:, k:]
    for c in range(k - 1, -1, -1):
        t = tau[c]
        if c < n - 1:
            apply_reflector_left(A, c, t)
        A[:c, c] = 0
        A[c, c] = 1 - t
        A[c + 1:, c] *= -t
    return A


def orm2r(a, tau, c, left, adjoint):
    c = c.copy()
    m, n = c.shape
    k = len(tau)
    forward = left == adjoint
    for step in range(k):
        i = step if forward else k - 1 - step
        t = np.conj(tau[i]) if adjoint else tau[i]
        v = a[:, i].copy()
        v[:i] = 0
        v[i] = 1
        if left:
            u = np.conj(v[i:]) @ c[i:, :]
            c[i:, :] -= t * np.outer(v[i:], u)
        else:
            u = c[:, i:] @ v[i:]
            c[:, i:] -= t * np.outer(u, np.conj(v[i:]))
    return c


rng = np.random.default_rng(0)
worst = 0.0
for trial in range(40):
    m, n = (int(v) for v in rng.integers(1, 20, 2))
    for dtype in (np.float64, np.complex128):
        a = rng.standard_normal((m, n))
        if dtype == np.complex128:
            a = a + 1j * rng.standard_normal((m, n))
        if trial % 5 == 0 and n > 1:
            a[:, 1] = 0  # a zero column: tau = 0
        geqrf = lapack.get_lapack_funcs(("geqrf",), dtype=np.dtype(dtype))[0]
        qr_ref, tau_ref, _, info = geqrf(a)
        qr, tau = geqr2(a.astype(dtype))
        worst = max(worst, np.abs(qr - qr_ref).max() / max(1, np.abs(qr_ref).max()),
                    np.abs(tau - tau_ref).max())
        if m >= n:
            name = "ungqr" if dtype == np.complex128 else "orgqr"
            orgqr = lapack.get_lapack_funcs((name,), dtype=np.dtype(dtype))[0]
            q_ref, _, _ = orgqr(qr_ref, tau_ref)
            q = org2r(qr, tau)
            worst = max(worst, np.abs(q - q_ref).max())
for trial in range(30):
    r, p = (int(v) for v in rng.integers(1, 15, 2))
    k = int(rng.integers(1, r + 1))
    for dtype in (np.float64, np.complex128):
        a = rng.standard_normal((r, k)) + (1j * rng.standard_normal((r, k)) if dtype == np.complex128 else 0)
        geqrf = lapack.get_lapack_funcs(("geqrf",), dtype=np.dtype(dtype))[0]
        h, tau, _, _ = geqrf(a)
        name = "unmqr" if dtype == np.complex128 else "ormqr"
        ormqr = lapack.get_lapack_funcs((name,), dtype=np.dtype(dtype))[0]
        for left in (True, False):
            for adjoint in (False, True):
                c = rng.standard_normal((r, p) if left else (p, r)).astype(dtype)
                trans = ("C" if dtype == np.complex128 else "T") if adjoint else "N"
                ref, _, _ = ormqr("L" if left else "R", trans, h, tau, c, max(1, 64 * r))
                worst = max(worst, np.abs(orm2r(h, tau, c, left, adjoint) - ref).max())
print("worst difference from LAPACK geqrf / orgqr / ormqr (float64 / complex128):", worst)
assert worst < 1e-12
