"""Blocks timed off the loop (issue 25): measure() with a queued timer, whose times arrive
after the loop has queued more, and :class:`StampedBlocks` (JAX's) on an asynchronous
device of its own thread; no framework involved (tests/test_jax.py runs it on real steps)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

import pytest

from accelbench.backends.blocks import BlockTime, QueuedBlocks, StampedBlocks
from accelbench.execution.measure import RUN_AHEAD_S, Loop, measure, run_ahead, run_loop
from accelbench.spec import MeasurementPolicy
from accelbench.stats import throughput_ci_rel_halfwidth


class Scripted:
    """A queued timer on a script: block i's per-step time is ``mean(i)``, and it is
    stamped once ``lag`` later blocks have been queued (or when waited for). It counts
    the loop's waits and the most blocks ever pending."""

    clock = "scripted, stamped late"

    def __init__(self, mean: Callable[[int], float], lag: int = 2) -> None:
        self.mean, self.lag = mean, lag
        self.sizes: list[int] = []
        self.stamped = 0
        self.taken = 0
        self.waits = 0
        self.most_pending = 0
        self.closed = False

    @property
    def pending(self) -> int:
        return len(self.sizes) - self.stamped

    def submit(self, k: int) -> None:
        self.sizes.append(k)
        self.most_pending = max(self.most_pending, self.pending)
        self.stamped = max(self.stamped, len(self.sizes) - self.lag)

    def ready(self, wait: bool = False) -> list[BlockTime]:
        if wait and self.stamped == self.taken and self.pending:
            self.waits += 1
            self.stamped += 1
        out = [BlockTime(self.mean(i) * self.sizes[i]) for i in range(self.taken, self.stamped)]
        self.taken = self.stamped
        return out

    def close(self) -> None:
        self.closed = True


def test_a_scripted_timer_is_a_queued_timer() -> None:
    assert isinstance(Scripted(lambda i: 0.001), QueuedBlocks)
    assert isinstance(StampedBlocks(lambda: None, lambda: None, lambda h: None), QueuedBlocks)


def test_exact_iterations_wait_for_every_block_queued() -> None:
    timer = Scripted(lambda i: 0.001 * (1 + i % 3), lag=3)
    got = measure(Loop(lambda: None, lambda: None, MeasurementPolicy(iterations=23), 1,
                       blocks=timer), k=5, ahead=8)
    assert got.stop_reason == "iterations"
    assert timer.sizes == got.block_steps == [5, 5, 5, 5, 3]  # 23 steps queued, no more
    assert got.times_s == pytest.approx([0.001, 0.002, 0.003, 0.001, 0.002])
    # The loop never waited while it queued (3 late < 8 ahead): only at the stop, for the
    # blocks still running, and then for every one of them.
    assert timer.waits == 3 and timer.pending == 0 and timer.closed


def test_the_loop_waits_only_with_ahead_blocks_pending() -> None:
    timer = Scripted(lambda i: 0.001, lag=10)  # nothing stamped before 10 more are queued
    got = measure(Loop(lambda: None, lambda: None, MeasurementPolicy(iterations=300), 1,
                       blocks=timer), k=10, ahead=4)
    assert got.steps == 300 and len(got.times_s) == 30
    assert timer.most_pending == 4  # at most 4 running: then the loop waits for one
    assert timer.waits == 30  # each block, once 4 were running (the stop's 3 included)


def test_by_default_two_blocks_run_ahead() -> None:
    """measure()'s default ``ahead`` is run_ahead's least: two blocks queued and not yet
    stamped, then the loop waits (issue 46: ``ahead=2`` -> ``3`` survived, every test
    naming its own)."""
    timer = Scripted(lambda i: 0.001, lag=10)
    got = measure(Loop(lambda: None, lambda: None, MeasurementPolicy(iterations=100), 1,
                       blocks=timer), k=10)
    assert got.steps == 100 and len(got.times_s) == 10
    assert timer.most_pending == 2
    assert timer.waits == 10


def test_a_ci_stop_on_late_times_takes_the_blocks_still_running() -> None:
    """The stop is decided on the blocks timed so far; the ones queued meanwhile are waited
    for and kept (every step run is timed once), and the CI is judged again with them."""
    timer = Scripted(lambda i: 0.001 if i % 2 else 0.00105, lag=3)
    pol = MeasurementPolicy(target_ci=0.05, min_iterations=10, min_time_s=0.0)
    got = measure(Loop(lambda: None, lambda: None, pol, 1, blocks=timer), k=20, ahead=8)
    assert got.stop_reason == "target_ci"
    assert len(got.times_s) == len(timer.sizes) == 13  # decided at 10; 3 more were running
    assert got.steps == sum(timer.sizes) == 13 * 20
    assert throughput_ci_rel_halfwidth(got.times_s, 1) <= 0.05


def test_a_ci_stop_is_judged_again_with_the_blocks_still_running() -> None:
    """Blocks alternate 1.0/1.1 ms; at the 10th timed block the CI meets a 4.6% target,
    but the three still running were slow (1.5 ms) and take it past: measurement goes on
    rather than report a wider CI than it stopped on."""
    target = 0.046
    timer = Scripted(lambda i: 0.0015 if 10 <= i <= 12 else (0.0011 if i % 2 and i < 9
                                                             else 0.001), lag=3)
    before = [0.001, 0.0011] * 4 + [0.001, 0.001]
    assert throughput_ci_rel_halfwidth(before, 1) <= target  # the stop, before the rest
    pol = MeasurementPolicy(target_ci=target, min_iterations=10, min_time_s=0.0)
    got = measure(Loop(lambda: None, lambda: None, pol, 1, blocks=timer), k=20, ahead=8)
    assert got.stop_reason == "target_ci" and len(got.times_s) > 13
    assert got.times_s[10:13] == pytest.approx([0.0015] * 3)
    assert throughput_ci_rel_halfwidth(got.times_s[:13], 1) > target
    assert throughput_ci_rel_halfwidth(got.times_s, 1) <= target
    assert got.steps == sum(timer.sizes) and timer.pending == 0


