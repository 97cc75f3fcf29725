"""The energy of runs to a target: every sensor accelbench reads for the device trained on
(and the host's CPU beside an accelerator, and a node meter where one is asked for), an
idle baseline before the runs, and the energy at each evaluation point.

The framework backend calls ``clock(True)`` as its training clock starts and
``clock(False)`` as it stops; each evaluation point carries its clock time. The window
here opens the meter session at the first call and closes it at the second, and a thread
records each sensor's energy so far with the time of its latest sample
(:meth:`accelbench.meters.common.Meter.live`) while the window is open. The energy at a
point is that cumulative energy interpolated at the point's clock time; the window's end
is the sensor's own figure (a counter's delta, or the integrated samples).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.totarget.outcome import EvalPoint
from accelbench.totarget.record import SensorEnergy

#: Seconds between two reads of the sensors' energy so far while the window is open. The
#: sensors sample on their own threads (RAPL every 100 ms, GPUs every 10 ms, node meters
#: every second); this only picks up their latest sample.
POLL_S = 0.05

#: The name of the thread that follows the window (open exactly while it is).
THREAD_NAME = "accelbench-totarget-energy"

SENSED = ("counter", "integrated_samples")

NO_IDLE_SENSOR = "no sensor reads here, so no idle baseline was measured"

#: Default seconds of idle baseline before the runs (``--idle-s``), where a sensor reads.
DEFAULT_IDLE_S = 3.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Metering:
    """What is read around runs to a target beyond the device's own sensors."""

    cpu_tdp_w: float | None = None
    """Where no CPU sensor reads: estimate the energy as this power x the training clock."""
    idle_s: float = DEFAULT_IDLE_S
    """Seconds of idle baseline before the first run (0: none)."""
    node_meter: str | None = None
    """A node meter's name (``ipmi``, ``cmd``, a plugin's), or None."""
    node_meter_cmd: str | None = None
    """The ``cmd`` node meter's command printing watts."""
    device: str = "cpu"
    """The device the runs train on (checked present, named as its backend names it): its
    sensors are the device boundary, the host's CPU beside an accelerator."""

    def node(self) -> Any:
        """A fresh node meter (refused in one line as ``run`` refuses it), or None."""
        if self.node_meter is None and self.node_meter_cmd is None:
            return None
        from accelbench.meters.registry import open_node_meter
        from accelbench.spec import MeterOptions

        return open_node_meter(MeterOptions(node_meter=self.node_meter,
                                            node_meter_cmd=self.node_meter_cmd))


def rel_95_of(reading: Any) -> float | None:
    """A reading's 95% relative error bound (:mod:`accelbench.meters.uncertainty`, set as
    the meter session closes its window), or None where it has none."""
    bound = (reading.details or {}).get("uncertainty")
    rel = bound.get("rel_95") if isinstance(bound, dict) else None
    return float(rel) if isinstance(rel, (int, float)) else None


def interpolate(knots: Sequence[tuple[float, float]], at: float) -> float:
    """The cumulative energy at time ``at`` from ``(time, energy so far)`` knots sorted by
    time: linear between the knots around it, held flat outside them."""
    if not knots:
        raise ValueError("no samples to interpolate")
    times = [t for t, _ in knots]
    i = bisect_left(times, at)
    if i == 0:
        return knots[0][1]
    if i == len(knots):
        return knots[-1][1]
    (t0, e0), (t1, e1) = knots[i - 1], knots[i]
    return e0 if t1 <= t0 else e0 + (e1 - e0) * (at - t0) / (t1 - t0)


def bracket_j(knots: Sequence[tuple[float, float]], at: float) -> float:
    """The energy between the two knots around time ``at`` (0 at or outside the knots):
    the cumulative energy never decreases, so the truth at ``at`` lies between them and
    :func:`interpolate` is off by at most this."""
    times = [t for t, _ in knots]
    i = bisect_left(times, at)
    if i == 0 or i == len(knots) or times[i] == at:
        return 0.0
    return max(0.0, knots[i][1] - knots[i - 1][1])


def knots_of(samples: Sequence[tuple[float, float]], *, t_open: float, t_close: float,
             total_j: float) -> list[tuple[float, float]]:
    """The window's knots: zero at ``t_open``, the samples inside the window (sorted, never
    decreasing), and the sensor's own figure ``total_j`` at ``t_close``."""
    out = [(t_open, 0.0)]
    for t, e in sorted(samples):
        if t_open < t < t_close:
            out.append((t, min(max(e, out[-1][1]), total_j)))
    out.append((t_close, max(total_j, out[-1][1])))
    return out


