"""The measurement loop: warm-up, then timed iterations with adaptive stopping.

Framework-neutral: it sees a ``step`` and a ``synchronize`` callable, and where the step
offers one a timer of blocks (:mod:`accelbench.backends.blocks`). Warm-up times every step
on its own (the device synchronised before the clock is read). Measurement then times each
step on its own too, unless a block timer is given: then it times blocks of k steps (k
chosen from the warm-up's step time so a block lasts at least :data:`BLOCK_TARGET_S`), and
each block gives one time, the block's per-step mean. The stop rule, the CI and the stored
series are of those per-step means; the step count (``iterations``, ``--iterations N``,
``--max-iterations``, the energy window) stays the true number of steps. A queued timer
(JAX's :class:`~accelbench.backends.blocks.StampedBlocks`) times blocks off the loop: the
loop keeps queuing blocks (up to about :data:`RUN_AHEAD_S` of them ahead of the device) and
decides on the blocks timed so far; at the stop it waits for the blocks still running and
takes their times too, so every step run is timed once. A case of many ranks (``agree``)
keeps k = 1: its ranks agree on every step.

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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelbench.backends.blocks import BlockTime, BlockTimer, QueuedBlocks
from accelbench.execution.energy_extension import Extension, LiveWindowFn, window_notes
from accelbench.meters.updates import EnergyWindow
from accelbench.spec import MeasurementPolicy, StopReason
from accelbench.stats import CHECK_RESAMPLES, throughput_ci_rel_halfwidth

ProgressFn = Callable[[str, int, float, float], None]
"""Called as ``progress(phase, iterations, samples_per_s, elapsed_s)``."""
AgreeFn = Callable[[float, float], tuple[float, float]]
"""``agree(step_time_s, elapsed_s)``: in a case of many ranks, the MAX over ranks of both
(a collective, called after each step outside its timed region), so that every rank holds
the same series and takes the same stop decisions; None for one process."""

_PROGRESS_PERIOD_S = 0.25
#: Warm-up ends when the median of the last window is no faster than this
#: fraction of the window before it (the step time has stopped falling).
_WARMUP_WINDOW = 3
_WARMUP_STABLE_RATIO = 0.97
#: A timed block of steps lasts at least this long: the one wait for the device that ends
#: it (and the dispatch it does not overlap) is then small beside it.
BLOCK_TARGET_S = 0.05
#: The adaptive stop tests its CI from this many blocks on (or ``--min-iterations``, when
#: lower), and an ``ok`` case holds at least as many.
MIN_BLOCKS = 10
#: A queued timer's loop runs at most about this many seconds of blocks ahead of the device
#: (at least 2 blocks; 2 under ``--strict-max-time``, whose cap the blocks still running at
#: the stop would pass): what it queues past the stop is waited for and timed.
RUN_AHEAD_S = 1.0
#: An exact ``--iterations`` count or the ``--max-iterations`` cap holds at least this many
#: blocks (k shrinks to fit), so the CI of a small step's blocks has samples to work on.
BLOCKS_UNDER_CAP = 30


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
    block_steps: tuple[int, ...] = ()
    """Steps behind each of :attr:`times_s` (each time is the per-step mean of its block);
    empty when every step was timed on its own."""
    step_times_s: tuple[float, ...] = ()
    """Each measured step's own time where a block's clock has them (device events)."""
    clock: str = ""
    """What timed the blocks (:attr:`BlockTimer.clock`), or ``""`` for one step a time."""
    block_size: int = 0
    """The k steps run per block (0: the largest of :attr:`block_steps`)."""

    @property
    def steps(self) -> int:
        """Measured training steps (iterations), whatever the blocks."""
        return sum(self.block_steps) if self.block_steps else len(self.times_s)

    @property
    def steps_per_block(self) -> int:
        """The block size k (the last block of a count may be shorter); 1 for per-step."""
        if not self.block_steps:
            return 1
        return self.block_size or max(self.block_steps)

    def timing(self) -> str:
        """How the times were taken, in words, for the record."""
        if self.steps_per_block <= 1:
            return f"every step timed on its own ({self.clock or 'device waited for after each'})"
        return (f"times are per-step means of blocks of {self.steps_per_block} steps "
                f"({len(self.times_s)} blocks, {self.steps} steps; {self.clock})")


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


def block_size(warmup_times_s: list[float] | tuple[float, ...], policy: MeasurementPolicy
               ) -> int:
    """Steps per timed block: enough for :data:`BLOCK_TARGET_S` at the warm-up's step time
    (the median of its last steps), at most a :data:`BLOCKS_UNDER_CAP`-th of the exact
    count or the ``--max-iterations`` cap; 1 without warm-up times."""
    if not warmup_times_s:
        return 1
    step_s = float(np.median(warmup_times_s[-_WARMUP_WINDOW:]))
    k = math.ceil(BLOCK_TARGET_S / step_s) if step_s > 0 else 1
    cap = policy.iterations if policy.iterations is not None else policy.max_iterations
    return max(1, min(k, cap // BLOCKS_UNDER_CAP))


def run_ahead(warmup_times_s: list[float] | tuple[float, ...], k: int,
              policy: MeasurementPolicy) -> int:
    """Blocks of ``k`` a queued timer's loop may have running before it waits: about
    :data:`RUN_AHEAD_S` of them at the warm-up's step time, at least 2 (the device is never
    idle at a block's start); 2 under ``strict_max_time``."""
    if policy.strict_max_time or not warmup_times_s:
        return 2
    step_s = float(np.median(warmup_times_s[-_WARMUP_WINDOW:]))
    return max(2, math.ceil(RUN_AHEAD_S / (k * step_s))) if step_s > 0 else 2


