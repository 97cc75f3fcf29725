"""The to-target datasets on disk, in the layouts of ``--data generated|PATH``
(docs/data.md), with a held-out split.

A to-target dataset is a folder holding two datasets in issue 41's layouts: ``train/``
(what is trained on) and ``val/`` (the held-out split, never trained on). Images are class
folders (``train/class_000/img_0000000.png``); tokens are flat little-endian ``uint16``
shards (``train/shard_000.bin``) with their ``meta.json``. ``accelbench train --data PATH``
reads a user's folder of the same shape; ``--data generated`` (and ``digits``) writes the
recipe's learnable data there once, into the data folder of :func:`~accelbench.data.store.
data_root`, under a name keyed by the content (the recipe's data fields and
:data:`GENERATOR_VERSION`), so a changed recipe or generator writes a new folder and an
unchanged one is read again.

Images are lossless PNG: a generated image x (template plus noise, floats) is stored as the
8-bit pixel ``clip(round(x * scale + 128))`` with ``scale = 32 / sqrt(1 + noise**2)`` (the
values' standard deviation is sqrt(1 + noise**2): 4 of them fit either side of 128), and
read back as ``(pixel - 128) / scale`` (:data:`META`'s ``pixel_scale`` and
``pixel_shift``), so the model sees the in-memory source's values to within the
quantisation step (1/scale, a tenth of the noise's standard deviation at noise 3) and the
floor of :mod:`accelbench.totarget.learnable` still holds. The digits are stored as their 17
grey levels times 15 and read back standardised, as :class:`~accelbench.totarget.learnable.
DigitsSource` makes them. A user's images are normalised with ImageNet's mean and standard
deviation (:mod:`accelbench.data.transforms`).

Token windows of the Markov chain are written as ``rows`` independent runs of the chain,
one shard each (a window never straddles two runs).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accelbench.data.atomic import is_complete, write_atomically
from accelbench.data.check import IMAGE_SUFFIXES, check_dataset
from accelbench.data.generate import pillow
from accelbench.data.layouts import ImageLayout, Layout, SpeechLayout, TokenLayout, layout_of
from accelbench.data.store import data_root
from accelbench.data.transforms import IMAGENET_SCALE, IMAGENET_SHIFT
from accelbench.errors import ConfigError
from accelbench.totarget.learnable import DigitsSource, ImageSource, MarkovSource

if TYPE_CHECKING:
    from accelbench.totarget.recipes import Recipe

#: Bumped whenever the bytes written for the same recipe change (part of the cache key).
GENERATOR_VERSION = 1
#: The file a written to-target dataset's root holds: what it is and how to read it.
META = "accelbench-totarget.json"
TRAIN, HELD_OUT = "train", "val"
#: Token runs (one shard each) of a generated training split, and of its held-out split.
TOKEN_ROWS, HELD_OUT_ROWS = 8, 2


@dataclass(frozen=True, slots=True)
class DiskData:
    """A to-target dataset on disk: its folder, layout and how its pixels are read."""

    root: Path
    layout: Layout
    pixel_scale: tuple[float, float, float]
    """Images: value = pixel * scale - shift, per channel (RGB)."""
    pixel_shift: tuple[float, float, float]

    @property
    def train(self) -> Path:
        return self.root / TRAIN

    @property
    def held_out(self) -> Path:
        return self.root / HELD_OUT


def totarget_layout(workload: Any, recipe: Recipe) -> Layout:
    """The on-disk layout ``recipe``'s workload reads (issue 41's, :func:`layout_of`)."""
    return layout_of(workload, recipe.size)


def data_fields(recipe: Recipe, layout: Layout) -> dict[str, Any]:
    """What the generated dataset of ``recipe`` depends on: its cache key's content."""
    base: dict[str, Any] = {"generator": GENERATOR_VERSION, "data": recipe.data,
                            "seed": recipe.data_seed}
    if isinstance(layout, ImageLayout):
        base |= {"side": layout.side}
        if recipe.data == "digits":
            return base
        return base | {"classes": layout.classes, "noise": recipe.noise,
                       "train": recipe.train_samples, "held_out": recipe.eval_sequences}
    if isinstance(layout, SpeechLayout):
        return base | {"speech": layout.key(), "train": recipe.train_samples,
                       "held_out": recipe.eval_sequences}
    assert isinstance(layout, TokenLayout)
    return base | {"vocab": layout.vocab, "states": recipe.states, "branching": recipe.branching,
                   "train_tokens": recipe.train_samples,
                   "held_out_tokens": _held_out_tokens(recipe, layout)}


def _held_out_tokens(recipe: Recipe, layout: TokenLayout) -> int:
    """Tokens of the held-out shards: room for ``eval_sequences`` windows many times over."""
    return max(4096, 8 * recipe.eval_sequences * layout.window)


