"""The interface of a workload's PyTorch implementation."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from accelbench.workloads.registry import Batch
from accelbench.workloads.sizes import SizeName

if TYPE_CHECKING:
    import torch

    from accelbench.workloads.registry import Workload


class TorchModel(ABC):
    """How one workload is built and trained in PyTorch.

    Registered per workload with ``@register_implementation("name", "torch")``;
    the registry builds it with the workload's framework-neutral description,
    so the size configuration comes from one place (``self.workload.config(size)``).
    The runner calls :meth:`build_model` and :meth:`make_batch` once, outside the
    timed loop, then times ``loss(model, batch).backward()`` plus the optimizer step.
    """

    framework: ClassVar[str] = "torch"

    def __init__(self, workload: Workload) -> None:
        self.workload = workload

    @abstractmethod
    def build_model(self, size: SizeName) -> torch.nn.Module:
        """Build the model at ``size`` on the current default device (CPU or meta)."""

    @abstractmethod
    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Synthetic inputs and targets for one step, created on ``device``.

        ``generator`` is a CPU generator; draw on the CPU and move, or draw on
        the device with a device generator seeded from it.
        """

    @abstractmethod
    def loss(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        """Forward pass and scalar training loss for ``batch``."""
