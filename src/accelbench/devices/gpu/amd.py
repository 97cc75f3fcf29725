"""AMD GPUs through AMD SMI (the optional ``amdsmi`` package, imported here only).

:class:`AmdGpus` is one AMD SMI session; :class:`AmdGpu` one physical GPU with the
readings the meter takes and the power cap the knob changes, in AMD SMI's own units and
shapes (dicts, microwatts). AMD SMI errors become :mod:`accelbench.devices.errors` here.
PyTorch on ROCm names AMD GPUs ``cuda:N``; N indexes the GPUs left visible by
``HIP_VISIBLE_DEVICES`` (else ``ROCR_VISIBLE_DEVICES``, else ``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from accelbench.devices.errors import DeviceError, DeviceNotSupportedError, PrivilegeError
from accelbench.devices.gpu.common import GpuSession, device_ordinal, normalize_pci_bus_id

INSTALL_HINT = "pip install amdsmi"
PRIVILEGE_HINT = "changing an AMD GPU's power cap needs root (run with sudo)"
VISIBILITY_VARS = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
NO_PERM = 10
"""``AMDSMI_STATUS_NO_PERM`` (amdsmi.h)."""

_T = TypeVar("_T")


def sdk() -> ModuleType:
    """Import amdsmi or raise :class:`DeviceError` with the install command."""
    try:
        import amdsmi
    except ImportError as exc:
        raise DeviceError(
            f"amdsmi is not installed: {INSTALL_HINT} (the version of your ROCm; it needs the "
            "ROCm AMD SMI library)"
        ) from exc
    return amdsmi


def error_types(smi: ModuleType) -> tuple[type[BaseException], ...]:
    """The exception classes amdsmi raises."""
    base = getattr(smi, "AmdSmiException", None)
    return (base,) if isinstance(base, type) and issubclass(base, BaseException) else (Exception,)


def call(fn: Callable[..., _T], *args: Any) -> _T:
    """Call an amdsmi function, translating its errors into the project's errors."""
    smi = sdk()
    try:
        return fn(*args)
    except error_types(smi) as exc:
        name = getattr(fn, "__name__", "amdsmi call")
        text = str(exc)
        upper = text.upper().replace(" ", "_")
        if getattr(exc, "err_code", None) == NO_PERM or "NO_PERM" in upper or "PERMISSION" in upper:
            raise PrivilegeError(f"{name}: permission denied; {PRIVILEGE_HINT}") from exc
        if "NOT_SUPPORTED" in upper:
            raise DeviceNotSupportedError(f"{name}: not supported on this GPU") from exc
        raise DeviceError(f"{name} failed: {text}") from exc


def number(value: Any) -> float | None:
    """A finite number from an amdsmi field (which may be ``"N/A"``), else None."""
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


