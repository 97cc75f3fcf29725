"""A CPU-bound MLP whose step takes a few milliseconds on one thread, for the noise tests
and ``benchmarks/noise.py``: long enough that timer and Python overheads do not dominate,
short enough that a measured window of ~0.5 s holds a hundred steps."""

from __future__ import annotations

from accelbench.workloads.registry import Batch, Workload, register_workload


@register_workload
class BusyMlp(Workload):
    name = "run_busy"
    family = "test"
    sample_unit = "sample"
    default_batch_sizes = {"tiny": (64,), "small": (64,), "paper": (64,)}
    learning_rate = 0.01

    def build_model(self, size):  # type: ignore[no-untyped-def]
        from torch import nn

        width = {"tiny": 256, "small": 512, "paper": 1024}[size]
        return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width),
                             nn.ReLU(), nn.Linear(width, 10))

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        import torch

        width = {"tiny": 256, "small": 512, "paper": 1024}[size]
        x = torch.randn(batch_size, width, generator=generator).to(device)
        y = torch.randint(0, 10, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        from torch import nn

        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