@dataclass(slots=True)
class _Count:
    """Where measurement stands: per-step means of blocks, and the steps behind them."""

    policy: MeasurementPolicy
    times: list[float]
    block_steps: list[int]
    """The steps each time stands for (its block's)."""
    steps: int = 0
    """Steps run (queued: a queued timer's may still be running), which every count is
    of."""
    next_check: int = 0
    """The block count at which the CI is next tested (grows geometrically: O(log n)
    bootstraps)."""

    @property
    def min_blocks(self) -> int:
        return min(self.policy.min_iterations, MIN_BLOCKS)

    def enough(self) -> bool:
        """The minimum: ``min_iterations`` steps, in at least :attr:`min_blocks` blocks
        (one step a block: ``min_iterations`` times, as ever)."""
        return (self.steps >= self.policy.min_iterations
                and len(self.times) >= self.min_blocks)

    def next_block(self, k: int) -> int:
        """Steps of the next block: ``k``, or fewer to land on an exact count or the cap."""
        p = self.policy
        cap = p.iterations if p.iterations is not None else p.max_iterations
        left = cap - self.steps
        return min(k, left) if left > 0 else k


def _policy_stop(count: _Count, elapsed: float, samples_per_step: int) -> StopReason | None:
    """The timing policy's reason to stop now, or None."""
    policy, times, n = count.policy, count.times, count.steps
    if policy.iterations is not None:
        return "iterations" if n >= policy.iterations else None
    if (count.enough() and len(times) >= count.next_check
            and elapsed >= policy.min_time_s):
        count.next_check = max(len(times) + 1, math.ceil(len(times) * 1.1))
        if ci_reached(times, samples_per_step, policy.target_ci):
            return "target_ci"
    if n >= policy.max_iterations:
        return "max_iterations"
    if elapsed >= policy.max_time_s and (policy.strict_max_time or count.enough()):
        return "max_time"
    return None


