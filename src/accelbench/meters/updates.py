"""How often a sensor's value actually changes: its update period, from the readings.

A sensor polled faster than it updates returns the same value several times in a
row; the times at which the value changes are the sensor's updates. Their spacing
is the update period (NVML's power fields on A100/H100-class GPUs: about 100 ms;
RAPL: about 1 ms). Energy needs a window holding at least
:data:`MIN_SENSOR_UPDATES` of them (:mod:`accelbench.meters.session`).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

MIN_SENSOR_UPDATES = 50
"""Sensor updates an energy window must hold (after Yang, Adamek & Armour, SC'24)."""
MIN_WINDOW_S = 5.0
"""Shortest energy window in seconds (SC'24: runs of at least 5 s)."""
MIN_WINDOW_STEPS = 32
"""Fewest training steps in an energy window (SC'24: at least 32 repetitions)."""


@dataclass(frozen=True, slots=True)
class UpdatePeriod:
    """A sensor's update period as seen in one series of readings."""

    period_s: float
    """Seconds between updates; an upper bound when :attr:`upper_bound`."""
    updates: int
    """Updates in the span of the readings (changes seen, plus updates that repeated a
    value, inferred from the gaps)."""
    upper_bound: bool = False
    """The value changed at (nearly) every read: the sensor updates at least as often as
    it was polled, so only the poll interval is known."""

    def to_dict(self) -> dict[str, float | int | bool]:
        return {"period_s": self.period_s, "updates": self.updates,
                "upper_bound": self.upper_bound}


def detect_update_period(
    times_s: Sequence[float], values: Sequence[float]
) -> UpdatePeriod | None:
    """The update period of a sensor from readings polled faster than it updates.

    The value changes at each update; intervals between changes are multiples of the
    period (an update that repeats the previous value is invisible). The median
    interval gives the period roughly; each interval then counts as the nearest whole
    number of periods, and the period is the span between the first and last change
    over the number of updates in it, which is exact to about two poll intervals over
    the span.

    Args:
        times_s: Read times (monotonic seconds), increasing.
        values: The value read at each time (NaN for a failed read, skipped).

    Returns:
        The period, or None with fewer than three usable readings or no change at all.
    """
    pairs = [(t, v) for t, v in zip(times_s, values, strict=True)
             if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(pairs) < 3:
        return None
    changes = [pairs[i][0] for i in range(1, len(pairs)) if pairs[i][1] != pairs[i - 1][1]]
    reads = len(pairs) - 1
    poll_s = (pairs[-1][0] - pairs[0][0]) / reads if reads else 0.0
    if not changes:
        return None
    if len(changes) >= 0.9 * reads:
        return UpdatePeriod(period_s=poll_s, updates=len(changes), upper_bound=True)
    if len(changes) < 3:
        return None
    gaps = sorted(b - a for a, b in zip(changes, changes[1:], strict=False))
    rough = gaps[len(gaps) // 2]
    if rough <= 0:
        return None
    whole = sum(max(1, round(g / rough)) for g in gaps)
    period = (changes[-1] - changes[0]) / whole
    return UpdatePeriod(period_s=period, updates=whole + 1)


@dataclass(frozen=True, slots=True)
class EnergyWindow:
    """The shortest measurement window an energy figure may come from.

    At least :data:`MIN_WINDOW_S` seconds and :data:`MIN_WINDOW_STEPS` training steps, and
    at least :data:`MIN_SENSOR_UPDATES` updates of the slowest sensor in use.
    """

    min_s: float
    min_steps: int
    update_period_s: float
    """Update period of the slowest sensor in use."""

    @classmethod
    def for_period(cls, update_period_s: float) -> EnergyWindow:
        """The window for sensors whose slowest updates every ``update_period_s``."""
        return cls(
            min_s=max(MIN_WINDOW_S, MIN_SENSOR_UPDATES * update_period_s),
            min_steps=MIN_WINDOW_STEPS,
            update_period_s=update_period_s,
        )

    def met(self, steps: int, elapsed_s: float) -> bool:
        """Whether ``steps`` steps over ``elapsed_s`` seconds are enough."""
        return steps >= self.min_steps and elapsed_s >= self.min_s

    def describe(self) -> str:
        """The rule in words, for notes."""
        return (
            f"energy needs a window of at least {self.min_s:.3g} s and {self.min_steps} steps "
            f"(max({MIN_WINDOW_S:g} s, {MIN_WINDOW_STEPS} steps) and {MIN_SENSOR_UPDATES} "
            f"updates of a sensor updating every {self.update_period_s * 1e3:.3g} ms)"
        )


DEFAULT_MAX_RAW = 65_536
"""Default bound on raw readings kept per window for update-period detection (1 MB)."""


class RawTrace:
    """The first ``max_readings`` raw readings of a window, for update-period detection.

    The power series integrates and decimates as it goes; detecting how often a
    sensor updates needs the readings as read (before any merging). Memory stays
    bounded: past the limit, readings are counted but not kept, and
    :attr:`truncated` says so (the period detected from the kept part stands for
    the window; the number of updates is then scaled to the whole window).

    Args:
        max_readings: Most readings kept.
    """

    def __init__(self, max_readings: int = DEFAULT_MAX_RAW) -> None:
        if max_readings < 3:
            raise ValueError(f"max_readings must be >= 3, got {max_readings}")
        self.max_readings = max_readings
        self.times_s = array("d")
        self.values = array("d")
        self.dropped = 0
        """Readings past the limit, counted but not kept."""

    def add(self, t_s: float, value: float) -> None:
        """Keep one reading (time in monotonic seconds), or count it past the limit."""
        if len(self.times_s) < self.max_readings:
            self.times_s.append(t_s)
            self.values.append(value)
        else:
            self.dropped += 1

    def clear(self) -> None:
        """Forget every reading (a new window)."""
        self.times_s = array("d")
        self.values = array("d")
        self.dropped = 0

    @property
    def truncated(self) -> bool:
        """Whether readings were dropped at the limit."""
        return self.dropped > 0

    def __len__(self) -> int:
        return len(self.times_s)
