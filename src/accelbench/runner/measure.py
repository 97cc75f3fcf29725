"""The measurement loop: warm-up, then timed iterations with adaptive stopping.

Framework-neutral: it sees a ``step`` and a ``synchronize`` callable. Every
iteration is timed on its own with the device synchronised before the clock
is read, and the raw times are returned for the statistics.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from accelbench.spec import MeasurementPolicy, StopReason
from accelbench.stats import ci_rel_halfwidth

ProgressFn = Callable[[str, int, float, float], None]
"""Called as ``progress(phase, iterations, samples_per_s, elapsed_s)``."""

_PROGRESS_PERIOD_S = 0.25
#: Warm-up ends when the median of the last window is no faster than this
#: fraction of the window before it (the step time has stopped falling).
_WARMUP_WINDOW = 3
_WARMUP_STABLE_RATIO = 0.97


@dataclass(frozen=True, slots=True)
class Timings:
    """Raw output of the loop."""

    warmup_times_s: tuple[float, ...]
    times_s: tuple[float, ...]
    stop_reason: StopReason


def _timed(step: Callable[[], None], sync: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    step()
    sync()
    return time.perf_counter() - t0


def _stopped_falling(times: list[float]) -> bool:
    w = min(_WARMUP_WINDOW, len(times) // 2)
    if w == 0:
        return True
    last = float(np.median(times[-w:]))
    prev = float(np.median(times[-2 * w : -w]))
    return last >= _WARMUP_STABLE_RATIO * prev


def warm_up(
    step: Callable[[], None],
    sync: Callable[[], None],
    policy: MeasurementPolicy,
    progress: ProgressFn | None = None,
) -> list[float]:
    """Run warm-up iterations until the step time stops falling (bounded)."""
    times: list[float] = []
    if policy.warmup_max == 0:
        return times
    start = time.perf_counter()
    sync()
    while len(times) < policy.warmup_max:
        times.append(_timed(step, sync))
        if progress is not None:
            progress("warmup", len(times), 0.0, time.perf_counter() - start)
        if len(times) >= policy.warmup_min and _stopped_falling(times):
            break
        if time.perf_counter() - start >= policy.warmup_max_time_s:
            break
    return times


def measure(
    step: Callable[[], None],
    sync: Callable[[], None],
    policy: MeasurementPolicy,
    samples_per_step: int,
    progress: ProgressFn | None = None,
) -> tuple[list[float], StopReason]:
    """Timed iterations until the policy says stop; returns raw times and the reason."""
    times: list[float] = []
    start = time.perf_counter()
    last_report = start
    next_check = policy.min_iterations
    reason: StopReason
    while True:
        times.append(_timed(step, sync))
        n = len(times)
        now = time.perf_counter()
        elapsed = now - start
        if progress is not None and now - last_report >= _PROGRESS_PERIOD_S:
            last_report = now
            progress("measure", n, samples_per_step / float(np.median(times)), elapsed)
        if policy.iterations is not None:
            if n >= policy.iterations:
                reason = "iterations"
                break
            continue
        if n >= next_check:
            # Checks grow geometrically so the bootstrap costs O(log n) calls.
            next_check = max(n + 1, math.ceil(n * 1.1))
            if ci_rel_halfwidth(times) <= policy.target_ci:
                reason = "target_ci"
                break
        if n >= policy.max_iterations:
            reason = "max_iterations"
            break
        if elapsed >= policy.max_time_s:
            reason = "max_time"
            break
    return times, reason


def run_loop(
    step: Callable[[], None],
    sync: Callable[[], None],
    policy: MeasurementPolicy,
    samples_per_step: int,
    progress: ProgressFn | None = None,
    *,
    on_measure_start: Callable[[], None] | None = None,
) -> Timings:
    """Warm-up then measurement; ``on_measure_start`` opens the energy window."""
    warm = warm_up(step, sync, policy, progress)
    if on_measure_start is not None:
        on_measure_start()
    times, reason = measure(step, sync, policy, samples_per_step, progress)
    return Timings(tuple(warm), tuple(times), reason)
