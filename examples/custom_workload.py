"""Benchmark your own model with accelbench: register it, then run it.

    python examples/custom_workload.py            # measures and stores one case
    accelbench --plugin examples/custom_workload.py run mlp_regressor --size tiny

The worker process that measures the case imports this file again by path,
so keep the registration at module level and the run under ``__main__``.
"""

from __future__ import annotations

import torch
from torch import nn

import accelbench
from accelbench.workloads import Batch, Workload, register_workload

WIDTHS = {"tiny": 64, "small": 512, "paper": 2048}


@register_workload
class MLPRegressor(Workload):
    """A 3-layer MLP trained with mean squared error on random data."""

    name = "mlp_regressor"
    family = "mlp"
    sample_unit = "sample"
    description = "3-layer MLP regressor (example of a user workload)"
    default_batch_sizes = {"tiny": (32,), "small": (256,), "paper": (1024,)}
    learning_rate = 0.01

    def build_model(self, size):  # type: ignore[no-untyped-def]
        w = WIDTHS[size]
        return nn.Sequential(nn.Linear(w, w), nn.GELU(), nn.Linear(w, w), nn.GELU(),
                             nn.Linear(w, 1))

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        w = WIDTHS[size]
        x = torch.randn(batch_size, w, generator=generator)
        y = x[:, :1] * 0.5  # a learnable target
        return x.to(device), y.to(device)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        x, y = batch
        return nn.functional.mse_loss(model(x), y)

    def size_notes(self, size):  # type: ignore[no-untyped-def]
        return f"width {WIDTHS[size]}"


if __name__ == "__main__":
    result = accelbench.run("mlp_regressor", size="tiny", max_time=2.0)
    print(result.status, f"{result.samples_per_s:.0f} samples/s" if result.stats else result.error)
