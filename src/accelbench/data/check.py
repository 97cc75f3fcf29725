"""A user's dataset (``--data PATH``) checked against the workload before anything runs:
one line naming what does not fit (no such folder, unreadable, empty, the wrong layout,
more classes or larger token ids than the model has, a file that does not decode).

The same walk lists the files the loader reads (:func:`image_files`, :func:`token_shards`),
so the checker and the loader agree on what the dataset is.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelbench.data.layouts import ImageLayout, Layout, SpeechLayout, TokenLayout
from accelbench.errors import ConfigError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
TOKEN_DTYPES = {"uint16": "<u2", "uint32": "<u4"}
#: Images opened and verified up front: the first of each class, up to this many.
VERIFY_IMAGES = 64
#: Token ids scanned per read when a dataset has no ``meta.json`` vocabulary.
SCAN_CHUNK = 1 << 22


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """What the check found: the layout's name, samples (images or tokens) and the
    classes (images) or the id type (tokens)."""

    path: str
    layout: str
    samples: int
    classes: int = 0
    dtype: str = ""


def _folder(path: Path) -> Path:
    if not path.exists():
        raise ConfigError(f"--data {path}: no such file or directory")
    if not path.is_dir():
        raise ConfigError(f"--data {path}: not a directory (a dataset is a folder of class "
                          "folders of images, or of .bin token shards)")
    if not os.access(path, os.R_OK | os.X_OK):
        raise ConfigError(f"--data {path}: not readable by this user")
    return path


def image_files(path: Path) -> list[tuple[str, int]]:
    """(file, class index) of every image, classes in sorted folder order."""
    classes = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    out = []
    for index, folder in enumerate(classes):
        out += [(str(f), index) for f in sorted(folder.iterdir())
                if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file()]
    return out


def check_images(path: Path, layout: ImageLayout) -> DatasetInfo:
    """An ImageFolder dataset for an image model (see the module)."""
    folders = [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    if not folders:
        raise ConfigError(f"--data {path}: no class folders (an image dataset is "
                          "PATH/CLASS/IMAGE.jpg)")
    unreadable = next((f for f in folders if not os.access(f, os.R_OK | os.X_OK)), None)
    if unreadable is not None:
        raise ConfigError(f"--data {path}: class folder {unreadable.name} is not readable")
    if len(folders) > layout.classes:
        raise ConfigError(f"--data {path}: {len(folders)} class folders, more than the "
                          f"model's {layout.classes} classes")
    files = image_files(path)
    if not files:
        raise ConfigError(f"--data {path}: the class folders hold no images "
                          f"({', '.join(IMAGE_SUFFIXES)})")
    firsts = list({label: name for name, label in reversed(files)}.values())
    _verify_images(path, firsts[:VERIFY_IMAGES])
    return DatasetInfo(str(path), layout.name, len(files), classes=len(folders))


def _verify_images(path: Path, names: list[str]) -> None:
    try:
        from PIL import Image
    except ImportError as exc:
        raise ConfigError("--data with images needs Pillow: pip install "
                          "'accelbench[data]'") from exc
    for name in names:
        try:
            with Image.open(name) as img:
                img.verify()
        except Exception as exc:  # Pillow raises many kinds for a bad file
            raise ConfigError(f"--data {path}: {Path(name).relative_to(path)} is not a "
                              f"readable image ({type(exc).__name__})") from None


def token_shards(path: Path) -> tuple[list[Path], str, int | None]:
    """The ``.bin`` shards (sorted), their numpy dtype and ``meta.json``'s vocabulary
    size (None where it has none).

    Raises:
        ConfigError: a ``meta.json`` that is not JSON or names an unknown dtype.
    """
    meta: dict[str, object] = {}
    if (path / "meta.json").is_file():
        try:
            meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--data {path}: meta.json is not readable JSON "
                              f"({type(exc).__name__})") from None
    dtype = str(meta.get("dtype", "uint16"))
    if dtype not in TOKEN_DTYPES:
        raise ConfigError(f"--data {path}: meta.json dtype {dtype!r}; token shards are "
                          f"{' or '.join(TOKEN_DTYPES)}")
    vocab = meta.get("vocab_size")
    shards = sorted(p for p in path.iterdir() if p.suffix == ".bin" and p.is_file())
    return shards, TOKEN_DTYPES[dtype], int(vocab) if isinstance(vocab, int) else None


def check_tokens(path: Path, layout: TokenLayout) -> DatasetInfo:
    """Token shards for a token model (see the module)."""
    shards, dtype, vocab = token_shards(path)
    if not shards:
        raise ConfigError(f"--data {path}: no .bin token shards (a token dataset is "
                          "PATH/*.bin, flat little-endian uint16, with an optional meta.json)")
    item = np.dtype(dtype).itemsize
    total = 0
    for shard in shards:
        if not os.access(shard, os.R_OK):
            raise ConfigError(f"--data {path}: {shard.name} is not readable")
        size = shard.stat().st_size
        if size % item:
            raise ConfigError(f"--data {path}: {shard.name} holds {size} bytes, not whole "
                              f"{item}-byte tokens")
        if size // item < layout.window:
            raise ConfigError(f"--data {path}: {shard.name} holds {size // item} tokens, "
                              f"fewer than one sample's {layout.window}")
        total += size // item
    top = vocab - 1 if vocab is not None else _largest_id(shards, dtype)
    if top > layout.max_token:
        raise ConfigError(f"--data {path}: token ids up to {top}, beyond the model's "
                          f"vocabulary ({layout.max_token + 1} ids usable)")
    return DatasetInfo(str(path), layout.name, total, dtype=np.dtype(dtype).name)


def _largest_id(shards: list[Path], dtype: str) -> int:
    top = 0
    for shard in shards:
        data = np.memmap(shard, dtype=dtype, mode="r")
        for start in range(0, len(data), SCAN_CHUNK):
            top = max(top, int(data[start:start + SCAN_CHUNK].max()))
    return top


#: Utterances opened and checked up front (the first ones, sorted by name).
VERIFY_UTTERANCES = 64


def check_speech(path: Path, layout: SpeechLayout) -> DatasetInfo:
    """WAV files with transcripts for a speech model: every ``*.wav`` has its ``.txt``;
    the first :data:`VERIFY_UTTERANCES` are 16-bit PCM at the layout's rate, at least one
    analysis window long, and their transcripts hold at least the model's characters."""
    import wave

    from accelbench.data.speech import read_wav, speech_files, transcript_ids

    wavs = sorted(p for p in path.rglob("*.wav") if p.is_file())
    if not wavs:
        raise ConfigError(f"--data {path}: no .wav files (a speech dataset is "
                          "PATH/NAME.wav, 16-bit PCM, with its transcript in PATH/NAME.txt)")
    lonely = next((w for w in wavs if not w.with_suffix(".txt").is_file()), None)
    if lonely is not None:
        raise ConfigError(f"--data {path}: {lonely.relative_to(path)} has no transcript "
                          f"{lonely.with_suffix('.txt').name} beside it")
    for wav, txt in speech_files(path)[:VERIFY_UTTERANCES]:
        where = Path(wav).relative_to(path)
        try:
            audio, rate = read_wav(wav)
        except (wave.Error, EOFError, ValueError) as exc:
            raise ConfigError(f"--data {path}: {where} is not a readable 16-bit PCM WAV "
                              f"file ({exc})") from None
        if rate != layout.sample_rate:
            raise ConfigError(f"--data {path}: {where} is sampled at {rate} Hz, not the "
                              f"{layout.sample_rate} Hz the features are made at (resampling "
                              "is not built)")
        if len(audio) < layout.win:
            raise ConfigError(f"--data {path}: {where} holds {len(audio)} samples, fewer "
                              f"than one {layout.win}-sample analysis window")
        chars = len(transcript_ids(Path(txt).read_text(encoding="utf-8", errors="replace")))
        if chars < layout.target_len:
            raise ConfigError(f"--data {path}: {Path(txt).relative_to(path)} holds {chars} "
                              f"transcript characters (a-z, ' and space), fewer than the "
                              f"model's {layout.target_len}")
    return DatasetInfo(str(path), layout.name, len(wavs))


def check_dataset(path: str, layout: Layout) -> DatasetInfo:
    """``path`` checked for ``layout`` (:class:`ConfigError`, one line, when it does not
    fit)."""
    folder = _folder(Path(path))
    try:
        if isinstance(layout, ImageLayout):
            return check_images(folder, layout)
        if isinstance(layout, SpeechLayout):
            return check_speech(folder, layout)
        return check_tokens(folder, layout)
    except PermissionError as exc:
        raise ConfigError(f"--data {path}: not readable ({exc.strerror})") from None
