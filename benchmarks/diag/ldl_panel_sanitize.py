"""Small LDL^T factorizations for compute-sanitizer's racecheck / synccheck (benchmarks/plans/
session21-call1.sh, -call8.sh, session22-call1.sh): the batched kernels (`--batched`: the small
block kernel at n = 32 / 64, the ?sytf2 block kernel with the matrix in shared memory at 200), or
blocked ones whose panels run on one block (a thread a row, two rows a thread) and on clusters.
Each factor is checked to reconstruct A, so a race that changed numbers shows here too."""
import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, "tests")

from test_ldl import check_factorization, symmetric  # noqa: E402

from jax_cusolver_ms import ldl_factor  # noqa: E402

rng = np.random.default_rng(3)
batched = "--batched" in sys.argv
cases = (((np.float64, 32, 4), (np.float64, 64, 2), (np.float32, 64, 2), (np.float64, 200, 1))
         if batched else
         ((np.float32, 300, 2), (np.float64, 257, 1), (np.float32, 1100, 1), (np.float64, 1100, 1)))
for dtype, n, batch in cases:
    for kind in ("indefinite", "banded", "zero_diagonal"):
        a = symmetric(rng, (batch, n, n), dtype, kind=kind).astype(dtype)
        ld, piv = ldl_factor(a, strategy="batched" if batched else "blocked")
        check_factorization(a, ld, piv, dtype)
        print(np.dtype(dtype).name, n, batch, kind, "ok", flush=True)
print("ok")
