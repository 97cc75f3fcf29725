"""The AMD GPU meter, on :mod:`accelbench.devices.gpu.amd` (which wraps AMD SMI).

Energy comes from the energy accumulator where the GPU has one
(``amdsmi_get_energy_count``: ticks times ``counter_resolution`` microjoules);
power samples (``amdsmi_get_power_info``, watts) feed the timeline, the peak and
a cross-check, and become the energy where the counter is missing.

The accumulator is checked as it is read: it is polled with every power sample, and a
backward step (seen in the field: amdsmi issue 115) or a step implying a power far
above the GPU's cap (invalid values: amdsmi issue 38) marks the window's energy
``unavailable`` with the reason, never a negative or absurd figure. The counter's own
timestamps (nanoseconds) give the span its energy covers. AMD SMI documents the
counter as unsupported in a virtual-machine guest; there the meter refuses it and
says so.

PyTorch on ROCm names AMD GPUs ``cuda:N``; N indexes the GPUs left visible by
``HIP_VISIBLE_DEVICES`` (else ``ROCR_VISIBLE_DEVICES``, else
``CUDA_VISIBLE_DEVICES``), given as indices, UUIDs or PCI bus ids
(:meth:`accelbench.devices.gpu.common.GpuSession.physical_index`).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from accelbench.devices.gpu.amd import VISIBILITY_VARS as VISIBILITY_VARS
from accelbench.devices.gpu.amd import AmdGpu, AmdGpus, number
from accelbench.errors import MeterError
from accelbench.meters.common import (
    Meter,
    NullMeter,
    SensorInfo,
)
from accelbench.meters.counter import CounterSampleMeter
from accelbench.meters.sampler import DEFAULT_INTERVAL_S, DEFAULT_MAX_SAMPLES

# Field names of amdsmi_get_power_info in watts, newest first (ROCm 7 "socket_power",
# MI300 "current_socket_power", older "average_socket_power").
POWER_FIELDS = ("socket_power", "current_socket_power", "average_socket_power")

NOMINAL_UPDATE_PERIOD_S = 0.001
"""Assumed update period of the energy accumulator and socket power: the SMU firmware
refreshes its metrics table (``gpu_metrics``, where both live) about every millisecond
on MI200/MI300-class GPUs. An assumption, not a cited measurement (McDaniel et al.,
arXiv 2604.06056, characterise MI250X/MI300A update intervals); each window measures
it where the power samples can (at a 10 ms poll usually only as an upper bound)."""
PLAUSIBLE_CAP_MARGIN = 2.0
"""A counter step implying more than this times the power cap is invalid: the cap bounds
the average power over milliseconds, not a factor of two above it."""
DEFAULT_MAX_POWER_W = 2000.0
"""Bound used when the GPU reports no power cap: above any single accelerator's draw."""
MIN_CHECK_S = 0.05
"""Counter steps are judged over at least this long (by the counter's own timestamps
where present), so one firmware update landing between two close reads is not a spike."""
VM_GUEST_NOTE = (
    "energy counter not used: this GPU is a virtual-machine guest (SR-IOV), where AMD SMI "
    "documents amdsmi_get_energy_count as unsupported; energy integrated from power samples "
    "(measure on the host or bare metal for the counter)"
)

def power_w_from_info(info: dict[str, Any]) -> float | None:
    """The socket power in watts from an ``amdsmi_get_power_info`` dict."""
    for field in POWER_FIELDS:
        watts = number(info.get(field))
        if watts is not None:
            return watts
    return None


def energy_j_from_count(count: dict[str, Any]) -> float | None:
    """Joules from an ``amdsmi_get_energy_count`` dict (accumulator times resolution)."""
    ticks = number(count.get("energy_accumulator", count.get("power")))  # "power": ROCm 5
    resolution_uj = number(count.get("counter_resolution"))
    if ticks is None or resolution_uj is None:
        return None
    return ticks * resolution_uj * 1e-6


def count_reading(count: dict[str, Any]) -> tuple[float, float | None]:
    """``(joules, device timestamp in seconds or None)`` of one ``amdsmi_get_energy_count``.

    Raises:
        MeterError: If the dict holds no usable accumulator or resolution.
    """
    energy_j = energy_j_from_count(count)
    if energy_j is None:
        raise MeterError("amdsmi_get_energy_count returned no accumulator")
    stamp_ns = number(count.get("timestamp"))
    return energy_j, (stamp_ns * 1e-9 if stamp_ns is not None and stamp_ns > 0 else None)


def _span(
    a: tuple[float, float | None, float], b: tuple[float, float | None, float]
) -> float | None:
    """Seconds between two accumulator reads: device timestamps where both have one and
    they advanced, else the monotonic clock."""
    if a[1] is not None and b[1] is not None and b[1] > a[1]:
        return b[1] - a[1]
    dt_s = b[2] - a[2]
    return dt_s if dt_s > 0 else None


