"""AMD GPUs through AMD SMI (the optional ``amdsmi`` package, imported here only).

Energy comes from the energy accumulator where the GPU has one
(``amdsmi_get_energy_count``: ticks times ``counter_resolution`` microjoules);
power samples (``amdsmi_get_power_info``, watts) feed the timeline, the peak and
a cross-check, and become the energy where the counter is missing.

PyTorch on ROCm names AMD GPUs ``cuda:N``; N indexes the GPUs left visible by
``HIP_VISIBLE_DEVICES`` (else ``ROCR_VISIBLE_DEVICES``, else
``CUDA_VISIBLE_DEVICES``), given as indices or UUIDs.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
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

INSTALL_HINT = "pip install amdsmi"
VISIBILITY_VARS = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
# Field names of amdsmi_get_power_info in watts, newest first (ROCm 7 "socket_power",
# MI300 "current_socket_power", older "average_socket_power").
POWER_FIELDS = ("socket_power", "current_socket_power", "average_socket_power")

_T = TypeVar("_T")


def _amdsmi() -> ModuleType:
    """Import amdsmi or raise :class:`MeterError` with the install command."""
    try:
        import amdsmi
    except ImportError as exc:
        raise MeterError(
            f"amdsmi is not installed: {INSTALL_HINT} (it needs the ROCm AMD SMI library)"
        ) from exc
    return amdsmi


def _error_types(smi: ModuleType) -> tuple[type[BaseException], ...]:
    base = getattr(smi, "AmdSmiException", None)
    return (base,) if isinstance(base, type) and issubclass(base, BaseException) else (Exception,)


def _call(fn: Callable[..., _T], *args: Any) -> _T:
    """Call an amdsmi function, translating its errors into MeterError."""
    smi = _amdsmi()
    try:
        return fn(*args)
    except _error_types(smi) as exc:
        name = getattr(fn, "__name__", "amdsmi call")
        text = str(exc)
        if "NOT_SUPPORTED" in text.upper().replace(" ", "_"):
            raise SensorUnsupportedError(f"{name}: not supported on this GPU") from exc
        raise MeterError(f"{name} failed: {text}") from exc


def _init() -> ModuleType:
    smi = _amdsmi()
    try:
        flags = getattr(getattr(smi, "AmdSmiInitFlags", None), "INIT_AMD_GPUS", None)
        if flags is None:
            smi.amdsmi_init()
        else:
            smi.amdsmi_init(flags)
    except _error_types(smi) as exc:
        raise MeterError(f"AMD SMI could not start ({exc}); is the amdgpu driver loaded?") from exc
    return smi


def _shutdown(smi: ModuleType) -> None:
    with contextlib.suppress(*_error_types(smi)):
        smi.amdsmi_shut_down()


def _number(value: Any) -> float | None:
    """A finite number from an amdsmi field (which may be ``"N/A"``), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def power_w_from_info(info: dict[str, Any]) -> float | None:
    """The socket power in watts from an ``amdsmi_get_power_info`` dict."""
    for field in POWER_FIELDS:
        number = _number(info.get(field))
        if number is not None:
            return number
    return None


def energy_j_from_count(count: dict[str, Any]) -> float | None:
    """Joules from an ``amdsmi_get_energy_count`` dict (accumulator times resolution)."""
    ticks = _number(count.get("energy_accumulator", count.get("power")))  # "power": ROCm 5
    resolution_uj = _number(count.get("counter_resolution"))
    if ticks is None or resolution_uj is None:
        return None
    return ticks * resolution_uj * 1e-6


def _visible_entries() -> tuple[str, list[str]] | None:
    for var in VISIBILITY_VARS:
        value = os.environ.get(var)
        if value is not None:
            return var, [e.strip() for e in value.split(",") if e.strip()]
    return None


@dataclass(frozen=True, slots=True)
class AmdTarget:
    """The AMD GPU behind an accelbench device."""

    device: str
    index: int
    uuid: str
    handle: Any


def resolve_gpu(device: str) -> AmdTarget:
    """Find the AMD SMI handle of ``cuda:N`` (AMD SMI must be initialised).

    Raises:
        MeterError: If the device is not visible or cannot be found.
    """
    smi = _amdsmi()
    prefix, _, tail = device.partition(":")
    if prefix != "cuda" or not (tail.isdigit() or tail == ""):
        raise MeterError(f"not a GPU device: {device!r} (expected 'cuda:N')")
    n = int(tail or 0)
    handles = list(_call(smi.amdsmi_get_processor_handles))
    uuids = [str(_call(smi.amdsmi_get_gpu_device_uuid, h)) for h in handles]
    visible = _visible_entries()
    entries = [str(i) for i in range(len(handles))] if visible is None else visible[1]
    if n >= len(entries):
        where = "" if visible is None else f" ({visible[0]}={','.join(visible[1])!r})"
        raise MeterError(f"{device} is not visible to this process: {len(entries)} GPU(s){where}")
    entry = entries[n]
    if entry.isdigit():
        index = int(entry)
        if index >= len(handles):
            raise MeterError(f"{device}: AMD SMI has no GPU with index {index}")
    else:
        bare = entry.removeprefix("GPU-").lower()
        found = [i for i, u in enumerate(uuids) if u.lower().removeprefix("gpu-").startswith(bare)]
        if len(found) != 1:
            raise MeterError(f"{device}: no unique AMD GPU with UUID {entry!r}")
        index = found[0]
    return AmdTarget(device=device, index=index, uuid=uuids[index], handle=handles[index])


