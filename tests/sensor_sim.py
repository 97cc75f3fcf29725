"""A sensor simulator: power traces with a known truth, read through simulated sensors
behind the real vendor boundaries accelbench reads (issue 44).

Time is simulated (:class:`SimClock`, installed with
:func:`accelbench.meters.clock.use_simulated_time`): the real meter code, its samplers and
sessions run unchanged, but a window of 5 s takes milliseconds and the same seed gives the
same readings. Used by ``tests/test_energy_uncertainty.py`` and
``benchmarks/energy_accuracy.py``.

Traces (:func:`make_trace`), each a piecewise-constant power on a 1 ms grid whose exact
energy over any span is known:

* ``square``: a load alternating between two levels at a training-step frequency
  (period 20 ms to 1.5 s, duty 20-80%);
* ``ramp``: power rising or falling linearly across the window;
* ``burst``: an idle level with random short bursts (5-60 ms, 1-10 per second);
* ``drift``: thermal drift, power rising towards a plateau (time constant 2-20 s) under a
  step-frequency ripple.

Sensors, each behind the library or interface accelbench reads:

* ``nvml-counter``: a fake pynvml (:func:`tests.fake_gpu.install_nvml`): the total-energy
  counter in mJ, the exact integral up to the latest 100 ms update; power fields as below;
* ``nvml-sampled``: the same GPU without a counter: ``NVML_FI_DEV_POWER_INSTANT`` is the
  mean over the last 25 ms before each 100 ms update (25% of the run observed, SC'24);
  ``NVML_FI_DEV_POWER_AVERAGE`` and ``nvmlDeviceGetPowerUsage`` the mean of the last
  10 updates (a 1 s averaging window);
* ``nvml-power1s``: a GPU with neither counter nor fields: only the 1 s average;
* ``rapl``: a powercap tree of real files whose ``energy_uj`` (updated every 1 ms, in
  uJ) wraps at ``max_energy_range_uj`` every 0.3-0.9 s;
* ``ipmi``: a fake ``ipmitool`` on PATH printing the BMC's reading: the mean power of
  the last second, in whole watts, updated at 1 Hz.
"""

from __future__ import annotations

import heapq
import math
import os
import random
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pynvml
import pytest

from accelbench.meters import clear_availability_cache
from accelbench.meters.clock import use_simulated_time
from tests.fake_gpu import install_nvml

TRACE_KINDS = ("square", "ramp", "burst", "drift")
SENSORS = ("nvml-counter", "nvml-sampled", "nvml-power1s", "rapl", "ipmi")
GRID_S = 0.001
"""Time step of the true power."""
T0_S = 1000.0
"""Simulated time at which every trace begins."""


class SimClock:
    """Simulated monotonic time with periodic calls fired in time order."""

    def __init__(self, t0_s: float = T0_S) -> None:
        self.t = t0_s
        self._heap: list[list[Any]] = []
        self._seq = 0
        self.hooks: list[Callable[[float], None]] = []
        """Called with the new time whenever time moves (sensors refresh their files)."""

    def now(self) -> float:
        return self.t

    def every(self, interval_s: float, fn: Callable[[], None]) -> Callable[[], None]:
        entry: list[Any] = [self.t + interval_s, self._seq, interval_s, fn, True]
        self._seq += 1
        heapq.heappush(self._heap, entry)

        def cancel() -> None:
            entry[4] = False

        return cancel

    def _move(self, t_s: float) -> None:
        self.t = t_s
        for hook in self.hooks:
            hook(t_s)

    def sleep(self, seconds: float) -> None:
        end = self.t + max(seconds, 0.0)
        while self._heap and self._heap[0][0] <= end:
            entry = heapq.heappop(self._heap)
            if not entry[4]:
                continue
            self._move(entry[0])
            entry[3]()
            if entry[4]:
                entry[0] += entry[2]
                entry[1] = self._seq
                self._seq += 1
                heapq.heappush(self._heap, entry)
        self._move(end)


@dataclass
class Trace:
    """True power on a 1 ms grid from :data:`T0_S`: piecewise constant, exact energy."""

    kind: str
    power_w: np.ndarray
    params: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Python lists: scalar look-ups in the sensors' hot path are faster than numpy's.
        self._cum = np.concatenate(([0.0], np.cumsum(self.power_w) * GRID_S)).tolist()
        self._p = self.power_w.tolist()

    def _cum_at(self, t_s: float) -> float:
        x = (t_s - T0_S) / GRID_S
        p = self._p
        n = len(p)
        if x <= 0:
            return p[0] * x * GRID_S
        if x >= n:
            return self._cum[n] + p[-1] * (x - n) * GRID_S
        k = int(x)
        return self._cum[k] + p[k] * (x - k) * GRID_S

    def energy_j(self, a_s: float, b_s: float) -> float:
        """Exact energy over ``[a_s, b_s]``."""
        return self._cum_at(b_s) - self._cum_at(a_s)

    def mean_w(self, a_s: float, b_s: float) -> float:
        return self.energy_j(a_s, b_s) / (b_s - a_s)


