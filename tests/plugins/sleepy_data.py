"""A workload that brings its own map-style dataset whose ``__getitem__`` sleeps a known
time, and whose step sleeps a known time too (its "compute"): the stall timing's check
(tests/test_data.py). With 0 loader workers the step waits ITEM_SLEEP_S x the batch for
each batch; with enough workers they prepare batches while the step computes."""

from __future__ import annotations

import time

from accelbench.workloads.registry import Batch, Workload, register_workload

ITEM_SLEEP_S = 0.025
STEP_SLEEP_S = 0.04
BATCH = 2


class SleepySet:
    """Samples (16 features, a class of 4) that each take ITEM_SLEEP_S to read."""

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        import torch

        time.sleep(ITEM_SLEEP_S)
        g = torch.Generator().manual_seed(index)
        return torch.randn(16, generator=g), int(index % 4)


@register_workload
class SleepyData(Workload):
    name = "sleepy_data"
    family = "test"
    sample_unit = "sample"
    description = "an MLP fed by a dataset that sleeps a known time per sample"
    default_batch_sizes = {"tiny": (BATCH,), "small": (BATCH,), "paper": (BATCH,)}
    learning_rate = 0.05

    def make_dataset(self, size):  # type: ignore[no-untyped-def]
        return SleepySet()

    def build_model(self, size):  # type: ignore[no-untyped-def]
        from torch import nn

        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        import torch

        x = torch.randn(batch_size, 16, generator=generator).to(device)
        y = torch.randint(0, 4, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        from torch import nn

        time.sleep(STEP_SLEEP_S)  # the step's known compute time
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
