"""Training to a target in JAX: the workload's Flax NNX model and loss, the recipe's optax
optimizer and warm-up, the recipe's learnable data, a held-out evaluation every
``eval_every`` samples, and a stop at the target, a cap or divergence.

The same recipe semantics as the torch trainer (:mod:`accelbench.backends.torch.totarget`):
the same data, Adam or SGD with momentum 0.9, a linear warm-up from lr / warmup_steps to lr
then constant, the same divergence rule and caps. The data is read from the same dataset on
disk (``recipe.feed == "files"``, the default: :func:`~accelbench.totarget.ondisk.
ensure_dataset`, ``--data generated|digits|PATH``), its training split through
:class:`~accelbench.data.loader.BatchLoader` (``--loader-workers`` spawned processes) in
the torch trainer's order (its ``DataLoader``'s shuffle for the seed, reproduced by
:func:`~accelbench.data.shuffle.torch_loader_order`; with no workers also its token windows'
offsets and bert's masks, drawn from a generator seeded as torch's process seeds Python's)
and ``jax.device_put``, its held-out split read once at start-up (torch's split, window for
window); or drawn in memory
(``feed="memory"``) as torch's in-memory feed draws it (the same batches per seed). Images
are NHWC here (the torch twin's NCHW arrays transposed); ids int32. Families: images,
next-token (lm, seq2seq), masked tokens (bert: the loss and the held-out loss on the
masked positions only, as torch's ``ignore_index``) and speech (deepspeech2: the same WAV
files and log-mel features as torch's ``SpeechSet``, (N, bins, frames, 1) here; optax's CTC
loss; the held-out character error rate of greedy CTC decoding, as torch's).

Start-up, reported apart, is everything before the training clock starts: JAX's CPU client,
building the model, the optimizer and the data, and tracing and compiling the training step
and the evaluation ahead of time (``lower().compile()``), so the clock never contains a
compile. The clock then runs through evaluations (as MLPerf's does). The loss is read back
after every step (a host sync), so a diverging run stops at the step it diverges, as torch's.

``threads``: XLA sizes its CPU thread pool once per process, from the CPU affinity of the
thread that creates its CPU client. The first run in a process creates the client in a
thread of its own restricted to the first ``threads`` allowed CPUs (the pool's threads
inherit that), leaving the calling process's affinity as it was; a later run in the same
process must ask for the same count (:func:`xla_cpu_threads`), else it is refused in one
line.

``device``: ``cpu`` (the pool above), or an accelerator JAX sees (``cuda:N``, ``tpu:N``:
its platform's device, :func:`~accelbench.backends.jax.runtime.jax_device`; one it does
not see is refused in one line before anything runs). The model, the held-out split and
each batch are put there; the step and the evaluation are compiled for it.

A run that reads its data from disk times the step's wait for each batch (the loader's
next batch put on the device) with ``run --data``'s
:class:`~accelbench.data.stall.InputTimer`: the outcome's ``input``.
"""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.backends.jax.hostinit import host_init
from accelbench.backends.jax.input import LOADER, PREFETCH
from accelbench.backends.jax.runtime import import_jax, jax_device, normalize_device, split_state
from accelbench.backends.jax.trainfns import TrainFns
from accelbench.data.check import image_files, token_shards
from accelbench.data.layouts import ImageLayout, SpeechLayout, TokenLayout
from accelbench.data.loader import BatchLoader, collate
from accelbench.data.shuffle import torch_loader_order
from accelbench.data.speech import SpeechSamples, speech_files
from accelbench.data.stall import InputTimer
from accelbench.data.transforms import IGNORE, PlainImageSamples, TokenSamples, shape_tokens
from accelbench.errors import ConfigError
from accelbench.totarget.learnable import (
    DigitsSource,
    ImageSource,
    character_error_rate,
    greedy_ctc,
)
from accelbench.totarget.loop import train_loop
from accelbench.totarget.ondisk import ensure_dataset, held_out_images, totarget_layout
from accelbench.totarget.outcome import Limits, RunOutcome
from accelbench.totarget.recipes import Recipe
from accelbench.workloads.images import ImageClassification
from accelbench.workloads.registry import get_implementation, get_workload

#: The compiled training step and evaluation per (recipe without its lr, device): every
#: seed, and every --lr, of a recipe in one process shares them (the programs are the same;
#: the model's state, the data and the learning rate are their arguments).
_COMPILED: dict[tuple[Recipe, str], tuple[Any, Any]] = {}

