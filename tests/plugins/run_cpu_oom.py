"""A workload whose step asks the CPU allocator for 4 EiB: a real allocation failure
(``DefaultCPUAllocator: can't allocate memory``), which must be stored as ``oom``."""

from __future__ import annotations

import torch
from torch import nn

from accelbench.workloads.registry import Batch, Workload, register_workload


@register_workload
class CpuOom(Workload):
    name = "run_cpu_oom"
    family = "test"
    sample_unit = "sample"
    default_batch_sizes = {"tiny": (4,), "small": (4,), "paper": (4,)}

    def build_model(self, size):  # type: ignore[no-untyped-def]
        return nn.Linear(8, 2)

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        return (torch.randn(batch_size, 8, generator=generator).to(device),)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        big = torch.empty(2**62, dtype=torch.uint8)  # 4 EiB: no machine has it
        return model(batch[0]).sum() + big[0]
