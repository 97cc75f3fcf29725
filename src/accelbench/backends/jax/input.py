"""The JAX input pipeline of ``--data generated|PATH``: the torch pipeline's work on the
same files (:mod:`accelbench.data.transforms`: JPEG decode with Pillow, RandomResizedCrop,
flip, normalise; random windows of memory-mapped token shards), batched by
:class:`~accelbench.data.loader.BatchLoader` (``--loader-workers`` spawned processes, each
preparing :data:`PREFETCH` batches ahead; 0: in the step's own process) and put on the
step's device with ``jax.device_put`` (asynchronous, as torch's pinned non-blocking copy);
on a one-process mesh (``--devices N``) each step reads one batch per data-parallel
replica and ``jax.device_put`` splits the rows over them with the batch's
``NamedSharding`` (:func:`open_feed`).
The step takes each batch through :class:`~accelbench.data.stall.InputTimer`, so the
record's ``input`` section has the same fields as torch's.

Batches are shaped as the JAX models' synthetic ones: images NHWC float32, ids and labels
int32.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from accelbench.data.check import image_files, token_shards
from accelbench.data.generate import case_dataset
from accelbench.data.layouts import (
    ImageLayout,
    Layout,
    SpeechLayout,
    source_of,
)
from accelbench.data.loader import BatchLoader
from accelbench.data.skipping import DataError, SkippingSet, stop_reason
from accelbench.data.speech import SpeechSamples, speech_files
from accelbench.data.stall import InputTimer
from accelbench.data.transforms import ImageSamples, TokenSamples
from accelbench.errors import ConfigError
from accelbench.spec import RunSpec

#: Batches each loader worker prepares ahead (as torch's DataLoader's default).
PREFETCH = 2
LOADER = "accelbench BatchLoader (spawned worker processes) + jax.device_put"


def build_samples(path: Any, layout: Layout) -> Any:
    """The framework-neutral dataset of ``path`` in ``layout`` (numpy samples)."""
    if isinstance(layout, ImageLayout):
        # a file that fails to decode is skipped, counted and said (data/skipping.py)
        return SkippingSet(ImageSamples(image_files(path), layout.side))
    if isinstance(layout, SpeechLayout):
        return SpeechSamples(speech_files(path), layout)
    shards, dtype, _vocab = token_shards(path)
    return TokenSamples(shards, dtype, layout)


def _for_jax(a: np.ndarray) -> np.ndarray:
    """64-bit numbers as JAX holds them without x64: int32 ids, float32 values."""
    if a.dtype == np.int64:
        return a.astype(np.int32)
    if a.dtype == np.float64:
        return a.astype(np.float32)
    return a


def open_feed(workload: Any, spec: RunSpec, place: Callable[[tuple[Any, ...]], Any],
              replicas: int = 1) -> tuple[Callable[[], tuple[Any, ...]], InputTimer]:
    """The step's next-batch callable (timed; each host batch through ``place``: a
    ``jax.device_put`` on the step's device, or on a mesh's batch shardings) and its timer.

    ``replicas``: the data-parallel replicas of a JAX mesh (``data`` x ``fsdp``); each
    step's batch is then ``replicas`` loader batches' rows, distinct samples for each
    replica (as torch's ranks each read their own shard), which ``place`` splits over them.

    Raises:
        ConfigError: the dataset holds fewer samples than one (global) batch.
    """
    found = case_dataset(workload, spec, build_samples)
    dataset, where, layout_name, per_batch = (found.dataset, found.where, found.layout,
                                               found.per_batch)
    if replicas > 1:
        if len(dataset) < per_batch * replicas:
            raise ConfigError(f"--data {spec.data}: {len(dataset)} samples, fewer than one "
                              f"global batch of {per_batch * replicas} ({per_batch} for each "
                              f"of the mesh's {replicas} data-parallel replicas)")
        per_batch *= replicas
    workers = spec.loader_workers or 0
    loader = BatchLoader(dataset, per_batch, workers, PREFETCH, spec.seed)
    # Speech features (N, bins, frames) take the JAX model's trailing channel axis.
    channel = layout_name == "wav_transcripts"

    skipping = dataset if isinstance(dataset, SkippingSet) else None
    seen = [0]  # the skip log's size when last read

    def fetch() -> tuple[Any, ...]:
        try:
            raw = next(loader)
        except RuntimeError:  # a worker's DataError arrives as its words: say it as torch does
            failed = skipping.skips.read() if skipping is not None else {}
            if skipping is None or len(failed) <= skipping.limit:
                raise
            raise DataError(stop_reason(failed, len(skipping), skipping.limit)) from None
        batch = tuple(_for_jax(a) for a in raw)
        if skipping is not None and skipping.skips.size() != seen[0]:
            seen[0] = skipping.skips.size()
            timer.facts["skipped"] = skipping.skipped()
        if channel:
            batch = (batch[0][..., None], *batch[1:])
        return tuple(place(batch))

    timer = InputTimer({
        "source": source_of(spec.data), "path": where, "layout": layout_name,
        "samples": len(dataset), "loader_workers": workers, "pin_memory": False,
        "prefetch_factor": PREFETCH if workers > 0 else 0, "loader": LOADER,
    })
    if skipping is not None:
        timer.facts["skipped"] = skipping.skipped()
    weakref.finalize(timer, loader.close)  # the workers stop with the step's timer
    return (lambda: timer.take(fetch)), timer


def mesh_batch_shardings(batch: tuple[Any, ...], mesh: Any) -> tuple[Any, ...]:
    """Each loaded array's ``NamedSharding`` on a one-process mesh: its rows (the first
    axis) split over ``data`` x ``fsdp`` (each replica its own samples), whole over
    ``tensor``; the batch's arrays all have the batch's rows first."""
    from jax.sharding import NamedSharding, PartitionSpec

    split = NamedSharding(mesh, PartitionSpec(("data", "fsdp")))
    return tuple(split for _ in batch)
