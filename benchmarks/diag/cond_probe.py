"""GPU probe for test_svd.py::test_cond (failed on the H100, traceback not captured): what JAX's
own GPU svdvals / cond give for the test's inputs (no extension needed: JAX side only)."""
import os, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
from conftest import random_matrix, rel_err, rtol_for, widened  # noqa: E402

print("backend", jax.default_backend())
rng = np.random.default_rng(0)
for dtype in (np.float32, np.float64, np.complex64, np.complex128):
    name = np.dtype(dtype).name
    singular = np.zeros((2, 4, 4), dtype)
    singular[1] = np.eye(4)
    s = np.asarray(jnp.linalg.svdvals(singular))
    c = np.asarray(jnp.linalg.cond(singular))
    print(f"{name}: zero/eye svdvals {s.tolist()} cond {c.tolist()}")
    x = random_matrix(rng, (3, 5, 5), dtype, "ill_conditioned")
    got = np.asarray(jnp.linalg.cond(x))
    print(f"{name}: ill-conditioned cond {got.tolist()} numpy {np.linalg.cond(widened(x)).tolist()} "
          f"rel_err {rel_err(got, np.linalg.cond(widened(x)), 0):.3g}")
    r = random_matrix(rng, (6, 4), dtype, "general")
    print(f"{name}: 6x4 rel_err {rel_err(jnp.linalg.cond(r), np.linalg.cond(widened(r)), 0):.3g} "
          f"tol {rtol_for(dtype, 6, 100):.3g}")
