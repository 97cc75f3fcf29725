"""A JAX implementation whose batch cannot be allocated: XLA raises RESOURCE_EXHAUSTED.

Loaded as a plugin file, like a user's; it adds a JAX implementation to the
test MLP described in ``faulty.py`` and a workload of its own.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from accelbench.backends.jax import JaxModel
from accelbench.workloads import Workload, register_implementation, register_workload


@register_workload
class Huge(Workload):
    name = "test_jax_huge"
    family = "test"
    sample_unit = "sample"
    default_batch_sizes = {"tiny": (8,), "small": (8,), "paper": (8,)}


class _Linear(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.fc = nnx.Linear(4, 1, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return self.fc(x)


@register_implementation("test_jax_huge", "jax")
class HugeJax(JaxModel):
    def build_model(self, size, rngs):  # type: ignore[no-untyped-def]
        return _Linear(rngs)

    def make_batch(self, size, batch_size, key):  # type: ignore[no-untyped-def]
        # 2**42 float32 = 16 TiB: more than any host has, so XLA refuses the allocation.
        big = jnp.zeros((2**42,), jnp.float32)
        big.block_until_ready()
        return (jax.random.normal(key, (batch_size, 4)),)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        return jnp.mean(model(batch[0]) ** 2)
