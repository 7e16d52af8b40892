"""Diagnostic: cusolverDn<t>sytrf + cusolverDnXsytrs through ctypes on raw device memory (torch
tensors), against NumPy. Checks which pivot width and workspace use Xsytrs really wants."""
import ctypes, glob, os, sys
import numpy as np
import torch

lib_dir = [p for p in sys.path if glob.glob(os.path.join(p, "nvidia/cu13/lib/libcusolver.so*"))][0]
cs = ctypes.CDLL(glob.glob(os.path.join(lib_dir, "nvidia/cu13/lib/libcusolver.so*"))[0])
vp, i64, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
h = vp(); assert cs.cusolverDnCreate(ctypes.byref(h)) == 0
cs.cusolverDnSetStream(h, vp(torch.cuda.current_stream().cuda_stream))
LOWER, R32F = 0, 0  # CUBLAS_FILL_MODE_LOWER, CUDA_R_32F

def ptr(t): return vp(t.data_ptr())

def run(n, nrhs, piv_dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)).astype(np.float32); a = (a + a.T) / 2
    b = rng.standard_normal((nrhs, n)).astype(np.float32)  # column-major (n, nrhs)
    A = torch.tensor(a.T.copy(), device="cuda")  # symmetric: layout irrelevant
    ipiv32 = torch.zeros(n, dtype=torch.int32, device="cuda")
    info = torch.zeros(1, dtype=torch.int32, device="cuda")
    lwork = ctypes.c_int()
    assert cs.cusolverDnSsytrf_bufferSize(h, ctypes.c_int(n), ptr(A), ctypes.c_int(n), ctypes.byref(lwork)) == 0
    work = torch.zeros(max(1, lwork.value), dtype=torch.float32, device="cuda")
    st = cs.cusolverDnSsytrf(h, LOWER, ctypes.c_int(n), ptr(A), ctypes.c_int(n), ptr(ipiv32), ptr(work), lwork, ptr(info))
    torch.cuda.synchronize(); print(f"n={n} sytrf status {st} info {info.item()} ipiv {ipiv32.cpu().numpy()[:8]}")
    ipiv = ipiv32.to(piv_dtype)
    B = torch.tensor(b, device="cuda")  # (nrhs, n) row-major == (n, nrhs) column-major
    dws, hws = sz(), sz()
    st = cs.cusolverDnXsytrs_bufferSize(h, LOWER, i64(n), i64(nrhs), R32F, ptr(A), i64(n), ptr(ipiv), R32F, ptr(B), i64(n), ctypes.byref(dws), ctypes.byref(hws))
    print(f"  bufferSize status {st} device {dws.value} host {hws.value}")
    dwork = torch.zeros(max(1, dws.value), dtype=torch.uint8, device="cuda")
    hbuf = ctypes.create_string_buffer(max(1, hws.value))
    st = cs.cusolverDnXsytrs(h, LOWER, i64(n), i64(nrhs), R32F, ptr(A), i64(n), ptr(ipiv), R32F, ptr(B), i64(n), ptr(dwork), sz(dws.value), hbuf if hws.value else None, sz(hws.value), ptr(info))
    torch.cuda.synchronize()
    x = B.cpu().numpy().T
    ref = np.linalg.solve(a.astype(np.float64), b.T.astype(np.float64))
    err = np.linalg.norm(x - ref) / np.linalg.norm(ref)
    print(f"  Xsytrs[{piv_dtype}] status {st} info {info.item()} rel err {err:.2e}")

piv = torch.int64 if sys.argv[1:] in ([], ["int64"]) else torch.int32
for n, nrhs in ((1, 1), (4, 1), (7, 2), (64, 3)):
    try:
        run(n, nrhs, piv)
    except Exception as e:  # an illegal address poisons the context: stop here
        print("  EXC", type(e).__name__, e); break