@dataclass(frozen=True, slots=True)
class Loop:
    """What the loop reads: the step to time and how to wait for the device, the policy,
    and the optional parts (progress, the ranks' agreement, a block timer, the energy
    window and its live sizing)."""

    step: Callable[[], None]
    sync: Callable[[], None]
    policy: MeasurementPolicy
    samples_per_step: int = 1
    progress: ProgressFn | None = None
    agree: AgreeFn | None = None
    """Makes the ranks of a distributed case hold one series (:data:`AgreeFn`)."""
    blocks: BlockTimer | QueuedBlocks | None = None
    """Times blocks of steps (k from :func:`block_size`; a queued timer's run-ahead from
    :func:`run_ahead`)."""
    energy_window: EnergyWindow | None = None
    """When energy is measured by a sensor: the loop goes on until it is long enough."""
    live_window: LiveWindowFn | None = None
    """Re-sizes the energy window from the sensors still working."""

    @property
    def timed_blocks(self) -> bool:
        """Whether steps run in timed blocks (a block timer, one process)."""
        return self.blocks is not None and self.agree is None


@dataclass(frozen=True, slots=True)
class Measured:
    """What :func:`measure` returns: the series, why it stopped, and its blocks."""

    times_s: list[float]
    """One time per block: the block's per-step mean (one step a block: each step's)."""
    stop_reason: StopReason
    block_steps: list[int]
    """The steps behind each time (its block's)."""
    step_times_s: list[float]
    """Each step's own time, where the block timer's clock has them."""
    notes: list[str] = field(default_factory=list)
    """One line per departure from the policy's limits, for the record."""
    extension: dict[str, Any] = field(default_factory=dict)
    """Where the policy would have stopped when the window was extended for energy
    (``from_iterations``, ``from_s``, ``to_iterations``, ``to_s``, ``rule``, ``short``);
    empty when it was not."""

    @property
    def steps(self) -> int:
        return sum(self.block_steps)


class _Now:
    """A timer that waits for each block as it is queued (a :class:`BlockTimer`, or one
    step timed on its own) seen as a queue: its blocks are ready at once."""

    def __init__(self, run: Callable[[int], BlockTime]) -> None:
        self._run = run
        self._done: list[BlockTime] = []
        self.clock = ""

    def submit(self, k: int) -> None:
        self._done.append(self._run(k))

    def ready(self, wait: bool = False) -> list[BlockTime]:
        out, self._done = self._done, []
        return out

    def close(self) -> None:
        pass


def _timer_of(loop: Loop, k: int) -> tuple[QueuedBlocks, int]:
    """The loop's timer seen as a queue, and its block size (1 when each step is timed on
    its own)."""
    blocks = loop.blocks
    if blocks is None or loop.agree is not None:
        step, sync = loop.step, loop.sync
        return _Now(lambda _: BlockTime(_timed(step, sync))), 1
    if isinstance(blocks, QueuedBlocks):
        return blocks, k
    return _Now(blocks.run_block), k


