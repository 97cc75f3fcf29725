"""The JAX (Flax NNX) backend. Importing this package does not import jax."""

from accelbench.backends.jax.model import JaxModel

__all__ = ["JaxModel"]
