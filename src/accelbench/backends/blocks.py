"""Timed blocks of training steps: what times measurement where one step at a time would
not be exact (issue 25).

Waiting for the device after every step costs the overlap of the host's dispatch of the
next step with the device's work on this one, which an asynchronous framework (JAX, CUDA)
gives a training loop for free. Measurement (:mod:`accelbench.execution.measure`) therefore
times blocks of ``k`` steps where a step offers a timer (``block_timer()``, found by
:func:`block_timer_of`), two kinds:

- a :class:`BlockTimer` runs a block and waits for it before it returns (torch on CUDA:
  :class:`~accelbench.backends.torch.step.EventBlocks`, device events around each step;
  :class:`HostBlocks`, the host clock around the block);
- a :class:`QueuedBlocks` only queues a block and times it off the loop
  (:class:`StampedBlocks`, JAX's): a thread of its own waits for each block's end and
  stamps it while the loop goes on queuing, so the loop that dispatches the steps never
  waits for the device, as a bare training loop does not. On XLA:CPU a wait on the
  dispatching thread slows the steps queued after it: in paired rounds of one compiled
  step a wait per block on the loop cost inception and resnet50 tiny 4-12%, while blocks
  timed off the loop are within the noise of a bare loop against itself on all nine tiny
  workloads (``benchmarks/harness_overhead.py --loop-only``; figures in docs/benchmarks.md).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class BlockTime:
    """One timed block of steps: its seconds and, where the clock has them, each step's."""

    total_s: float
    step_times_s: tuple[float, ...] = ()
    """Each step's own seconds (device events); empty where only the block is timed."""


@runtime_checkable
class BlockTimer(Protocol):
    """A step's capability to run ``k`` steps and wait for the device once, at the end."""

    clock: str
    """What times a block, in words, for the record."""

    def run_block(self, k: int) -> BlockTime:
        """Run ``k`` steps, wait once; the block's time."""


@runtime_checkable
class QueuedBlocks(Protocol):
    """A step's capability to queue blocks of ``k`` steps and time them off the loop: the
    caller never waits for the device unless it asks to (``ready(wait=True)``)."""

    clock: str
    """What times a block, in words, for the record."""

    def submit(self, k: int) -> None:
        """Queue ``k`` steps as one block; returns without waiting for the device."""

    def ready(self, wait: bool = False) -> list[BlockTime]:
        """The blocks stamped since the last call, in the order queued; with ``wait``, at
        least one while any is still running. Raises what a step raised while it ran."""

    def close(self) -> None:
        """Stop timing; blocks still pending are not waited for."""


def block_timer_of(step: Any) -> BlockTimer | QueuedBlocks | None:
    """The step's timer (its optional ``block_timer()``), or None where every step is
    timed on its own (a synchronous device such as torch's CPU)."""
    make = getattr(step, "block_timer", None)
    timer = make() if callable(make) else None
    return timer if isinstance(timer, (BlockTimer, QueuedBlocks)) else None


class HostBlocks:
    """Blocks timed by the host clock: ``k`` steps queued, one wait for all of them.

    The device is idle at each block's start (the host dispatches its first step after
    the last block's wait): :class:`StampedBlocks` avoids that.

    Args:
        step: One training step (may return before the device has finished it).
        synchronize: Waits until the device has finished all queued work.
    """

    clock = "host clock around each block of steps, one device wait per block"

    def __init__(self, step: Callable[[], None], synchronize: Callable[[], None]) -> None:
        self._step = step
        self._sync = synchronize

    def run_block(self, k: int) -> BlockTime:
        step = self._step
        t0 = time.perf_counter()
        for _ in range(k):
            step()
        self._sync()
        return BlockTime(time.perf_counter() - t0)


class StampedBlocks:
    """Blocks queued behind asynchronous dispatch, each stamped at its end by a thread of
    its own.

    :meth:`submit` notes the host clock, queues the block's steps and hands the waiter a
    handle on the last step's outputs (which every earlier step's outputs feed); the waiter
    waits for each handle in turn and reads the clock when it is ready. A block's time runs
    from the end of the block before it, or from its own submission where that came later
    (the device then had nothing queued: the first block, or one after the loop stopped to
    drain), to its own end. In steady state the blocks tile the device's time with nothing
    left out or counted twice, and the loop keeps queuing as a training loop does.

    Args:
        step: One training step (returns once its work is queued).
        handle: The last step's outputs (e.g. JAX's loss array), read after each block.
        wait: Blocks until a handle is ready; called on the waiter thread only.
    """

    clock = ("host clock at each block's end, stamped by a thread of its own while the loop "
             "goes on queuing (the loop never waits for the device); a block's time runs "
             "from the end of the one before it, or from its own start if later")

    def __init__(self, step: Callable[[], None], handle: Callable[[], Any],
                 wait: Callable[[Any], None]) -> None:
        self._step, self._handle, self._wait = step, handle, wait
        # Two C queues, no lock of Python's between the threads: the loop's side of a block
        # is a put and, when one is stamped, a get.
        self._todo: queue.SimpleQueue[tuple[Any, float] | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[BlockTime | BaseException] = queue.SimpleQueue()
        self._pending = 0
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> int:
        """Blocks queued whose end has not been taken by :meth:`ready` yet."""
        return self._pending

    def submit(self, k: int) -> None:
        submitted = time.perf_counter()
        step = self._step
        for _ in range(k):
            step()
        self._todo.put((self._handle(), submitted))
        self._pending += 1
        if self._thread is None:
            self._thread = threading.Thread(target=self._stamp, name="accelbench-blocks",
                                            daemon=True)
            self._thread.start()

    def ready(self, wait: bool = False) -> list[BlockTime]:
        out: list[BlockTime] = []
        while self._pending and (wait or not self._done.empty()):
            try:  # a timeout keeps the loop open to signals while it waits
                got = self._done.get(timeout=0.5) if wait and not out else self._done.get(False)
            except queue.Empty:
                if wait and not out:
                    continue
                break
            if isinstance(got, BaseException):
                self._done.put(got)  # the timer stays failed: a later call raises it too
                raise got
            out.append(got)
            self._pending -= 1
        return out

    def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._todo.put(None)
            if not self._pending:
                thread.join()

    def _stamp(self) -> None:
        last_end: float | None = None
        while (item := self._todo.get()) is not None:
            handle, submitted = item
            try:
                self._wait(handle)
            except BaseException as exc:  # noqa: BLE001 - the loop re-raises it
                self._done.put(exc)
                return
            end = time.perf_counter()
            start = submitted if last_end is None else max(last_end, submitted)
            last_end = end
            self._done.put(BlockTime(end - start))