_pool_lock = threading.Lock()
_pool_threads: list[int] = []
"""The thread count this module sized XLA's CPU pool with (empty: not sized here)."""


def xla_cpu_threads() -> int | None:
    """The ``threads`` this process's XLA CPU pool was sized for, where it exists (None: not
    created yet). The pool has at most the CPUs the process may use (XLA counts the
    affinity); one created outside this module is taken to follow the process's affinity."""
    if _pool_threads:
        return _pool_threads[0]
    if not _backends_initialized():
        return None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def _backends_initialized() -> bool:
    import_jax()
    try:
        from jax._src import xla_bridge
    except ImportError:  # pragma: no cover - a jax without this module
        return False
    probe = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(probe()) if probe is not None else False


def check_threads(threads: int) -> None:
    """Refuse, in one line, a thread count this process's XLA CPU pool cannot have: once the
    pool exists, its size is fixed."""
    have = xla_cpu_threads()
    if have is not None and have != threads:
        raise ConfigError(f"--threads {threads}: this process's XLA CPU thread pool was "
                          f"already sized for {have} (XLA sizes it once per process); "
                          f"run train in a new process")


def cpu_device(threads: int) -> Any:
    """The CPU device, XLA's CPU pool sized for ``threads`` (see the module docstring)."""
    jax = import_jax()
    with _pool_lock:
        have = xla_cpu_threads()
        if have is None:
            failed: list[BaseException] = []

            def create() -> None:
                try:
                    if hasattr(os, "sched_setaffinity"):
                        allowed = sorted(os.sched_getaffinity(0))
                        os.sched_setaffinity(0, allowed[:threads])
                    jax.devices("cpu")
                except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                    failed.append(exc)

            t = threading.Thread(target=create, name="accelbench-xla-cpu-client")
            t.start()
            t.join()
            if failed:
                raise failed[0]
            _pool_threads.append(threads)
        else:
            check_threads(threads)
    return jax.devices("cpu")[0]


