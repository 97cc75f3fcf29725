"""A tiny workload that leaves a marker file (path in $ACCELBENCH_TEST_MARKER) whenever its
model is built, so a test can tell whether a case was measured at all."""

from __future__ import annotations

import os

from accelbench.workloads.registry import Batch, Workload, register_workload


@register_workload
class MarkerMLP(Workload):
    name = "marker_mlp"
    family = "test"
    sample_unit = "sample"
    description = "an MLP whose build leaves a marker file"
    default_batch_sizes = {"tiny": (8,), "small": (32,), "paper": (64,)}
    learning_rate = 0.05

    def build_model(self, size):  # type: ignore[no-untyped-def]
        from torch import nn

        marker = os.environ.get("ACCELBENCH_TEST_MARKER")
        if marker:
            with open(marker, "a", encoding="utf-8") as f:
                f.write(f"{os.getpid()}\n")
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        import torch

        x = torch.randn(batch_size, 16, generator=generator).to(device)
        y = torch.randint(0, 4, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        from torch import nn

        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
