"""A workload that brings its own dataset: ``accelbench run --data generated`` reads it
through a torch ``DataLoader`` (``--loader-workers N``) and times each step's wait.

    accelbench --plugin examples/dataset_plugin.py run tabular_mlp --size tiny \\
        --data generated --loader-workers 2

A map-style dataset is any object with ``__len__`` and ``__getitem__(index)``; each item is
one sample as a tuple (the loader stacks them into the batch ``loss`` receives). Build it in
``make_dataset(size)``; the worker process imports this file again by path.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from accelbench.workloads import Batch, Workload, register_workload

FEATURES, CLASSES = 32, 5


class TabularRows:
    """Rows of a table made once (a real plugin would open its files here): features,
    standardised when read, and a class label."""

    def __init__(self, rows: int) -> None:
        rng = np.random.default_rng(0)
        self.table = rng.normal(3.0, 2.0, (rows, FEATURES)).astype(np.float32)
        self.labels = rng.integers(0, CLASSES, rows)

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        row = (self.table[index] - 3.0) / 2.0
        return torch.from_numpy(row), int(self.labels[index])


@register_workload
class TabularMLP(Workload):
    """A 2-layer MLP classifier on rows of a table."""

    name = "tabular_mlp"
    family = "mlp"
    sample_unit = "row"
    description = "2-layer MLP on table rows (example of a workload with its own dataset)"
    default_batch_sizes = {"tiny": (64,), "small": (256,), "paper": (1024,)}
    learning_rate = 0.05

    def make_dataset(self, size: str) -> TabularRows:
        return TabularRows({"tiny": 4096, "small": 65536}.get(size, 1 << 20))

    def build_model(self, size: str) -> nn.Module:
        return nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES))

    def make_batch(self, size: str, batch_size: int, device: torch.device,
                   generator: torch.Generator) -> Batch:
        """The synthetic batch (``--data synthetic``, the default)."""
        x = torch.randn(batch_size, FEATURES, generator=generator).to(device)
        y = torch.randint(0, CLASSES, (batch_size,), generator=generator).to(device)
        return x, y

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
