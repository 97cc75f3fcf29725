"""What the GPU meter reads on an AMD GPU, through :mod:`.amd` (AMD SMI).

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
import os
import time
from pathlib import Path
from typing import Any

from accelbench.devices.errors import DeviceError
from accelbench.devices.gpu.amd import AmdGpu, AmdGpus, number
from accelbench.devices.gpu.common import GpuEnergy, VendorEnergy

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
AMDSMI_MIN_ROCM = "6.0"
"""ROCm release whose AMD SMI library has ``amdsmi_get_energy_count``."""

Point = tuple[float, float | None, float]
"""One accumulator read: ``(joules, device seconds or None, monotonic seconds)``."""


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
        DeviceError: If the dict holds no usable accumulator or resolution.
    """
    energy_j = energy_j_from_count(count)
    if energy_j is None:
        raise DeviceError("amdsmi_get_energy_count returned no accumulator")
    stamp_ns = number(count.get("timestamp"))
    return energy_j, (stamp_ns * 1e-9 if stamp_ns is not None and stamp_ns > 0 else None)


def _span(a: Point, b: Point) -> float | None:
    """Seconds between two accumulator reads: device timestamps where both have one and
    they advanced, else the monotonic clock."""
    if a[1] is not None and b[1] is not None and b[1] > a[1]:
        return b[1] - a[1]
    dt_s = b[2] - a[2]
    return dt_s if dt_s > 0 else None


def rocm_version() -> str | None:
    """The installed ROCm release from ``/opt/rocm/.info/version``, or None."""
    root = os.environ.get("ROCM_PATH") or "/opt/rocm"
    try:
        return (Path(root) / ".info" / "version").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def amdsmi_fix(reason: str) -> str:
    """The fix for an AMD SMI problem, from its reason."""
    rocm = rocm_version()
    match = (
        f"`pip install amdsmi=={rocm.split('-')[0]}`, matching the installed ROCm {rocm}"
        if rocm
        else "`pip install amdsmi==X.Y.Z` with X.Y.Z the installed ROCm version "
        "(`cat /opt/rocm/.info/version`)"
    )
    if "not installed" in reason:
        return (f"{match} (the Python package must match the ROCm library); the energy "
                f"counter needs ROCm >= {AMDSMI_MIN_ROCM}")
    if "not visible" in reason:
        return "set HIP_VISIBLE_DEVICES to include it, if it should be measured"
    if "not supported" in reason or "virtual" in reason.lower() or "VM" in reason:
        return (f"the counter needs ROCm >= {AMDSMI_MIN_ROCM} on bare metal (unsupported in "
                "VM guests); accelbench integrates the power samples instead, labelled")
    return (f"load the amdgpu driver and make sure {match}; the energy counter needs "
            f"ROCm >= {AMDSMI_MIN_ROCM}")


