"""The torch input pipeline of ``--data generated|PATH``: a ``DataLoader`` doing a
training job's real work on the CPU.

Each sample is made by :mod:`accelbench.data.transforms` (shared with JAX's loader):
images decoded with Pillow, RandomResizedCrop, flipped and normalised; tokens as random
windows of memory-mapped shards cut into the workload's sample. Random draws use Python's
generator, which the ``DataLoader`` seeds in each worker (and this module, with no workers,
in the step's process): the ranks of a tensor-parallel group read the same batch.
``--loader-workers`` processes prepare batches (0: in the step's own process); on a GPU
the batches are pinned and copied without blocking the host. The step takes each batch
through :class:`~accelbench.data.stall.InputTimer`, which times the wait.
"""

from __future__ import annotations

import random
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


def replica_of(spec: RunSpec) -> tuple[int, int]:
    """(this rank's data-parallel replica, replicas) with a process group of several ranks
    up (:func:`~accelbench.backends.torch.sharding.data_replica`); (0, 1) otherwise."""
    from accelbench.backends.torch.distributed import several_ranks

    if not several_ranks():
        return 0, 1
    import torch.distributed as dist

    from accelbench.backends.torch.sharding import data_replica

    return data_replica(spec, dist.get_rank())


def shard_sampler(dataset: Any, spec: RunSpec) -> Any | None:
    """The disjoint shard of ``dataset`` of this rank's data-parallel replica
    (:func:`replica_of`): torch's ``DistributedSampler`` (shuffled by the case's seed, the
    last partial shard dropped), whose epoch the feed sets at each pass so that every pass
    has a new order; every rank of a tensor-parallel group gets its replica's shard. None
    for one replica (one process, or tp over every rank: the loader shuffles the whole
    dataset as one device's does, alike on every rank)."""
    replica, replicas = replica_of(spec)
    if replicas == 1:
        return None
    from torch.utils.data import DistributedSampler

    return DistributedSampler(dataset, num_replicas=replicas, rank=replica, shuffle=True,
                              seed=spec.seed, drop_last=True)


def draw_seed(seed: int, start: int, replica: int) -> int:
    """The seed of a loader's random draws (its shuffle, and the crops, offsets and masks of
    the workers it seeds): the case's seed and the loader's restart, and the data-parallel
    replica, so that replicas draw apart (a token window's content is its draw) and the
    ranks of one replica alike; replica 0's (one process's) as before replicas."""
    return seed + start + (replica << 32)


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

    sampler = shard_sampler(dataset, spec)  # a rank of a data-parallel case: its shard
    replica = replica_of(spec)[0]

    def make_loader(start: int) -> Any:
        # The ranks of a tensor-parallel group train one batch: the same samples (the
        # sampler) with the same crops, offsets and masks, drawn from Python's generator,
        # which the loader seeds in each worker from its own generator, and this seeds
        # where the step's process reads them.
        seed = draw_seed(spec.seed, start, replica)
        if workers == 0:
            random.seed(seed)
        return DataLoader(dataset, batch_size=per_batch, shuffle=sampler is None,
                          sampler=sampler, num_workers=workers,
                          pin_memory=pin, drop_last=True, persistent_workers=workers > 0,
                          prefetch_factor=PREFETCH if workers > 0 else None,
                          generator=torch.Generator().manual_seed(seed))

    timer = InputTimer({
        "source": source_of(spec.data), "path": where, "layout": layout_name,
        "samples": len(dataset), "loader_workers": workers, "pin_memory": pin,
        "prefetch_factor": PREFETCH if workers > 0 else 0, "loader": "torch DataLoader",
    })
    files = (lambda: dataset_files(where)) if where else None
    skipping = dataset if isinstance(dataset, SkippingSet) else None
    return Feed(make_loader, device, pin, timer, files, skipping), timer
