"""The measurement loop: warm-up, then timed iterations with adaptive stopping.

Framework-neutral: it sees a ``step`` and a ``synchronize`` callable. Every
iteration is timed on its own with the device synchronised before the clock
is read, and the raw times are returned for the statistics.

Minimum samples: warm-up always runs ``warmup_min`` iterations, even past
``warmup_max_time_s``; measurement always reaches ``min_iterations``, even past
``max_time_s`` (a target, not a cut), and says so in :attr:`Timings.notes`.
Only ``strict_max_time`` makes the time a hard cap; a case cut below the
minimum then has :attr:`Timings.below_minimum` set (stored as ``insufficient``).
The adaptive stop tests the statistic the record reports
(:func:`accelbench.stats.throughput_ci_rel_halfwidth`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.meters.updates import EnergyWindow
from accelbench.spec import MeasurementPolicy, StopReason
from accelbench.stats import CHECK_RESAMPLES, throughput_ci_rel_halfwidth

ProgressFn = Callable[[str, int, float, float], None]
"""Called as ``progress(phase, iterations, samples_per_s, elapsed_s)``."""
LiveWindowFn = Callable[[], tuple[EnergyWindow | None, str]]
"""The energy window of the sensors still working in the open window (None when none
does) and why the others failed (:meth:`accelbench.meters.session.MeterSession.live_window`);
in a case of many ranks agreed over them (a collective: every rank calls it at the same
step)."""
AgreeFn = Callable[[float, float], tuple[float, float]]
"""``agree(step_time_s, elapsed_s)``: in a case of many ranks, the MAX over ranks of both
(a collective, called after each step outside its timed region), so that every rank holds
the same series and takes the same stop decisions; None for one process."""

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
    notes: tuple[str, ...] = ()
    """One line per departure from the policy's limits (a minimum honoured past a time
    limit), for the record."""
    below_minimum: bool = False
    """A hard time cap (``strict_max_time``) stopped measurement below ``min_iterations``."""
    energy_short: str = ""
    """Why the window is too short for an energy figure (an exact ``--iterations`` count,
    or ``strict_max_time``, refused to extend it), or ``""``."""
    energy_extension: dict[str, Any] | None = None
    """Where the timing policy would have stopped when the window was extended for
    energy: ``{"from_iterations", "from_s", "to_iterations", "to_s", "rule"}``."""


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
    notes: list[str] | None = None,
    agree: AgreeFn | None = None,
) -> list[float]:
    """Run warm-up iterations until the step time stops falling (bounded).

    At least ``warmup_min`` iterations run whatever the time limit; when that
    takes past ``warmup_max_time_s``, a line saying so is appended to ``notes``.
    """
    times: list[float] = []
    if policy.warmup_max == 0:
        return times
    start = time.perf_counter()
    past_limit_at: int | None = None
    sync()
    while len(times) < policy.warmup_max:
        t = _timed(step, sync)
        elapsed = time.perf_counter() - start
        if agree is not None:
            t, elapsed = agree(t, elapsed)
        times.append(t)
        if progress is not None:
            progress("warmup", len(times), 0.0, elapsed)
        if len(times) < policy.warmup_min:
            if elapsed >= policy.warmup_max_time_s and past_limit_at is None:
                past_limit_at = len(times)
            continue
        if _stopped_falling(times) or elapsed >= policy.warmup_max_time_s:
            break
    if notes is not None and past_limit_at is not None:
        notes.append(
            f"warm-up went on past its {policy.warmup_max_time_s:g} s limit to its minimum of "
            f"{policy.warmup_min} iterations ({past_limit_at} done at the limit; "
            f"{time.perf_counter() - start:.3g} s in all)"
        )
    return times


#: Up to this many times the full bootstrap costs under ~20 ms and is the stop test itself;
#: above, a cheap screen (with a margin, so it rarely says no when the full test would say
#: yes) runs first and only a pass is confirmed with the full bootstrap.
_FULL_CHECK_MAX_N = 256
_SCREEN_MARGIN = 1.25


def ci_reached(times: list[float], samples_per_step: int, target: float) -> bool:
    """Whether the CI the record will report (full bootstrap, same seed) is within ``target``.

    True only when :func:`accelbench.stats.compute_stats` on these times reports a
    ``ci_rel_halfwidth`` of at most ``target``: a case stopped on ``target_ci`` never
    reports a wider CI than asked.
    """
    if len(times) > _FULL_CHECK_MAX_N:
        screen = throughput_ci_rel_halfwidth(
            times, samples_per_step, resamples=CHECK_RESAMPLES
        )
        if screen > target * _SCREEN_MARGIN:
            return False
    return throughput_ci_rel_halfwidth(times, samples_per_step) <= target


def _policy_stop(
    times: list[float], elapsed: float, policy: MeasurementPolicy, samples_per_step: int,
    checks: list[int],
) -> StopReason | None:
    """The timing policy's reason to stop now, or None; ``checks[0]`` is the iteration
    count at which the CI is next tested (checks grow geometrically: O(log n) bootstraps)."""
    n = len(times)
    if policy.iterations is not None:
        return "iterations" if n >= policy.iterations else None
    if n >= checks[0] and elapsed >= policy.min_time_s:
        checks[0] = max(n + 1, math.ceil(n * 1.1))
        if ci_reached(times, samples_per_step, policy.target_ci):
            return "target_ci"
    if n >= policy.max_iterations:
        return "max_iterations"
    if elapsed >= policy.max_time_s and (policy.strict_max_time or n >= policy.min_iterations):
        return "max_time"
    return None


@dataclass(slots=True)
class _Extension:
    """The state of a window the energy rule keeps open past the policy's stop."""

    window: EnergyWindow | None
    live: LiveWindowFn | None = None
    reason: StopReason | None = None
    from_n: int = 0
    from_s: float = 0.0
    short: str = ""
    failed: str = ""
    """Why meters left out of the window failed (the last time it was sized)."""

    def done(self, n: int, elapsed: float, policy: MeasurementPolicy, stop: StopReason) -> bool:
        """Whether measurement may end at the policy's ``stop`` after ``n`` steps: the
        window of the sensors still working is met, none works, or the policy refuses to
        extend (an exact ``--iterations`` count; ``--strict-max-time`` at its limit)."""
        if self.live is not None:
            self.window, why = self.live()
            self.failed = why or self.failed
        if self.window is None or self.window.met(n, elapsed):
            return True
        if self.reason is None:
            self.reason, self.from_n, self.from_s = stop, n, elapsed
        if policy.iterations is not None:
            self.short = (
                f"--iterations {policy.iterations} ran {elapsed:.3g} s, too short for energy: "
                f"{self.window.describe()}; drop --iterations or use --target-ci / --max-time "
                "to let the window grow"
            )
        elif policy.strict_max_time and elapsed >= policy.max_time_s:
            self.short = (
                f"the {elapsed:.3g} s / {n}-step window is too short for energy: "
                f"{self.window.describe()}, and --strict-max-time {policy.max_time_s:g} s "
                "refused to extend it"
            )
        return bool(self.short)