class AmdGpu:
    """One physical AMD GPU of an open :class:`AmdGpus` session."""

    def __init__(self, smi: ModuleType, device: str, index: int, uuid: str, handle: Any) -> None:
        self.smi = smi
        self.device = device
        self.index = index
        self.uuid = uuid
        self.handle = handle

    # -- readings ----------------------------------------------------------------------

    def energy_count(self) -> dict[str, Any]:
        """``amdsmi_get_energy_count``: accumulator, resolution (uJ), timestamp (ns)."""
        return dict(call(self.smi.amdsmi_get_energy_count, self.handle))

    def power_info(self) -> dict[str, Any]:
        """``amdsmi_get_power_info``: socket power in watts under a version's field name."""
        return dict(call(self.smi.amdsmi_get_power_info, self.handle))

    def power_cap_info(self) -> dict[str, Any]:
        """``amdsmi_get_power_cap_info`` (microwatts).

        Raises:
            DeviceError: The call fails or gives no power cap.
        """
        fn = getattr(self.smi, "amdsmi_get_power_cap_info", None)
        if fn is None:
            raise DeviceNotSupportedError("amdsmi_get_power_cap_info: not in this amdsmi")
        info = call(fn, self.handle)
        if not isinstance(info, dict) or not isinstance(info.get("power_cap"), int | float):
            raise DeviceError("amdsmi_get_power_cap_info gave no power cap")
        return info

    def power_cap_w(self) -> float | None:
        """The GPU's power cap in watts (the largest of its caps), or None."""
        try:
            info = self.power_cap_info()
        except DeviceError:
            return None
        caps = [number(info.get(k)) for k in ("power_cap", "max_power_cap", "default_power_cap")]
        usable = [c for c in caps if c is not None and c > 0]
        return max(usable) * 1e-6 if usable else None

    def set_power_cap_uw(self, microwatts: int) -> None:
        call(self.smi.amdsmi_set_power_cap, self.handle, 0, int(microwatts))

    def is_vm_guest(self) -> bool:
        """Whether AMD SMI says this GPU is a virtual-machine guest (virtualization mode)."""
        fn = getattr(self.smi, "amdsmi_get_gpu_virtualization_mode", None)
        if fn is None:
            return False
        try:
            mode = call(fn, self.handle)
        except DeviceError:
            return False
        if isinstance(mode, dict):
            mode = mode.get("mode", mode.get("virtualization_mode"))
        name = str(getattr(mode, "name", mode)).upper()
        # AMDSMI_VIRTUALIZATION_MODE_GUEST is 3 in amdsmi.h.
        return "GUEST" in name or (
            isinstance(mode, int) and not isinstance(mode, bool) and mode == 3
        )

    def processes(self) -> list[dict[str, Any]]:
        """Processes using the GPU (``amdsmi_get_gpu_process_list``; the process dicts of
        ROCm 6.1+, else each handle's ``amdsmi_get_gpu_process_info``), deduplicated by PID;
        ``[]`` where AMD SMI cannot list them."""
        fn = getattr(self.smi, "amdsmi_get_gpu_process_list", None)
        if fn is None:
            return []
        try:
            found = list(call(fn, self.handle) or ())
        except DeviceError:
            return []
        seen: dict[int, dict[str, Any]] = {}
        info_fn = getattr(self.smi, "amdsmi_get_gpu_process_info", None)
        for proc in found:
            if not isinstance(proc, dict) and info_fn is not None:
                try:
                    proc = call(info_fn, self.handle, proc)
                except DeviceError:
                    continue
            pid = number(proc.get("pid")) if isinstance(proc, dict) else None
            if pid is None:
                continue
            mem = proc.get("mem")
            used = number(mem) if not isinstance(mem, dict) else None
            seen.setdefault(int(pid), {"pid": int(pid),
                                       "used_memory_bytes": None if used is None else int(used)})
        return list(seen.values())

    def gfx_activity_percent(self) -> float | None:
        """Graphics engine busy percentage (``amdsmi_get_gpu_activity``), or None."""
        fn = getattr(self.smi, "amdsmi_get_gpu_activity", None)
        if fn is None:
            return None
        try:
            info = call(fn, self.handle)
        except DeviceError:
            return None
        return number(info.get("gfx_activity")) if isinstance(info, dict) else None

    def temperature_c(self) -> float | None:
        """Edge temperature (else hotspot) from ``amdsmi_get_temp_metric``, or None."""
        smi = self.smi
        fn = getattr(smi, "amdsmi_get_temp_metric", None)
        kinds = getattr(smi, "AmdSmiTemperatureType", None)
        metrics = getattr(smi, "AmdSmiTemperatureMetric", None)
        if fn is None or kinds is None or metrics is None:
            return None
        current = getattr(metrics, "CURRENT", None)
        for name in ("EDGE", "HOTSPOT", "JUNCTION"):
            kind = getattr(kinds, name, None)
            if kind is None or current is None:
                continue
            try:
                value = number(call(fn, self.handle, kind, current))
            except DeviceError:
                continue
            if value is not None:
                return value
        return None


class AmdGpus(GpuSession):
    """One AMD SMI session (``amdsmi_init`` here, ``amdsmi_shut_down`` at :meth:`close`).

    Raises:
        DeviceError: amdsmi is missing or AMD SMI does not start.
    """

    vendor = "amd"
    vendor_name = "AMD"
    library = "AMD SMI"
    sensor_kind = "amdsmi"
    visibility_vars = VISIBILITY_VARS

    def __init__(self) -> None:
        smi = sdk()
        try:
            flags = getattr(getattr(smi, "AmdSmiInitFlags", None), "INIT_AMD_GPUS", None)
            if flags is None:
                smi.amdsmi_init()
            else:
                smi.amdsmi_init(flags)
        except error_types(smi) as exc:
            raise DeviceError(
                f"AMD SMI could not start ({exc}); is the amdgpu driver loaded?"
            ) from exc
        self.smi = smi
        self._open = True
        self._handles: list[Any] | None = None

    def close(self) -> None:
        if self._open:
            self._open = False
            with contextlib.suppress(*error_types(self.smi)):
                self.smi.amdsmi_shut_down()

    def handles(self) -> list[Any]:
        """AMD SMI's processor handles, in its order (the physical index)."""
        if self._handles is None:
            self._handles = list(call(self.smi.amdsmi_get_processor_handles))
        return self._handles

    def count(self) -> int:
        return len(self.handles())

    def uuid(self, index: int) -> str:
        return str(call(self.smi.amdsmi_get_gpu_device_uuid, self.handles()[index]))

    def pci_bus_id(self, index: int) -> str | None:
        fn = getattr(self.smi, "amdsmi_get_gpu_device_bdf", None)
        if fn is None:
            return None
        try:
            return normalize_pci_bus_id(str(call(fn, self.handles()[index])))
        except DeviceError:
            return None

    def gpu(self, index: int, device: str = "") -> AmdGpu:
        """Physical GPU ``index`` (named ``device``, default ``amd:<index>``)."""
        handles = self.handles()
        if not 0 <= index < len(handles):
            raise DeviceError(f"AMD SMI sees {len(handles)} GPU(s), no index {index}")
        return AmdGpu(self.smi, device or f"amd:{index}", index, self.uuid(index), handles[index])

    def resolve(self, device: str) -> AmdGpu:
        """The GPU behind ``cuda:N``, through the visible devices.

        Raises:
            DeviceError: If the device is not visible or cannot be found.
        """
        index, _ = self.physical_index(device_ordinal(device), device)
        return self.gpu(index, device)
