"""A workload whose own dataset appends ``RANK:INDEX`` to ``$ACCELBENCH_TEST_SHARD_LOG`` at
every read: the data-parallel sharding check (tests/test_data_analysis.py)."""

from __future__ import annotations

import os

from accelbench.workloads.registry import Batch, Workload, register_workload

#: Samples of the dataset (``$ACCELBENCH_TEST_SHARD_SAMPLES``: a smaller one makes the
#: ranks pass over their shards several times).
SAMPLES = int(os.environ.get("ACCELBENCH_TEST_SHARD_SAMPLES", "4096"))
BATCH = 2


class LoggedSet:
    """Samples (8 features, a class of 2) whose reads are logged with the reading rank."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        import torch

        line = f"{os.environ.get('RANK', '-')}:{index}\n".encode()
        fd = os.open(os.environ["ACCELBENCH_TEST_SHARD_LOG"],
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        g = torch.Generator().manual_seed(index)
        return torch.randn(8, generator=g), int(index % 2)


@register_workload
class ShardLog(Workload):
    name = "shard_log"
    family = "test"
    sample_unit = "sample"
    description = "an MLP fed by a dataset that logs which rank read which sample"
    default_batch_sizes = {"tiny": (BATCH,), "small": (BATCH,), "paper": (BATCH,)}

    def make_dataset(self, size):  # type: ignore[no-untyped-def]
        return LoggedSet()

    def build_model(self, size):  # type: ignore[no-untyped-def]
        from torch import nn

        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        import torch

        x = torch.randn(batch_size, 8, generator=generator).to(device)
        y = torch.randint(0, 2, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        from torch import nn

        x, y = batch
        return nn.functional.cross_entropy(model(x), y)