def measure(
    step: Callable[[], None],
    sync: Callable[[], None],
    policy: MeasurementPolicy,
    samples_per_step: int,
    progress: ProgressFn | None = None,
    notes: list[str] | None = None,
    energy_window: EnergyWindow | None = None,
    extension: dict[str, Any] | None = None,
    agree: AgreeFn | None = None,
    live_window: LiveWindowFn | None = None,
) -> tuple[list[float], StopReason]:
    """Timed iterations until the policy says stop; returns raw times and the reason.

    ``max_time_s`` ends the adaptive loop only once ``min_iterations`` are done,
    unless ``strict_max_time``; going past it to the minimum appends a line to
    ``notes``. With ``energy_window``, the adaptive loop goes on past the policy's stop
    until the window is long enough for energy (the timed steps of the extension count
    like any other); an exact ``iterations`` count never does, nor ``strict_max_time``
    past ``max_time_s``: ``extension`` (filled in place) then receives ``short`` with why.
    ``live_window``, when given, re-sizes the window at each step past the stop from the
    sensors still working: failed ones never extend it, and with none left it ends.
    """
    times: list[float] = []
    start = time.perf_counter()
    last_report = start
    checks = [policy.min_iterations]
    past_time_at: int | None = None
    ext = _Extension(energy_window, live_window) if energy_window is not None else None
    reason: StopReason | None = None
    while True:
        t = _timed(step, sync)
        now = time.perf_counter()
        elapsed = now - start
        if agree is not None:
            t, elapsed = agree(t, elapsed)
        times.append(t)
        n = len(times)
        if progress is not None and now - last_report >= _PROGRESS_PERIOD_S:
            last_report = now
            progress("measure", n, samples_per_step / float(np.median(times)), elapsed)
        if reason is None:
            reason = _policy_stop(times, elapsed, policy, samples_per_step, checks)
            if (reason is None and past_time_at is None and policy.iterations is None
                    and elapsed >= policy.max_time_s):
                past_time_at = n
        if reason is not None and (ext is None or ext.done(n, elapsed, policy, reason)):
            break
    total_s = time.perf_counter() - start
    if notes is not None and past_time_at is not None:
        notes.append(
            f"measurement went on past --max-time {policy.max_time_s:g} s to the minimum of "
            f"{policy.min_iterations} iterations ({past_time_at} done at the limit; "
            f"{total_s:.3g} s in all)"
        )
    if ext is not None and notes is not None:
        _window_notes(ext, len(times), total_s, notes)
    if ext is not None and ext.reason is not None and extension is not None:
        extension.update(
            from_iterations=ext.from_n, from_s=ext.from_s, to_iterations=len(times),
            to_s=total_s, rule=ext.window.describe() if ext.window else "", short=ext.short,
        )
    return times, reason