class AmdMeter(CounterSampleMeter):
    """Energy and power of one AMD GPU. Build it with :func:`open_meter`.

    Args:
        target: The GPU (from :meth:`AmdGpus.resolve`).
        interval_s: Power sampling interval.
        has_counter: Whether the energy accumulator works on this GPU.
        has_power: Whether power readings work on this GPU.
        counter_resolution_j: Joules per accumulator tick.
        notes: Remarks for every reading.
        max_samples: Bound on stored samples.
        power_cap_w: The GPU's power cap, bounding plausible counter steps (None:
            :data:`DEFAULT_MAX_POWER_W`).
        session: The AMD SMI session ``target`` belongs to, closed with the meter.
    """

    kind = "amdsmi"

    def __init__(  # noqa: PLR0913
        self,
        target: AmdGpu,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        has_counter: bool,
        has_power: bool,
        counter_resolution_j: float | None = None,
        notes: tuple[str, ...] = (),
        max_samples: int = DEFAULT_MAX_SAMPLES,
        power_cap_w: float | None = None,
        session: AmdGpus | None = None,
    ) -> None:
        details: dict[str, Any] = {
            "sensor": "amdsmi",
            "uuid": target.uuid,
            "amdsmi_index": target.index,
            "power_cap_w": power_cap_w,
        }
        super().__init__(
            target.device,
            "gpu",
            interval_s=interval_s,
            has_counter=has_counter,
            has_power=has_power,
            counter_resolution_j=counter_resolution_j,
            details=details,
            notes=notes,
            max_samples=max_samples,
            nominal_update_period_s=NOMINAL_UPDATE_PERIOD_S,
        )
        self.target = target
        self._session = session
        self._closed = False
        self.power_cap_w = power_cap_w
        self.max_plausible_w = PLAUSIBLE_CAP_MARGIN * (power_cap_w or DEFAULT_MAX_POWER_W)
        self._first: tuple[float, float | None, float] | None = None
        self._last: tuple[float, float | None, float] | None = None
        self._ref: tuple[float, float | None, float] | None = None
        self._counter_polls = 0

    def _window_started(self) -> None:
        self._first = self._last = self._ref = None
        self._counter_polls = 0

    def _count(self) -> tuple[float, float | None, float]:
        """One accumulator read: ``(joules, device seconds or None, monotonic seconds)``."""
        count = self.target.energy_count()
        energy_j, stamp_s = count_reading(count)
        return energy_j, stamp_s, time.monotonic()

    def _step(self, point: tuple[float, float | None, float]) -> None:
        """Check one accumulator read against the previous ones (backward, implausible)."""
        self._counter_polls += 1
        prev, self._last = self._last, point
        if self._first is None:
            self._first = point
        if self._ref is None:
            self._ref = point
        if prev is None:
            return
        if point[0] < prev[0]:
            self.invalidate(
                f"energy counter went backwards by {prev[0] - point[0]:.4g} J within the "
                "window (known AMD SMI fault, amdsmi issue 115); energy not reported"
            )
            return
        ref = self._ref
        dt_s = _span(ref, point)
        if dt_s is None or dt_s < MIN_CHECK_S:
            return
        implied_w = (point[0] - ref[0]) / dt_s
        if implied_w > self.max_plausible_w:
            bound = (
                f"{PLAUSIBLE_CAP_MARGIN:g}x the power cap of {self.power_cap_w:.0f} W"
                if self.power_cap_w
                else f"{self.max_plausible_w:.0f} W (no power cap reported)"
            )
            self.invalidate(
                f"energy counter step implies {implied_w:.4g} W over {dt_s:.3g} s, above "
                f"{bound}: an invalid counter value (amdsmi issue 38); energy not reported"
            )
        self._ref = point

    def read_counter_j(self) -> float:
        point = self._count()
        self._step(point)
        return point[0]

    def read_power_w(self) -> float:
        power_w = power_w_from_info(self.target.power_info())
        if power_w is None:
            raise MeterError("amdsmi_get_power_info returned no socket power")
        if self.has_counter:
            # Poll the accumulator with every power sample, so a backward or absurd step
            # inside the window is seen even if the counter recovers by its end. A failed
            # poll is skipped: the edge reads decide whether the counter is usable.
            with contextlib.suppress(MeterError):
                self._step(self._count())
        return power_w

    def _counter_span_s(self) -> float | None:
        if self._first is None or self._last is None:
            return None
        t0, t1 = self._first[1], self._last[1]
        if t0 is None or t1 is None or t1 <= t0:
            return None
        return t1 - t0

    def _window_extras(self, window_s: float) -> tuple[dict[str, Any], list[str]]:
        extras: dict[str, Any] = {"counter_polls": self._counter_polls}
        if self._first is not None and self._last is not None and self._last is not self._first:
            # The whole window too, where no sub-span reached MIN_CHECK_S.
            dt_s = _span(self._first, self._last)
            if dt_s and dt_s > 0:
                implied_w = (self._last[0] - self._first[0]) / dt_s
                if implied_w > self.max_plausible_w:
                    self.invalidate(
                        f"energy counter implies {implied_w:.4g} W over the window, above "
                        f"{self.max_plausible_w:.0f} W: an invalid counter value "
                        "(amdsmi issue 38); energy not reported"
                    )
        return extras, []

    def temperature_c(self) -> float | None:
        """Edge temperature (else hotspot) from ``amdsmi_get_temp_metric``, or None."""
        return self.target.temperature_c()

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        return AmdGpus.availability()

    def describe(self) -> list[SensorInfo]:
        return [
            SensorInfo(
                f"AMD GPU {self.target.index} ({self.target.uuid}) energy counter",
                "amdsmi-energy",
                self.device,
                self.has_counter,
                "" if self.has_counter else "amdsmi_get_energy_count: not supported",
            ),
            SensorInfo(
                f"AMD GPU {self.target.index} ({self.target.uuid}) power",
                "amdsmi-power",
                self.device,
                self.has_power,
                "" if self.has_power else "amdsmi_get_power_info: no socket power",
            ),
        ]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._session is not None:
                self._session.close()


