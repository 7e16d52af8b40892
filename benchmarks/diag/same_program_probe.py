"""Why benchmarks.bench.same_program tells jnp.linalg.cholesky and jcm.cholesky (auto: JAX's own
lowering) apart on the GPU when it does not on the CPU (tests/test_tune.py, session 12): the
lines where the two signatures differ.

    python3 -m benchmarks.diag.same_program_probe
"""
import difflib

from benchmarks import bench  # first: the installed package, not this source folder

import jax.numpy as jnp

jcm = bench.jcm


def main():
    a = jnp.eye(16, dtype=jnp.float32)[None] * 4 + jnp.ones((3, 16, 16), jnp.float32)
    print(jcm.explain("cholesky", a.shape, a.dtype))
    ours = bench.program_signature(jcm.cholesky, a).splitlines()
    theirs = bench.program_signature(jnp.linalg.cholesky, a).splitlines()
    diff = list(difflib.unified_diff(theirs, ours, "jnp.linalg.cholesky", "jcm.cholesky",
                                     lineterm="", n=1))
    print(f"{len(theirs)} / {len(ours)} lines; {len(diff)} diff lines")
    for line in diff[:80]:
        print(line[:400])


if __name__ == "__main__":
    main()