class Batches:
    """Training batches and the fixed held-out split of one recipe, as numpy arrays in the
    layout of the JAX models (NHWC images, int32 tokens): read from the dataset on disk by a
    :class:`~accelbench.data.loader.BatchLoader` (``recipe.feed == "files"``, torch's
    default: the same files, the same held-out split and the same order as the torch
    trainer), or drawn in
    memory from the learnable sources, fresh each step (``"memory"``)."""

    def __init__(self, recipe: Recipe, seed: int) -> None:
        self.recipe, self.seed = recipe, seed
        self.rng = np.random.default_rng(seed)
        held_out = np.random.default_rng(recipe.data_seed + 1)
        wl = get_workload(recipe.workload)
        self.seq_len = 0
        self.images: ImageSource | DigitsSource
        self.loader: BatchLoader | None = None
        self.timer: InputTimer | None = None
        """The step's wait for each batch read from disk (None: drawn in memory)."""
        self._pending: tuple[np.ndarray, ...] | None = None
        if recipe.feed == "files":
            self._open_files(wl, seed)
            return
        if isinstance(wl, ImageClassification) and recipe.data == "digits":
            self.images = digits = DigitsSource.load(side=wl.image_size(recipe.size))
            self.held_out: tuple[np.ndarray, ...] = (_nhwc(digits.held_x),
                                                     digits.held_y.astype(np.int32))
            return
        if isinstance(wl, ImageClassification):
            self.images = recipe.images(classes=wl.num_classes(recipe.size),
                                        side=wl.image_size(recipe.size))
        else:
            self.chain = recipe.markov()
            self.seq_len = int(wl.config(recipe.size).seq_len)
            layout = totarget_layout(wl, recipe)
            assert isinstance(layout, TokenLayout)
            self.tokens = layout
        self.held_out = self._draw(recipe.eval_sequences, held_out)

    def _open_files(self, wl: Any, seed: int) -> None:
        """The dataset on disk (written first if missing), a loader over its training split
        (``--loader-workers`` spawned processes), and its held-out split read once (torch's
        split: every held-out image, or the recipe's count of token windows at fixed
        offsets)."""
        recipe = self.recipe
        disk = ensure_dataset(recipe, totarget_layout(wl, recipe))
        layout = disk.layout
        held: Any
        if isinstance(layout, ImageLayout):
            train: Any = PlainImageSamples(image_files(disk.train), layout.side,
                                           disk.pixel_scale, disk.pixel_shift)
            held = PlainImageSamples(held_out_images(disk), layout.side, disk.pixel_scale,
                                     disk.pixel_shift)
            count = len(held)
        elif isinstance(layout, TokenLayout):
            shards, dtype, _ = token_shards(disk.train)
            train = TokenSamples(shards, dtype, layout)
            held_shards, held_dtype, _ = token_shards(disk.held_out)
            held = HeldOutTokens(held_shards, held_dtype, layout, recipe.data_seed + 1)
            count = min(len(held), recipe.eval_sequences)
        elif isinstance(layout, SpeechLayout):  # whole utterances: no random draws
            train = Utterances(speech_files(disk.train), layout)
            held = Utterances(speech_files(disk.held_out), layout)
            count = len(held)
        else:
            raise ConfigError(f"train --framework jax: {recipe.workload} reads "
                              f"{type(layout).__name__} data, not built in JAX yet")
        if len(train) < recipe.batch_size:
            raise ConfigError(f"--data {recipe.data_path or recipe.data}: {len(train)} "
                              f"training samples, fewer than one batch of "
                              f"{recipe.batch_size}")
        self.held_out = _for_jax(collate([held.sample(i) for i in range(count)]))
        self.loader = BatchLoader(train, recipe.batch_size, recipe.loader_workers, PREFETCH,
                                  seed, order=_torch_order(len(train), recipe, seed))
        workers = recipe.loader_workers
        self.timer = InputTimer({
            "source": recipe.data, "path": str(disk.train), "layout": layout.name,
            "samples": len(train), "loader_workers": workers, "pin_memory": False,
            "prefetch_factor": PREFETCH if workers > 0 else 0,
            "loader": LOADER})

    def _draw(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        fam, n = self.recipe.family, self.seq_len
        if fam == "image":
            x, y = self.images.sample(count, rng)
            return _nhwc(x), y.astype(np.int32)
        if fam == "lm":
            seq = self.chain.sample(count, n + 1, rng).astype(np.int32)
            return seq[:, :-1], seq[:, 1:]
        if fam == "masked":  # BERT's masks (data/transforms.shape_tokens), as torch's draw
            draw = random.Random(int(rng.integers(1 << 62)))
            rows = [shape_tokens(w, self.tokens, draw)
                    for w in self.chain.sample(count, self.tokens.seq_len, rng)]
            return _for_jax(collate(rows))
        seq = self.chain.sample(count, 2 * n, rng).astype(np.int32)
        tgt = seq[:, n - 1:]
        return seq[:, :n], tgt[:, :-1], tgt[:, 1:]

    def first(self) -> tuple[np.ndarray, ...]:
        """A batch for the compile's shapes, not lost to training: the loader's first batch
        (handed out again by the next :meth:`batch`), or a draw whose generator is then
        reset (the seed's first batch is drawn again)."""
        if self.loader is not None:
            if self._pending is None:
                self._pending = self.batch()
            return self._pending
        state = self.rng.bit_generator.state
        out = self.batch()
        self.rng.bit_generator.state = state
        return out

    def batch(self) -> tuple[np.ndarray, ...]:
        if self.loader is not None:
            if self._pending is not None:
                out, self._pending = self._pending, None
                return out
            return _for_jax(next(self.loader))
        return self._draw(self.recipe.batch_size, self.rng)

    def close(self) -> None:
        """Stop the loader's workers (where there are any)."""
        if self.loader is not None:
            self.loader.close()


class Utterances(SpeechSamples):
    """(log-mel features ``(bins, frames, 1)``, label ids) of a speech split: torch's
    ``SpeechSet`` read by the same :mod:`accelbench.data.speech` code, with the JAX
    model's trailing channel axis (NHWC: frequency as height, time as width)."""

    def sample(self, index: int, rng: Any = random) -> tuple[np.ndarray, np.ndarray]:
        features, ids = super().sample(index, rng)
        return features[..., None], ids


def _torch_order(n: int, recipe: Recipe, seed: int) -> Iterator[list[int]] | None:
    """The torch trainer's order of the training split's samples for ``seed`` (its
    ``DataLoader``'s shuffle, reproduced by :func:`~accelbench.data.shuffle.
    torch_loader_order`), or None (the loader's own shuffle) where it is not reproduced
    (2^32 / 20 samples or more)."""
    try:
        return torch_loader_order(n, recipe.batch_size, seed, workers=recipe.loader_workers)
    except ValueError:
        return None


class HeldOutTokens(TokenSamples):
    """Held-out token windows at offsets fixed by the index (the same every read): the
    torch trainer's held-out windows (``_HeldOutWindows``, the same seed per index)."""

    def __init__(self, shards: list[Path], dtype: str, layout: TokenLayout, seed: int
                 ) -> None:
        super().__init__(shards, dtype, layout)
        self.seed = seed

    def sample(self, index: int, rng: Any = None) -> tuple[np.ndarray, ...]:
        return super().sample(index, random.Random(self.seed * 1_000_003 + index))


def _for_jax(batch: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """64-bit numbers as JAX holds them without x64: int32 ids, float32 values."""
    return tuple(a.astype(np.int32) if a.dtype == np.int64 else
                 a.astype(np.float32) if a.dtype == np.float64 else a for a in batch)


def _nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


#: The recipe families the JAX trainer trains.
FAMILIES = ("lm", "seq2seq", "image", "masked", "speech")


def fit_recipe(recipe: Recipe) -> Recipe:
    """The recipe as this trainer feeds it (as given: files by default, as torch's, or
    memory where the recipe asks), or a one-line refusal of what it does not train yet."""
    if recipe.family == "speech" and recipe.feed == "memory":
        raise ConfigError(f"{recipe.workload}: speech is read from disk only")
    if recipe.family not in FAMILIES:
        raise ConfigError(f"train --framework jax: {recipe.workload} ({recipe.family}) is not "
                          "built in JAX yet (torch trains it)")
    return recipe


def warmup_factor(recipe: Recipe) -> Callable[[Any], Any]:
    """The learning-rate factor of update ``count`` (0-based): min(1, (count + 1) / warm-up
    steps), torch's ``LambdaLR`` of the same recipe."""
    import jax.numpy as jnp

    warm = max(1, recipe.warmup_steps)

    def factor(count: Any) -> Any:
        return jnp.minimum(1.0, (count + 1) / warm)

    return factor


def optimizer(recipe: Recipe) -> Any:
    """The recipe's optax optimizer: Adam (torch's defaults: betas 0.9/0.999, eps 1e-8) or
    SGD with momentum 0.9 (torch's buffer rule), times the warm-up factor, times -lr.

    The learning rate is a value in the optimizer's state (``inject_hyperparams``), not a
    constant of the compiled program, so one compile serves every ``--lr``."""
    import optax

    direction = (optax.trace(decay=0.9) if recipe.optimizer == "sgd"
                 else optax.scale_by_adam(b1=0.9, b2=0.999, eps=1e-8))
    return optax.chain(direction, optax.scale_by_schedule(warmup_factor(recipe)),
                       optax.inject_hyperparams(optax.scale)(step_size=-recipe.lr))


@dataclass(eq=False)
class _Run:
    """One seed's compiled step and evaluation, its state and its data."""

    step: Any
    evaluate: Any
    state: tuple[Any, Any, Any]
    data: Batches
    held: Any
    """The held-out split on the device."""


def _metric_fn(eval_graphdef: Any, family: str) -> Callable[..., Any]:
    """Held-out accuracy (images), mean next-token cross entropy in nats (no smoothing), or
    for speech each utterance's best symbol per step ((utterances, steps) ids, decoded and
    scored on the host: :func:`_speech_cer`), the model in evaluation mode (BatchNorm's
    running statistics, no dropout)."""
    import jax.numpy as jnp
    import optax
    from flax import nnx

    def metric(params: Any, rest: Any, batch: Any) -> Any:
        model = nnx.merge(eval_graphdef, params, rest, copy=True)
        logits = model(*batch[:-1]).astype(jnp.float32)
        if family == "image":
            return jnp.mean(jnp.argmax(logits, axis=-1) == batch[-1])
        if family == "speech":  # logits (steps, utterances, symbols)
            return jnp.argmax(logits, axis=-1).T
        labels = batch[-1]
        if family == "masked":  # the masked positions only (torch's ignore_index)
            weights = (labels != IGNORE).astype(jnp.float32)
            per_token = optax.softmax_cross_entropy_with_integer_labels(
                logits, jnp.where(labels == IGNORE, 0, labels))
            return (per_token * weights).sum() / weights.sum()
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))

    return metric


