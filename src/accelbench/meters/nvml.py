"""NVIDIA GPUs through NVML (the ``nvidia-ml-py`` package, imported here only).

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

Only the GPUs a case uses are measured. ``cuda:N`` is the N-th entry of
``CUDA_VISIBLE_DEVICES`` (indices, ``GPU-<uuid>`` full or unique prefixes,
``MIG-<uuid>`` or ``MIG-GPU-<uuid>/<gi>/<ci>``), resolved to an NVML handle by
UUID. A MIG instance is measured through its parent GPU, which the note says.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from accelbench.errors import MeterError
from accelbench.meters.common import (
    CounterSampleMeter,
    Meter,
    NullMeter,
    SensorInfo,
    SensorUnsupportedError,
)
from accelbench.meters.sampler import DEFAULT_INTERVAL_S, DEFAULT_MAX_SAMPLES

INSTALL_HINT = "pip install nvidia-ml-py"

NOMINAL_UPDATE_PERIOD_S = 0.1
"""NVML power (and energy counter) update period on A100/H100-class GPUs: ~100 ms
(Yang, Adamek & Armour, SC'24, arXiv 2312.02741); used until a window measures it."""

SC24 = "Yang, Adamek & Armour, SC'24 (arXiv 2312.02741)"


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

_T = TypeVar("_T")

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


def _pynvml() -> ModuleType:
    """Import pynvml or raise :class:`MeterError` with the install command."""
    try:
        import pynvml
    except ImportError as exc:
        raise MeterError(f"nvidia-ml-py is not installed: {INSTALL_HINT}") from exc
    return pynvml


def _call(fn: Callable[..., _T], *args: Any) -> _T:
    """Call an NVML function, translating NVMLError into MeterError."""
    nv = _pynvml()
    try:
        return fn(*args)
    except nv.NVMLError as exc:
        name = getattr(fn, "__name__", "NVML call")
        if isinstance(exc, nv.NVMLError_NotSupported):
            raise SensorUnsupportedError(f"{name}: not supported on this GPU") from exc
        raise MeterError(f"{name} failed: {exc}") from exc


def _clock_event_mask(nv: Any, handle: Any) -> int | None:
    """The bitmask of why clocks are held down (power cap, thermal, ...), or None.

    The "event" name replaced "throttle" in NVML 12.5; older bindings have only the latter.
    """
    for name in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        fn = getattr(nv, name, None)
        if fn is not None:
            mask = _try(fn, handle)
            if mask is not None:
                return int(mask)
    return None


def _try(fn: Callable[..., _T], *args: Any) -> _T | None:
    try:
        return _call(fn, *args)
    except MeterError:
        return None


_VALUE_MEMBERS = {
    0: "dVal",  # NVML_VALUE_TYPE_DOUBLE
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


def _field_number(field: Any) -> float | None:
    """The value of one ``nvmlFieldValue_t``, or None when NVML returned an error for it."""
    if int(getattr(field, "nvmlReturn", 1)) != 0:
        return None
    member = _VALUE_MEMBERS.get(int(getattr(field, "valueType", -1)))
    if member is None:
        return None
    return float(getattr(field.value, member))


def read_power_fields(handle: Any, fields: list[Any]) -> list[float | None]:
    """Watts of each power field (ids or ``(id, scope)`` pairs); None for an unsupported one.

    Raises:
        MeterError: If the call itself fails (no such function in the driver ...).
    """
    nv = _pynvml()
    fn = getattr(nv, "nvmlDeviceGetFieldValues", None)
    if fn is None:
        raise SensorUnsupportedError("nvmlDeviceGetFieldValues: not in this nvidia-ml-py")
    values = _call(fn, handle, fields)
    out: list[float | None] = []
    for field in list(values)[: len(fields)]:
        milliwatts = _field_number(field)
        out.append(None if milliwatts is None else milliwatts * 1e-3)
    return out


def _power_field_ids(nv: Any) -> tuple[Any, Any, Any]:
    """(instant, average, memory) field ids; memory is the instant field's memory scope."""
    instant = getattr(nv, "NVML_FI_DEV_POWER_INSTANT", 186)
    average = getattr(nv, "NVML_FI_DEV_POWER_AVERAGE", 185)
    memory = (instant, getattr(nv, "NVML_POWER_SCOPE_MEMORY", 2))
    return instant, average, memory


def probe_power_fields(handle: Any) -> dict[str, bool]:
    """Which power fields this GPU answers: ``instant``, ``average``, ``memory``."""
    nv = _pynvml()
    ids = _power_field_ids(nv)
    try:
        values = read_power_fields(handle, list(ids))
    except MeterError:
        return {"instant": False, "average": False, "memory": False}
    values += [None] * (3 - len(values))
    return {
        "instant": values[0] is not None,
        "average": values[1] is not None,
        "memory": values[2] is not None,
    }


def _init() -> ModuleType:
    nv = _pynvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise MeterError(
            f"NVML could not start ({exc}); is the NVIDIA driver installed and loaded?"
        ) from exc
    return nv


def _shutdown(nv: ModuleType) -> None:
    with contextlib.suppress(nv.NVMLError):
        nv.nvmlShutdown()


def decode_throttle_reasons(mask: int) -> list[str]:
    """Names of the set bits of an NVML clocks-event (throttle) mask."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    if unknown:
        names.append(f"other_0x{unknown:x}")
    return names


def parse_visible_devices(value: str | None) -> list[str] | None:
    """Entries of ``CUDA_VISIBLE_DEVICES`` as CUDA reads them.

    Args:
        value: The variable's value, or None when unset.

    Returns:
        None when unset (every GPU visible), else the entries up to the first
        invalid one (CUDA ignores everything from there on).
    """
    if value is None:
        return None
    entries: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if entry.startswith(("GPU-", "MIG-")):
            entries.append(entry)
            continue
        try:
            index = int(entry)
        except ValueError:
            break
        if index < 0:
            break
        entries.append(str(index))
    return entries


@dataclass(frozen=True, slots=True)
class GpuTarget:
    """The physical GPU behind an accelbench device."""

    device: str
    nvml_index: int
    uuid: str
    name: str
    handle: Any
    mig_uuid: str | None = None


def _all_gpus(nv: ModuleType) -> list[tuple[int, str, Any]]:
    count = _call(nv.nvmlDeviceGetCount)
    out = []
    for index in range(count):
        handle = _call(nv.nvmlDeviceGetHandleByIndex, index)
        out.append((index, str(_call(nv.nvmlDeviceGetUUID, handle)), handle))
    return out


def _device_index(device: str) -> int:
    if device == "cuda":
        return 0
    prefix, _, index = device.partition(":")
    if prefix != "cuda" or not index.isdigit():
        raise MeterError(f"not a CUDA device: {device!r} (expected 'cuda:N')")
    return int(index)


def resolve_gpu(device: str, *, uuid: str | None = None) -> GpuTarget:
    """Find the NVML handle of ``cuda:N`` (NVML must be initialised).

    Args:
        device: ``cuda:N`` (``cuda`` means ``cuda:0``).
        uuid: The GPU's UUID if the caller knows it (e.g. from
            ``torch.cuda.get_device_properties(N).uuid``); overrides
            ``CUDA_VISIBLE_DEVICES``.

    Returns:
        The physical GPU to measure.

    Raises:
        MeterError: If the device is not visible or cannot be found.
    """
    nv = _pynvml()
    gpus = _all_gpus(nv)
    if uuid is not None:
        entry = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    else:
        index = _device_index(device)
        visible = parse_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"))
        if visible is None:
            visible = [str(i) for i, _, _ in gpus]
        if index >= len(visible):
            raise MeterError(
                f"{device} is not visible to this process: {len(visible)} GPU(s) visible "
                f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!r})"
            )
        entry = visible[index]

    mig_uuid: str | None = None
    if entry.isdigit():
        matches = [g for g in gpus if g[0] == int(entry)]
        if not matches:
            raise MeterError(f"{device}: NVML has no GPU with index {entry} ({len(gpus)} found)")
    elif entry.startswith("MIG-GPU-"):
        # Legacy MIG form MIG-GPU-<uuid>/<gi>/<ci>: the parent GPU is in the name.
        mig_uuid = entry
        parent = entry[len("MIG-") :].split("/")[0]
        matches = [g for g in gpus if g[1] == parent]
    elif entry.startswith("MIG-"):
        mig_uuid = entry
        mig_handle = _call(nv.nvmlDeviceGetHandleByUUID, entry)
        parent_handle = _call(nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle, mig_handle)
        parent_uuid = str(_call(nv.nvmlDeviceGetUUID, parent_handle))
        matches = [g for g in gpus if g[1] == parent_uuid]
    else:
        # CUDA accepts any unique prefix of a GPU UUID.
        matches = [g for g in gpus if g[1] == entry] or [g for g in gpus if g[1].startswith(entry)]
        if len(matches) > 1:
            raise MeterError(f"{device}: GPU UUID prefix {entry!r} is ambiguous")
    if not matches:
        raise MeterError(f"{device}: no GPU with UUID {entry!r} found by NVML")
    nvml_index, gpu_uuid, handle = matches[0]
    name = str(_try(nv.nvmlDeviceGetName, handle) or "NVIDIA GPU")
    return GpuTarget(
        device=device,
        nvml_index=nvml_index,
        uuid=gpu_uuid,
        name=name,
        handle=handle,
        mig_uuid=mig_uuid,
    )


def _order_caveat(nv: ModuleType, gpus: list[tuple[int, str, Any]]) -> str:
    """A note when CUDA's device order may differ from NVML's (PCI bus) order."""
    if os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or len(gpus) < 2:
        return ""
    visible = parse_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible is not None and not any(e.isdigit() for e in visible):
        return ""  # UUIDs name GPUs unambiguously
    names = {str(_try(nv.nvmlDeviceGetName, h)) for _, _, h in gpus}
    if len(names) < 2:
        return ""
    return (
        "GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA's index may "
        "not match NVML's; set CUDA_DEVICE_ORDER=PCI_BUS_ID or use GPU UUIDs"
    )


class NvmlMeter(CounterSampleMeter):
    """Energy and power of one NVIDIA GPU. Build it with :func:`open_meter`.

    Args:
        target: The GPU (from :func:`resolve_gpu`).
        interval_s: Power sampling interval.
        has_counter: Whether the total-energy counter works on this GPU.
        has_power: Whether power readings work on this GPU.
        notes: Remarks for every reading (MIG, ordering caveats).
        max_samples: Bound on stored samples.
        power_field: Where the power samples come from (:data:`POWER_FIELDS`).
        average_field: Whether ``NVML_FI_DEV_POWER_AVERAGE`` is recorded alongside.
        memory_field: Whether the GPU reports its memory power.
    """

    kind = "nvml"

    def __init__(
        self,
        target: GpuTarget,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        has_counter: bool,
        has_power: bool,
        notes: tuple[str, ...] = (),
        max_samples: int = DEFAULT_MAX_SAMPLES,
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
        notes = (*notes, *field_notes)
        super().__init__(
            target.device,
            "gpu",
            interval_s=interval_s,
            has_counter=has_counter,
            has_power=has_power,
            counter_resolution_j=1e-3,  # the counter counts millijoules
            details=details,
            notes=notes,
            max_samples=max_samples,
            nominal_update_period_s=NOMINAL_UPDATE_PERIOD_S,
        )
        self.target = target
        self._nv = _pynvml()
        self._closed = False
        self.power_field = power_field
        self.average_field = average_field
        self.memory_field = memory_field
        instant_id, average_id, memory_id = _power_field_ids(self._nv)
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
        self._average_sum_w = 0.0
        self._average_n = 0
        self._memory_sum_w = 0.0
        self._memory_n = 0

    def _window_started(self) -> None:
        self._average_sum_w = 0.0
        self._average_n = 0
        self._memory_sum_w = 0.0
        self._memory_n = 0

    def _window_extras(self, window_s: float) -> tuple[dict[str, Any], list[str]]:
        extras: dict[str, Any] = {}
        if self.has_power:
            extras["cross_check_field"] = self.power_field
        if self._average_n:
            extras["power_average_field_mean_w"] = self._average_sum_w / self._average_n
        if self._memory_n:
            extras["memory_power_mean_w"] = self._memory_sum_w / self._memory_n
            extras["memory_power_field"] = "NVML_FI_DEV_POWER_INSTANT/NVML_POWER_SCOPE_MEMORY"
        return extras, []

    def temperature_c(self) -> float | None:
        """GPU temperature (``nvmlDeviceGetTemperature``, ``NVML_TEMPERATURE_GPU``), or None."""
        nv = self._nv
        value = _try(nv.nvmlDeviceGetTemperature, self.target.handle, nv.NVML_TEMPERATURE_GPU)
        return None if value is None else float(value)

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        try:
            nv = _init()
        except MeterError as exc:
            return False, str(exc)
        try:
            count = _call(nv.nvmlDeviceGetCount)
        except MeterError as exc:
            return False, str(exc)
        finally:
            _shutdown(nv)
        if count < 1:
            return False, "NVML found no NVIDIA GPU"
        return True, ""

    @classmethod
    def _availability_key(cls) -> Hashable:
        return ()

    def read_counter_j(self) -> float:
        energy_mj = _call(self._nv.nvmlDeviceGetTotalEnergyConsumption, self.target.handle)
        return float(energy_mj) * 1e-3

    def read_power_w(self) -> float:
        if self.power_field == "power_usage":
            power_mw = _call(self._nv.nvmlDeviceGetPowerUsage, self.target.handle)
            return float(power_mw) * 1e-3
        values = read_power_fields(self.target.handle, self._fields)
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
            raise MeterError(f"power field {self.power_field!r}: NVML returned an error")
        return power_w

    def read_state(self) -> dict[str, Any]:
        nv, h = self._nv, self.target.handle
        limit_mw = _try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
        mask = _clock_event_mask(nv, h)
        return {
            "power_limit_w": None if limit_mw is None else float(limit_mw) * 1e-3,
            "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            "throttle_reasons_mask": mask,
            "throttle_reasons": None if mask is None else decode_throttle_reasons(int(mask)),
        }

    def describe(self) -> list[SensorInfo]:
        label = f"{self.target.name} ({self.target.uuid})"
        return [
            SensorInfo(
                name=f"{label} energy counter",
                kind="nvml-energy",
                device=self.device,
                readable=self.has_counter,
                reason=""
                if self.has_counter
                else "nvmlDeviceGetTotalEnergyConsumption: not supported",
            ),
            SensorInfo(
                name=f"{label} power ({self.power_field})",
                kind="nvml-power",
                device=self.device,
                readable=self.has_power,
                reason="" if self.has_power else "nvmlDeviceGetPowerUsage: not supported",
            ),
        ]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _shutdown(self._nv)


def _supports(fn: Callable[..., Any], handle: Any) -> tuple[bool, str]:
    try:
        _call(fn, handle)
    except MeterError as exc:
        return False, str(exc)
    return True, ""


def open_meter(
    device: str,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    uuid: str | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
) -> Meter:
    """The meter for ``cuda:N``: an :class:`NvmlMeter`, or a :class:`NullMeter` saying why not.

    Args:
        device: ``cuda:N``.
        interval_s: Power sampling interval.
        uuid: The GPU's UUID if known (overrides ``CUDA_VISIBLE_DEVICES``).
        max_samples: Bound on stored samples.
    """
    try:
        nv = _init()
    except MeterError as exc:
        return NullMeter(device, "gpu", str(exc))
    try:
        target = resolve_gpu(device, uuid=uuid)
        has_counter, counter_why = _supports(nv.nvmlDeviceGetTotalEnergyConsumption, target.handle)
        fields = probe_power_fields(target.handle)
        has_usage, power_why = _supports(nv.nvmlDeviceGetPowerUsage, target.handle)
        power_field = next(
            (
                f
                for f, ok in (
                    ("instant", fields["instant"]),
                    ("average", fields["average"]),
                    ("power_usage", has_usage),
                )
                if ok
            ),
            "power_usage",
        )
        has_power = fields["instant"] or fields["average"] or has_usage
        notes: list[str] = []
        if target.mig_uuid:
            notes.append(
                f"MIG instance {target.mig_uuid}: energy and power are those of the whole "
                f"physical GPU {target.uuid}, shared with its other instances"
            )
        notes.append(_order_caveat(nv, _all_gpus(nv)))
        if not has_counter and has_power:
            notes.append(f"no energy counter ({counter_why}); energy integrated from power samples")
        if not has_counter and not has_power:
            _shutdown(nv)
            return NullMeter(
                device,
                "gpu",
                f"{target.name} ({target.uuid}) reports no energy or power through NVML "
                f"({counter_why}; {power_why})",
            )
    except MeterError as exc:
        _shutdown(nv)
        return NullMeter(device, "gpu", str(exc))
    return NvmlMeter(
        target,
        interval_s=interval_s,
        has_counter=has_counter,
        has_power=has_power,
        notes=tuple(n for n in notes if n),
        max_samples=max_samples,
        power_field=power_field,
        average_field=fields["average"],
        memory_field=fields["memory"],
    )


def _processes(nv: ModuleType, handle: Any) -> list[dict[str, Any]]:
    """Compute and graphics processes holding a context on the GPU (deduplicated by PID)."""
    seen: dict[int, dict[str, Any]] = {}
    for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        fn = getattr(nv, name, None)
        found = _try(fn, handle) if fn is not None else None
        for proc in found or ():
            pid = int(proc.pid)
            used = getattr(proc, "usedGpuMemory", None)
            # NVML_VALUE_NOT_AVAILABLE is the all-ones 64-bit value.
            used_bytes = int(used) if isinstance(used, int) and 0 <= used < 2**63 else None
            seen.setdefault(pid, {"pid": pid, "used_memory_bytes": used_bytes})
    return list(seen.values())


def device_activity(device: str, *, uuid: str | None = None) -> dict[str, Any]:
    """What else is happening on ``cuda:N``: processes, clocks, throttling, utilisation.

    For the noise record of a case (:mod:`accelbench.runner.noise`); every field
    is best effort (None where NVML does not report it).

    Raises:
        MeterError: NVML is missing or cannot find the device.
    """
    nv = _init()
    try:
        target = resolve_gpu(device, uuid=uuid)
        h = target.handle
        util = _try(nv.nvmlDeviceGetUtilizationRates, h)
        mask = _clock_event_mask(nv, h)
        return {
            "uuid": target.uuid,
            "processes": _processes(nv, h),
            "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            "max_sm_clock_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            "throttle_reasons_mask": None if mask is None else int(mask),
            "throttle_reasons": None if mask is None else decode_throttle_reasons(int(mask)),
            "gpu_util_percent": None if util is None else int(util.gpu),
            "mem_util_percent": None if util is None else int(util.memory),
            "temperature_c": _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
        }
    finally:
        _shutdown(nv)


def visible_devices() -> list[str]:
    """``cuda:N`` for every GPU this process can see through NVML (``[]`` if none)."""
    if not NvmlMeter.is_available():
        return []
    try:
        nv = _init()
    except MeterError:
        return []
    try:
        count = _call(nv.nvmlDeviceGetCount)
    except MeterError:
        return []
    finally:
        _shutdown(nv)
    visible = parse_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"))
    n = count if visible is None else min(len(visible), count)
    return [f"cuda:{i}" for i in range(n)]


def list_sensors() -> list[SensorInfo]:
    """Every NVIDIA GPU sensor NVML can see, hidden ones included, for ``accelbench devices``."""
    try:
        nv = _init()
    except MeterError as exc:
        return [
            SensorInfo(
                name="NVIDIA GPUs (NVML)", kind="nvml", device="", readable=False, reason=str(exc)
            )
        ]
    try:
        gpus = _all_gpus(nv)
        by_uuid: dict[str, str] = {}
        for device in [f"cuda:{i}" for i in range(len(gpus))]:
            try:
                by_uuid.setdefault(resolve_gpu(device).uuid, device)
            except MeterError:
                break
        out: list[SensorInfo] = []
        for index, uuid, handle in gpus:
            name = str(_try(nv.nvmlDeviceGetName, handle) or "NVIDIA GPU")
            device = by_uuid.get(uuid, "")
            hidden = "" if device else "not visible to this process (CUDA_VISIBLE_DEVICES)"
            label = f"GPU {index}: {name} ({uuid})"
            for kind, fn, what in (
                ("nvml-energy", nv.nvmlDeviceGetTotalEnergyConsumption, "energy counter"),
                ("nvml-power", nv.nvmlDeviceGetPowerUsage, "power"),
            ):
                ok, why = _supports(fn, handle)
                reason = why if not ok else hidden
                out.append(SensorInfo(f"{label} {what}", kind, device, ok, reason))
        return out
    except MeterError as exc:
        return [
            SensorInfo(
                name="NVIDIA GPUs (NVML)", kind="nvml", device="", readable=False, reason=str(exc)
            )
        ]
    finally:
        _shutdown(nv)
