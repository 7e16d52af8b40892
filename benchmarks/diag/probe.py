"""GPU probe: (1) what JAX's own GPU LU does with NaN and exactly singular input, next to ours
(the tests must expect JAX's behaviour); (2) where ldl_solve goes wrong (run as `probe.py ldl`)."""
import os, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import scipy.linalg as sl
import jax_cusolver_ms as jcm
from jax_cusolver_ms._common import resolve_params
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
from conftest import random_matrix  # noqa: E402

def lu_stats(a, lu, piv):
    a, lu, piv = np.asarray(a, np.complex128), np.asarray(lu, np.complex128), np.asarray(piv)
    out = []
    for k in range(a.reshape(-1, *a.shape[-2:]).shape[0]):
        ak, luk, pk = a.reshape(-1, *a.shape[-2:])[k], lu.reshape(-1, *lu.shape[-2:])[k], piv.reshape(-1, piv.shape[-1])[k]
        n = ak.shape[0]
        perm = np.arange(n)
        for i, p in enumerate(pk):
            perm[[i, p]] = perm[[p, i]]
        l = np.tril(luk, -1) + np.eye(n); u = np.triu(luk)
        rec = np.linalg.norm(ak[perm] - l @ u) / np.linalg.norm(ak)
        out.append(f"nan={np.isnan(luk).any()} rec={rec:.2g} maxL={np.abs(l).max():.3g} piv={pk.tolist()}")
    return out

def lu_probe():
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.complex64, np.float64, np.complex128):
        for kind, shape in (("nan", (5, 5)), ("nan", (4, 8, 8)), ("singular", (4, 9, 9)), ("singular", (7, 7))):
            if kind == "nan":
                a = random_matrix(rng, shape, dtype, "well_conditioned").astype(dtype)
                a[..., 2, 3] = np.nan
            else:
                a = random_matrix(rng, shape, dtype, "singular").astype(dtype)
            print(f"== {np.dtype(dtype).name} {kind} {shape}")
            lu, piv = jsl.lu_factor(a)
            print("  jax       ", lu_stats(a, lu, piv)[:2])
            for s in ("sequential", "looped", "batched"):
                lu2, piv2 = jcm.lu_factor(a, strategy=s)
                same = np.array_equal(np.asarray(lu), np.asarray(lu2), equal_nan=True)
                print(f"  jcm {s:10s}", lu_stats(a, lu2, piv2)[:2], "same_as_jax" if same else "DIFFERS")

def ldl_probe():
    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float64):
        for n in (1, 4, 7):
            a = rng.standard_normal((n, n)).astype(dtype); a = (a + a.T) / 2
            b = rng.standard_normal((n, 1)).astype(dtype)
            ld, piv = jcm.ldl_factor(a, strategy="sequential")
            ref_ld, ref_piv, info = sl.lapack.get_lapack_funcs("sytrf", (a,))(a, lower=1)[:3]
            print(f"== {np.dtype(dtype).name} n={n} piv ours {np.asarray(piv).tolist()} lapack {ref_piv.tolist()} "
                  f"ld_err {np.abs(np.tril(np.asarray(ld)) - np.tril(ref_ld)).max():.2g}", flush=True)
            from jax_cusolver_ms import ldl as L
            p64 = jnp.asarray(np.asarray(piv), jnp.int64)
            x_direct = L.sytrs.bind(jnp.asarray(ld), p64, jnp.asarray(b), lower=True, hermitian=False, **resolve_params("sequential", None))[0]
            jax.block_until_ready(x_direct)
            ref = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
            print(f"   sytrs.bind(int64 pivots): x {np.asarray(x_direct).ravel()[:4]} ref {ref.ravel()[:4]}", flush=True)
            for s in ("sequential", "looped", "auto"):
                x = jcm.ldl_solve(ld, piv, b, strategy=s)
                print(f"   ldl_solve[{s}]: x {np.asarray(x).ravel()[:4]}", flush=True)
            bb = rng.standard_normal((3, n, 2)).astype(dtype)
            aa = np.broadcast_to(a, (3, n, n)).copy()
            ld3, piv3 = jcm.ldl_factor(aa, strategy="looped")
            x3 = jcm.ldl_solve(ld3, piv3, bb, strategy="looped")
            ref3 = np.linalg.solve(aa.astype(np.float64), bb.astype(np.float64))
            print(f"   batch 3 looped: rel err {np.linalg.norm(np.asarray(x3) - ref3) / np.linalg.norm(ref3):.2g}", flush=True)

if __name__ == "__main__":
    (ldl_probe if sys.argv[1:] == ["ldl"] else lu_probe)()