def make_trace(kind: str, rng: random.Random, length_s: float) -> Trace:
    """A random trace of one kind, ``length_s`` long (constant past its end)."""
    n = int(length_s / GRID_S) + 1
    t = np.arange(n) * GRID_S
    params: dict[str, float]
    if kind == "square":
        low = rng.uniform(50, 150)
        high = low + rng.uniform(100, 400)
        period = math.exp(rng.uniform(math.log(0.02), math.log(1.5)))
        duty = rng.uniform(0.2, 0.8)
        phase = rng.uniform(0, period)
        power = np.where(((t + phase) % period) < duty * period, high, low)
        params = {"low_w": low, "high_w": high, "period_s": period, "duty": duty}
    elif kind == "ramp":
        a, b = rng.uniform(50, 500), rng.uniform(50, 500)
        power = a + (b - a) * t / length_s
        params = {"from_w": a, "to_w": b}
    elif kind == "burst":
        base = rng.uniform(60, 120)
        rate = rng.uniform(1, 10)
        power = np.full(n, base)
        x = rng.expovariate(rate)
        while x < length_s:
            width = rng.uniform(0.005, 0.06)
            i, j = int(x / GRID_S), int((x + width) / GRID_S) + 1
            power[i:j] = base + rng.uniform(200, 500)
            x += width + rng.expovariate(rate)
        params = {"base_w": base, "rate_hz": rate}
    elif kind == "drift":
        base = rng.uniform(100, 250)
        rise = rng.uniform(20, 120)
        tau = rng.uniform(2, 20)
        period = math.exp(rng.uniform(math.log(0.05), math.log(0.5)))
        ripple = rng.uniform(10, 60)
        power = base + rise * (1 - np.exp(-t / tau))
        power = power + np.where((t % period) < 0.5 * period, ripple, -ripple)
        params = {"base_w": base, "rise_w": rise, "tau_s": tau}
    else:
        raise ValueError(f"unknown trace kind {kind!r}; one of {TRACE_KINDS}")
    return Trace(kind, np.asarray(power, dtype=float), params)


# -- simulated NVML ------------------------------------------------------------------------


class SimNvmlGpu:
    """An A100/H100-like GPU behind the fake pynvml, reading a :class:`Trace`."""

    name = "NVIDIA H100 80GB HBM3"
    temperature_c = 55

    def __init__(self, trace: Trace, clock: SimClock, rng: random.Random, *,
                 counter: bool = True, fields: bool = True) -> None:
        self.trace = trace
        self.clock = clock
        self.counter = counter
        self.fields = fields
        self.update_s = 0.1
        self.averaging_s = 0.025
        self.average_updates = 10
        self.offset_s = rng.uniform(0, self.update_s)
        self._updates: dict[int, float] = {}

    def _last_update(self, t_s: float) -> float:
        k = math.floor((t_s - self.offset_s) / self.update_s)
        return self.offset_s + k * self.update_s

    def _update_w(self, k: int) -> float:
        """The value of update ``k``: the mean power over the 25 ms before it."""
        value = self._updates.get(k)
        if value is None:
            u = self.offset_s + k * self.update_s
            value = self._updates[k] = self.trace.mean_w(u - self.averaging_s, u)
        return value

    def _k(self, t_s: float) -> int:
        return math.floor((t_s - self.offset_s) / self.update_s)

    def instant_w(self, t_s: float) -> float:
        return self._update_w(self._k(t_s))

    def average_w(self, t_s: float) -> float:
        k = self._k(t_s)
        return sum(self._update_w(k - i) for i in range(self.average_updates)
                   ) / self.average_updates

    def energy_mj(self) -> int:
        if not self.counter:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        u = self._last_update(self.clock.now())
        return 10**9 + int(self.trace.energy_j(T0_S, u) * 1000)

    def power_usage_mw(self) -> int:
        return int(round(self.average_w(self.clock.now()) * 1000))

    def field_values(self, fields: list[Any]) -> Any:
        now = self.clock.now()
        values = (pynvml.c_nvmlFieldValue_t * len(fields))()
        for i, spec in enumerate(fields):
            field_id, scope = spec if isinstance(spec, tuple) else (spec, 0)
            slot = values[i]
            slot.fieldId, slot.scopeId = field_id, scope
            slot.timestamp = int(self._last_update(now) * 1e6)
            slot.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            watts: float | None = None
            if self.fields and field_id == pynvml.NVML_FI_DEV_POWER_INSTANT and scope in (
                    0, pynvml.NVML_POWER_SCOPE_GPU):
                watts = self.instant_w(now)
            elif self.fields and field_id == pynvml.NVML_FI_DEV_POWER_AVERAGE and scope == 0:
                watts = self.average_w(now)
            if watts is None:
                slot.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            else:
                slot.nvmlReturn = pynvml.NVML_SUCCESS
                slot.value.uiVal = int(round(watts * 1000))
        return values