def _probe_counter(gpu: AmdGpu) -> tuple[float | None, str]:
    """Joules per tick if the accumulator works, else ``(None, why)``."""
    try:
        count = gpu.energy_count()
    except MeterError as exc:
        return None, str(exc)
    resolution_uj = number(count.get("counter_resolution"))
    if energy_j_from_count(count) is None or resolution_uj is None:
        return None, "amdsmi_get_energy_count returned no accumulator"
    return resolution_uj * 1e-6, ""


def _probe_power(gpu: AmdGpu) -> tuple[bool, str]:
    try:
        info = gpu.power_info()
    except MeterError as exc:
        return False, str(exc)
    if power_w_from_info(info) is None:
        return False, "amdsmi_get_power_info returned no socket power"
    return True, ""


def open_meter(
    device: str,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    max_samples: int = DEFAULT_MAX_SAMPLES,
) -> Meter:
    """The meter for AMD GPU ``cuda:N``: an :class:`AmdMeter`, or a :class:`NullMeter` with why."""
    try:
        gpus = AmdGpus()
    except MeterError as exc:
        return NullMeter(device, "gpu", str(exc))
    try:
        target = gpus.resolve(device)
        resolution_j, counter_why = _probe_counter(target)
        has_power, power_why = _probe_power(target)
        guest = target.is_vm_guest()
        cap_w = target.power_cap_w()
    except MeterError as exc:
        gpus.close()
        return NullMeter(device, "gpu", str(exc))
    has_counter = resolution_j is not None
    if has_counter and guest:
        has_counter, resolution_j = False, None
        counter_why = VM_GUEST_NOTE
    if not has_counter and not has_power:
        gpus.close()
        return NullMeter(
            device,
            "gpu",
            f"AMD GPU {target.index} reports no energy or power ({counter_why}; {power_why})",
        )
    if has_counter:
        notes: tuple[str, ...] = ()
    elif guest:
        notes = (VM_GUEST_NOTE,)
    else:
        notes = (f"no energy counter ({counter_why}); energy integrated from power samples",)
    return AmdMeter(
        target,
        interval_s=interval_s,
        has_counter=has_counter,
        has_power=has_power,
        counter_resolution_j=resolution_j,
        notes=notes,
        max_samples=max_samples,
        power_cap_w=cap_w,
        session=gpus,
    )


def visible_devices() -> list[str]:
    """``cuda:N`` for every AMD GPU this process can see (``[]`` if none or no amdsmi)."""
    if not AmdGpus.is_available():
        return []
    try:
        with AmdGpus() as gpus:
            n = gpus.visible_count()
    except MeterError:
        return []
    return [f"cuda:{i}" for i in range(n)]


def list_sensors() -> list[SensorInfo]:
    """Every AMD GPU sensor AMD SMI can see, for ``accelbench devices``."""
    try:
        gpus = AmdGpus()
    except MeterError as exc:
        return [SensorInfo("AMD GPUs (amdsmi)", "amdsmi", "", False, str(exc))]
    try:
        device_of: dict[int, str] = {}
        for n in range(gpus.count()):
            try:
                device_of.setdefault(gpus.physical_index(n)[0], f"cuda:{n}")
            except MeterError:
                break
        out: list[SensorInfo] = []
        for index in range(gpus.count()):
            gpu = gpus.gpu(index)
            resolution_j, counter_why = _probe_counter(gpu)
            has_power, power_why = _probe_power(gpu)
            device = device_of.get(index, "")
            hidden = "" if device else "not visible to this process (HIP_VISIBLE_DEVICES)"
            label = f"AMD GPU {index} ({gpu.uuid})"
            has_counter = resolution_j is not None
            out.append(SensorInfo(f"{label} energy counter", "amdsmi-energy", device,
                                  has_counter, hidden if has_counter else counter_why))
            out.append(SensorInfo(f"{label} power", "amdsmi-power", device, has_power,
                                  hidden if has_power else power_why))
        return out
    except MeterError as exc:
        return [SensorInfo("AMD GPUs (amdsmi)", "amdsmi", "", False, str(exc))]
    finally:
        gpus.close()