def _speech_cer(best: np.ndarray, labels: np.ndarray) -> float:
    """The character error rate of greedy CTC decoding (best symbol per step, repeats
    merged, blanks dropped), as the torch trainer scores it."""
    return character_error_rate([greedy_ctc(row) for row in best.tolist()],
                                labels.tolist())


def _build(recipe: Recipe, seed: int, device: Any) -> _Run:
    """Model, optimizer, data, and the training step and evaluation compiled ahead of time."""
    import_jax()
    impl = get_implementation(recipe.workload, "jax")
    data = Batches(recipe, seed)
    try:
        return _compiled(recipe, seed, device, impl, data)
    except BaseException:
        data.close()
        raise


def _compiled(recipe: Recipe, seed: int, device: Any, impl: Any, data: Batches) -> _Run:
    """:func:`_build` once the data is open."""
    jax = import_jax()
    from flax import nnx

    with jax.default_device(device):
        with host_init():
            model = impl.build_model(recipe.size, nnx.Rngs(seed))
        model.eval()
        eval_graphdef, _, _ = split_state(model)
        model.train()
        graphdef, params, rest = split_state(model)
    params, rest = jax.device_put((params, rest), device)
    tx = optimizer(recipe)
    opt_state = tx.init(params)
    fns = TrainFns(impl=impl, graphdef=graphdef, rest_dtypes=jax.tree.map(lambda x: x.dtype, rest),
                   compute_dtype=None, tx=tx, fp16=False)
    # CPUs cannot donate buffers and XLA warns on every call; the step is the same.
    warnings.filterwarnings("ignore", message=".*donated buffers.*")
    held = jax.device_put(data.held_out, device)
    key = (dataclasses.replace(recipe, lr=0.0), str(device))
    if key not in _COMPILED:
        first = jax.device_put(data.first(), device)
        with jax.default_matmul_precision("float32"):
            _COMPILED[key] = (
                jax.jit(fns.train_step_unscaled, donate_argnums=(0, 1, 2)).lower(
                    params, rest, opt_state, first).compile(),
                jax.jit(_metric_fn(eval_graphdef, recipe.family)).lower(
                    params, rest, held).compile())
    step, evaluate = _COMPILED[key]
    return _Run(step=step, evaluate=evaluate, state=(params, rest, opt_state), data=data,
                held=held)


