"""jax_cusolver_ms.numpy: holds `linalg`, the mirror of jax.numpy.linalg (swap
``jax.numpy.linalg`` for ``jax_cusolver_ms.numpy.linalg`` and nothing else changes)."""
from . import linalg
