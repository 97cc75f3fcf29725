"""The meters' clock: the real monotonic clock, or a simulated one (tests, benchmarks).

Every meter reads time through :func:`now` and waits through :func:`sleep`, and every
:class:`~accelbench.meters.sampler.PowerSampler` takes its samples through
:func:`every`. Normally these are ``time.monotonic``, ``time.sleep`` and a daemon thread.
A sensor simulator (``tests/sensor_sim.py``) installs a :class:`SimulatedTime` with
:func:`use_simulated_time`: time then advances only when :func:`sleep` is called, and the
samplers' ticks fire in order, on the caller's thread, at their simulated times. So the
real meter code reads simulated sensors over thousands of windows in seconds, and the
same inputs give the same readings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class SimulatedTime(Protocol):
    """A simulated clock the meters may run on."""

    def now(self) -> float:
        """Current simulated time in seconds."""

    def sleep(self, seconds: float) -> None:
        """Advance time by ``seconds``, firing every periodic call that falls due."""

    def every(self, interval_s: float, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn`` every ``interval_s`` from now on; returns the function that stops it."""


_simulated: SimulatedTime | None = None


def use_simulated_time(sim: SimulatedTime | None) -> None:
    """Run the meters on ``sim`` (None: back to real time)."""
    global _simulated  # noqa: PLW0603 - one process-wide clock, swapped by simulators only
    _simulated = sim


def simulated() -> SimulatedTime | None:
    """The simulated clock in use, or None on real time."""
    return _simulated


def now() -> float:
    """Monotonic time in seconds (simulated where a simulator is installed)."""
    return _simulated.now() if _simulated is not None else time.monotonic()


def sleep(seconds: float) -> None:
    """Wait ``seconds`` (simulated time advances instead, where a simulator is installed)."""
    if _simulated is not None:
        _simulated.sleep(seconds)
    else:
        time.sleep(seconds)