def test_run_ahead_is_about_a_second_of_blocks() -> None:
    adaptive = MeasurementPolicy()
    assert run_ahead([0.001] * 5, 50, adaptive) == round(RUN_AHEAD_S / 0.05)
    assert run_ahead([0.5] * 5, 1, adaptive) == 2  # never fewer than 2 running
    assert run_ahead([], 1, adaptive) == 2
    # A hard time cap: what is still running at the stop would pass it.
    assert run_ahead([0.001] * 5, 50, MeasurementPolicy(strict_max_time=True)) == 2


class AsyncDevice:
    """A device of its own thread: :meth:`step` queues ``seconds`` of sleep and returns
    at once; a step's handle is an event set when it ends. ``gate`` holds the device until
    it is set; a step numbered ``fail_at`` makes its handle raise."""

    def __init__(self, seconds: float = 0.002, fail_at: int | None = None) -> None:
        self.seconds, self.fail_at = seconds, fail_at
        self.gate = threading.Event()
        self.gate.set()
        self.queued = 0
        self.done = 0
        self.last: threading.Event | None = None
        self.work: queue.SimpleQueue[threading.Event] = queue.SimpleQueue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            ev = self.work.get()
            self.gate.wait()
            time.sleep(self.seconds)
            self.done += 1
            ev.set()

    def step(self) -> None:
        self.last = threading.Event()
        self.last.number = self.queued  # type: ignore[attr-defined]
        self.queued += 1
        self.work.put(self.last)

    def handle(self) -> threading.Event | None:
        return self.last

    def wait(self, ev: threading.Event) -> None:
        ev.wait()
        if self.fail_at is not None and ev.number >= self.fail_at:  # type: ignore[attr-defined]
            raise MemoryError("RESOURCE_EXHAUSTED: out of memory (fake device)")

    def timer(self) -> StampedBlocks:
        return StampedBlocks(self.step, self.handle, self.wait)


def test_stamped_blocks_queue_without_waiting_and_time_in_order() -> None:
    dev = AsyncDevice(0.002)
    dev.gate.clear()  # the device holds: nothing can finish
    timer = dev.timer()
    t0 = time.perf_counter()
    for _ in range(3):
        timer.submit(4)
    assert dev.queued == 12 and dev.done == 0  # queued, none run: submit did not wait
    assert timer.pending == 3 and timer.ready() == []  # nothing stamped, no wait either
    time.sleep(0.05)
    dev.gate.set()
    got: list[BlockTime] = []
    while timer.pending or len(got) < 3:
        got += timer.ready(wait=True)
    span = time.perf_counter() - t0
    assert len(got) == 3 and dev.done == 12
    # The first block ran from its submission, through the held 50 ms, to its end; the
    # blocks do not overlap, so together they fit in the span.
    assert got[0].total_s >= 0.05 + 4 * 0.002
    assert sum(b.total_s for b in got) <= span
    timer.close()


def test_a_block_queued_after_the_device_went_idle_is_timed_from_its_submission() -> None:
    dev = AsyncDevice(0.002)
    timer = dev.timer()
    timer.submit(2)
    first = timer.ready(wait=True)
    time.sleep(0.1)  # the device idle: not the next block's time
    timer.submit(2)
    second = timer.ready(wait=True)
    assert len(first) == len(second) == 1
    assert second[0].total_s < 0.1
    timer.close()


def test_measure_runs_stamped_blocks_to_an_exact_count() -> None:
    dev = AsyncDevice(0.001)
    pol = MeasurementPolicy(iterations=60, warmup_min=3, warmup_max=3)
    t = run_loop(Loop(dev.step, lambda: None, pol, 1, blocks=dev.timer()))
    assert t.steps == 60 and dev.queued == 3 + 60 and dev.done == dev.queued
    assert sum(t.block_steps) == 60 and len(t.times_s) == len(t.block_steps) >= 10
    assert "stamped by a thread of its own" in t.timing()
    assert all(x > 0 for x in t.times_s)


def test_a_step_that_fails_on_the_device_fails_the_measurement() -> None:
    """What a step raises when it runs (XLA's out-of-memory arrives at the wait) reaches
    the loop as the same error, so the worker records the case as it would any OOM."""
    dev = AsyncDevice(0.0005, fail_at=13)
    timer = dev.timer()
    with pytest.raises(MemoryError, match="RESOURCE_EXHAUSTED"):
        measure(Loop(dev.step, lambda: None, MeasurementPolicy(iterations=200), 1, blocks=timer),
                     k=5, ahead=3)
    assert dev.queued < 200  # the loop stopped queuing when the error came
    with pytest.raises(MemoryError):  # and the timer stays failed, never hangs a caller
        timer.ready(wait=True)


def test_close_ends_the_timer_thread() -> None:
    dev = AsyncDevice(0.0005)
    timer = dev.timer()
    before = set(threading.enumerate())
    timer.submit(3)
    timer.ready(wait=True)
    (mine,) = set(threading.enumerate()) - before  # started by the first block
    assert mine.name == "accelbench-blocks" and mine.daemon
    timer.close()
    assert not mine.is_alive()
