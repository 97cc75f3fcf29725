"""Training to a target in PyTorch: the workload's own model and loss, the recipe's optimizer
and warm-up, the learnable data of :mod:`accelbench.totarget.learnable`, a held-out
evaluation every ``eval_every`` samples, and a stop at the target, a cap or a non-finite loss.

The training clock starts before the first batch is drawn and runs through evaluations (as
MLPerf's does); building the model, the optimizer and the data sources is timed apart as
start-up.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from accelbench.totarget.learnable import DigitsSource, ImageSource
from accelbench.totarget.outcome import EvalPoint, Limits, RunOutcome, Status
from accelbench.totarget.recipes import Recipe
from accelbench.workloads.images import ImageClassification
from accelbench.workloads.registry import get_implementation, get_workload

#: A training loss this many times the first step's ends the run as diverged.
DIVERGED_FACTOR = 10.0


class _Data:
    """Training batches and the fixed held-out split of one recipe, as tensors."""

    def __init__(self, recipe: Recipe, seed: int) -> None:
        self.recipe = recipe
        self.rng = np.random.default_rng(seed)
        held_out = np.random.default_rng(recipe.data_seed + 1)
        wl = get_workload(recipe.workload)
        self.seq_len = 0
        self.images: ImageSource | DigitsSource
        if isinstance(wl, ImageClassification) and recipe.data == "digits":
            self.images = digits = DigitsSource.load(side=wl.image_size(recipe.size))
            self.held_out: tuple[torch.Tensor, ...] = (torch.from_numpy(digits.held_x),
                                                       torch.from_numpy(digits.held_y))
            return
        if isinstance(wl, ImageClassification):
            self.images = recipe.images(classes=wl.num_classes(recipe.size),
                                        side=wl.image_size(recipe.size))
        else:
            self.chain = recipe.markov()
            self.seq_len = int(wl.config(recipe.size).seq_len)
        self.held_out = self._draw(recipe.eval_sequences, held_out)

    def _draw(self, count: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
        fam, n = self.recipe.family, self.seq_len
        if fam == "image":
            x, y = self.images.sample(count, rng)
            return torch.from_numpy(x), torch.from_numpy(y)
        if fam == "lm":
            seq = torch.from_numpy(self.chain.sample(count, n + 1, rng))
            return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        seq = torch.from_numpy(self.chain.sample(count, 2 * n, rng))
        tgt = seq[:, n - 1:]
        return seq[:, :n].contiguous(), tgt[:, :-1].contiguous(), tgt[:, 1:].contiguous()

    def batch(self) -> tuple[torch.Tensor, ...]:
        return self._draw(self.recipe.batch_size, self.rng)


def _evaluate(model: torch.nn.Module, family: str, batch: tuple[torch.Tensor, ...]) -> float:
    """Held-out accuracy (images) or mean next-token cross entropy in nats (no smoothing)."""
    model.eval()
    with torch.no_grad():
        if family == "image":
            images, labels = batch
            value = float((model(images).argmax(dim=1) == labels).float().mean())
        else:
            logits = model(*batch[:-1])
            value = float(F.cross_entropy(logits.flatten(0, 1).float(), batch[-1].flatten()))
    model.train()
    return value


def _divergence(loss: float, first: float) -> str:
    """Why a training loss means the run diverged ("" where it does not): not finite, or
    more than :data:`DIVERGED_FACTOR` times the first step's (worse than the untrained
    model by far, which no recipe recovers from in the runs we measured)."""
    if not math.isfinite(loss):
        return f"training loss {loss}"
    if loss > DIVERGED_FACTOR * first:
        return f"training loss {loss:.4g} over {DIVERGED_FACTOR:g}x the first step's {first:.4g}"
    return ""


def _optimizer(recipe: Recipe, model: torch.nn.Module) -> Any:
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=recipe.lr, momentum=0.9)
    return torch.optim.Adam(model.parameters(), lr=recipe.lr)


def _build(recipe: Recipe, seed: int) -> tuple[Any, torch.nn.Module, Any, Any, _Data]:
    """The implementation, model, optimizer, warm-up schedule and data of one seed."""
    torch.manual_seed(seed)
    impl = get_implementation(recipe.workload, "torch")
    model = impl.build_model(recipe.size)
    model.train()
    opt = _optimizer(recipe, model)
    warm = max(1, recipe.warmup_steps)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / warm))
    return impl, model, opt, sched, _Data(recipe, seed)


def train_to_target(recipe: Recipe, *, seed: int, limits: Limits, threads: int = 1,
                    clock: Callable[[bool], None] | None = None) -> RunOutcome:
    """One seed's run of ``recipe`` on the CPU (``threads`` intra-op threads) until the
    target, a cap or divergence; ``clock(True)`` is called as the training clock starts and
    ``clock(False)`` as it stops (the energy window)."""
    t0 = time.perf_counter()
    torch.set_num_threads(threads)
    impl, model, opt, sched, data = _build(recipe, seed)
    steps_per_eval = max(1, math.ceil(limits.eval_every / recipe.batch_size))
    if clock is not None:
        clock(True)
    start = time.perf_counter()
    startup_s = start - t0
    points: list[EvalPoint] = []
    samples, eval_s, step, first = 0, 0.0, 0, math.nan
    status: Status = "not_reached"
    reason = ""
    while True:
        loss = impl.loss(model, data.batch())
        value = float(loss.detach())
        first = value if step == 0 else first
        why = _divergence(value, first)
        if why:
            status, reason = "diverged", f"{why} at step {step + 1} ({samples} samples)"
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        step += 1
        samples += recipe.batch_size
        if step % steps_per_eval == 0:
            e0 = time.perf_counter()
            metric = _evaluate(model, recipe.family, data.held_out)
            eval_s += time.perf_counter() - e0
            points.append(EvalPoint(samples=samples, time_s=time.perf_counter() - start,
                                    metric=metric, train_loss=value))
            if not math.isfinite(metric):
                status = "diverged"
                reason = f"held-out {recipe.metric} {metric} at {samples} samples"
                break
            if recipe.reached(metric, limits.target):
                status = "reached"
                reason = f"held-out {recipe.metric} {metric:.4g} met the target {limits.target:.4g}"
                break
        elapsed = time.perf_counter() - start
        if elapsed >= limits.max_time_s or samples >= limits.max_samples:
            cap = (f"--max-time {limits.max_time_s:g} s" if elapsed >= limits.max_time_s
                   else f"--max-samples {limits.max_samples}")
            reason = f"{cap} reached before the target"
            break
    time_s = time.perf_counter() - start
    if clock is not None:
        clock(False)
    return RunOutcome(seed=seed, status=status, reason=reason, startup_s=startup_s,
                      time_s=time_s, samples=samples, eval_s=eval_s,
                      points=tuple(points))