# -- simulated powercap tree (RAPL) --------------------------------------------------------


class SimRapl:
    """One package zone of a powercap tree under ``root``; ``energy_uj`` wraps."""

    def __init__(self, trace: Trace, root: Path, rng: random.Random) -> None:
        self.trace = trace
        self.max_power_w = 1000.0
        mean_w = float(np.mean(trace.power_w))
        self.max_uj = int(mean_w * rng.uniform(0.3, 0.9) * 1e6)
        self.start_uj = rng.randrange(self.max_uj)
        zone = root / "intel-rapl:0"
        zone.mkdir(parents=True, exist_ok=True)
        (root / "intel-rapl").mkdir(exist_ok=True)
        (zone / "name").write_text("package-0\n")
        (zone / "max_energy_range_uj").write_text(f"{self.max_uj}\n")
        (zone / "constraint_0_max_power_uw").write_text(f"{int(self.max_power_w * 1e6)}\n")
        self.path = zone / "energy_uj"
        self.refresh(T0_S)

    def refresh(self, t_s: float) -> None:
        """The counter as the hardware holds it at ``t_s``: updated every 1 ms, in uJ."""
        tick = T0_S + math.floor((t_s - T0_S) / GRID_S + 1e-9) * GRID_S
        uj = self.start_uj + int(self.trace.energy_j(T0_S, tick) * 1e6)
        self.path.write_text(f"{uj % (self.max_uj + 1)}\n")


# -- simulated BMC behind a fake ipmitool --------------------------------------------------

DCMI = """    Instantaneous power reading:                   {w} Watts
    Minimum during sampling period:                 50 Watts
    Maximum during sampling period:                500 Watts
    Average power reading over sample period:      {w} Watts
    IPMI timestamp:                           Mon Dec  7 00:00:00 2026
    Sampling period:                          00000001 Seconds.
    Power reading state is:                   activated
"""