def _window_notes(ext: _Extension, n: int, total_s: float, notes: list[str]) -> None:
    """The record's lines on the energy window: where it was extended from, and the
    failed meters that did not size it."""
    if ext.failed:
        left = "no working sensor is left to measure energy" if ext.window is None else (
            "the window is sized from the sensors still working")
        notes.append(f"failed meters do not extend the energy window ({ext.failed}): {left}")
    if ext.reason is not None and not ext.short and ext.window is not None:
        notes.append(
            f"measurement extended for energy from {ext.from_n} iterations "
            f"({ext.from_s:.3g} s, where the timing policy stopped) to {n} "
            f"({total_s:.3g} s): {ext.window.describe()}"
        )


def run_loop(
    step: Callable[[], None],
    sync: Callable[[], None],
    policy: MeasurementPolicy,
    samples_per_step: int,
    progress: ProgressFn | None = None,
    *,
    on_measure_start: Callable[[], None] | None = None,
    energy_window: EnergyWindow | None = None,
    agree: AgreeFn | None = None,
    live_window: LiveWindowFn | None = None,
) -> Timings:
    """Warm-up then measurement; ``on_measure_start`` opens the energy window, which
    ``energy_window`` (when energy is measured by a sensor) keeps open long enough, sized
    from the sensors still working when ``live_window`` is given; ``agree`` makes the
    ranks of a distributed case hold one series (:data:`AgreeFn`)."""
    notes: list[str] = []
    warm = warm_up(step, sync, policy, progress, notes, agree)
    if on_measure_start is not None:
        on_measure_start()
    extension: dict[str, Any] = {}
    times, reason = measure(step, sync, policy, samples_per_step, progress, notes,
                            energy_window, extension, agree, live_window)
    below = policy.iterations is None and len(times) < policy.min_iterations
    if below:
        notes.append(
            f"--strict-max-time {policy.max_time_s:g} s stopped measurement after "
            f"{len(times)} of the minimum {policy.min_iterations} iterations; no CI"
        )
    short = str(extension.pop("short", ""))
    return Timings(tuple(warm), tuple(times), reason, tuple(notes), below,
                   energy_short=short, energy_extension=extension or None)
