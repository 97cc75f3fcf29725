"""One measurement window over the devices a case uses.

:func:`open_session` asks the device-meter registry (:mod:`.registry`) for a meter
per device: the GPU meter (NVML, else AMD SMI) for ``cuda:N``; RAPL package and DRAM
for ``cpu`` when readable, else the TDP estimate when a TDP is known, else an
``unavailable`` reading; a plugin's meter for the devices it claims. The runner then
calls::

    session = open_session(["cuda:0", "cpu"], cpu_tdp_w=None, idle_s=3.0)
    with session:
        session.measure_idle()          # baseline before the case (no-op if idle_s == 0)
        session.start()
        ...                             # timed iterations
        readings, timeline = session.stop(samples=n_samples_processed)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from accelbench.errors import ConfigError, MeterError
from accelbench.meters import clock
from accelbench.meters.common import (
    WHOLE_WINDOW_COVERAGE,
    Meter,
    MeterOutput,
    SensorInfo,
    join_notes,
)
from accelbench.meters.registry import DeviceMeterOptions, open_device_meter
from accelbench.meters.sampler import DEFAULT_INTERVAL_S, DEFAULT_MAX_SAMPLES
from accelbench.meters.uncertainty import idle_spread, with_bound, with_dynamic_bound
from accelbench.meters.updates import EnergyWindow
from accelbench.result import EnergyReading

#: Energy counters (RAPL) integrate in hardware: polling only has to catch wraparounds
#: (minutes apart even at 500 W) and draw the timeline. A 100 ms poll keeps the sampler
#: thread off the training threads' cores; benchmarks/meter_overhead.py measures both.
DEFAULT_COUNTER_POLL_S = 0.1

TIMELINE_POINTS = 500
"""Most points per sensor in the stored power timeline."""
SETTLE_CHUNK_S = 2.0
"""Seconds of load between two drift checks of the thermal settle."""
SETTLE_CHUNKS = 3
"""Chunks whose power (and temperature) must agree for the device to count as settled."""
SETTLE_POWER_REL = 0.02
"""Largest spread of those chunks' mean power, relative to their mean."""
SETTLE_TEMP_C = 1.0
"""Temperature change over those chunks below which the device counts as settled."""


def _steady(powers: list[float], temps: list[float]) -> bool:
    """Whether the last chunks' power and temperature have stopped drifting."""
    n = SETTLE_CHUNKS
    if powers:
        if len(powers) < n:
            return False
        last = powers[-n:]
        mean = sum(last) / n
        if mean <= 0 or (max(last) - min(last)) > SETTLE_POWER_REL * mean:
            return False
    if temps:
        if len(temps) < n:
            return False
        if max(temps[-n:]) - min(temps[-n:]) >= SETTLE_TEMP_C:
            return False
    return bool(powers or temps)


def refuse_energy(
    readings: Sequence[EnergyReading], why: str
) -> tuple[EnergyReading, ...]:
    """The readings with every sensor figure withdrawn (``unavailable``, saying why).

    Estimates and readings already unavailable are kept as they are: the rule that a
    window be long enough concerns sensors.
    """
    out: list[EnergyReading] = []
    for r in readings:
        if r.source in ("counter", "integrated_samples"):
            details = dict(r.details)
            details["withdrawn"] = {"source": r.source, "energy_j": r.energy_j,
                                    "window_s": r.window_s}
            r = dataclasses.replace(
                r, source="unavailable", energy_j=None, avg_power_w=None,
                energy_j_per_sample=None, dynamic_energy_j_per_sample=None,
                note=join_notes(why, r.note), details=details,
            )
        out.append(r)
    return tuple(out)


def normalize_device(device: str) -> str:
    """``cuda`` -> ``cuda:0``; other strings unchanged (stripped, lower-case)."""
    device = device.strip().lower()
    return "cuda:0" if device == "cuda" else device


def meter_for(
    device: str,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    counter_poll_s: float = DEFAULT_COUNTER_POLL_S,
    cpu_tdp_w: float | None = None,
    gpu_uuid: str | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    device_name: str | None = None,
) -> Meter:
    """The meter for one accelbench device from the device meter that claims it
    (:mod:`accelbench.meters.registry`); a :class:`~accelbench.meters.common.NullMeter`
    if none does."""
    options = DeviceMeterOptions(
        interval_s=interval_s, counter_poll_s=counter_poll_s, cpu_tdp_w=cpu_tdp_w,
        uuid=gpu_uuid, max_samples=max_samples, device_name=device_name,
    )
    return open_device_meter(normalize_device(device), options)


