"""A simulated NVIDIA GPU behind a fake pynvml: a known power signal and NVML's sensor model.

Everything is a function of the real ``time.monotonic()``, so real meter sessions and
real sampler threads read it as they would read a GPU. The model (Yang, Adamek &
Armour, SC'24, arXiv 2312.02741, for A100/H100):

* the true power is ``idle_w`` while no workload runs and, while one runs, a square
  wave: ``burst_w`` for ``burst_s`` at the start of every ``period_s`` (phase counted
  from the workload's start), ``idle_w`` otherwise;
* the sensor updates every ``update_s`` (100 ms) on a fixed grid; each update is the
  mean true power over the last ``averaging_s`` (25 ms) before it, held until the next
  (``NVML_FI_DEV_POWER_INSTANT``);
* ``NVML_FI_DEV_POWER_AVERAGE`` and ``nvmlDeviceGetPowerUsage`` are the mean of the
  last ``1 s / update_s`` updates (a 1 s average: Ampere and newer);
* the total-energy counter (millijoules) is the exact integral of the true power up to
  the latest update: it sees the whole run, but only advances every ``update_s``
  (Zeus, "Measuring GPU energy: best practices": NVML's counters update about every
  100 ms). SC'24 measured the power readings' 25%-of-the-time coverage; whether the
  counter integrates the unobserved 75% is not settled there, and this model assumes
  it does (it is what makes the counter the primary source).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import create_autospec

import pynvml
import pytest

UUID = "GPU-51a1a1a1-aaaa-bbbb-cccc-0123456789ab"


@dataclass
class SimulatedGpu:
    """One GPU with a known bursty power signal and NVML's sensor model."""

    name: str = "NVIDIA H100 80GB HBM3"
    idle_w: float = 100.0
    burst_w: float = 400.0
    period_s: float = 0.17
    burst_s: float = 0.05
    update_s: float = 0.1
    averaging_s: float = 0.025
    average_updates: int = 10
    grid_offset_s: float = 0.0137
    counter: bool = True
    fields: bool = True
    instant_field: bool = True
    memory_w: float | None = 30.0
    temperature_c: int = 55
    lock_phase_s: float | None = 0.0
    """When set, the first workload start moves the sensor grid so that an update falls
    ``lock_phase_s`` into the run, so that a test sees the same phases on every run (a
    load whose period is a multiple of the update period is then seen at fixed phases:
    the SC'24 worst case). None: the grid stays where the clock puts it."""
    runs: list[list[float]] = field(default_factory=list)
    """Workload runs as ``[start, end]`` (end ``inf`` while running)."""
    epoch_s: float = field(default_factory=time.monotonic)

    # -- the workload --------------------------------------------------------------------

    def start_workload(self) -> float:
        """Start the workload now (phase 0); returns the start time."""
        now = time.monotonic()
        if self.lock_phase_s is not None and not self.runs:
            self.grid_offset_s = (now + self.lock_phase_s) % self.update_s
        self.runs.append([now, math.inf])
        return now

    def stop_workload(self) -> None:
        """Stop the running workload now."""
        if self.runs and self.runs[-1][1] == math.inf:
            self.runs[-1][1] = time.monotonic()

    # -- the true signal -------------------------------------------------------------------

    def _burst_time(self, x_s: float) -> float:
        """Burst time in the first ``x_s`` seconds of a run."""
        if x_s <= 0:
            return 0.0
        full = math.floor(x_s / self.period_s)
        return full * self.burst_s + min(x_s - full * self.period_s, self.burst_s)

    def energy_j(self, a_s: float, b_s: float) -> float:
        """Exact energy of the true signal over ``[a_s, b_s]``."""
        if b_s <= a_s:
            return 0.0
        extra_w = self.burst_w - self.idle_w
        burst = 0.0
        for start, end in self.runs:
            lo, hi = max(a_s, start), min(b_s, end)
            if hi > lo:
                burst += self._burst_time(hi - start) - self._burst_time(lo - start)
        return self.idle_w * (b_s - a_s) + extra_w * burst

    # -- the sensor ------------------------------------------------------------------------

    def _last_update(self, t_s: float) -> float:
        k = math.floor((t_s - self.grid_offset_s) / self.update_s)
        return self.grid_offset_s + k * self.update_s

    def instant_w(self, t_s: float) -> float:
        """``NVML_FI_DEV_POWER_INSTANT`` at ``t_s``: the 25 ms mean before the last update."""
        u = self._last_update(t_s)
        return self.energy_j(u - self.averaging_s, u) / self.averaging_s

    def average_w(self, t_s: float) -> float:
        """The 1 s average: mean of the last ``average_updates`` sensor updates."""
        u = self._last_update(t_s)
        values = [
            self.energy_j(u - i * self.update_s - self.averaging_s, u - i * self.update_s)
            / self.averaging_s
            for i in range(self.average_updates)
        ]
        return sum(values) / len(values)

    def counter_mj(self, t_s: float) -> int:
        """Total energy since the epoch up to the last update, in millijoules."""
        return 10**9 + int(self.energy_j(self.epoch_s, self._last_update(t_s)) * 1000)

    # -- pynvml's shapes -------------------------------------------------------------------

    def field_values(self, fields: list[Any]) -> Any:
        now = time.monotonic()
        values = (pynvml.c_nvmlFieldValue_t * len(fields))()
        for i, spec in enumerate(fields):
            field_id, scope = spec if isinstance(spec, tuple) else (spec, 0)
            slot = values[i]
            slot.fieldId, slot.scopeId = field_id, scope
            slot.timestamp = int(self._last_update(now) * 1e6)
            slot.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            watts: float | None = None
            if self.fields and field_id == pynvml.NVML_FI_DEV_POWER_INSTANT:
                if scope == pynvml.NVML_POWER_SCOPE_MEMORY:
                    watts = self.memory_w
                elif scope == pynvml.NVML_POWER_SCOPE_GPU and self.instant_field:
                    watts = self.instant_w(now)
            elif self.fields and field_id == pynvml.NVML_FI_DEV_POWER_AVERAGE and scope == 0:
                watts = self.average_w(now)
            if watts is None:
                slot.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            else:
                slot.nvmlReturn = pynvml.NVML_SUCCESS
                slot.value.uiVal = int(round(watts * 1000))
        return values

    def energy_mj(self) -> int:
        if not self.counter:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self.counter_mj(time.monotonic())

    def power_usage_mw(self) -> int:
        return int(round(self.average_w(time.monotonic()) * 1000))