class SimBmc:
    """A BMC answering ``ipmitool dcmi power reading``: whole watts, updated at 1 Hz."""

    def __init__(self, trace: Trace, bindir: Path, rng: random.Random) -> None:
        self.trace = trace
        self.offset_s = rng.uniform(0, 1.0)
        bindir.mkdir(parents=True, exist_ok=True)
        self.watts = bindir / "watts"
        script = bindir / "ipmitool"
        report = DCMI.replace("{w}", f"$(cat {self.watts})")
        script.write_text(
            "#!/bin/sh\n"
            f'[ "$1 $2 $3" = "dcmi power reading" ] || exit 2\ncat <<EOF\n{report}EOF\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self._last = ""
        self.refresh(T0_S)

    def refresh(self, t_s: float) -> None:
        u = self.offset_s + math.floor(t_s - self.offset_s)
        text = str(int(round(self.trace.mean_w(u - 1.0, u))))
        if text != self._last:
            self.watts.write_text(text)
            self._last = text


# -- one simulated machine -----------------------------------------------------------------


@contextmanager
def simulated_sensor(sensor: str, trace: Trace, rng: random.Random,
                     workdir: Path) -> Iterator[SimClock]:
    """Install ``sensor`` reading ``trace`` on a fresh simulated clock.

    Patches pynvml, ``ACCELBENCH_POWERCAP_ROOT`` or ``PATH`` as the sensor needs, and
    undoes it all on exit. Yields the clock (at :data:`T0_S`)."""
    clock = SimClock()
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        # No other sensor is seen: an empty powercap root, no GPU library unless faked.
        empty = workdir / "no-powercap"
        empty.mkdir(parents=True, exist_ok=True)
        mp.setenv("ACCELBENCH_POWERCAP_ROOT", str(empty))
        if sensor.startswith("nvml"):
            gpu = SimNvmlGpu(trace, clock, rng, counter=sensor == "nvml-counter",
                             fields=sensor != "nvml-power1s")
            install_nvml(mp, gpu)  # type: ignore[arg-type]
        elif sensor == "rapl":
            root = workdir / "powercap"
            sim = SimRapl(trace, root, rng)
            mp.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
            clock.hooks.append(sim.refresh)
        elif sensor == "ipmi":
            bmc = SimBmc(trace, workdir / "bin", rng)
            mp.setenv("PATH", f"{workdir / 'bin'}{os.pathsep}{os.environ['PATH']}")
            clock.hooks.append(bmc.refresh)
        else:
            raise ValueError(f"unknown sensor {sensor!r}; one of {SENSORS}")
        clear_availability_cache()
        use_simulated_time(clock)
        try:
            yield clock
        finally:
            use_simulated_time(None)
            clear_availability_cache()


# -- one trial -----------------------------------------------------------------------------

PRE_S = 2.0
"""Seconds of load before the window (warm-up: the 1 s averages hold load, not idle)."""
SAMPLES = 1000
"""Samples processed per window (per-sample energy is energy / SAMPLES)."""


@dataclass(frozen=True)
class Trial:
    """One simulated window: accelbench's reading against the true energy."""

    sensor: str
    kind: str
    seed: int
    reading: Any
    true_j: float
    trace: Trace

    @property
    def error(self) -> float:
        """Relative error of the measured energy (nan where there is none)."""
        e = self.reading.energy_j
        return math.nan if e is None else (e - self.true_j) / self.true_j

    @property
    def bound(self) -> float:
        """The reading's stated 95% relative bound (nan where there is none)."""
        u = (self.reading.details or {}).get("uncertainty") or {}
        rel = u.get("rel_95")
        return math.nan if rel is None else float(rel)

    @property
    def covered(self) -> bool:
        return abs(self.error) <= self.bound


def window_for(sensor: str) -> float:
    """The window accelbench would open for this sensor (the energy window rule)."""
    from accelbench.meters.updates import EnergyWindow

    return EnergyWindow.for_period(1.0 if sensor == "ipmi" else 0.1).min_s


def run_trial(sensor: str, kind: str, seed: int, workdir: Path,
              window_s: float | None = None) -> Trial:
    """One window of ``sensor`` over a random trace of ``kind``, measured by accelbench's
    own meter session, with the true energy of that window."""
    from accelbench.meters import open_session
    from accelbench.meters.registry import get_meter_factory
    from accelbench.meters.session import MeterSession
    from accelbench.spec import MeterOptions

    rng = random.Random(f"{sensor}/{kind}/{seed}")
    window_s = window_s or window_for(sensor) * rng.uniform(1.0, 1.5)
    trace = make_trace(kind, rng, PRE_S + window_s + 2.0)
    workdir = workdir / f"{sensor}-{kind}-{seed}"
    with simulated_sensor(sensor, trace, rng, workdir) as clock:
        clock.sleep(PRE_S + rng.uniform(0, 1.0))
        if sensor == "ipmi":
            meter = get_meter_factory("ipmi")(MeterOptions(node_meter="ipmi"))
            session = MeterSession([meter], idle_s=0)
        else:
            session = open_session(["cpu" if sensor == "rapl" else "cuda:0"], idle_s=0)
        with session:
            session.start()
            t0 = clock.now()
            clock.sleep(window_s)
            readings, _ = session.stop(samples=SAMPLES)
    reading = readings[0]
    span = reading.window_s if reading.window_s else window_s
    return Trial(sensor, kind, seed, reading, trace.energy_j(t0, t0 + span), trace)


def run_windows(sensor: str, trace: Trace, windows: int, window_s: float, workdir: Path,
                seed: int = 0, cooldown_s: float = 0.0) -> list[tuple[Any, ...]]:
    """``windows`` back-to-back windows of ``sensor`` over one trace (``--energy-trials``
    on one machine, ``cooldown_s`` its ``--cooldown-s``): each window's readings, as
    ``MeterSession.stop`` gives them."""
    from accelbench.meters import open_session
    from accelbench.meters.trials import between_trials

    rng = random.Random(seed)
    out: list[tuple[Any, ...]] = []
    with simulated_sensor(sensor, trace, rng, workdir) as clock:
        clock.sleep(PRE_S)
        for _ in range(windows):
            with open_session(["cpu" if sensor == "rapl" else "cuda:0"], idle_s=0) as session:
                session.start()
                clock.sleep(window_s)
                readings, _ = session.stop(samples=SAMPLES)
            out.append(readings)
            between_trials(cooldown_s, None, rng)  # as metering waits: the cooldown, a delay
    return out
