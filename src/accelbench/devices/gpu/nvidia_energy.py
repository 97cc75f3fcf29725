"""What the GPU meter reads on an NVIDIA GPU, through :mod:`.nvidia` (NVML).

Energy comes from the total-energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, millijoules, Volta and newer);
power samples are taken on a background thread for the timeline, the peak and
a cross-check, and become the energy where the counter is missing or fails.

Power is read by field (``nvmlDeviceGetFieldValues``): ``NVML_FI_DEV_POWER_INSTANT``
for the samples, ``NVML_FI_DEV_POWER_AVERAGE`` recorded alongside, and the memory
power (``NVML_FI_DEV_POWER_INSTANT`` with ``NVML_POWER_SCOPE_MEMORY``) where the GPU
reports it. Where a field is unsupported the meter falls back, and
``details["power_field"]`` says which was used (``instant``, ``average``, or
``power_usage``: ``nvmlDeviceGetPowerUsage``, a 1 s average on Ampere and newer).

On A100 and H100 the power sensor updates every ~100 ms but averages only the last
~25 ms of each period (Yang, Adamek & Armour, SC'24, arXiv 2312.02741): 75% of the
run is never observed, so energy integrated from power samples can miss bursts. The
counter is the better energy source there; readings carry the observed fraction
where it is known (:data:`SENSOR_WINDOWS`) and the update period measured from the
window's own readings.

``cuda:N`` is resolved through ``CUDA_VISIBLE_DEVICES`` by
:meth:`accelbench.devices.gpu.common.GpuSession.physical_index`, the mapping the knobs
use. A MIG instance is measured through its parent GPU, which the note says.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.devices.errors import DeviceError
from accelbench.devices.gpu.common import (
    GpuEnergy,
    VendorEnergy,
    in_container,
    parse_visible_devices,
)
from accelbench.devices.gpu.nvidia import NvidiaGpu, NvidiaGpus, power_field_ids

NOMINAL_UPDATE_PERIOD_S = 0.1
"""NVML power (and energy counter) update period on A100/H100-class GPUs: ~100 ms
(Yang, Adamek & Armour, SC'24, arXiv 2312.02741); used until a window measures it."""

SC24 = "Yang, Adamek & Armour, SC'24 (arXiv 2312.02741)"

NVML_CONTAINER_FIX = (
    "in a container, start it with the GPUs and NVML: `docker run --gpus all -e "
    "NVIDIA_DRIVER_CAPABILITIES=compute,utility ...` (NVML ships in the `utility` "
    "capability; Kubernetes: request `nvidia.com/gpu`); on the host, `nvidia-smi` must work"
)
NVML_INSTALL_FIX = "`pip install nvidia-ml-py` (the NVML bindings)"


@dataclass(frozen=True, slots=True)
class SensorWindow:
    """How much of each update period a GPU generation's power sensor averages."""

    averaging_s: float
    """Length of the averaging window behind each update."""
    update_s: float
    """Time between updates."""
    source: str
    """Where the figures come from."""

    @property
    def observed_fraction(self) -> float:
        """Share of the run the sensor observes."""
        return self.averaging_s / self.update_s


SENSOR_WINDOWS: dict[str, SensorWindow] = {
    "A100": SensorWindow(0.025, 0.1, SC24),
    "H100": SensorWindow(0.025, 0.1, SC24),
}
"""Known power-sensor windows by GPU generation (a substring of the NVML name). Other
GPUs are absent: their observed fraction is unknown, not assumed."""


def sensor_window(gpu_name: str) -> SensorWindow | None:
    """The known power-sensor window of a GPU model, or None."""
    upper = gpu_name.upper()
    for key, window in SENSOR_WINDOWS.items():
        if key in upper:
            return window
    return None


POWER_FIELDS = ("instant", "average", "power_usage")
"""Power sources in order of preference (``details["power_field"]``)."""

# Bits of nvmlDeviceGetCurrentClocksEventReasons (nvml.h, nvmlClocksEventReason*).
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def decode_throttle_reasons(mask: int) -> list[str]:
    """Names of the set bits of an NVML clocks-event (throttle) mask."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    if unknown:
        names.append(f"other_0x{unknown:x}")
    return names


def nvml_fix(reason: str) -> str:
    """The fix for an NVML problem, from its reason."""
    if "not installed" in reason:
        return f"{NVML_INSTALL_FIX}; then, if NVML still cannot start: {NVML_CONTAINER_FIX}"
    if "not visible" in reason:
        return "set CUDA_VISIBLE_DEVICES to include it, if it should be measured"
    if "not supported" in reason:
        return "this GPU lacks the sensor; accelbench falls back to the other one, labelled"
    if in_container():
        return NVML_CONTAINER_FIX
    return "install and load the NVIDIA driver (`nvidia-smi` must list the GPUs)"


class NvmlEnergy(GpuEnergy):
    """Energy and power of one NVIDIA GPU. Build it with :func:`open_energy`.

    Args:
        target: The GPU (from :meth:`NvidiaGpus.resolve`).
        has_counter: Whether the total-energy counter works on this GPU.
        has_power: Whether power readings work on this GPU.
        notes: Remarks for every reading (MIG, ordering caveats).
        power_field: Where the power samples come from (:data:`POWER_FIELDS`).
        average_field: Whether ``NVML_FI_DEV_POWER_AVERAGE`` is recorded alongside.
        memory_field: Whether the GPU reports its memory power.
    """

    kind = "nvml"
    nominal_update_period_s = NOMINAL_UPDATE_PERIOD_S

    def __init__(
        self,
        target: NvidiaGpu,
        *,
        has_counter: bool,
        has_power: bool,
        notes: tuple[str, ...] = (),
        power_field: str = "power_usage",
        average_field: bool = False,
        memory_field: bool = False,
    ) -> None:
        if power_field not in POWER_FIELDS:
            raise ValueError(f"power_field must be one of {POWER_FIELDS}, got {power_field!r}")
        details: dict[str, Any] = {
            "sensor": "nvml",
            "gpu_name": target.name,
            "uuid": target.uuid,
            "nvml_index": target.nvml_index,
        }
        if has_power:
            details["power_field"] = power_field
        window = sensor_window(target.name)
        if window is not None:
            details["observed_fraction"] = window.observed_fraction
            details["observed_fraction_source"] = (
                f"{window.averaging_s * 1e3:g} ms averaged per {window.update_s * 1e3:g} ms "
                f"update ({window.source})"
            )
        if target.mig_uuid:
            details["mig_uuid"] = target.mig_uuid
        field_notes: list[str] = []
        if has_power and power_field == "average":
            field_notes.append(
                "NVML_FI_DEV_POWER_INSTANT unsupported: power samples are "
                "NVML_FI_DEV_POWER_AVERAGE (a 1 s average; timeline and peak smoothed)"
            )
        elif has_power and power_field == "power_usage":
            field_notes.append(
                "power fields unsupported: power samples are nvmlDeviceGetPowerUsage, "
                "a 1 s average on Ampere and newer (timeline and peak smoothed; "
                "energy integrated from it lags the load by about 0.5 s)"
            )
        super().__init__(
            target.device, has_counter=has_counter, has_power=has_power,
            counter_resolution_j=1e-3,  # the counter counts millijoules
            details=details, notes=(*notes, *field_notes),
        )
        self.target = target
        self.power_field = power_field
        self.average_field = average_field
        self.memory_field = memory_field
        instant_id, average_id, memory_id = power_field_ids()
        self._fields: list[Any] = []
        self._slot: dict[str, int] = {}
        for name, field_id, wanted in (
            ("instant", instant_id, power_field == "instant"),
            ("average", average_id, power_field == "average" or average_field),
            ("memory", memory_id, memory_field),
        ):
            if wanted:
                self._slot[name] = len(self._fields)
                self._fields.append(field_id)
        self.window_started()

    def window_started(self) -> None:
        super().window_started()
        self._average_sum_w = 0.0
        self._average_n = 0
        self._memory_sum_w = 0.0
        self._memory_n = 0

    def window_extras(self, window_s: float) -> dict[str, Any]:
        extras: dict[str, Any] = {}
        if self.has_power:
            extras["cross_check_field"] = self.power_field
        if self._average_n:
            extras["power_average_field_mean_w"] = self._average_sum_w / self._average_n
        if self._memory_n:
            extras["memory_power_mean_w"] = self._memory_sum_w / self._memory_n
            extras["memory_power_field"] = "NVML_FI_DEV_POWER_INSTANT/NVML_POWER_SCOPE_MEMORY"
        return extras

    def temperature_c(self) -> float | None:
        """GPU temperature (``nvmlDeviceGetTemperature``, ``NVML_TEMPERATURE_GPU``), or None."""
        value = self.target.temperature_c()
        return None if value is None else float(value)

    def read_counter_j(self) -> float:
        return float(self.target.total_energy_mj()) * 1e-3

    def read_power_w(self) -> float:
        if self.power_field == "power_usage":
            return float(self.target.power_usage_mw()) * 1e-3
        values = self.target.power_fields_w(self._fields)
        values += [None] * (len(self._fields) - len(values))
        if "average" in self._slot and self.power_field != "average":
            average_w = values[self._slot["average"]]
            if average_w is not None:
                self._average_sum_w += average_w
                self._average_n += 1
        if "memory" in self._slot:
            memory_w = values[self._slot["memory"]]
            if memory_w is not None:
                self._memory_sum_w += memory_w
                self._memory_n += 1
        power_w = values[self._slot[self.power_field]]
        if power_w is None:
            raise DeviceError(f"power field {self.power_field!r}: NVML returned an error")
        return power_w

    def read_state(self) -> dict[str, Any]:
        gpu = self.target
        limit_mw = gpu.enforced_power_limit_mw()
        mask = gpu.clock_event_mask()
        return {
            "power_limit_w": None if limit_mw is None else float(limit_mw) * 1e-3,
            "sm_clock_mhz": gpu.clock_mhz("sm"),
            "mem_clock_mhz": gpu.clock_mhz("mem"),
            "throttle_reasons_mask": mask,
            "throttle_reasons": None if mask is None else decode_throttle_reasons(int(mask)),
        }

    def sensors(self) -> list[tuple[str, str, bool, str]]:
        label = f"{self.target.name} ({self.target.uuid})"
        return [
            (f"{label} energy counter", "nvml-energy", self.has_counter,
             "" if self.has_counter else "nvmlDeviceGetTotalEnergyConsumption: not supported"),
            (f"{label} power ({self.power_field})", "nvml-power", self.has_power,
             "" if self.has_power else "nvmlDeviceGetPowerUsage: not supported"),
        ]


def _order_caveat(gpus: NvidiaGpus) -> str:
    """A note when CUDA's device order may differ from NVML's (PCI bus) order."""
    if os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or gpus.count() < 2:
        return ""
    visible = parse_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible is not None and not any(e.isdigit() for e in visible):
        return ""  # UUIDs name GPUs unambiguously
    if len(gpus.names()) < 2:
        return ""
    return (
        "GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA's index may "
        "not match NVML's; set CUDA_DEVICE_ORDER=PCI_BUS_ID or use GPU UUIDs"
    )


def supports(read: Callable[[], Any]) -> tuple[bool, str]:
    """Whether ``read()`` answers, and why not."""
    try:
        read()
    except DeviceError as exc:
        return False, str(exc)
    return True, ""


def open_energy(gpus: NvidiaGpus, device: str, uuid: str | None = None) -> NvmlEnergy:
    """What the GPU meter reads on ``cuda:N`` (``uuid`` overrides ``CUDA_VISIBLE_DEVICES``).

    Raises:
        DeviceError: Not found, or the GPU reports neither energy nor power.
    """
    target = gpus.resolve(device, uuid=uuid)
    has_counter, counter_why = supports(target.total_energy_mj)
    fields = target.probe_power_fields()
    has_usage, power_why = supports(target.power_usage_mw)
    power_field = next(
        (f for f, ok in (("instant", fields["instant"]), ("average", fields["average"]),
                         ("power_usage", has_usage)) if ok),
        "power_usage",
    )
    has_power = fields["instant"] or fields["average"] or has_usage
    notes: list[str] = []
    if target.mig_uuid:
        notes.append(
            f"MIG instance {target.mig_uuid}: energy and power are those of the whole "
            f"physical GPU {target.uuid}, shared with its other instances"
        )
    notes.append(_order_caveat(gpus))
    if not has_counter and has_power:
        notes.append(f"no energy counter ({counter_why}); energy integrated from power samples")
    if not has_counter and not has_power:
        raise DeviceError(
            f"{target.name} ({target.uuid}) reports no energy or power through NVML "
            f"({counter_why}; {power_why})"
        )
    return NvmlEnergy(
        target, has_counter=has_counter, has_power=has_power,
        notes=tuple(n for n in notes if n), power_field=power_field,
        average_field=fields["average"], memory_field=fields["memory"],
    )


def sensor_probe(gpus: NvidiaGpus, index: int) -> tuple[str, list[tuple[str, bool, str]]]:
    """Label of NVML GPU ``index`` and whether its energy counter and power read."""
    gpu = gpus.gpu(index)
    return f"GPU {index}: {gpu.name} ({gpu.uuid})", [
        ("energy counter", *supports(gpu.total_energy_mj)),
        ("power", *supports(gpu.power_usage_mw)),
    ]


def activity(gpus: NvidiaGpus, device: str, uuid: str | None = None) -> dict[str, Any]:
    """Processes, clocks, throttling, utilisation and temperature of ``cuda:N``."""
    gpu = gpus.resolve(device, uuid=uuid)
    util = gpu.utilization()
    mask = gpu.clock_event_mask()
    return {
        "uuid": gpu.uuid,
        "processes": gpu.processes(),
        "sm_clock_mhz": gpu.clock_mhz("sm"),
        "max_sm_clock_mhz": gpu.max_sm_clock_mhz(),
        "mem_clock_mhz": gpu.clock_mhz("mem"),
        "throttle_reasons_mask": mask,
        "throttle_reasons": None if mask is None else decode_throttle_reasons(mask),
        "gpu_util_percent": None if util is None else util[0],
        "mem_util_percent": None if util is None else util[1],
        "temperature_c": gpu.temperature_c(),
    }


VENDOR = VendorEnergy(NvidiaGpus, open_energy, sensor_probe, activity, nvml_fix)
"""What the GPU meter reads through NVML."""