def dataset_key(fields: dict[str, Any]) -> str:
    """A short hash of ``fields`` (sorted JSON)."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def generated_dir(recipe: Recipe, layout: Layout, root: Path | None = None) -> Path:
    """Where the generated dataset of ``recipe`` lives (or will)."""
    kind = ("images" if isinstance(layout, ImageLayout) else
            "speech" if isinstance(layout, SpeechLayout) else "tokens")
    return (root or data_root()) / (f"totarget-{recipe.data}-{kind}-"
                                     f"{dataset_key(data_fields(recipe, layout))}")


def ensure_dataset(recipe: Recipe, layout: Layout, *, root: Path | None = None,
                   on_write: Callable[[Path], None] | None = None) -> DiskData:
    """The dataset ``recipe`` trains on, on disk: a user's folder (checked), or the
    generated one (written first if missing; ``on_write(folder)`` is called then).

    Raises:
        ConfigError: a user's folder without ``train/`` or ``val/``, or one that does not
            fit the workload's layout; a data folder that cannot be written.
    """
    if recipe.data == "path":
        return user_dataset(Path(recipe.data_path), layout)
    target = generated_dir(recipe, layout, root)
    if not is_complete(target, META):
        if on_write is not None:
            on_write(target)
        write_atomically(target, lambda tmp: _write(tmp, recipe, layout), marker=META,
                         taken="is not a to-target dataset accelbench wrote",
                         unwritable="set ACCELBENCH_DATA_DIR to a folder you can write")
    meta = json.loads((target / META).read_text(encoding="utf-8"))
    sc, sh = meta["pixel_scale"], meta["pixel_shift"]
    return DiskData(target, layout, (sc[0], sc[1], sc[2]), (sh[0], sh[1], sh[2]))


def user_dataset(path: Path, layout: Layout) -> DiskData:
    """A user's to-target folder: ``train/`` and ``val/``, each in ``layout``; images
    normalised with ImageNet's mean and standard deviation."""
    if not path.is_dir():
        raise ConfigError(f"--data {path}: no such folder (generated, digits, or a folder "
                          f"with {TRAIN}/ and {HELD_OUT}/)")
    for split in (TRAIN, HELD_OUT):
        if not (path / split).is_dir():
            what = "held-out split" if split == HELD_OUT else "training split"
            raise ConfigError(f"--data {path}: no {what} {path / split} (train reads "
                              f"PATH/{TRAIN} and PATH/{HELD_OUT}, each in the layout of "
                              "docs/data.md)")
    for split in (TRAIN, HELD_OUT):
        check_dataset(str(path / split), layout)
    if isinstance(layout, ImageLayout):  # a held-out class is named as a trained one
        train, held = (set(class_names(path / s)) for s in (TRAIN, HELD_OUT))
        if not held <= train:
            raise ConfigError(f"--data {path}: {HELD_OUT}/ has class folders {TRAIN}/ has "
                              f"not ({', '.join(sorted(held - train)[:3])})")
    scale = (float(IMAGENET_SCALE[0]), float(IMAGENET_SCALE[1]), float(IMAGENET_SCALE[2]))
    shift = (float(IMAGENET_SHIFT[0]), float(IMAGENET_SHIFT[1]), float(IMAGENET_SHIFT[2]))
    return DiskData(path, layout, scale, shift)


def class_names(folder: Path) -> list[str]:
    """The class folders of an image split, sorted (a class's index is its place)."""
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def held_out_images(disk: DiskData) -> list[tuple[str, int]]:
    """(file, class index) of the held-out images, each class indexed by its place among
    the training split's class folders (a held-out split may lack a class)."""
    index = {name: i for i, name in enumerate(class_names(disk.train))}
    return [(str(f), index[c]) for c in class_names(disk.held_out)
            for f in sorted((disk.held_out / c).iterdir())
            if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file()]


