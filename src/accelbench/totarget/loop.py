"""The loop every framework's trainer runs to a target, framework-neutral: the training
clock (evaluations on it, start-up apart), an evaluation every ``eval_every`` samples
(rounded up to whole batches), and a stop at the target, at a cap (``not_reached``) or at
divergence (``diverged``, at once, with the reason). A backend gives one training step and
one evaluation; the rules are here once.

Where the backend reads its batches from disk it hands its
:class:`~accelbench.data.stall.InputTimer` (``run --data``'s), whose ``take`` it wraps
around each batch's fetch: the loop opens the timer's window as the clock starts, times
each step (the wait inside it) and returns the timer's figures over every step of the
run as the outcome's ``input`` (the waits' median with its CI, their mean, the stall
share: the waits over the steps' time, evaluations apart, and the loader's CPU use). The
per-step waits themselves are not kept (a run has thousands of steps)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from accelbench.data.stall import InputTimer
from accelbench.input_stats import InputStats
from accelbench.totarget.outcome import EvalPoint, Limits, RunOutcome, Status
from accelbench.totarget.recipes import Recipe

#: A training loss this many times the first step's ends the run as diverged.
DIVERGED_FACTOR = 10.0


def divergence(loss: float, first: float) -> str:
    """Why a training loss means the run diverged ("" where it does not): not finite, or
    more than :data:`DIVERGED_FACTOR` times the first step's (worse than the untrained
    model by far, which no recipe recovers from in the runs we measured)."""
    if not math.isfinite(loss):
        return f"training loss {loss}"
    if loss > DIVERGED_FACTOR * first:
        return f"training loss {loss:.4g} over {DIVERGED_FACTOR:g}x the first step's {first:.4g}"
    return ""


def _cap(limits: Limits, elapsed: float, samples: int) -> str:
    """The cap a run hit ("" where none)."""
    if elapsed >= limits.max_time_s:
        return f"--max-time {limits.max_time_s:g} s reached before the target"
    if samples >= limits.max_samples:
        return f"--max-samples {limits.max_samples} reached before the target"
    return ""


def train_loop(recipe: Recipe, limits: Limits, *, seed: int, t0: float,
               step: Callable[[], float], evaluate: Callable[[], float],
               clock: Callable[[bool], None] | None = None,
               timer: InputTimer | None = None) -> RunOutcome:
    """Run ``step`` (one training step on the next batch; returns its loss, read back to
    the host) until the target, a cap or divergence, ``evaluate`` (the held-out metric)
    every ``limits.eval_every`` samples. ``t0``: when the backend began its start-up (the
    clock starts here, so start-up is timed apart); ``clock(True)``/``clock(False)`` as the
    training clock starts and stops (the energy window); ``timer``: the one ``step`` takes
    its batches through, where it reads them from disk."""
    steps_per_eval = max(1, math.ceil(limits.eval_every / recipe.batch_size))
    if clock is not None:
        clock(True)
    if timer is not None:
        timer.open()
    step_s: list[float] = []
    start = time.perf_counter()
    points: list[EvalPoint] = []
    samples, eval_s, steps, first = 0, 0.0, 0, math.nan
    status: Status = "not_reached"
    reason = ""
    while True:
        s0 = time.perf_counter()
        value = step()
        step_s.append(time.perf_counter() - s0)
        first = value if steps == 0 else first
        why = divergence(value, first)
        if why:
            status, reason = "diverged", f"{why} at step {steps + 1} ({samples} samples)"
            break
        steps += 1
        samples += recipe.batch_size
        if steps % steps_per_eval == 0:
            e0 = time.perf_counter()
            metric = evaluate()
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
        reason = _cap(limits, time.perf_counter() - start, samples)
        if reason:
            break
    time_s = time.perf_counter() - start
    if clock is not None:
        clock(False)
    return RunOutcome(seed=seed, status=status, reason=reason, startup_s=start - t0,
                      time_s=time_s, samples=samples, eval_s=eval_s, points=tuple(points),
                      input=None if timer is None else input_of(timer, step_s))


def input_of(timer: InputTimer, step_s: list[float]) -> InputStats:
    """``run --data``'s figures (:meth:`InputTimer.window`) over every step of a run, its
    per-step waits dropped from the record (their median, CI, mean and share are kept)."""
    return dataclasses.replace(timer.window(len(step_s), step_s), wait_s=())
