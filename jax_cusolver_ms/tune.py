"""`python -m jax_cusolver_ms.tune`: measure the strategies on this GPU (see _tune.py).

The implementation lives in _tune.py so that `jax_cusolver_ms.tune` stays the function.
"""
import sys

from jax_cusolver_ms._tune import main

if __name__ == "__main__":
    sys.exit(main())
