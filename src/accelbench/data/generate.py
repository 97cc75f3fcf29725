"""Writing a generated dataset, once per layout and size, into the data folder.

Images: JPEG files (Pillow, quality 90) in class folders, at the workload's resolution;
each a smooth random colour field (a few random colours upsampled, as photographs are
mostly low-frequency) with a class tint, so it compresses and decodes like a photograph
rather than like noise. Tokens: flat little-endian ``uint16`` shards of ids drawn from a
Zipf law (the shape of word frequencies in text), with ``meta.json``. Speech: 16-bit
PCM WAV files synthesised from random transcripts, each beside its ``.txt``.

A dataset is written whole or not at all (:mod:`accelbench.data.atomic`): into a temporary
folder beside its final one, renamed into place when complete.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accelbench.data.atomic import write_atomically
from accelbench.data.layouts import (
    ImageLayout,
    Layout,
    SpeechLayout,
    TokenLayout,
    layout_of,
    loader_batch,
    samples_for,
    source_of,
)
from accelbench.data.store import data_root
from accelbench.errors import ConfigError, UnsupportedError

if TYPE_CHECKING:
    from accelbench.spec import RunSpec

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)`` while a dataset is written."""
#: The file a generated dataset's root holds: what it is and how it was made.
MARKER = "accelbench-dataset.json"
#: Most tokens in one shard file.
SHARD_TOKENS = 1 << 24
SEED = 0


def dataset_dir(layout: Layout, size: str, root: Path | None = None) -> Path:
    """Where the generated dataset of ``layout`` at ``size`` lives (or will)."""
    return (root or data_root()) / f"{layout.key()}-{size}"


def ensure_generated(layout: Layout, size: str, *, out: Path | None = None,
                     progress: ProgressFn | None = None) -> tuple[Path, bool]:
    """The generated dataset's folder, written first if missing; and whether it was
    written now. ``out``: the folder to write (default: :func:`dataset_dir`).

    Raises:
        ConfigError: ``out`` exists and is not a dataset accelbench wrote.
        UnsupportedError: Pillow is missing (images).
    """
    target = out if out is not None else dataset_dir(layout, size)

    def write(tmp: Path) -> None:
        count = samples_for(layout, size)
        if isinstance(layout, ImageLayout):
            write_images(tmp, layout, count, progress)
        elif isinstance(layout, SpeechLayout):
            write_speech(tmp, layout, count, progress)
        else:
            write_tokens(tmp, layout, count, progress)
        (tmp / MARKER).write_text(json.dumps(
            {"layout": layout.name, "key": layout.key(), "size": size, "samples": count,
             "seed": SEED}, indent=1) + "\n", encoding="utf-8")

    made = write_atomically(target, write, marker=MARKER,
                            taken="is not a dataset accelbench generated",
                            unwritable="set ACCELBENCH_DATA_DIR or --out to a folder you "
                            "can write")
    return target, made


def pillow(needs: str = "--data with images") -> Any:
    """PIL's ``Image`` module, or one line saying that ``needs`` Pillow and how to install it."""
    try:
        from PIL import Image
    except ImportError as exc:
        raise UnsupportedError(f"{needs} needs Pillow: pip install 'accelbench[data]'") from exc
    return Image


