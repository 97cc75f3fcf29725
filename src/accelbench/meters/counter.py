"""The base of GPU meters: an energy counter read at the window edges plus power samples
sampled on a background thread (:class:`CounterSampleMeter`), and the rules its reading
follows: when the samples may stand for the window, the counter/samples cross-check, the
sensor's update period."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.errors import MeterError
from accelbench.meters import clock
from accelbench.meters.common import (
    MAX_CONSECUTIVE_ERRORS,
    MIN_COVERAGE,
    Meter,
    MeterOutput,
    covers_window,
    join_notes,
)
from accelbench.meters.sampler import (
    DEFAULT_INTERVAL_S,
    DEFAULT_MAX_SAMPLES,
    PowerSampler,
    PowerSeries,
)
from accelbench.meters.updates import (
    DEFAULT_MAX_RAW,
    RawTrace,
    UpdatePeriod,
    detect_update_period,
)
from accelbench.result import EnergyReading

CROSS_CHECK_WARN_REL = 0.05
"""Counter and integrated samples differing by more than this add a warning."""
#: The window's edges read the energy counter up to this many times, keeping the read whose
#: clock bracket is narrowest: a read the scheduler pre-empts on a busy host (its bracket
#: milliseconds wide) would misplace the edge by half the bracket, and the power with it.
EDGE_READS = 5
#: A read bracketed within this many seconds is taken at once.
TIGHT_READ_S = 0.0005


def update_period_details(
    period: UpdatePeriod | None,
    nominal_s: float | None,
    window_s: float,
    *,
    truncated: bool = False,
) -> dict[str, Any]:
    """``details["update_period"]`` and ``details["sensor_updates"]`` of one window.

    Args:
        period: The period detected from the window's readings, or None.
        nominal_s: The sensor's documented period, used when none was detected.
        window_s: The window's length.
        truncated: Whether the detection saw only the first part of the window
            (bounded memory): the update count is then scaled to the whole window.

    Returns:
        The two keys, or ``{}`` when neither a detected nor a nominal period exists.
    """
    if period is not None and period.period_s > 0:
        updates = period.updates
        if truncated or period.upper_bound:
            updates = int(window_s / period.period_s)
        return {"update_period": period.to_dict(), "sensor_updates": updates}
    if nominal_s:
        return {
            "update_period": {"period_s": nominal_s, "nominal": True},
            "sensor_updates": int(window_s / nominal_s),
        }
    return {}


def cross_check(counter_j: float, integrated_j: float) -> tuple[float | None, str]:
    """Relative difference of counter and integrated energy, and a warning above 5%.

    Args:
        counter_j: Energy from the hardware counter.
        integrated_j: Energy integrated from power samples.

    Returns:
        ``(|counter - integral| / counter, warning or "")``; ``(None, "")`` if the
        counter is zero.
    """
    if counter_j <= 0:
        return None, ""
    rel = abs(counter_j - integrated_j) / counter_j
    warning = ""
    if rel > CROSS_CHECK_WARN_REL:
        warning = (
            f"WARNING: energy counter ({counter_j:.4g} J) and integrated power samples "
            f"({integrated_j:.4g} J) differ by {rel:.1%} (> {CROSS_CHECK_WARN_REL:.0%}); "
            "the sampling interval may be too coarse for this load, or a sensor is off"
        )
    return rel, warning


def update_values(values: Sequence[float]) -> dict[str, float] | None:
    """Mean, spread and range of a sensor's updates in a window: its readings, each run
    of equal values (a value held between two updates) counted once; None with fewer than
    two. The uncertainty of integrated samples (:mod:`.uncertainty`) is sized from them."""
    distinct = [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
    if len(distinct) < 2:
        return None
    mean = sum(distinct) / len(distinct)
    var = sum((v - mean) ** 2 for v in distinct) / (len(distinct) - 1)
    return {"mean_w": mean, "std_w": math.sqrt(var), "min_w": min(distinct),
            "max_w": max(distinct), "n": len(distinct)}


@dataclass(frozen=True, kw_only=True)
class Sensor:
    """What a device's energy sensor offers, as its vendor reports it."""

    has_counter: bool
    """Whether the device has an energy counter."""
    has_power: bool
    """Whether the device reports power."""
    counter_resolution_j: float | None = None
    """Counter resolution, if known."""
    details: dict[str, Any] = field(default_factory=dict)
    """Static extras merged into every reading's details."""
    notes: tuple[str, ...] = ()
    """Static remarks added to every reading's note."""
    nominal_update_period_s: float | None = None
    """The power sensor's documented update period, used until a window has measured it
    (:meth:`CounterSampleMeter.update_period_s`)."""


