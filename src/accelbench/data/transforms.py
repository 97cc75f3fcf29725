"""The framework-neutral work of an input pipeline: one sample read from disk and made
ready for training, as numpy arrays. Both backends' loaders call these (torch's
``DataLoader`` through :mod:`accelbench.backends.torch.input`, JAX's through
:mod:`accelbench.backends.jax.input`), so the two frameworks do the same work on the same
files and, given the same random draws, read the same samples.

Images: decoded with Pillow, then RandomResizedCrop (scale 0.08-1, ratio 3/4-4/3, as
torchvision's), a horizontal flip half the time, and normalisation with ImageNet's mean
and standard deviation, to a ``(side, side, 3)`` float32 array (HWC; torch transposes to
CHW). Tokens: a window at a random offset of a memory-mapped shard, cut into the
workload's sample (next-token pairs, masked-LM inputs, or a source and a target pair).

Every random draw comes from ``rng`` (a :class:`random.Random`; by default Python's global
generator, which torch's ``DataLoader`` seeds in each worker): a loader seeds it, and two
loaders seeded alike draw the same crops, flips, offsets and masks.
"""

from __future__ import annotations

import bisect
import math
import random
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.data.layouts import TokenLayout

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
_MEAN, _STD = np.asarray(MEAN, dtype=np.float32), np.asarray(STD, dtype=np.float32)
# (x / 255 - mean) / std as x * _SCALE - _SHIFT per channel: the formula's four passes and
# temporaries cost the loader about a fifth of its rate (benchmarks/input_pipeline.py --loader)
_SCALE = (1.0 / (255.0 * _STD)).astype(np.float32)
_SHIFT = (_MEAN / _STD).astype(np.float32)
_SCALE_CHW, _SHIFT_CHW = _SCALE[:, None, None], _SHIFT[:, None, None]
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)
MASK_FRACTION = 0.15
IGNORE = -100

Rng = Any
"""A :class:`random.Random` or the :mod:`random` module itself (its global generator)."""


def crop_box(width: int, height: int, rng: Rng = random) -> tuple[int, int, int, int]:
    """RandomResizedCrop's box (left, top, right, bottom): torchvision's algorithm, ten
    tries at a random area and aspect ratio, else the centre crop of the allowed ratio."""
    # Python's generator: a numpy or torch call per draw cost the loader about a seventh
    # of its rate (benchmarks/input_pipeline.py --loader).
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(*SCALE)
        aspect = math.exp(rng.uniform(math.log(RATIO[0]), math.log(RATIO[1])))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = rng.randint(0, height - h)
            left = rng.randint(0, width - w)
            return left, top, left + w, top + h
    ratio = width / height
    w, h = (width, round(width / RATIO[1])) if ratio > RATIO[1] else \
        (round(height * RATIO[0]), height) if ratio < RATIO[0] else (width, height)
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


def decode_augment(name: str, side: int, rng: Rng = random, *, chw: bool = False
                   ) -> np.ndarray:
    """The image file ``name`` decoded, cropped, resized to ``side``, flipped half the time
    and normalised: a ``(side, side, 3)`` float32 array, or ``(3, side, side)`` with
    ``chw`` (torch's layout, made in the same pass as the conversion to float)."""
    from PIL import Image

    with Image.open(name) as raw:
        raw.load()  # decoded here: the image outlives its file
        img = raw if raw.mode == "RGB" else raw.convert("RGB")  # no copy of an RGB one
    width, height = img.size
    box = crop_box(width, height, rng)
    img = img.resize((side, side), Image.Resampling.BILINEAR, box=box)
    if rng.random() < 0.5:
        img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if chw:  # one pass to float in CHW order, then two in place
        planes = np.ascontiguousarray(np.asarray(img).transpose(2, 0, 1), dtype=np.float32)
        planes *= _SCALE_CHW
        planes -= _SHIFT_CHW
        return planes
    pixels = np.array(img, dtype=np.float32)  # one pass to float, then two in place
    pixels *= _SCALE
    pixels -= _SHIFT
    return pixels