class MeterSession:
    """Meters for the devices of one case, with an idle baseline and one window.

    Build it with :func:`open_session`. Use it as a context manager (or call
    :meth:`close`) so sampler threads and vendor handles are released even on
    an exception or Ctrl-C.

    Args:
        meters: One meter per device.
        idle_s: Seconds of idle baseline sampled by :meth:`measure_idle`.
        timeline_points: Most points per sensor in the returned timeline.
    """

    def __init__(
        self,
        meters: Sequence[Meter],
        *,
        idle_s: float = 3.0,
        timeline_points: int = TIMELINE_POINTS,
    ) -> None:
        self.meters = list(meters)
        self.idle_s = idle_s
        self.timeline_points = timeline_points
        self.idle_power_w: dict[str, float] = {}
        """Average idle power per reading device, from :meth:`measure_idle`."""
        self.idle_spread: dict[str, tuple[float, int]] = {}
        """Spread of the idle baseline per device: (standard deviation in W, readings)."""
        self._running: list[Meter] = []
        self._t0_s = 0.0

    def describe(self) -> list[SensorInfo]:
        """The sensors this session reads."""
        return [info for meter in self.meters for info in meter.describe()]

    # -- window ----------------------------------------------------------------------------

    def _start_all(self) -> None:
        if self._running:
            raise MeterError("the meter session is already running; call stop() first")
        try:
            for meter in self.meters:
                meter.start()
                self._running.append(meter)
        except BaseException:
            self._stop_all()
            raise

    def _stop_all(self) -> list[MeterOutput]:
        """Stop every running meter; a failing one never leaves the others running."""
        outputs: list[MeterOutput] = []
        running, self._running = self._running, []
        bug: BaseException | None = None
        for meter in running:
            try:
                outputs.extend(meter.stop())
            except MeterError as exc:
                outputs.append(
                    MeterOutput(
                        reading=EnergyReading(
                            device=meter.device,
                            scope=meter.scope,
                            source="unavailable",
                            note=f"meter failed at stop: {exc}",
                        )
                    )
                )
            except BaseException as exc:  # a bug or Ctrl-C: stop the rest, then raise it
                bug = bug or exc
        if bug is not None:
            raise bug
        return outputs

    def energy_window(self) -> EnergyWindow | None:
        """The shortest window an energy figure of these meters may come from, or None
        when no meter reads a sensor (estimates and unavailable readings need none).

        Sized from the slowest sensor's update period: nominal, or measured by
        :meth:`measure_idle`.
        """
        periods = [p for m in self.meters if (p := m.update_period_s()) is not None and p > 0]
        return EnergyWindow.for_period(max(periods)) if periods else None

    def live_window(self) -> tuple[EnergyWindow | None, str]:
        """While the window is open: the energy window of the sensors still working (None
        when none does) and why the others failed (``"device: why; ..."``, or ``""``).
        A failed meter never extends the window: it can give it no figure."""
        periods: list[float] = []
        failed: list[str] = []
        for m in self._running:
            if (p := m.update_period_s()) is None or p <= 0:
                continue
            if why := m.failure():
                failed.append(f"{m.device}: {why}")
            else:
                periods.append(p)
        return (EnergyWindow.for_period(max(periods)) if periods else None), "; ".join(failed)

    def _live_energy(self) -> dict[tuple[int, str], tuple[float, float]]:
        """``(time of the latest sample, energy so far)`` per sensor channel of the open
        window (estimates and channels without a sample yet left out)."""
        out: dict[tuple[int, str], tuple[float, float]] = {}
        for i, meter in enumerate(self._running):
            if meter.update_period_s() is None:
                continue
            for channel, value in meter.live().items():
                if value.t_s is not None and math.isfinite(value.energy_j):
                    out[(i, channel)] = (value.t_s, value.energy_j)
        return out

    def _temperature_c(self) -> float | None:
        temps = [t for m in self.meters if (t := m.temperature_c()) is not None]
        return max(temps) if temps else None

    def settle(
        self,
        run_for: Callable[[float], None],
        max_s: float,
        *,
        chunk_s: float = SETTLE_CHUNK_S,
    ) -> dict[str, Any]:
        """Thermal settle: run the load until power and temperature stop drifting.

        The load runs in chunks of ``chunk_s``; after each, the chunk's mean power (from
        the sensors' energy) and the hottest device temperature are read. Settled when
        the last :data:`SETTLE_CHUNKS` chunk powers lie within :data:`SETTLE_POWER_REL`
        of their mean and the temperature moved less than :data:`SETTLE_TEMP_C` over
        them; bounded by ``max_s``.

        Args:
            run_for: Runs training steps for about the given seconds (synchronised).
            max_s: Longest settle; 0 does nothing.
            chunk_s: Seconds per chunk.

        Returns:
            The record: ``{"max_s", "settle_s", "settled", "power_w", "temperature_c"}``
            (``reason`` instead when nothing can be judged), or ``{}`` when ``max_s`` is 0.
        """
        if max_s <= 0:
            return {}
        if self.energy_window() is None and self._temperature_c() is None:
            return {"max_s": max_s, "settle_s": 0.0, "settled": False,
                    "reason": "no power or temperature sensor to judge drift by; not settled"}
        powers: list[float] = []
        temps: list[float] = []
        settled = False
        t0 = clock.now()
        self._start_all()
        try:
            prev = self._live_energy()
            while True:
                left = max_s - (clock.now() - t0)
                if left <= 0:
                    break
                run_for(min(chunk_s, left))
                now = self._live_energy()
                # Each channel's mean power between its own sample times (a counter polled
                # every 100 ms is up to 100 ms behind the clock).
                parts = [(e1 - prev[k][1]) / (t1 - prev[k][0])
                         for k, (t1, e1) in now.items() if k in prev and t1 > prev[k][0]]
                if parts:
                    powers.append(sum(parts))
                prev = now
                temp = self._temperature_c()
                if temp is not None:
                    temps.append(temp)
                if _steady(powers, temps):
                    settled = True
                    break
        finally:
            self._stop_all()
        return {"max_s": max_s, "settle_s": clock.now() - t0, "settled": settled,
                "power_w": powers, "temperature_c": temps}

    def measure_idle(self) -> dict[str, float]:
        """Sample power for ``idle_s`` seconds before the case; no-op if ``idle_s`` is 0.

        Returns:
            Average idle power per reading device (devices without power are absent).
        """
        if self.idle_s <= 0:
            return {}
        self._start_all()
        try:
            clock.sleep(self.idle_s)
        finally:
            outputs = self._stop_all()
        self.idle_power_w = {
            o.reading.device: o.reading.avg_power_w
            for o in outputs
            if o.reading.avg_power_w is not None and o.reading.energy_j is not None
        }
        self.idle_spread = {}
        for o in outputs:
            if o.reading.device in self.idle_power_w:
                timeline = (o.series.timeline(max_points=self.timeline_points)["power_w"]
                            if o.series is not None and o.series.n_samples else [])
                spread = idle_spread(o.reading, timeline)
                if spread is not None:
                    self.idle_spread[o.reading.device] = spread
        return dict(self.idle_power_w)

    def start(self) -> None:
        """Open the measurement window on every meter."""
        self._t0_s = clock.now()
        self._start_all()

    def stop(self, samples: int) -> tuple[tuple[EnergyReading, ...], dict[str, Any]]:
        """Close the window.

        Args:
            samples: Samples processed in the window (for per-sample energy).

        Returns:
            One reading per device or domain, and the power timeline
            ``{sensor: {"t_s": [...], "power_w": [...]}}`` (at most
            ``timeline_points`` points per sensor, ``t_s`` from :meth:`start`).

        Raises:
            ConfigError: If ``samples`` is negative.
        """
        if samples < 0:
            raise ConfigError(f"samples must be >= 0, got {samples}")
        outputs = self._stop_all()
        readings: list[EnergyReading] = []
        timeline: dict[str, Any] = {}
        for output in outputs:
            readings.append(self._finish(output.reading, samples))
            series = output.series
            if series is not None and series.n_samples:
                timeline[output.reading.device] = series.timeline(
                    max_points=self.timeline_points, t0_s=self._t0_s
                )
        return tuple(readings), timeline

    def _finish(self, reading: EnergyReading, samples: int) -> EnergyReading:
        """Per-sample and dynamic energy of a reading.

        A reading whose energy covers only part of the window (``details["coverage"]``
        below :data:`~accelbench.meters.common.WHOLE_WINDOW_COVERAGE`, e.g. a counter
        that stopped answering late in the window) is divided by the samples of the
        covered part (``samples * coverage``, at the window's steady rate), and the
        note says so; dividing the covered energy by all samples would be low by the
        uncovered share.
        """
        energy_j = reading.energy_j
        idle_w = self.idle_power_w.get(reading.device)
        updates: dict[str, Any] = {}
        notes: list[str] = [reading.note]
        coverage = reading.details.get("coverage") if reading.details else None
        covered_samples = float(samples)
        if (
            energy_j is not None
            and isinstance(coverage, (int, float))
            and 0.0 < coverage < WHOLE_WINDOW_COVERAGE
            and samples > 0
        ):
            covered_samples = samples * float(coverage)
            notes.append(
                f"per-sample energy is over the {coverage:.1%} of the window the readings "
                f"cover (about {covered_samples:.4g} of {samples} samples)"
            )
        if energy_j is not None and samples > 0:
            updates["energy_j_per_sample"] = energy_j / covered_samples
        if idle_w is not None:
            updates["idle_power_w"] = idle_w
            if energy_j is not None and samples > 0 and reading.window_s is not None:
                updates["dynamic_energy_j_per_sample"] = (
                    energy_j - idle_w * reading.window_s
                ) / covered_samples
        if energy_j is not None and samples == 0:
            notes.append("no samples processed; per-sample energy not computed")
        if len(notes) > 1:
            updates["note"] = join_notes(*notes)
        out = with_bound(dataclasses.replace(reading, **updates) if updates else reading)
        spread = self.idle_spread.get(reading.device)
        if idle_w is not None and spread is not None:
            out = with_dynamic_bound(out, idle_w, spread)
        return out

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop anything running and release every meter."""
        try:
            self._stop_all()
        finally:
            for meter in self.meters:
                meter.close()

    def __enter__(self) -> MeterSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_session(  # noqa: PLR0913
    devices: Sequence[str],
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    counter_poll_s: float = DEFAULT_COUNTER_POLL_S,
    cpu_tdp_w: float | None = None,
    idle_s: float = 3.0,
    gpu_uuids: Mapping[str, str] | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    device_names: Mapping[str, str] | None = None,
    extra: Sequence[Meter] = (),
) -> MeterSession:
    """Meters for the devices a case uses.

    Args:
        devices: accelbench device strings (``cpu``, ``cuda:0`` ...); duplicates dropped.
        interval_s: Power sampling interval in seconds (default 10 ms).
        counter_poll_s: Poll interval of CPU energy counters (RAPL; default 100 ms).
        cpu_tdp_w: TDP of all CPU packages together, for the estimate where no
            CPU sensor exists.
        idle_s: Seconds of idle baseline :meth:`MeterSession.measure_idle` samples.
        gpu_uuids: UUID per ``cuda:N`` when the caller knows it (e.g. from
            ``torch.cuda.get_device_properties(N).uuid``); otherwise
            ``CUDA_VISIBLE_DEVICES`` is used.
        max_samples: Bound on stored samples per sensor.
        device_names: Model name per device where the meter depends on it (TPUs:
            jax's ``device_kind``, which selects the published TDP).
        extra: Meters beyond the devices' (a node meter); the session owns and closes them.

    Raises:
        ConfigError: On a non-positive interval, negative idle time or bad TDP.
    """
    if not interval_s > 0:
        raise ConfigError(f"power sampling interval must be > 0 s, got {interval_s}")
    if not counter_poll_s > 0:
        raise ConfigError(f"counter poll interval must be > 0 s, got {counter_poll_s}")
    if idle_s < 0:
        raise ConfigError(f"idle baseline must be >= 0 s, got {idle_s}")
    if cpu_tdp_w is not None and not cpu_tdp_w > 0:
        raise ConfigError(f"--cpu-tdp-w must be > 0 W, got {cpu_tdp_w}")
    uuids = dict(gpu_uuids or {})
    meters: list[Meter] = list(extra)
    seen: set[str] = set()
    try:
        for raw in devices:
            device = normalize_device(raw)
            if device in seen:
                continue
            seen.add(device)
            meters.append(
                meter_for(
                    device,
                    interval_s=interval_s,
                    counter_poll_s=counter_poll_s,
                    cpu_tdp_w=cpu_tdp_w,
                    gpu_uuid=uuids.get(device),
                    max_samples=max_samples,
                    device_name=(device_names or {}).get(device),
                )
            )
    except BaseException:
        for meter in meters:
            meter.close()
        raise
    # The devices' meters first (the training device's reading leads), node meters last.
    return MeterSession(meters[len(extra):] + meters[:len(extra)], idle_s=idle_s)
