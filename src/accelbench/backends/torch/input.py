"""The torch input pipeline of ``--data generated|PATH``: a ``DataLoader`` doing a
training job's real work on the CPU.

Images: decoded with Pillow, then RandomResizedCrop (scale 0.08-1, ratio 3/4-4/3, as
torchvision's), a horizontal flip half the time, and normalisation with ImageNet's mean
and standard deviation. Tokens: random windows of memory-mapped shards, cut into the
workload's batch (next-token pairs, masked-LM inputs, or source and target pairs).
``--loader-workers`` processes prepare batches (0: in the step's own process); on a GPU
the batches are pinned and copied without blocking the host. The step takes each batch
through :class:`~accelbench.data.stall.InputTimer`, which times the wait.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accelbench.backends.torch.feed import Feed
from accelbench.data.check import image_files, token_shards
from accelbench.data.layouts import ImageLayout, Layout, TokenLayout, layout_of, source_of
from accelbench.data.pagecache import dataset_files
from accelbench.data.skipping import SkippingSet
from accelbench.data.stall import InputTimer
from accelbench.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from accelbench.spec import RunSpec

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
_MEAN, _STD = np.asarray(MEAN, dtype=np.float32), np.asarray(STD, dtype=np.float32)
# (x / 255 - mean) / std as x * _SCALE - _SHIFT, per channel of a CHW image: one pass to
# float in CHW order and two in place, where the four passes and temporaries of the
# formula cost the loader about a fifth of its rate (benchmarks/input_pipeline.py --loader)
_SCALE = (1.0 / (255.0 * _STD)).astype(np.float32)[:, None, None]
_SHIFT = (_MEAN / _STD).astype(np.float32)[:, None, None]
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)
MASK_FRACTION = 0.15
IGNORE = -100
#: Batches each loader worker prepares ahead (torch's default).
PREFETCH = 2


def _uniform(lo: float, hi: float) -> float:
    # Python's generator: the DataLoader seeds it in each worker; a torch call per draw
    # cost the loader about a seventh of its rate (benchmarks/input_pipeline.py --loader).
    return random.uniform(lo, hi)


def crop_box(width: int, height: int) -> tuple[int, int, int, int]:
    """RandomResizedCrop's box (left, top, right, bottom): torchvision's algorithm, ten
    tries at a random area and aspect ratio, else the centre crop of the allowed ratio."""
    area = width * height
    for _ in range(10):
        target = area * _uniform(*SCALE)
        aspect = math.exp(_uniform(math.log(RATIO[0]), math.log(RATIO[1])))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = random.randint(0, height - h)
            left = random.randint(0, width - w)
            return left, top, left + w, top + h
    ratio = width / height
    w, h = (width, round(width / RATIO[1])) if ratio > RATIO[1] else \
        (round(height * RATIO[0]), height) if ratio < RATIO[0] else (width, height)
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


class ImageFolderSet:
    """A map-style dataset of (normalised CHW float image, class index)."""

    def __init__(self, files: list[tuple[str, int]], side: int) -> None:
        self.files, self.side = files, side

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import torch
        from PIL import Image

        name, label = self.files[index]
        with Image.open(name) as raw:
            raw.load()  # decoded here: the image outlives its file
            img = raw if raw.mode == "RGB" else raw.convert("RGB")  # no copy of an RGB one
        box = crop_box(*img.size)
        img = img.resize((self.side, self.side), Image.Resampling.BILINEAR, box=box)
        if random.random() < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        chw = np.ascontiguousarray(np.asarray(img).transpose(2, 0, 1), dtype=np.float32)
        chw *= _SCALE
        chw -= _SHIFT
        return torch.from_numpy(chw), label


class TokenWindows:
    """A map-style dataset of random token windows: sample i reads a window at a random
    offset of the shard it falls in (shards weighted by their length), shaped as the
    workload's batch (:attr:`TokenLayout.kind`)."""

    def __init__(self, shards: list[Path], dtype: str, layout: TokenLayout) -> None:
        self.shards, self.dtype, self.layout = [str(s) for s in shards], dtype, layout
        item = np.dtype(dtype).itemsize
        self.lengths = [s.stat().st_size // item for s in shards]
        self.starts = list(np.cumsum([n // layout.window for n in self.lengths]))
        self._maps: list[np.memmap] | None = None  # opened in the process that reads

    def __len__(self) -> int:
        return int(self.starts[-1])

    def release(self) -> None:
        """Unmap the shards (reopened at the next read): a mapped page stays in the page
        cache (--input-analysis drops it)."""
        self._maps = None

    def __getitem__(self, index: int) -> tuple[torch.Tensor, ...]:
        import torch

        if self._maps is None:
            self._maps = [np.memmap(s, dtype=self.dtype, mode="r") for s in self.shards]
        shard = bisect.bisect_right(self.starts, index)
        n, span = self.lengths[shard], self.layout.window
        offset = int(torch.randint(0, n - span + 1, ()))
        window = torch.from_numpy(self._maps[shard][offset:offset + span].astype(np.int64))
        return shape_tokens(window, self.layout)


def shape_tokens(w: torch.Tensor, layout: TokenLayout) -> tuple[torch.Tensor, ...]:
    """One sample of the workload's batch from a window ``w`` of token ids."""
    import torch

    seq = layout.seq_len
    if layout.kind == "causal":
        return w[:-1], w[1:]
    if layout.kind == "pairs":
        return w[:seq], w[seq:-1], w[seq + 1:]
    masked = torch.rand(seq) < MASK_FRACTION
    masked[0] = True  # at least one prediction per sequence, as the synthetic batch
    tokens = torch.where(masked, torch.full_like(w, layout.vocab - 1), w)
    labels = torch.where(masked, w, torch.full_like(w, IGNORE))
    types = (torch.arange(seq) >= seq // 2).long()
    return tokens, types, labels


def dataset_path(spec: RunSpec, layout: Layout) -> Path:
    """The folder the case reads: the generated dataset (written now if missing) or the
    user's PATH."""
    if source_of(spec.data) == "generated":
        from accelbench.data.generate import ensure_generated

        return ensure_generated(layout, spec.size)[0]
    return Path(spec.data)


def loader_batch(workload: Any, layout: Layout, batch_size: int) -> int:
    """Samples the loader batches: sequences where the workload counts tokens."""
    if isinstance(layout, TokenLayout) and workload.sample_unit == "token":
        return batch_size // layout.seq_len
    return batch_size


def build_dataset(path: Path, layout: Layout) -> Any:
    """The map-style dataset of ``path`` in ``layout``."""
    if isinstance(layout, ImageLayout):
        # a file that fails to decode is skipped, counted and said (data/skipping.py)
        return SkippingSet(ImageFolderSet(image_files(path), layout.side))
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

    own = getattr(workload, "make_dataset", None)
    if callable(own):  # a plugin workload's own map-style dataset (--data generated)
        dataset, where, layout_name = own(spec.size), "", "plugin"
        per_batch = spec.batch_size
    else:
        layout = layout_of(workload, spec.size)
        path = dataset_path(spec, layout)
        dataset, where, layout_name = build_dataset(path, layout), str(path), layout.name
        per_batch = loader_batch(workload, layout, spec.batch_size)
    if len(dataset) < per_batch:
        raise ConfigError(f"--data {spec.data}: {len(dataset)} samples, fewer than one batch "
                          f"of {per_batch}")
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
