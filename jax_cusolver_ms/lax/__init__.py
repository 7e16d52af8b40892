"""jax_cusolver_ms.lax: holds `linalg`, the mirror of jax.lax.linalg (swap ``jax.lax.linalg``
for ``jax_cusolver_ms.lax.linalg`` and nothing else changes)."""
from . import linalg