class _Run:
    """One measurement under way: the blocks queued and timed, and the stop decision."""

    def __init__(self, loop: Loop, k: int, ahead: int) -> None:
        self.loop = loop
        self.ahead = ahead
        self.count = _Count(loop.policy, [], [])
        self.step_times: list[float] = []
        self.timer, self.k = _timer_of(loop, k)
        self.queued: deque[int] = deque()
        """The steps of each block queued whose time has not been taken yet (the blocks
        still running)."""
        self.start = time.perf_counter()
        self.last_report = self.start
        self.past_time_at: int | None = None
        self.ext = (Extension(loop.energy_window, loop.live_window)
                    if loop.energy_window is not None else None)
        self.reason: StopReason | None = None

    def take(self, got: list[BlockTime], elapsed: float) -> float:
        """Record the blocks timed: each one's per-step mean and its steps."""
        agree, count = self.loop.agree, self.count
        for block in got:
            done = self.queued.popleft()
            t = block.total_s / done
            if agree is not None:
                t, elapsed = agree(t, elapsed)
            count.times.append(t)
            count.block_steps.append(done)
            self.step_times.extend(block.step_times_s)
        return elapsed

    def block(self) -> bool:
        """Queue one block, take the times ready and decide: True once measurement ends."""
        count = self.count
        kb = count.next_block(self.k)
        self.timer.submit(kb)
        self.queued.append(kb)
        count.steps += kb
        got = self.timer.ready(wait=len(self.queued) >= self.ahead)
        now = time.perf_counter()
        elapsed = self.take(got, now - self.start)
        self._report(now, elapsed)
        if self.reason is None:
            self._decide(elapsed)
        return self._ends(elapsed)

    def _report(self, now: float, elapsed: float) -> None:
        progress, count = self.loop.progress, self.count
        if progress is not None and count.times and now - self.last_report >= _PROGRESS_PERIOD_S:
            self.last_report = now
            progress("measure", count.steps,
                     self.loop.samples_per_step / float(np.median(count.times)), elapsed)

    def _decide(self, elapsed: float) -> None:
        """The policy's stop reason; where there is none past ``max_time_s``, note the
        steps done there (the minimum goes on past it)."""
        policy = self.loop.policy
        self.reason = _policy_stop(self.count, elapsed, self.loop.samples_per_step)
        if (self.reason is None and self.past_time_at is None and policy.iterations is None
                and elapsed >= policy.max_time_s):
            self.past_time_at = self.count.steps

    def _ends(self, elapsed: float) -> bool:
        """Whether measurement ends now: the policy stopped it and the energy window (if
        any) is long enough; the blocks still running are then waited for and timed, and
        a CI stop re-checked on them."""
        if self.reason is None or (self.ext is not None and not self.ext.done(
                self.count.steps, elapsed, self.loop.policy, self.reason)):
            return False
        if self.queued:  # the blocks still running: wait for them, time them all
            while self.queued:
                self.take(self.timer.ready(wait=True), elapsed)
            self.reason = _recheck(self.count, self.reason, elapsed, self.loop.samples_per_step)
        return self.reason is not None

    def notes(self, total_s: float) -> list[str]:
        """The record's lines on limits passed or not reached, and on the energy window."""
        policy, count, notes = self.loop.policy, self.count, []
        if self.past_time_at is not None:
            notes.append(
                f"measurement went on past --max-time {policy.max_time_s:g} s to the minimum "
                f"of {policy.min_iterations} iterations{_in_blocks(count)} ({self.past_time_at} "
                f"done at the limit; {total_s:.3g} s in all)"
            )
        if self.reason == "max_iterations" and self.k > 1:
            rel = throughput_ci_rel_halfwidth(count.times, self.loop.samples_per_step)
            notes.append(
                f"--max-iterations {policy.max_iterations} stopped measurement before the CI "
                f"reached the {policy.target_ci:.3g} target: {len(count.times)} timed blocks "
                f"of up to {self.k} steps gave +-{rel:.1%}; a higher --max-iterations gives "
                "more blocks"
            )
        if self.ext is not None:
            window_notes(self.ext, count.steps, total_s, notes)
        return notes

    def extension(self, total_s: float) -> dict[str, Any]:
        """Where the policy would have stopped when the window was extended for energy."""
        ext = self.ext
        if ext is None or ext.reason is None:
            return {}
        return {"from_iterations": ext.from_n, "from_s": ext.from_s,
                "to_iterations": self.count.steps, "to_s": total_s,
                "rule": ext.window.describe() if ext.window else "", "short": ext.short}