class AmdMeter(CounterSampleMeter):
    """Energy and power of one AMD GPU. Build it with :func:`open_meter`.

    Args:
        target: The GPU (from :func:`resolve_gpu`).
        interval_s: Power sampling interval.
        has_counter: Whether the energy accumulator works on this GPU.
        has_power: Whether power readings work on this GPU.
        counter_resolution_j: Joules per accumulator tick.
        notes: Remarks for every reading.
        max_samples: Bound on stored samples.
    """

    kind = "amdsmi"

    def __init__(
        self,
        target: AmdTarget,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        has_counter: bool,
        has_power: bool,
        counter_resolution_j: float | None = None,
        notes: tuple[str, ...] = (),
        max_samples: int = DEFAULT_MAX_SAMPLES,
    ) -> None:
        super().__init__(
            target.device,
            "gpu",
            interval_s=interval_s,
            has_counter=has_counter,
            has_power=has_power,
            counter_resolution_j=counter_resolution_j,
            details={"sensor": "amdsmi", "uuid": target.uuid, "amdsmi_index": target.index},
            notes=notes,
            max_samples=max_samples,
        )
        self.target = target
        self._smi = _amdsmi()
        self._closed = False

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        try:
            smi = _init()
        except MeterError as exc:
            return False, str(exc)
        try:
            handles = list(_call(smi.amdsmi_get_processor_handles))
        except MeterError as exc:
            return False, str(exc)
        finally:
            _shutdown(smi)
        if not handles:
            return False, "AMD SMI found no AMD GPU"
        return True, ""

    def read_counter_j(self) -> float:
        energy_j = energy_j_from_count(_call(self._smi.amdsmi_get_energy_count, self.target.handle))
        if energy_j is None:
            raise MeterError("amdsmi_get_energy_count returned no accumulator")
        return energy_j

    def read_power_w(self) -> float:
        power_w = power_w_from_info(_call(self._smi.amdsmi_get_power_info, self.target.handle))
        if power_w is None:
            raise MeterError("amdsmi_get_power_info returned no socket power")
        return power_w

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
            _shutdown(self._smi)


def _probe_counter(smi: ModuleType, handle: Any) -> tuple[float | None, str]:
    """Joules per tick if the accumulator works, else ``(None, why)``."""
    try:
        count = _call(smi.amdsmi_get_energy_count, handle)
    except MeterError as exc:
        return None, str(exc)
    resolution_uj = _number(count.get("counter_resolution"))
    if energy_j_from_count(count) is None or resolution_uj is None:
        return None, "amdsmi_get_energy_count returned no accumulator"
    return resolution_uj * 1e-6, ""


def _probe_power(smi: ModuleType, handle: Any) -> tuple[bool, str]:
    try:
        info = _call(smi.amdsmi_get_power_info, handle)
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
        smi = _init()
    except MeterError as exc:
        return NullMeter(device, "gpu", str(exc))
    try:
        target = resolve_gpu(device)
        resolution_j, counter_why = _probe_counter(smi, target.handle)
        has_power, power_why = _probe_power(smi, target.handle)
    except MeterError as exc:
        _shutdown(smi)
        return NullMeter(device, "gpu", str(exc))
    has_counter = resolution_j is not None
    if not has_counter and not has_power:
        _shutdown(smi)
        return NullMeter(
            device,
            "gpu",
            f"AMD GPU {target.index} reports no energy or power ({counter_why}; {power_why})",
        )
    notes = (
        ()
        if has_counter
        else (f"no energy counter ({counter_why}); energy integrated from power samples",)
    )
    return AmdMeter(
        target,
        interval_s=interval_s,
        has_counter=has_counter,
        has_power=has_power,
        counter_resolution_j=resolution_j,
        notes=notes,
        max_samples=max_samples,
    )


def visible_devices() -> list[str]:
    """``cuda:N`` for every AMD GPU this process can see (``[]`` if none or no amdsmi)."""
    if not AmdMeter.is_available():
        return []
    try:
        smi = _init()
    except MeterError:
        return []
    try:
        count = len(list(_call(smi.amdsmi_get_processor_handles)))
    except MeterError:
        return []
    finally:
        _shutdown(smi)
    visible = _visible_entries()
    n = count if visible is None else min(count, len(visible[1]))
    return [f"cuda:{i}" for i in range(n)]


def list_sensors() -> list[SensorInfo]:
    """Every AMD GPU sensor AMD SMI can see, for ``accelbench devices``."""
    try:
        smi = _init()
    except MeterError as exc:
        return [SensorInfo("AMD GPUs (amdsmi)", "amdsmi", "", False, str(exc))]
    try:
        handles = list(_call(smi.amdsmi_get_processor_handles))
        device_of: dict[int, str] = {}
        for n in range(len(handles)):
            try:
                device_of.setdefault(resolve_gpu(f"cuda:{n}").index, f"cuda:{n}")
            except MeterError:
                break
        out: list[SensorInfo] = []
        for index, handle in enumerate(handles):
            uuid = str(_call(smi.amdsmi_get_gpu_device_uuid, handle))
            resolution_j, counter_why = _probe_counter(smi, handle)
            has_power, power_why = _probe_power(smi, handle)
            device = device_of.get(index, "")
            hidden = "" if device else "not visible to this process (HIP_VISIBLE_DEVICES)"
            label = f"AMD GPU {index} ({uuid})"
            has_counter = resolution_j is not None
            out.append(
                SensorInfo(
                    f"{label} energy counter",
                    "amdsmi-energy",
                    device,
                    has_counter,
                    hidden if has_counter else counter_why,
                )
            )
            out.append(
                SensorInfo(
                    f"{label} power",
                    "amdsmi-power",
                    device,
                    has_power,
                    hidden if has_power else power_why,
                )
            )
        return out
    except MeterError as exc:
        return [SensorInfo("AMD GPUs (amdsmi)", "amdsmi", "", False, str(exc))]
    finally:
        _shutdown(smi)