def install_nvml(monkeypatch: pytest.MonkeyPatch, gpu: SimulatedGpu) -> None:
    """Replace the pynvml functions accelbench calls with autospecced fakes reading ``gpu``."""

    def fake(name: str, side_effect: Callable[..., Any]) -> None:
        monkeypatch.setattr(
            pynvml, name, create_autospec(getattr(pynvml, name), side_effect=side_effect)
        )

    def by_index(index: int) -> SimulatedGpu:
        if index != 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu

    fake("nvmlInit", lambda: None)
    fake("nvmlShutdown", lambda: None)
    fake("nvmlDeviceGetCount", lambda: 1)
    fake("nvmlDeviceGetHandleByIndex", by_index)
    fake("nvmlDeviceGetUUID", lambda h: UUID)
    fake("nvmlDeviceGetName", lambda h: h.name)
    fake("nvmlDeviceGetTotalEnergyConsumption", lambda h: h.energy_mj())
    fake("nvmlDeviceGetPowerUsage", lambda h: h.power_usage_mw())
    fake("nvmlDeviceGetFieldValues", lambda h, fields: h.field_values(fields))
    fake("nvmlDeviceGetEnforcedPowerLimit", lambda h: 700_000)
    fake("nvmlDeviceGetClockInfo", lambda h, kind: 1980)
    fake("nvmlDeviceGetCurrentClocksEventReasons", lambda h: 0)
    fake("nvmlDeviceGetTemperature", lambda h, sensor: h.temperature_c)