def decode_plain(name: str, side: int, scale: np.ndarray, shift: np.ndarray, *,
                 chw: bool = False) -> np.ndarray:
    """The image file ``name`` decoded without augmentation (no crop, no flip; resized
    to ``side`` where it is not already, bilinear), each channel as ``pixel * scale -
    shift``: a ``(side, side, 3)`` float32 array, or ``(3, side, side)`` with ``chw``.
    Training to a target reads its images so (docs/totarget.md)."""
    from PIL import Image

    with Image.open(name) as raw:
        raw.load()
        img = raw if raw.mode == "RGB" else raw.convert("RGB")
    if img.size != (side, side):
        img = img.resize((side, side), Image.Resampling.BILINEAR)
    if chw:
        planes = np.ascontiguousarray(np.asarray(img).transpose(2, 0, 1), dtype=np.float32)
        planes *= scale.astype(np.float32)[:, None, None]
        planes -= shift.astype(np.float32)[:, None, None]
        return planes
    pixels = np.array(img, dtype=np.float32)
    pixels *= scale.astype(np.float32)
    pixels -= shift.astype(np.float32)
    return pixels


#: ImageNet's normalisation as ``pixel * IMAGENET_SCALE - IMAGENET_SHIFT`` per channel.
IMAGENET_SCALE, IMAGENET_SHIFT = _SCALE, _SHIFT


class PlainImageSamples:
    """(float32 image, class index) of an ImageFolder's files, read by
    :func:`decode_plain` (no random draws: ``rng`` is taken for the loaders' sake)."""

    def __init__(self, files: list[tuple[str, int]], side: int,
                 scale: tuple[float, ...], shift: tuple[float, ...]) -> None:
        self.files, self.side = files, side
        self.scale = np.asarray(scale, dtype=np.float32)
        self.shift = np.asarray(shift, dtype=np.float32)

    def __len__(self) -> int:
        return len(self.files)

    def sample(self, index: int, rng: Rng = random, *, chw: bool = False
               ) -> tuple[np.ndarray, int]:
        name, label = self.files[index]
        return decode_plain(name, self.side, self.scale, self.shift, chw=chw), label


class ImageSamples:
    """(normalised HWC float32 image, class index) of an ImageFolder's files."""

    def __init__(self, files: list[tuple[str, int]], side: int) -> None:
        self.files, self.side = files, side

    def __len__(self) -> int:
        return len(self.files)

    def sample(self, index: int, rng: Rng = random, *, chw: bool = False
               ) -> tuple[np.ndarray, int]:
        name, label = self.files[index]
        return decode_augment(name, self.side, rng, chw=chw), label


class TokenSamples:
    """Random token windows: sample i reads a window at a random offset of the shard it
    falls in (shards weighted by their length), shaped as the workload's sample
    (:func:`shape_tokens`), int64 arrays."""

    def __init__(self, shards: list[Path], dtype: str, layout: TokenLayout) -> None:
        self.shards, self.dtype, self.layout = [str(s) for s in shards], dtype, layout
        item = np.dtype(dtype).itemsize
        self.lengths = [s.stat().st_size // item for s in shards]
        self.starts = [int(x) for x in np.cumsum([n // layout.window for n in self.lengths])]
        self._maps: list[np.memmap] | None = None  # opened in the process that reads

    def __len__(self) -> int:
        return self.starts[-1]

    def __getstate__(self) -> dict[str, Any]:
        # Memory maps are opened again in each worker process, never pickled.
        return {**self.__dict__, "_maps": None}

    def window(self, index: int, rng: Rng = random) -> np.ndarray:
        """Sample ``index``'s window of token ids (int64)."""
        if self._maps is None:
            self._maps = [np.memmap(s, dtype=self.dtype, mode="r") for s in self.shards]
        shard = bisect.bisect_right(self.starts, index)
        n, span = self.lengths[shard], self.layout.window
        offset = rng.randint(0, n - span)
        return self._maps[shard][offset:offset + span].astype(np.int64)

    def sample(self, index: int, rng: Rng = random) -> tuple[np.ndarray, ...]:
        return shape_tokens(self.window(index, rng), self.layout, rng)


def shape_tokens(w: np.ndarray, layout: TokenLayout, rng: Rng = random
                 ) -> tuple[np.ndarray, ...]:
    """One sample of the workload's batch from a window ``w`` of token ids."""
    seq = layout.seq_len
    if layout.kind == "causal":
        return w[:-1], w[1:]
    if layout.kind == "pairs":
        return w[:seq], w[seq:-1], w[seq + 1:]
    draws = np.random.default_rng(rng.getrandbits(64)).random(seq)
    masked = draws < MASK_FRACTION
    masked[0] = True  # at least one prediction per sequence, as the synthetic batch
    tokens = np.where(masked, layout.vocab - 1, w)
    labels = np.where(masked, w, IGNORE)
    types = (np.arange(seq) >= seq // 2).astype(np.int64)
    return tokens, types, labels