def _write(folder: Path, recipe: Recipe, layout: Layout) -> None:
    meta: dict[str, Any] = {"recipe": f"{recipe.workload} {recipe.size}",
                            "fields": data_fields(recipe, layout)}
    if isinstance(layout, ImageLayout) and recipe.data == "digits":
        scale, shift = write_digits(folder, layout.side)
    elif isinstance(layout, ImageLayout):
        source = recipe.images(classes=layout.classes, side=layout.side)
        scale, shift = write_templates(folder, source, recipe.train_samples,
                                       recipe.eval_sequences, recipe.data_seed)
    elif isinstance(layout, SpeechLayout):
        write_utterances(folder, layout, recipe.train_samples, recipe.eval_sequences,
                         recipe.data_seed)
        scale, shift = 1.0, 0.0
    else:
        assert isinstance(layout, TokenLayout)
        write_chain(folder, recipe.markov(), layout.vocab, recipe.train_samples,
                    _held_out_tokens(recipe, layout), recipe.data_seed)
        scale, shift = 1.0, 0.0
    meta |= {"pixel_scale": [scale] * 3, "pixel_shift": [shift] * 3}
    (folder / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def _save_images(folder: Path, pixels: np.ndarray, labels: np.ndarray, classes: int
                 ) -> None:
    """(count, side, side, 3) uint8 ``pixels`` as PNGs in ``folder/class_NNN/`` (a folder
    for each of ``classes``, so both splits index the classes alike)."""
    image = pillow("accelbench train with image data")
    for c in range(classes):
        (folder / f"class_{c:03d}").mkdir(parents=True, exist_ok=True)
    for i, (px, c) in enumerate(zip(pixels, labels, strict=True)):
        image.fromarray(px).save(folder / f"class_{int(c):03d}" / f"img_{i:07d}.png",
                                 compress_level=1)


def template_scale(noise: float) -> float:
    """Pixel units per unit of a generated image (see the module)."""
    return 32.0 / math.sqrt(1.0 + noise * noise)


def write_templates(folder: Path, source: ImageSource, train: int, held_out: int,
                    seed: int) -> tuple[float, float]:
    """``train`` and ``held_out`` images of ``source`` (the held-out ones drawn from their
    own generator, seeded ``seed + 1``) as PNGs; the (scale, shift) that reads them back."""
    scale = template_scale(source.noise)
    for split, count, rng in ((TRAIN, train, np.random.default_rng(seed + 2)),
                              (HELD_OUT, held_out, np.random.default_rng(seed + 1))):
        done = 0
        while done < count:  # in chunks: a large split never sits in memory at once
            n = min(1024, count - done)
            x, y = source.sample(n, rng)
            px = np.clip(np.rint(x * scale + 128.0), 0, 255).astype(np.uint8)
            _save_images(folder / split, px.transpose(0, 2, 3, 1), y,
                         len(source.templates))
            done += n
    return 1.0 / scale, 128.0 / scale


def write_digits(folder: Path, side: int) -> tuple[float, float]:
    """scikit-learn's digits at ``side`` (the last ones held out, as :class:`DigitsSource`)
    as PNGs of their grey levels times 15; the (scale, shift) that standardises them."""
    digits = DigitsSource.load(side=8)  # checks scikit-learn is there
    from sklearn.datasets import load_digits

    d = load_digits()
    raw = d.images.astype(np.float64)
    grey = np.kron(raw, np.ones((side // 8, side // 8))).astype(np.uint8) * 15
    px = np.repeat(grey[..., None], 3, axis=3)
    n = len(digits.train_y)
    _save_images(folder / TRAIN, px[:n], d.target[:n], 10)
    _save_images(folder / HELD_OUT, px[n:], d.target[n:], 10)
    mean, std = float(raw.mean()), float(raw.std())
    return 1.0 / (15.0 * std), mean / std


def write_chain(folder: Path, chain: MarkovSource, vocab: int, train_tokens: int,
                held_out_tokens: int, seed: int) -> None:
    """Runs of ``chain`` as ``uint16`` shards: ``train_tokens`` in :data:`TOKEN_ROWS` runs
    under ``train/``, ``held_out_tokens`` in :data:`HELD_OUT_ROWS` under ``val/``, each
    split with its ``meta.json``."""
    for split, total, rows, rng in (
            (TRAIN, train_tokens, TOKEN_ROWS, np.random.default_rng(seed + 2)),
            (HELD_OUT, held_out_tokens, HELD_OUT_ROWS, np.random.default_rng(seed + 1))):
        (folder / split).mkdir()
        runs = chain.sample(rows, math.ceil(total / rows), rng)
        names = []
        for r, run in enumerate(runs):
            names.append(f"shard_{r:03d}.bin")
            run.astype("<u2").tofile(folder / split / names[-1])
        meta = {"dtype": "uint16", "vocab_size": vocab, "tokens": int(runs.size),
                "shards": names, "source": f"Markov chain over {chain.transition.shape[0]} "
                f"ids, seed {chain.seed} (accelbench train)"}
        (folder / split / "meta.json").write_text(json.dumps(meta, indent=1) + "\n",
                                                   encoding="utf-8")


def write_utterances(folder: Path, layout: SpeechLayout, train: int, held_out: int,
                     seed: int) -> None:
    """``train`` and ``held_out`` utterances synthesised from random transcripts
    (:mod:`accelbench.data.speech`: each character its own pair of formants), as WAV
    files with their ``.txt`` under ``train/`` and ``val/`` (the held-out ones from their
    own generator, seeded ``seed + 1``)."""
    from accelbench.data.speech import random_transcript, synthesise, write_wav

    for split, count, rng in ((TRAIN, train, np.random.default_rng(seed + 2)),
                              (HELD_OUT, held_out, np.random.default_rng(seed + 1))):
        (folder / split).mkdir()
        for i in range(count):
            text = random_transcript(layout.target_len, rng)
            write_wav(folder / split / f"utt_{i:07d}.wav", synthesise(text, layout, rng),
                      layout.sample_rate)
            (folder / split / f"utt_{i:07d}.txt").write_text(text + "\n", encoding="utf-8")