def write_images(folder: Path, layout: ImageLayout, count: int,
                 progress: ProgressFn | None = None) -> None:
    """``count`` JPEGs in ``folder/class_NNN/`` (classes in turn)."""
    image_mod = pillow()
    rng = np.random.default_rng(SEED)
    classes = min(layout.classes, 10)
    tints = rng.integers(0, 256, (classes, 3))
    for c in range(classes):
        (folder / f"class_{c:03d}").mkdir()
    step = max(1, count // 20)
    for i in range(count):
        c = i % classes
        coarse = rng.integers(0, 256, (6, 6, 3)).astype(np.float32)
        coarse = (0.6 * coarse + 0.4 * tints[c]).astype(np.uint8)
        img = image_mod.fromarray(coarse).resize(
            (layout.side, layout.side), image_mod.Resampling.BICUBIC)
        img.save(folder / f"class_{c:03d}" / f"img_{i:07d}.jpg", quality=90)
        if progress is not None and ((i + 1) % step == 0 or i + 1 == count):
            progress(i + 1, count)


def write_tokens(folder: Path, layout: TokenLayout, count: int,
                 progress: ProgressFn | None = None) -> None:
    """``count`` token ids in ``folder/shard_NNN.bin`` (uint16, little-endian) and
    ``meta.json``; ids below ``vocab - 1`` (a masked-LM keeps the last id)."""
    if layout.vocab > 1 << 16:
        raise ConfigError(f"--data generated: vocabulary {layout.vocab} does not fit uint16 "
                          "shards yet")
    rng = np.random.default_rng(SEED)
    top = layout.vocab - 1  # ids 0 .. vocab-2: valid for every kind of window
    ranks = rng.permutation(top)  # which id is the most frequent, second ...
    shards: list[str] = []
    done = 0
    while done < count:
        n = min(SHARD_TOKENS, count - done)
        draws = np.minimum(rng.zipf(1.1, n), top) - 1
        name = f"shard_{len(shards):03d}.bin"
        ranks[draws].astype("<u2").tofile(folder / name)
        shards.append(name)
        done += n
        if progress is not None:
            progress(done, count)
    meta = {"dtype": "uint16", "vocab_size": top, "tokens": count, "shards": shards,
            "source": "ids drawn from a Zipf law (s=1.1)"}
    (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def write_speech(folder: Path, layout: SpeechLayout, count: int,
                 progress: ProgressFn | None = None) -> None:
    """``count`` utterances ``folder/utt_NNNNNNN.wav`` (16-bit PCM, mono, the layout's
    rate and length) synthesised from random transcripts of the model's length, each
    beside its ``.txt`` (:mod:`accelbench.data.speech`)."""
    from accelbench.data.speech import random_transcript, synthesise, write_wav

    rng = np.random.default_rng(SEED)
    step = max(1, count // 20)
    for i in range(count):
        text = random_transcript(layout.target_len, rng)
        write_wav(folder / f"utt_{i:07d}.wav", synthesise(text, layout, rng),
                  layout.sample_rate)
        (folder / f"utt_{i:07d}.txt").write_text(text + "\n", encoding="utf-8")
        if progress is not None and ((i + 1) % step == 0 or i + 1 == count):
            progress(i + 1, count)


def ensure_for(workload: object, size: str, progress: ProgressFn | None = None
               ) -> tuple[Path, bool] | None:
    """:func:`ensure_generated` for a registered workload at ``size``; None for a workload
    that brings its own dataset (``make_dataset``)."""
    from accelbench.data.layouts import layout_of

    if callable(getattr(workload, "make_dataset", None)):
        return None
    return ensure_generated(layout_of(workload, size), size, progress=progress)


def dataset_path(spec: RunSpec, layout: Layout) -> Path:
    """The folder the case reads: the generated dataset (written now if missing) or the
    user's PATH."""
    if source_of(spec.data) == "generated":
        return ensure_generated(layout, spec.size)[0]
    return Path(spec.data)


@dataclass(frozen=True, slots=True)
class CaseDataset:
    """The dataset a case reads, made by its backend's ``build``, and how it is batched."""

    dataset: Any
    where: str
    """The folder read (empty for a plugin's own dataset)."""
    layout: str
    """The layout's name (``plugin`` for a plugin's own dataset)."""
    per_batch: int
    """Samples the loader batches (sequences where the workload counts tokens)."""


def case_dataset(workload: Any, spec: RunSpec, build: Callable[[Path, Layout], Any]
                 ) -> CaseDataset:
    """The dataset of a case with ``--data generated|PATH``: a plugin workload's own
    (``make_dataset``), else ``build(folder, layout)`` over the generated dataset (written
    now if missing) or the user's PATH.

    Raises:
        ConfigError: the dataset holds fewer samples than one batch.
    """
    own = getattr(workload, "make_dataset", None)
    if callable(own):  # a plugin workload's own map-style dataset (--data generated)
        found = CaseDataset(own(spec.size), "", "plugin", spec.batch_size)
    else:
        layout = layout_of(workload, spec.size)
        path = dataset_path(spec, layout)
        found = CaseDataset(build(path, layout), str(path), layout.name,
                            loader_batch(workload, layout, spec.batch_size))
    if len(found.dataset) < found.per_batch:
        raise ConfigError(f"--data {spec.data}: {len(found.dataset)} samples, fewer than one "
                          f"batch of {found.per_batch}")
    return found
