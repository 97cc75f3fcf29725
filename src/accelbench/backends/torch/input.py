"""The torch input pipeline of ``--data generated|PATH``: a ``DataLoader`` doing a
training job's real work on the CPU.

Each sample is made by :mod:`accelbench.data.transforms` (shared with JAX's loader):
images decoded with Pillow, RandomResizedCrop, flipped and normalised; tokens as random
windows of memory-mapped shards cut into the workload's sample. Random draws use Python's
generator, which the ``DataLoader`` seeds in each worker.
``--loader-workers`` processes prepare batches (0: in the step's own process); on a GPU
the batches are pinned and copied without blocking the host. The step takes each batch
through :class:`~accelbench.data.stall.InputTimer`, which times the wait.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accelbench.backends.torch.feed import Feed
from accelbench.data.check import image_files, token_shards
from accelbench.data.generate import case_dataset
from accelbench.data.layouts import (
    ImageLayout,
    Layout,
    SpeechLayout,
    source_of,
)
from accelbench.data.pagecache import dataset_files
from accelbench.data.skipping import SkippingSet
from accelbench.data.speech import SpeechSamples, speech_files
from accelbench.data.stall import InputTimer
from accelbench.data.transforms import (  # noqa: F401 - MEAN, STD, crop_box: this module's API
    MEAN,
    STD,
    ImageSamples,
    TokenSamples,
    crop_box,
)

if TYPE_CHECKING:
    import torch

    from accelbench.spec import RunSpec

#: Batches each loader worker prepares ahead (torch's default).
PREFETCH = 2


class ImageFolderSet(ImageSamples):
    """A map-style dataset of (normalised CHW float image, class index): the decode and
    augmentation of :mod:`accelbench.data.transforms`, transposed to torch's layout."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import torch

        chw, label = self.sample(index, chw=True)
        return torch.from_numpy(chw), label


class SpeechSet(SpeechSamples):
    """A map-style dataset of (log-mel features ``(1, bins, frames)``, label ids): the
    decode and features of :mod:`accelbench.data.speech`, with torch's channel axis."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        features, ids = self.sample(index)
        return torch.from_numpy(features[None]), torch.from_numpy(ids)


class TokenWindows(TokenSamples):
    """A map-style dataset of random token windows (:class:`TokenSamples`) as int64
    tensors shaped as the workload's batch (:attr:`TokenLayout.kind`)."""

    def release(self) -> None:
        """Unmap the shards (reopened at the next read): a mapped page stays in the page
        cache (--input-analysis drops it)."""
        self._maps = None

    def __getitem__(self, index: int) -> tuple[torch.Tensor, ...]:
        import torch

        return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in self.sample(index))


def build_dataset(path: Path, layout: Layout) -> Any:
    """The map-style dataset of ``path`` in ``layout``."""
    if isinstance(layout, ImageLayout):
        # a file that fails to decode is skipped, counted and said (data/skipping.py)
        return SkippingSet(ImageFolderSet(image_files(path), layout.side))
    if isinstance(layout, SpeechLayout):
        return SpeechSet(speech_files(path), layout)
    shards, dtype, _vocab = token_shards(path)
    return TokenWindows(shards, dtype, layout)


def open_feed(workload: Any, spec: RunSpec, device: torch.device
              ) -> tuple[Callable[[], tuple[torch.Tensor, ...]], InputTimer]:
    """The step's next-batch callable (timed) and its timer.

    Raises:
        ConfigError: the dataset holds fewer samples than one batch.
    """
    import torch
    from torch.utils.data import DataLoader

    found = case_dataset(workload, spec, build_dataset)
    dataset, where, layout_name, per_batch = (found.dataset, found.where, found.layout,
                                               found.per_batch)
    workers = spec.loader_workers or 0
    pin = device.type == "cuda"

    from accelbench.backends.torch.distributed import shard_sampler

    sampler = shard_sampler(dataset, spec.seed)  # a rank of a data-parallel case: its shard

    def make_loader(start: int) -> Any:
        return DataLoader(dataset, batch_size=per_batch, shuffle=sampler is None,
                          sampler=sampler, num_workers=workers,
                          pin_memory=pin, drop_last=True, persistent_workers=workers > 0,
                          prefetch_factor=PREFETCH if workers > 0 else None,
                          generator=torch.Generator().manual_seed(spec.seed + start))

    timer = InputTimer({
        "source": source_of(spec.data), "path": where, "layout": layout_name,
        "samples": len(dataset), "loader_workers": workers, "pin_memory": pin,
        "prefetch_factor": PREFETCH if workers > 0 else 0, "loader": "torch DataLoader",
    })
    files = (lambda: dataset_files(where)) if where else None
    skipping = dataset if isinstance(dataset, SkippingSet) else None
    return Feed(make_loader, device, pin, timer, files, skipping), timer
