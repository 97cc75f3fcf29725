"""NVIDIA GPUs through NVML (the ``nvidia-ml-py`` package, imported here only).

Energy comes from the total-energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, millijoules, Volta and newer);
power samples (``nvmlDeviceGetPowerUsage``, milliwatts) are taken on a
background thread for the timeline, the peak and a cross-check, and become the
energy where the counter is missing or fails. On A100/H100-class GPUs the
power value NVML reports is averaged by the driver over a short window, so the
counter is the better energy source there.

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
    ) -> None:
        details: dict[str, Any] = {
            "sensor": "nvml",
            "gpu_name": target.name,
            "uuid": target.uuid,
            "nvml_index": target.nvml_index,
        }
        if target.mig_uuid:
            details["mig_uuid"] = target.mig_uuid
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
        )
        self.target = target
        self._nv = _pynvml()
        self._closed = False

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
        power_mw = _call(self._nv.nvmlDeviceGetPowerUsage, self.target.handle)
        return float(power_mw) * 1e-3

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
                name=f"{label} power",
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
        has_power, power_why = _supports(nv.nvmlDeviceGetPowerUsage, target.handle)
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