def check_device(device: str) -> str:
    """``device`` as this backend names it (``cuda`` -> ``cuda:0``), refused in one line
    where the name is unknown or JAX does not see it (``cpu`` is always here; its thread
    pool is sized at the first run)."""
    dev = normalize_device(device)
    if dev != "cpu":
        jax_device(dev)
    return dev


def train_to_target(recipe: Recipe, *, seed: int, limits: Limits, threads: int = 1,
                    clock: Callable[[bool], None] | None = None,
                    device: str = "cpu") -> RunOutcome:
    """One seed's run of ``recipe`` on ``device`` (the CPU: XLA's pool sized for
    ``threads``) until the target, a cap or divergence
    (:func:`accelbench.totarget.loop.train_loop`); ``clock(True)`` is called as the training
    clock starts and ``clock(False)`` as it stops (the energy window). Start-up (the client,
    the model, the data and both compiles) is timed apart."""
    t0 = time.perf_counter()
    jax = import_jax()
    where = cpu_device(threads) if device == "cpu" else jax_device(device)
    run = _build(recipe, seed, where)
    state = list(run.state)
    timer = run.data.timer

    def next_batch() -> Any:
        return jax.device_put(run.data.batch(), where)

    def step() -> float:
        # The loss is read back every step (a host sync), so a diverging run stops there.
        batch = timer.take(next_batch) if timer is not None else next_batch()
        params, rest, opt_state, loss = run.step(*state, batch)
        state[:] = [params, rest, opt_state]
        return float(loss)

    def evaluate() -> float:
        value = run.evaluate(state[0], state[1], run.held)
        if recipe.family == "speech":
            return _speech_cer(np.asarray(value), run.data.held_out[-1])
        return float(value)

    try:
        return train_loop(recipe, limits, seed=seed, t0=t0, step=step, evaluate=evaluate,
                          clock=clock, timer=timer)
    finally:
        run.data.close()  # the loader's workers stop with the run