def measure(loop: Loop, k: int = 1, ahead: int = 2) -> Measured:
    """Timed steps until the policy says stop: the series, the reason, and the notes.

    With ``loop.blocks``, steps run in blocks of ``k`` (the last one of an exact count or of
    the ``max_iterations`` cap shorter), each timed once and stored as its per-step mean;
    without, each step is timed on its own (k = 1). Counts (``iterations``,
    ``min_iterations``, ``max_iterations``, the energy window) are steps. A
    :class:`~accelbench.backends.blocks.QueuedBlocks` timer times blocks off the loop: the
    loop queues a block, takes the times stamped so far and decides on those, and waits
    only with ``ahead`` blocks unstamped; at the stop it waits for every block queued, so
    every step run is timed once and measurement ends with the device idle.

    ``max_time_s`` ends the adaptive loop only once the minimum is done
    (:meth:`_Count.enough`), unless ``strict_max_time``; going past it to the minimum
    adds a line to :attr:`Measured.notes`. With ``loop.energy_window``, the adaptive loop
    goes on past the policy's stop until the window is long enough for energy (the timed
    steps of the extension count like any other); an exact ``iterations`` count never does,
    nor ``strict_max_time`` past ``max_time_s``: :attr:`Measured.extension` then holds
    ``short`` with why. ``loop.live_window``, when given, re-sizes the window at each block
    past the stop from the sensors still working: failed ones never extend it, and with
    none left it ends.
    """
    run = _Run(loop, k, ahead)
    loop.sync()
    try:
        while not run.block():
            pass
    finally:
        run.timer.close()
    total_s = time.perf_counter() - run.start
    count = run.count
    reason = run.reason
    assert reason is not None
    return Measured(count.times, reason, count.block_steps, run.step_times,
                    run.notes(total_s), run.extension(total_s))


def _recheck(count: _Count, reason: StopReason, elapsed: float, samples_per_step: int
             ) -> StopReason | None:
    """The stop reason once the blocks still running at the stop were timed: a CI stop
    stands only if the CI still meets the target (the record never reports a wider one
    than it stopped on); else the policy's other limits, or None (measure on)."""
    if reason != "target_ci" or ci_reached(count.times, samples_per_step,
                                           count.policy.target_ci):
        return reason
    count.next_check = len(count.times) + 1
    return _policy_stop(count, elapsed, samples_per_step)


def _in_blocks(count: _Count) -> str:
    if max(count.block_steps, default=1) <= 1:
        return ""
    return f" in at least {count.min_blocks} timed blocks"


def _below_minimum(policy: MeasurementPolicy, got: Measured, k: int) -> str:
    """The line saying ``strict_max_time`` stopped measurement below the minimum, or ``""``."""
    min_blocks = min(policy.min_iterations, MIN_BLOCKS)
    if policy.iterations is not None or (
            got.steps >= policy.min_iterations and len(got.times_s) >= min_blocks):
        return ""
    if k == 1:
        return (f"--strict-max-time {policy.max_time_s:g} s stopped measurement after "
                f"{got.steps} of the minimum {policy.min_iterations} iterations; no CI")
    return (f"--strict-max-time {policy.max_time_s:g} s stopped measurement after "
            f"{got.steps} iterations in {len(got.times_s)} timed blocks of {k}, below the "
            f"minimum of {policy.min_iterations} iterations in at least {min_blocks} "
            "blocks; no CI")


def run_loop(loop: Loop, on_measure_start: Callable[[], None] | None = None) -> Timings:
    """Warm-up then measurement; ``on_measure_start`` opens the energy window, which
    ``loop.energy_window`` (when energy is measured by a sensor) keeps open long enough
    (:class:`Loop` says what each of its parts does)."""
    policy = loop.policy
    notes: list[str] = []
    warm = warm_up(loop.step, loop.sync, policy, loop.progress, notes, loop.agree)
    k = block_size(warm, policy) if loop.timed_blocks else 1
    if on_measure_start is not None:
        on_measure_start()
    got = measure(loop, k, run_ahead(warm, k, policy))
    notes.extend(got.notes)
    below = _below_minimum(policy, got, k)
    if below:
        notes.append(below)
    extension = dict(got.extension)
    short = str(extension.pop("short", ""))
    timed = loop.timed_blocks
    return Timings(tuple(warm), tuple(got.times_s), got.stop_reason, tuple(notes), bool(below),
                   energy_short=short, energy_extension=extension or None,
                   block_steps=tuple(got.block_steps) if timed else (),
                   step_times_s=tuple(got.step_times_s),
                   clock=loop.blocks.clock if timed and loop.blocks is not None else "",
                   block_size=k if timed else 0)
