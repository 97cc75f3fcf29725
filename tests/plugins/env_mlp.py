"""One tiny workload, loaded through ACCELBENCH_PLUGINS in the CLI tests."""

from __future__ import annotations

import torch
from torch import nn

from accelbench.workloads.registry import Batch, Workload, register_workload


@register_workload
class EnvMLP(Workload):
    name = "env_mlp"
    family = "test"
    sample_unit = "sample"
    description = "an MLP registered by a plugin named in ACCELBENCH_PLUGINS"
    default_batch_sizes = {"tiny": (8,), "small": (32,), "paper": (64,)}
    learning_rate = 0.05

    def build_model(self, size):  # type: ignore[no-untyped-def]
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        x = torch.randn(batch_size, 16, generator=generator).to(device)
        y = torch.randint(0, 4, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
