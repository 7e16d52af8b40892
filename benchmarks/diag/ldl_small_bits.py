"""Whether the small block kernel's factors (sytrf_small_block_kernel, every n <= 64) equal the
warp kernel's (n <= 32) and the ?sytf2 block kernel's to the bit, on tests/test_ldl.py's
small_kernel_cases (the test asserts the pivots and the factor to rounding). Run from the
repository root on a GPU: python benchmarks/diag/ldl_small_bits.py"""
import collections
import pathlib
import sys
import tempfile

import numpy as np

sys.path.insert(0, "tests")

from test_ldl import _batched_factors_in_child, small_kernel_cases  # noqa: E402

tmp = pathlib.Path(tempfile.mkdtemp())
small = _batched_factors_in_child(tmp / "small.npz", JCM_LDL_WARP_MAX_N="0")
others = {
    "warp": _batched_factors_in_child(tmp / "warp.npz", JCM_LDL_WARP_MAX_N="32",
                                      JCM_LDL_SMALL_BLOCK_MAX_N="0"),
    "block": _batched_factors_in_child(tmp / "block.npz", JCM_LDL_WARP_MAX_N="0",
                                       JCM_LDL_SMALL_BLOCK_MAX_N="0"),
}
tally = collections.Counter()
for key, a in small_kernel_cases().items():
    dtype, n = key.split("/")[:2]
    for name, other in others.items():
        if name == "warp" and int(n) > 32:
            continue
        same = (np.array_equal(small[key + "/ld"], other[key + "/ld"], equal_nan=True)
                and np.array_equal(small[key + "/piv"], other[key + "/piv"]))
        tally[(name, dtype, same)] += 1
        if not same:
            print("differs:", name, key)
for (name, dtype, same), count in sorted(tally.items()):
    print(f"{name:6s} {dtype:11s} {'same bits' if same else 'different'}: {count}")
