"""jax_cusolver_ms.scipy: holds `linalg`, the mirror of jax.scipy.linalg (swap
``jax.scipy.linalg`` for ``jax_cusolver_ms.scipy.linalg`` and nothing else changes)."""
from . import linalg