class CounterSampleMeter(Meter):
    """Base of GPU meters: an energy counter read at the window edges plus power samples.

    The counter, where it exists, gives the energy (``source="counter"``); the
    samples give peak power, the timeline and a cross-check. Without a counter,
    or when it fails mid-window, the samples are integrated
    (``source="integrated_samples"``). Read errors never escape: the reading
    degrades and says why in its note.

    Subclasses implement :meth:`read_counter_j`, :meth:`read_power_w` and
    optionally :meth:`read_state`, each raising :class:`MeterError` on failure.

    Args:
        device: accelbench device string.
        scope: What is measured.
        sensor: What the sensor offers (counter, power, resolution, update period) and
            the static details and notes of every reading.
        interval_s: Power sampling interval.
        max_samples: Bound on stored samples.
        max_raw: Bound on raw power readings kept per window for detecting the
            update period.
    """

    def __init__(
        self,
        device: str,
        scope: str,
        sensor: Sensor,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        max_raw: int = DEFAULT_MAX_RAW,
    ) -> None:
        super().__init__(device, scope)
        self.interval_s = interval_s
        self.has_counter = sensor.has_counter
        self.has_power = sensor.has_power
        self.counter_resolution_j = sensor.counter_resolution_j
        self.static_details = dict(sensor.details)
        self.static_notes = sensor.notes
        self.max_samples = max_samples
        self._window_notes: list[str] = []
        self._e0_j: float | None = None
        self._t_start_s = 0.0
        self._state_start: dict[str, Any] = {}
        self._failed_reads = 0
        self._consecutive_errors = 0
        self._last_error: MeterError | None = None
        self.nominal_update_period_s = sensor.nominal_update_period_s
        self._measured_period_s: float | None = None
        self._raw = RawTrace(max_raw)
        self._invalid: str = ""

    def update_period_s(self) -> float | None:
        """The power sensor's update period: last measured (a window or the idle
        baseline), else the nominal one."""
        return self._measured_period_s or self.nominal_update_period_s

    def failure(self) -> str:
        """Why the open window can have no figure from this meter any more, or ``""``: a
        counter read at the start still gives one; otherwise the power samples must be
        running and have read at least once."""
        if self._invalid:
            return self._invalid
        if self._e0_j is not None:
            return ""
        sampler = self._sampler
        if sampler is None:
            return join_notes(*self._window_notes) or "no energy counter or power sampling"
        if sampler.error is not None:
            return f"power sampling stopped ({sampler.error})"
        if self._failed_reads and not len(self._raw) and not self._raw.dropped:
            return f"every power read failed so far ({self._last_error})"
        return ""

    def invalidate(self, reason: str) -> None:
        """Mark this window's energy untrustworthy (e.g. a counter that went backwards).

        The reading at :meth:`stop` is then ``unavailable`` with ``reason`` in its note,
        whatever the counter or the samples say. The first reason is kept.
        """
        if not self._invalid:
            self._invalid = reason

    def _window_started(self) -> None:
        """Reset a subclass's per-window state (called by :meth:`start`)."""

    def _window_extras(self, window_s: float) -> tuple[dict[str, Any], list[str]]:
        """A subclass's details and notes for the window's reading (called by :meth:`stop`)."""
        return {}, []

    def _counter_span_s(self) -> float | None:
        """Seconds between the device's own timestamps of the two edge counter reads,
        where the counter carries them (AMD SMI); None otherwise."""
        return None

    @abstractmethod
    def read_counter_j(self) -> float:
        """Read the energy counter in joules. Raises :class:`MeterError`."""

    @abstractmethod
    def read_power_w(self) -> float:
        """Read the current power in watts. Raises :class:`MeterError`."""

    def read_state(self) -> dict[str, Any]:
        """Power limit, clocks, throttling ... at a window edge (best effort)."""
        return {}

    def _safe_state(self) -> dict[str, Any]:
        try:
            return self.read_state()
        except MeterError as exc:
            return {"error": str(exc)}

    def _sample_power(self) -> float:
        try:
            power_w = self.read_power_w()
        except MeterError as exc:
            self._failed_reads += 1
            self._consecutive_errors += 1
            self._last_error = exc
            if self._consecutive_errors >= MAX_CONSECUTIVE_ERRORS:
                raise
            return math.nan
        self._consecutive_errors = 0
        self._raw.add(clock.now(), power_w)
        return power_w

    def _timed_counter(self) -> tuple[float, float]:
        """A counter read at a window edge and its time: the middle of the narrowest of up
        to :data:`EDGE_READS` clock brackets (the first within :data:`TIGHT_READ_S`)."""
        best: tuple[float, float, float] | None = None
        for _ in range(EDGE_READS):
            t0 = clock.now()
            energy_j = self.read_counter_j()
            t1 = clock.now()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, 0.5 * (t0 + t1), energy_j)
            if t1 - t0 <= TIGHT_READ_S:
                break
        assert best is not None
        return best[1], best[2]

    def start(self) -> None:
        self._window_notes = []
        self._failed_reads = 0
        self._consecutive_errors = 0
        self._last_error = None
        self._raw.clear()
        self._invalid = ""
        self._window_started()
        self._state_start = self._safe_state()
        self._e0_j = None
        self._t_start_s = clock.now()
        if self.has_counter:
            try:
                self._t_start_s, self._e0_j = self._timed_counter()
            except MeterError as exc:
                self._window_notes.append(f"energy counter unreadable at start ({exc})")
        self._sampler = None
        if self.has_power:
            sampler = PowerSampler.single(
                self._sample_power,
                self.device,
                interval_s=self.interval_s,
                max_samples=self.max_samples,
                name=f"accelbench-{self.kind}-{self.device}",
            )
            try:
                sampler.start()
            except MeterError as exc:
                self._window_notes.append(f"power sampling failed to start ({exc})")
            else:
                self._sampler = sampler

    def stop(self) -> list[MeterOutput]:
        """Close the window: read the counter's end edge, stop the samples, and make the
        reading (:meth:`_reading`) from the counter delta, else the integrated samples."""
        sampler = self._stop_sampler()
        t_stop_s, e1_j = self._end_counter()
        state_end = self._safe_state()
        window_s = max(t_stop_s - self._t_start_s, 0.0)
        series = sampler.series[self.device] if sampler is not None else None
        notes = list(self.static_notes) + self._window_notes
        if sampler is not None and sampler.error is not None:
            notes.append(f"power sampling stopped early ({sampler.error})")
        if self._failed_reads:
            notes.append(f"{self._failed_reads} power read(s) failed ({self._last_error})")
        integrated_j = self._integrated_j(series, window_s, notes)
        counter_j = self._counter_delta_j(e1_j, integrated_j, window_s, notes)
        span_s = self._counter_span_s() if counter_j is not None else None
        counter_j = self._rescaled_to_window(counter_j, span_s, window_s, notes)
        details = self._window_details(series, span_s, state_end, window_s, notes)
        common: dict[str, Any] = {
            "device": self.device,
            "scope": self.scope,
            "window_s": window_s,
            "details": details,
        }
        if series is not None and series.n_samples:
            common["peak_power_w"] = series.peak_power_w
            common["n_samples"] = series.n_samples
            common["interval_s"] = series.mean_interval_s
        reading = self._reading(counter_j, integrated_j, window_s, notes, common)
        return [MeterOutput(reading=reading, series=series)]

    def _end_counter(self) -> tuple[float, float | None]:
        """The end edge: ``(time, counter joules)``; None joules where the window has no
        start read or the counter is lost now (the window's notes say so)."""
        t_stop_s = clock.now()
        if self._e0_j is None:
            return t_stop_s, None
        try:
            return self._timed_counter()
        except MeterError as exc:
            self._window_notes.append(f"energy counter lost at stop ({exc})")
            return t_stop_s, None

    def _integrated_j(
        self, series: PowerSeries | None, window_s: float, notes: list[str]
    ) -> float | None:
        """The window's energy from the power samples, where they may stand for it."""
        if series is not None and series.n_samples >= 2 and window_s > 0:
            if covers_window(series.covered_s, window_s, self.interval_s):
                # Samples start and stop within microseconds of the window edges, or a
                # few intervals short of them after failed reads: the mean sampled power
                # stands for the whole window.
                if series.covered_s < MIN_COVERAGE * window_s:
                    notes.append(
                        f"power samples cover {series.covered_s / window_s:.0%} of the window; "
                        "their mean power is extended to all of it"
                    )
                return series.energy_j * window_s / series.covered_s
            notes.append(
                f"power samples cover only {series.covered_s / window_s:.0%} of the window"
            )
        elif self.has_power:
            notes.append("too few power samples to integrate")
        return None

    def _counter_delta_j(
        self, e1_j: float | None, integrated_j: float | None, window_s: float, notes: list[str]
    ) -> float | None:
        """The counter's energy over the window, or None where it went backwards or stood
        still while the samples show power."""
        if self._e0_j is None or e1_j is None:
            return None
        delta_j = e1_j - self._e0_j
        avg_sampled_w = integrated_j / window_s if integrated_j and window_s > 0 else None
        if delta_j < 0:
            notes.append("energy counter went backwards (driver reload?); counter ignored")
            return None
        if delta_j == 0 and avg_sampled_w and avg_sampled_w > 1.0:
            notes.append(
                f"energy counter did not advance (updates too rarely for this window?) "
                f"while power samples average "
                f"{avg_sampled_w:.1f} W; counter ignored"
            )
            return None
        return delta_j

    @staticmethod
    def _rescaled_to_window(
        counter_j: float | None, span_s: float | None, window_s: float, notes: list[str]
    ) -> float | None:
        """The counter delta scaled from the span of the device's own timestamps to the
        window, where the two roughly agree."""
        if counter_j is None or span_s is None or window_s <= 0:
            return counter_j
        if 0.5 * window_s <= span_s <= 2.0 * window_s:
            # The delta is the energy between the device's two snapshots; scale it
            # to the window the samples were processed in.
            return counter_j * window_s / span_s
        notes.append(
            f"counter timestamps span {span_s:.4g} s for a {window_s:.4g} s window; "
            "energy not rescaled"
        )
        return counter_j

    def _window_details(
        self,
        series: PowerSeries | None,
        span_s: float | None,
        state_end: dict[str, Any],
        window_s: float,
        notes: list[str],
    ) -> dict[str, Any]:
        """The reading's details: static ones, edge states, sample statistics, the update
        period, and the subclass's extras (whose notes join ``notes``)."""
        details: dict[str, Any] = dict(self.static_details)
        if span_s is not None:
            details["counter_span_s"] = span_s
        details["start"] = self._state_start
        details["end"] = state_end
        if series is not None:
            details["power_samples"] = series.interval_stats()
        if self._failed_reads:
            details["failed_power_reads"] = self._failed_reads
        # How often the sensor updates, from the raw readings (before any decimation);
        # the counter is read at the edges only, so the power sensor's period stands
        # for it (NVML: both about 100 ms).
        period = detect_update_period(self._raw.times_s, self._raw.values)
        spread = update_values(self._raw.values)
        if spread is not None:
            details["update_values"] = spread
        if period is not None:
            self._measured_period_s = period.period_s
        details.update(
            update_period_details(
                period, self.nominal_update_period_s, window_s, truncated=self._raw.truncated
            )
        )
        extra_details, extra_notes = self._window_extras(window_s)
        details.update(extra_details)
        notes.extend(extra_notes)
        return details

    def _reading(
        self,
        counter_j: float | None,
        integrated_j: float | None,
        window_s: float,
        notes: list[str],
        common: dict[str, Any],
    ) -> EnergyReading:
        """The window's reading: ``unavailable`` when invalidated, else the counter
        (cross-checked against the samples), else the integrated samples, else
        ``unavailable`` with why."""
        details = common["details"]
        if self._invalid:
            return EnergyReading(
                source="unavailable", note=join_notes(self._invalid, *notes), **common
            )
        if counter_j is not None:
            rel: float | None = None
            if integrated_j is not None:
                rel, warning = cross_check(counter_j, integrated_j)
                notes.append(warning)
                details["integrated_energy_j"] = integrated_j
            return EnergyReading(
                source="counter",
                energy_j=counter_j,
                avg_power_w=counter_j / window_s if window_s > 0 else None,
                resolution_j=self.counter_resolution_j,
                cross_check_rel_diff=rel,
                note=join_notes(*notes),
                **common,
            )
        if integrated_j is not None:
            if self.has_counter:
                notes.append("energy integrated from power samples instead")
            observed = details.get("observed_fraction")
            if isinstance(observed, (int, float)) and observed < 1:
                notes.append(
                    f"the power sensor observes only {observed:.0%} of each update period: "
                    "bursts between its averaging windows are missed; repeat the "
                    "measurement (energy trials) or use a GPU with an energy counter"
                )
            return EnergyReading(
                source="integrated_samples",
                energy_j=integrated_j,
                avg_power_w=integrated_j / window_s,
                note=join_notes(*notes),
                **common,
            )
        if not self.has_counter and not self.has_power:
            notes.insert(0, "device reports neither an energy counter nor power")
        return EnergyReading(
            source="unavailable",
            note=join_notes(*notes) or "no usable energy or power data",
            **common,
        )
