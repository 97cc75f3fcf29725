"""Training to a target in PyTorch: the workload's own model and loss, the recipe's optimizer
and warm-up, the learnable data of :mod:`accelbench.totarget.learnable`, a held-out
evaluation every ``eval_every`` samples, and a stop at the target, a cap or a non-finite loss.

The training clock starts before the first batch is drawn and runs through evaluations (as
MLPerf's does); building the model, the optimizer and the data sources is timed apart as
start-up.

On an accelerator (``device`` ``cuda:N``, ``mps``) the model, the held-out split and every
batch live there: the ``DataLoader`` pins its batches in page-locked memory and each is
copied with ``non_blocking`` (as ``run --data`` feeds a GPU), the evaluation runs there, and
the device is synchronised before the clock starts and after each step's update, and each
evaluation reads its metric back to the host, so every reading of the clock follows the
device's work. fp32 is true fp32 (TF32 off, as ``run --precision fp32``).

A run that reads its data from disk times the step's wait for each batch with ``run
--data``'s :class:`~accelbench.data.stall.InputTimer` (the outcome's ``input``).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from accelbench.backends.base import get_backend
from accelbench.backends.probe import device_refusal
from accelbench.backends.torch.backend import normalize_device
from accelbench.backends.torch.input import PREFETCH, SpeechSet, TokenWindows
from accelbench.backends.torch.step import configure_math
from accelbench.data.check import image_files, token_shards
from accelbench.data.layouts import ImageLayout, SpeechLayout, TokenLayout
from accelbench.data.speech import speech_files
from accelbench.data.stall import InputTimer
from accelbench.data.transforms import IGNORE, PlainImageSamples, shape_tokens
from accelbench.errors import ConfigError, UnsupportedError
from accelbench.totarget.learnable import (
    DigitsSource,
    ImageSource,
    character_error_rate,
    greedy_ctc,
)
from accelbench.totarget.loop import train_loop
from accelbench.totarget.ondisk import (
    DiskData,
    ensure_dataset,
    held_out_images,
    totarget_layout,
)
from accelbench.totarget.outcome import Limits, RunOutcome
from accelbench.totarget.recipes import Recipe
from accelbench.workloads.registry import get_implementation, get_workload


class _Data:
    """Training batches and the fixed held-out split of one recipe, as tensors: read
    through the input pipeline from the dataset on disk (``recipe.feed == "files"``), or
    drawn in memory from the source, fresh each step (``"memory"``)."""

    def __init__(self, recipe: Recipe, seed: int, device: torch.device | None = None
                 ) -> None:
        self.recipe = recipe
        self.device = device or torch.device("cpu")
        self.pin = self.device.type == "cuda"
        """Batches pinned by the loader and copied without blocking (``run --data``'s rule)."""
        self.timer: InputTimer | None = None
        """The step's wait for each batch read from disk (None: drawn in memory)."""
        self.rng = np.random.default_rng(seed)
        held_out = np.random.default_rng(recipe.data_seed + 1)
        wl = get_workload(recipe.workload)
        self.seq_len = 0
        self.images: ImageSource | DigitsSource
        self._loader: Iterator[Any] | None = None
        if recipe.feed == "files":
            self._open_files(wl, seed)
            return
        layout = totarget_layout(wl, recipe)
        if isinstance(layout, ImageLayout) and recipe.data == "digits":
            self.images = digits = DigitsSource.load(side=layout.side)
            self.held_out: tuple[torch.Tensor, ...] = (torch.from_numpy(digits.held_x),
                                                       torch.from_numpy(digits.held_y))
            return
        if isinstance(layout, ImageLayout):
            self.images = recipe.images(classes=layout.classes, side=layout.side)
        else:
            assert isinstance(layout, TokenLayout)
            self.chain = recipe.markov()
            self.seq_len = layout.seq_len
            self.tokens = layout
        self.held_out = self._draw(recipe.eval_sequences, held_out)

    def _open_files(self, wl: Any, seed: int) -> None:
        """The dataset on disk (written first if missing), a ``DataLoader`` over its
        training split, and its held-out split read once."""
        from torch.utils.data import DataLoader

        recipe = self.recipe
        disk = ensure_dataset(recipe, totarget_layout(wl, recipe))
        random.seed(seed)  # the token windows' offsets with 0 workers
        train, held = split_datasets(disk, recipe)
        if len(train) < recipe.batch_size:
            raise ConfigError(f"--data {recipe.data_path or recipe.data}: {len(train)} "
                              f"training samples, fewer than one batch of "
                              f"{recipe.batch_size}")
        workers = recipe.loader_workers
        loader = DataLoader(train, batch_size=recipe.batch_size, shuffle=True,
                            drop_last=True, num_workers=workers, pin_memory=self.pin,
                            persistent_workers=workers > 0,
                            prefetch_factor=PREFETCH if workers > 0 else None,
                            generator=torch.Generator().manual_seed(seed))
        # The first epoch's iterator made at start-up: the workers start (and prefetch)
        # off the clock, as JAX's BatchLoader's do, and live through the whole window.
        self._loader = _forever(loader, iter(loader))
        self.timer = InputTimer({
            "source": recipe.data, "path": str(disk.train), "layout": disk.layout.name,
            "samples": len(train), "loader_workers": workers, "pin_memory": self.pin,
            "prefetch_factor": PREFETCH if workers > 0 else 0, "loader": "torch DataLoader"})
        # images: the whole held-out folder (digits: 360, a user's val/); tokens: the
        # recipe's count of windows
        count = len(held) if isinstance(disk.layout, ImageLayout) else min(
            len(held), recipe.eval_sequences)
        rows = [held[i] for i in range(count)]
        self.held_out = tuple(torch.stack([torch.as_tensor(r[k]) for r in rows])
                              for k in range(len(rows[0])))

    def _draw(self, count: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
        fam, n = self.recipe.family, self.seq_len
        if fam == "image":
            x, y = self.images.sample(count, rng)
            return torch.from_numpy(x), torch.from_numpy(y)
        if fam == "lm":
            seq = torch.from_numpy(self.chain.sample(count, n + 1, rng))
            return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        if fam == "masked":  # BERT's masks (data/transforms.shape_tokens), drawn from rng
            draw = random.Random(int(rng.integers(1 << 62)))
            rows = [shape_tokens(w, self.tokens, draw) for w in self.chain.sample(count, n, rng)]
            return tuple(torch.from_numpy(np.stack([r[k] for r in rows])) for k in range(3))
        seq = torch.from_numpy(self.chain.sample(count, 2 * n, rng))
        tgt = seq[:, n - 1:]
        return seq[:, :n].contiguous(), tgt[:, :-1].contiguous(), tgt[:, 1:].contiguous()

    def batch(self) -> tuple[torch.Tensor, ...]:
        """The next training batch on the device (read from disk: its wait timed)."""
        if self.timer is not None:
            return tuple(self.timer.take(self._next_on_device))
        return tuple(t.to(self.device) for t in self._draw(self.recipe.batch_size, self.rng))

    def _next_on_device(self) -> tuple[torch.Tensor, ...]:
        assert self._loader is not None
        return tuple(t.to(self.device, non_blocking=self.pin) for t in next(self._loader))


def _forever(loader: Any, first: Iterator[Any]) -> Iterator[Any]:
    """The loader's batches, epoch after epoch (each epoch reshuffled): ``first`` (its
    first epoch's iterator), then a new pass each time."""
    yield from first
    while True:
        yield from loader


class _FixedImages(PlainImageSamples):
    """(CHW float tensor, class index) read without augmentation."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        chw, label = self.sample(index, chw=True)
        return torch.from_numpy(chw), label


class _HeldOutWindows(TokenWindows):
    """Held-out token windows at offsets fixed by the index (the same every read)."""

    def __init__(self, shards: list[Path], dtype: str, layout: TokenLayout, seed: int
                 ) -> None:
        super().__init__(shards, dtype, layout)
        self.seed = seed

    def __getitem__(self, index: int) -> tuple[torch.Tensor, ...]:
        rng = random.Random(self.seed * 1_000_003 + index)
        return tuple(torch.from_numpy(np.ascontiguousarray(a))
                     for a in self.sample(index, rng))


def split_datasets(disk: DiskData, recipe: Recipe) -> tuple[Any, Any]:
    """The map-style training and held-out datasets of a to-target dataset on disk."""
    layout = disk.layout
    if isinstance(layout, ImageLayout):
        return tuple(_FixedImages(files, layout.side, disk.pixel_scale, disk.pixel_shift)
                     for files in (image_files(disk.train), held_out_images(disk))
                     )  # type: ignore[return-value]
    if isinstance(layout, SpeechLayout):  # no random draws: utterances are whole
        return SpeechSet(speech_files(disk.train), layout), SpeechSet(
            speech_files(disk.held_out), layout)
    assert isinstance(layout, TokenLayout)
    shards, dtype, _ = token_shards(disk.train)
    held, held_dtype, _ = token_shards(disk.held_out)
    return (TokenWindows(shards, dtype, layout),
            _HeldOutWindows(held, held_dtype, layout, recipe.data_seed + 1))


def _evaluate(model: torch.nn.Module, family: str, batch: tuple[torch.Tensor, ...]) -> float:
    """Held-out accuracy (images) or mean next-token cross entropy in nats (no smoothing)."""
    model.eval()
    with torch.no_grad():
        if family == "image":
            images, labels = batch
            value = float((model(images).argmax(dim=1) == labels).float().mean())
        elif family == "speech":  # greedy CTC decoding, character error rate
            features, labels = batch
            best = model(features).argmax(dim=-1).T  # (utterances, steps)
            value = character_error_rate([greedy_ctc(row) for row in best.tolist()],
                                         labels.tolist())
        else:
            logits = model(*batch[:-1])  # bert's unmasked positions are IGNORE
            value = float(F.cross_entropy(logits.flatten(0, 1).float(), batch[-1].flatten(),
                                          ignore_index=IGNORE))
    model.train()
    return value


def _optimizer(recipe: Recipe, model: torch.nn.Module) -> Any:
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=recipe.lr, momentum=0.9)
    return torch.optim.Adam(model.parameters(), lr=recipe.lr)


def check_device(device: str) -> str:
    """``device`` as torch names it (``cuda`` -> ``cuda:0``), refused in one line where it
    is no device name or is not present here (``run``'s names and words:
    :func:`~accelbench.backends.torch.backend.normalize_device`,
    :func:`~accelbench.backends.probe.device_refusal`)."""
    dev = normalize_device(device)
    if dev != "cpu":
        why = device_refusal("torch", dev, tuple(get_backend("torch").devices()))
        if why:
            raise UnsupportedError(why)
    return dev


def synchronize(device: torch.device) -> None:
    """Wait until ``device`` has finished its queued work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _build(recipe: Recipe, seed: int, device: torch.device
           ) -> tuple[Any, torch.nn.Module, Any, Any, _Data]:
    """The implementation, model, optimizer, warm-up schedule and data of one seed, the
    model and the held-out split on ``device``."""
    torch.manual_seed(seed)
    impl = get_implementation(recipe.workload, "torch")
    model = impl.build_model(recipe.size).to(device)
    model.train()
    opt = _optimizer(recipe, model)
    warm = max(1, recipe.warmup_steps)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / warm))
    data = _Data(recipe, seed, device)
    data.held_out = tuple(t.to(device) for t in data.held_out)
    return impl, model, opt, sched, data


def train_to_target(recipe: Recipe, *, seed: int, limits: Limits, threads: int = 1,
                    clock: Callable[[bool], None] | None = None,
                    device: str = "cpu") -> RunOutcome:
    """One seed's run of ``recipe`` on ``device`` (``threads`` intra-op threads) until the
    target, a cap or divergence (:func:`accelbench.totarget.loop.train_loop`);
    ``clock(True)`` is called as the training clock starts and ``clock(False)`` as it stops
    (the energy window)."""
    t0 = time.perf_counter()
    torch.set_num_threads(threads)
    dev = torch.device(device)
    configure_math("fp32")
    impl, model, opt, sched, data = _build(recipe, seed, dev)
    synchronize(dev)  # start-up's copies done before the clock starts

    def step() -> float:
        loss = impl.loss(model, data.batch())
        value = float(loss.detach())
        if math.isfinite(value):  # a diverged step ends the run: no update is applied
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        synchronize(dev)  # the update done within its step (a no-op on the CPU)
        return value

    return train_loop(recipe, limits, seed=seed, t0=t0, step=step,
                      evaluate=lambda: _evaluate(model, recipe.family, data.held_out),
                      clock=clock, timer=data.timer)