class Window:
    """The meters of a set of runs: the idle baseline once, then one window per run.

    Args:
        metering: The idle baseline's length and the node meter to read, if any.
        device: The device the runs train on (``cpu``; an accelerator adds the host CPU).
    """

    def __init__(self, metering: Metering, *, device: str = "cpu") -> None:
        from accelbench.meters.session import open_session

        devices = [device] if device == "cpu" else [device, "cpu"]
        self.device = device
        self.metering = metering
        node = metering.node()
        self.session = open_session(devices, idle_s=0, extra=[node] if node is not None else [])
        self.idle_power_w: dict[tuple[str, str], float] = {}
        self.idle_rel_95: dict[tuple[str, str], float] = {}
        self.idle_s = 0.0
        self.idle_note = ""
        self.readings: tuple[Any, ...] = ()
        self._samples: dict[str, list[tuple[float, float]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t_open = self._t_close = self._t0 = 0.0

    def senses(self) -> bool:
        """Whether any of the meters reads a sensor (an estimate or none needs no window)."""
        return any(m.update_period_s() is not None for m in self.session.meters)

    def measure_idle(self) -> None:
        """Each sensor's mean power over the baseline's seconds with nothing running."""
        idle_s = self.metering.idle_s
        if idle_s <= 0:
            self.idle_note = "no idle baseline (--idle-s 0)"
            return
        if not self.senses():
            self.idle_note = NO_IDLE_SENSOR
            return
        self.session.start()
        time.sleep(idle_s)
        readings, _ = self.session.stop(samples=0)
        self.idle_s = idle_s
        rule = self.session.energy_window()
        if rule is not None and idle_s < rule.min_s:
            self.idle_note = (f"a {idle_s:g} s baseline, shorter than the {rule.min_s:.3g} s "
                              f"run allows these sensors: each edge uncertain by up to one "
                              f"update ({rule.update_period_s * 1e3:.3g} ms)")
        self.idle_power_w = {
            (r.device, r.scope): r.energy_j / r.window_s for r in readings
            if r.source in SENSED and r.energy_j is not None and r.window_s}
        self.idle_rel_95 = {(r.device, r.scope): rel for r in readings
                            if (rel := rel_95_of(r)) is not None}

    # -- the training clock ------------------------------------------------------------------

    def clock(self, running: bool) -> None:
        """The backend's clock edges: open the window, or close it."""
        if running:
            self._samples = {}
            self._stop.clear()
            self._t_open = time.monotonic()
            self.session.start()
            self._thread = threading.Thread(target=self._follow, name=THREAD_NAME,
                                            daemon=True)
            self._thread.start()
            self._t0 = time.monotonic()
        else:
            self.readings, _ = self.session.stop(samples=0)
            self._t_close = time.monotonic()
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
                self._thread = None

    def _follow(self) -> None:
        while not self._stop.wait(POLL_S):
            self._read_live()

    def _read_live(self) -> None:
        for meter in self.session.meters:
            for channel, value in meter.live().items():
                got = self._samples.setdefault(channel, [])
                if value.t_s is not None and (not got or got[-1][0] != value.t_s):
                    got.append((value.t_s, value.energy_j))

    def window_note(self, time_s: float) -> str:
        """A note where the training clock is shorter than ``run`` allows an energy figure
        of these sensors (:class:`~accelbench.meters.updates.EnergyWindow`), else ``""``.
        The figure is kept: the whole window's energy is the figure here, not a rate, and
        each edge is uncertain by at most one sensor update."""
        rule = self.session.energy_window()
        if rule is None or time_s >= rule.min_s:
            return ""
        return (f"a {time_s:.3g} s window, shorter than run allows a per-sample figure "
                f"({rule.describe()}): each edge uncertain by up to one update "
                f"({rule.update_period_s * 1e3:.3g} ms)")

    def boundary_of(self, reading: Any) -> str:
        """``node`` for a node meter, ``device`` for the device trained on (its RAPL
        domains for a CPU run), else ``host``."""
        if reading.scope == "node":
            return "node"
        if self.device == "cpu" or reading.device == self.device:
            return "device"
        return "host"

    def sensors(self, points: Sequence[EvalPoint]) -> tuple[SensorEnergy, ...]:
        """Every sensor that measured the last window, with its energy at each point."""
        out = []
        for r in self.readings:
            if r.source not in SENSED or r.energy_j is None or not r.window_s:
                continue
            t_close = self._t_open + float(r.window_s)
            knots = knots_of(self._samples.get(r.device, []), t_open=self._t_open,
                             t_close=t_close, total_j=float(r.energy_j))
            out.append(SensorEnergy(
                device=r.device, scope=r.scope, boundary=self.boundary_of(r),
                source=str(r.source), energy_j=float(r.energy_j), window_s=float(r.window_s),
                idle_power_w=self.idle_power_w.get((r.device, r.scope)),
                points_j=tuple(interpolate(knots, self._t0 + p.time_s) for p in points),
                points_gap_j=tuple(bracket_j(knots, self._t0 + p.time_s) for p in points),
                samples=len(knots), rel_95=rel_95_of(r),
                idle_rel_95=self.idle_rel_95.get((r.device, r.scope))))
        return tuple(out)

    def close(self) -> None:
        """Release the meters (and stop the thread if a run ended by an exception)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.session.close()
