"""One workload, two frameworks: describe it once, implement it in PyTorch and in JAX.

    python examples/two_frameworks.py       # measures both and prints the JAX/torch ratio
    accelbench --plugin examples/two_frameworks.py run mlp_classifier --size tiny --framework jax

The description (sizes, batch sizes, learning rate, sample unit) is registered
once; each implementation is registered for its framework under the same name.
Worker processes import this file again by path, so keep the registrations at
module level and the run under ``__main__``. Needs ``pip install -e '.[jax]'``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax
import torch
from flax import nnx
from torch import nn

import accelbench
from accelbench.backends.jax import JaxModel
from accelbench.backends.torch import TorchModel
from accelbench.workloads import Workload, register_implementation, register_workload


@dataclass(frozen=True)
class MLPSize:
    features: int
    hidden: int
    classes: int


SIZES = {
    "tiny": MLPSize(features=32, hidden=64, classes=10),
    "small": MLPSize(features=256, hidden=1024, classes=100),
    "paper": MLPSize(features=1024, hidden=4096, classes=1000),
}


@register_workload
class MLPClassifier(Workload):
    """A 2-layer MLP classifier on random features: the framework-neutral description."""

    name = "mlp_classifier"
    family = "mlp"
    sample_unit = "sample"
    description = "2-layer MLP classifier (example of a workload in two frameworks)"
    default_batch_sizes = {"tiny": (32,), "small": (256,), "paper": (1024,)}
    learning_rate = 0.05
    loss_kind = "cross_entropy"

    def config(self, size):  # type: ignore[no-untyped-def]
        return SIZES[size]

    def size_notes(self, size):  # type: ignore[no-untyped-def]
        c = SIZES[size]
        return f"{c.features} features, hidden {c.hidden}, {c.classes} classes"


@register_implementation("mlp_classifier", "torch")
class MLPTorch(TorchModel):
    def build_model(self, size):  # type: ignore[no-untyped-def]
        c = self.workload.config(size)
        return nn.Sequential(nn.Linear(c.features, c.hidden), nn.ReLU(),
                             nn.Linear(c.hidden, c.classes))

    def make_batch(self, size, batch_size, device, generator):  # type: ignore[no-untyped-def]
        c = self.workload.config(size)
        x = torch.randn(batch_size, c.features, generator=generator)
        y = torch.randint(0, c.classes, (batch_size,), generator=generator)
        return x.to(device), y.to(device)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        x, y = batch
        return nn.functional.cross_entropy(model(x).float(), y)


class _MLP(nnx.Module):
    def __init__(self, c: MLPSize, rngs: nnx.Rngs) -> None:
        self.fc1 = nnx.Linear(c.features, c.hidden, rngs=rngs)
        self.fc2 = nnx.Linear(c.hidden, c.classes, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return self.fc2(nnx.relu(self.fc1(x)))


@register_implementation("mlp_classifier", "jax")
class MLPJax(JaxModel):
    def build_model(self, size, rngs):  # type: ignore[no-untyped-def]
        return _MLP(self.workload.config(size), rngs)

    def make_batch(self, size, batch_size, key):  # type: ignore[no-untyped-def]
        c = self.workload.config(size)
        kx, ky = jax.random.split(key)
        x = jax.random.normal(kx, (batch_size, c.features), jnp.float32)
        y = jax.random.randint(ky, (batch_size,), 0, c.classes, jnp.int32)
        return x, y

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        x, y = batch
        logits = model(x).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


if __name__ == "__main__":
    results = {fw: accelbench.run("mlp_classifier", size="tiny", framework=fw, max_time=2.0)
               for fw in ("torch", "jax")}
    for fw, r in results.items():
        print(fw, r.status, f"{r.samples_per_s:.0f} samples/s" if r.stats else r.error,
              f"compile {r.compile_s:.2f} s" if r.compile_s is not None else "")
    t, j = results["torch"].samples_per_s, results["jax"].samples_per_s
    if t and j:
        print(f"jax/torch throughput ratio {j / t:.2f}")
