"""The energy window's hold on measurement: where the timing policy would stop, the loop
(:func:`accelbench.execution.measure.measure`) goes on until the window of the sensors
still working is long enough for energy, unless the policy refuses to extend it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from accelbench.meters.updates import EnergyWindow
from accelbench.spec import MeasurementPolicy, StopReason

LiveWindowFn = Callable[[], tuple[EnergyWindow | None, str]]
"""The energy window of the sensors still working in the open window (None when none
does) and why the others failed (:meth:`accelbench.meters.session.MeterSession.live_window`);
in a case of many ranks agreed over them (a collective: every rank calls it at the same
step)."""


@dataclass(slots=True)
class Extension:
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


def window_notes(ext: Extension, n: int, total_s: float, notes: list[str]) -> None:
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