class AmdEnergy(GpuEnergy):
    """Energy and power of one AMD GPU. Build it with :func:`open_energy`.

    Args:
        target: The GPU (from :meth:`AmdGpus.resolve`).
        has_counter: Whether the energy accumulator works on this GPU.
        has_power: Whether power readings work on this GPU.
        counter_resolution_j: Joules per accumulator tick.
        notes: Remarks for every reading.
        power_cap_w: The GPU's power cap, bounding plausible counter steps (None:
            :data:`DEFAULT_MAX_POWER_W`).
    """

    kind = "amdsmi"
    nominal_update_period_s = NOMINAL_UPDATE_PERIOD_S

    def __init__(
        self,
        target: AmdGpu,
        *,
        has_counter: bool,
        has_power: bool,
        counter_resolution_j: float | None = None,
        notes: tuple[str, ...] = (),
        power_cap_w: float | None = None,
    ) -> None:
        details: dict[str, Any] = {
            "sensor": "amdsmi",
            "uuid": target.uuid,
            "amdsmi_index": target.index,
            "power_cap_w": power_cap_w,
        }
        super().__init__(
            target.device, has_counter=has_counter, has_power=has_power,
            counter_resolution_j=counter_resolution_j, details=details, notes=notes,
        )
        self.target = target
        self.power_cap_w = power_cap_w
        self.max_plausible_w = PLAUSIBLE_CAP_MARGIN * (power_cap_w or DEFAULT_MAX_POWER_W)
        self.window_started()

    def window_started(self) -> None:
        super().window_started()
        self._first: Point | None = None
        self._last: Point | None = None
        self._ref: Point | None = None
        self._counter_polls = 0

    def _count(self) -> Point:
        count = self.target.energy_count()
        energy_j, stamp_s = count_reading(count)
        return energy_j, stamp_s, time.monotonic()

    def _invalidate(self, reason: str) -> None:
        if not self.invalid:
            self.invalid = reason

    def _step(self, point: Point) -> None:
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
            self._invalidate(
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
            self._invalidate(
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
            raise DeviceError("amdsmi_get_power_info returned no socket power")
        if self.has_counter:
            # Poll the accumulator with every power sample, so a backward or absurd step
            # inside the window is seen even if the counter recovers by its end. A failed
            # poll is skipped: the edge reads decide whether the counter is usable.
            with contextlib.suppress(DeviceError):
                self._step(self._count())
        return power_w

    def counter_span_s(self) -> float | None:
        if self._first is None or self._last is None:
            return None
        t0, t1 = self._first[1], self._last[1]
        if t0 is None or t1 is None or t1 <= t0:
            return None
        return t1 - t0

    def window_extras(self, window_s: float) -> dict[str, Any]:
        if self._first is not None and self._last is not None and self._last is not self._first:
            # The whole window too, where no sub-span reached MIN_CHECK_S.
            dt_s = _span(self._first, self._last)
            if dt_s and dt_s > 0:
                implied_w = (self._last[0] - self._first[0]) / dt_s
                if implied_w > self.max_plausible_w:
                    self._invalidate(
                        f"energy counter implies {implied_w:.4g} W over the window, above "
                        f"{self.max_plausible_w:.0f} W: an invalid counter value "
                        "(amdsmi issue 38); energy not reported"
                    )
        return {"counter_polls": self._counter_polls}

    def temperature_c(self) -> float | None:
        """Edge temperature (else hotspot) from ``amdsmi_get_temp_metric``, or None."""
        return self.target.temperature_c()

    def sensors(self) -> list[tuple[str, str, bool, str]]:
        label = f"AMD GPU {self.target.index} ({self.target.uuid})"
        return [
            (f"{label} energy counter", "amdsmi-energy", self.has_counter,
             "" if self.has_counter else "amdsmi_get_energy_count: not supported"),
            (f"{label} power", "amdsmi-power", self.has_power,
             "" if self.has_power else "amdsmi_get_power_info: no socket power"),
        ]


def probe_counter(gpu: AmdGpu) -> tuple[float | None, str]:
    """Joules per tick if the accumulator works, else ``(None, why)``."""
    try:
        count = gpu.energy_count()
    except DeviceError as exc:
        return None, str(exc)
    resolution_uj = number(count.get("counter_resolution"))
    if energy_j_from_count(count) is None or resolution_uj is None:
        return None, "amdsmi_get_energy_count returned no accumulator"
    return resolution_uj * 1e-6, ""


def probe_power(gpu: AmdGpu) -> tuple[bool, str]:
    """Whether the GPU reports its socket power, and why not."""
    try:
        info = gpu.power_info()
    except DeviceError as exc:
        return False, str(exc)
    if power_w_from_info(info) is None:
        return False, "amdsmi_get_power_info returned no socket power"
    return True, ""


def open_energy(gpus: AmdGpus, device: str, uuid: str | None = None) -> AmdEnergy:
    """What the GPU meter reads on AMD GPU ``cuda:N`` (``uuid`` is not used: ROCm's and
    AMD SMI's UUIDs differ).

    Raises:
        DeviceError: Not found, or the GPU reports neither energy nor power.
    """
    target = gpus.resolve(device)
    resolution_j, counter_why = probe_counter(target)
    has_power, power_why = probe_power(target)
    guest = target.is_vm_guest()
    cap_w = target.power_cap_w()
    has_counter = resolution_j is not None
    if has_counter and guest:
        has_counter, resolution_j = False, None
        counter_why = VM_GUEST_NOTE
    if not has_counter and not has_power:
        raise DeviceError(
            f"AMD GPU {target.index} reports no energy or power ({counter_why}; {power_why})"
        )
    if has_counter:
        notes: tuple[str, ...] = ()
    elif guest:
        notes = (VM_GUEST_NOTE,)
    else:
        notes = (f"no energy counter ({counter_why}); energy integrated from power samples",)
    return AmdEnergy(
        target, has_counter=has_counter, has_power=has_power,
        counter_resolution_j=resolution_j, notes=notes, power_cap_w=cap_w,
    )


def sensor_probe(gpus: AmdGpus, index: int) -> tuple[str, list[tuple[str, bool, str]]]:
    """Label of AMD SMI GPU ``index`` and whether its energy counter and power read."""
    gpu = gpus.gpu(index)
    resolution_j, counter_why = probe_counter(gpu)
    return f"AMD GPU {index} ({gpu.uuid})", [
        ("energy counter", resolution_j is not None, counter_why),
        ("power", *probe_power(gpu)),
    ]


def activity(gpus: AmdGpus, device: str, uuid: str | None = None) -> dict[str, Any]:
    """Processes, utilisation and temperature of AMD GPU ``cuda:N`` (AMD SMI reports no
    clock-event reasons: ``throttle_reasons`` is None)."""
    gpu = gpus.resolve(device)
    return {
        "uuid": gpu.uuid,
        "processes": gpu.processes(),
        "throttle_reasons": None,
        "gpu_util_percent": gpu.gfx_activity_percent(),
        "temperature_c": gpu.temperature_c(),
    }


VENDOR = VendorEnergy(AmdGpus, open_energy, sensor_probe, activity, amdsmi_fix)
"""What the GPU meter reads through AMD SMI."""
