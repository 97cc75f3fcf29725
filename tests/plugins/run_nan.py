"""Workloads whose loss stops being finite, for the ``diverged`` status (loaded as a plugin).

``run_nan``: the loss is NaN from the first step (caught at the end of warm-up).
``run_inf_late``: the loss is finite for the first 6 steps, then infinite (caught only by
the check at the end of measurement).
"""

from __future__ import annotations

from accelbench.workloads.registry import Batch, Workload, register_workload


class _Tiny(Workload):
    family = "test"
    sample_unit = "sample"
    default_batch_sizes = {"tiny": (4,), "small": (4,), "paper": (4,)}
    learning_rate = 0.01

    def build_model(self, size):  # type: ignore[no-untyped-def]
        from torch import nn

        return nn.Linear(8, 2)

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        import torch

        x = torch.randn(batch_size, 8, generator=generator).to(device)
        y = torch.randint(0, 2, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        from torch import nn

        x, y = batch
        return nn.functional.cross_entropy(model(x), y)


@register_workload
class NanLoss(_Tiny):
    name = "run_nan"
    description = "a linear model whose loss is NaN"

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        return super().loss(model, batch) * float("nan")


@register_workload
class InfLate(_Tiny):
    name = "run_inf_late"
    description = "a linear model whose loss becomes infinite after 6 steps"
    steps = 0

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        InfLate.steps += 1
        scale = float("inf") if InfLate.steps > 6 else 1.0
        return super().loss(model, batch) * scale
