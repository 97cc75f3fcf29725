"""NVIDIA GPUs through NVML (the ``nvidia-ml-py`` package, imported here only).

:class:`NvidiaGpus` is one NVML session; :class:`NvidiaGpu` one physical GPU with the
readings the meter takes and the settings the knobs change, in NVML's own units
(milliwatts, millijoules, MHz). NVML errors become :mod:`accelbench.devices.errors`
here: ``NotSupported`` a :class:`DeviceNotSupportedError`, ``NoPermission`` a
:class:`PrivilegeError` that says what is needed, anything else a :class:`DeviceError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from accelbench.devices.errors import DeviceError, DeviceNotSupportedError, PrivilegeError
from accelbench.devices.gpu.common import GpuSession, device_ordinal, normalize_pci_bus_id

INSTALL_HINT = "pip install nvidia-ml-py"
PRIVILEGE_HINT = (
    "changing NVIDIA power limits and clocks needs root (run with sudo), with persistence "
    "mode on (`sudo nvidia-smi -pm 1` or the nvidia-persistenced daemon)"
)

_T = TypeVar("_T")

_VALUE_MEMBERS = {
    0: "dVal",  # NVML_VALUE_TYPE_DOUBLE
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


def sdk() -> ModuleType:
    """Import pynvml or raise :class:`DeviceError` with the install command."""
    try:
        import pynvml
    except ImportError as exc:
        raise DeviceError(f"nvidia-ml-py is not installed: {INSTALL_HINT}") from exc
    return pynvml


def call(fn: Callable[..., _T], *args: Any) -> _T:
    """Call an NVML function, translating NVMLError into the project's errors."""
    nv = sdk()
    try:
        return fn(*args)
    except nv.NVMLError as exc:
        name = getattr(fn, "__name__", "NVML call")
        value = getattr(exc, "value", None)
        if value == getattr(nv, "NVML_ERROR_NO_PERMISSION", object()):
            raise PrivilegeError(f"{name}: permission denied; {PRIVILEGE_HINT}") from exc
        if isinstance(exc, nv.NVMLError_NotSupported) or value == nv.NVML_ERROR_NOT_SUPPORTED:
            raise DeviceNotSupportedError(f"{name}: not supported on this GPU") from exc
        raise DeviceError(f"{name} failed: {exc}") from exc


def try_call(fn: Callable[..., _T], *args: Any) -> _T | None:
    """:func:`call`, or None where it fails."""
    try:
        return call(fn, *args)
    except DeviceError:
        return None


def field_number(field: Any) -> float | None:
    """The value of one ``nvmlFieldValue_t``, or None when NVML returned an error for it."""
    if int(getattr(field, "nvmlReturn", 1)) != 0:
        return None
    member = _VALUE_MEMBERS.get(int(getattr(field, "valueType", -1)))
    if member is None:
        return None
    return float(getattr(field.value, member))


def power_field_ids() -> tuple[Any, Any, Any]:
    """(instant, average, memory) field ids; memory is the instant field's memory scope."""
    nv = sdk()
    instant = getattr(nv, "NVML_FI_DEV_POWER_INSTANT", 186)
    average = getattr(nv, "NVML_FI_DEV_POWER_AVERAGE", 185)
    memory = (instant, getattr(nv, "NVML_POWER_SCOPE_MEMORY", 2))
    return instant, average, memory


def driver_version() -> str | None:
    """The NVIDIA driver's version, or None where NVML is missing or broken."""
    try:
        with NvidiaGpus() as gpus:
            version = call(gpus.nv.nvmlSystemGetDriverVersion)
    except DeviceError:
        return None
    return version.decode() if isinstance(version, bytes) else str(version)


class NvidiaGpu:
    """One physical NVIDIA GPU of an open :class:`NvidiaGpus` session.

    Args:
        nv: The pynvml module.
        device: The accelbench device it stands for (``cuda:N``), or ``nvidia:N``.
        index: NVML's index.
        uuid: ``GPU-...``.
        handle: NVML's handle.
        mig_uuid: The MIG instance named in the visible devices, if any.
    """

    def __init__(
        self, nv: ModuleType, device: str, index: int, uuid: str, handle: Any,
        mig_uuid: str | None = None,
    ) -> None:
        self.nv = nv
        self.device = device
        self.index = index
        self.uuid = uuid
        self.handle = handle
        self.mig_uuid = mig_uuid
        self.name = str(try_call(nv.nvmlDeviceGetName, handle) or "NVIDIA GPU")

    @property
    def nvml_index(self) -> int:
        """NVML's index (the physical one)."""
        return self.index

    # -- readings ----------------------------------------------------------------------

    def total_energy_mj(self) -> int:
        """``nvmlDeviceGetTotalEnergyConsumption``: millijoules since the driver loaded."""
        return int(call(self.nv.nvmlDeviceGetTotalEnergyConsumption, self.handle))

    def power_usage_mw(self) -> int:
        """``nvmlDeviceGetPowerUsage`` (a 1 s average on Ampere and newer)."""
        return int(call(self.nv.nvmlDeviceGetPowerUsage, self.handle))

    def power_fields_w(self, fields: list[Any]) -> list[float | None]:
        """Watts of each power field (ids or ``(id, scope)`` pairs); None for an unsupported one.

        Raises:
            DeviceError: If the call itself fails (no such function in the driver ...).
        """
        fn = getattr(self.nv, "nvmlDeviceGetFieldValues", None)
        if fn is None:
            raise DeviceNotSupportedError("nvmlDeviceGetFieldValues: not in this nvidia-ml-py")
        values = call(fn, self.handle, fields)
        out: list[float | None] = []
        for field in list(values)[: len(fields)]:
            milliwatts = field_number(field)
            out.append(None if milliwatts is None else milliwatts * 1e-3)
        return out

    def probe_power_fields(self) -> dict[str, bool]:
        """Which power fields this GPU answers: ``instant``, ``average``, ``memory``."""
        try:
            values = self.power_fields_w(list(power_field_ids()))
        except DeviceError:
            return {"instant": False, "average": False, "memory": False}
        values += [None] * (3 - len(values))
        return {
            "instant": values[0] is not None,
            "average": values[1] is not None,
            "memory": values[2] is not None,
        }

    def enforced_power_limit_mw(self) -> int | None:
        value = try_call(self.nv.nvmlDeviceGetEnforcedPowerLimit, self.handle)
        return None if value is None else int(value)

    def clock_mhz(self, which: str) -> int | None:
        """Current ``sm`` or ``mem`` clock, or None."""
        kind = self.nv.NVML_CLOCK_SM if which == "sm" else self.nv.NVML_CLOCK_MEM
        return try_call(self.nv.nvmlDeviceGetClockInfo, self.handle, kind)

    def max_sm_clock_mhz(self) -> int | None:
        return try_call(self.nv.nvmlDeviceGetMaxClockInfo, self.handle, self.nv.NVML_CLOCK_SM)

    def temperature_c(self) -> int | None:
        """``nvmlDeviceGetTemperature`` (``NVML_TEMPERATURE_GPU``), or None."""
        nv = self.nv
        return try_call(nv.nvmlDeviceGetTemperature, self.handle, nv.NVML_TEMPERATURE_GPU)

    def utilization(self) -> tuple[int, int] | None:
        """``(gpu %, memory %)`` or None."""
        util = try_call(self.nv.nvmlDeviceGetUtilizationRates, self.handle)
        return None if util is None else (int(util.gpu), int(util.memory))

    def clock_event_mask(self) -> int | None:
        """The bitmask of why clocks are held down (power cap, thermal, ...), or None.

        The "event" name replaced "throttle" in NVML 12.5; older bindings have only the latter.
        """
        for name in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            fn = getattr(self.nv, name, None)
            if fn is not None:
                mask = try_call(fn, self.handle)
                if mask is not None:
                    return int(mask)
        return None

    def processes(self) -> list[dict[str, Any]]:
        """Compute and graphics processes holding a context on the GPU (deduplicated by PID)."""
        seen: dict[int, dict[str, Any]] = {}
        for name in (
            "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"
        ):
            fn = getattr(self.nv, name, None)
            found = try_call(fn, self.handle) if fn is not None else None
            for proc in found or ():
                pid = int(proc.pid)
                used = getattr(proc, "usedGpuMemory", None)
                # NVML_VALUE_NOT_AVAILABLE is the all-ones 64-bit value.
                used_bytes = int(used) if isinstance(used, int) and 0 <= used < 2**63 else None
                seen.setdefault(pid, {"pid": pid, "used_memory_bytes": used_bytes})
        return list(seen.values())

    # -- settings ----------------------------------------------------------------------

    def power_limit_mw(self) -> int:
        return int(call(self.nv.nvmlDeviceGetPowerManagementLimit, self.handle))

    def power_limit_range_mw(self) -> tuple[int, int]:
        lo, hi = call(self.nv.nvmlDeviceGetPowerManagementLimitConstraints, self.handle)
        return int(lo), int(hi)

    def set_power_limit_mw(self, milliwatts: int) -> None:
        call(self.nv.nvmlDeviceSetPowerManagementLimit, self.handle, int(milliwatts))

    def supported_memory_clocks(self) -> list[float]:
        return [float(m) for m in call(self.nv.nvmlDeviceGetSupportedMemoryClocks, self.handle)]

    def supported_graphics_clocks(self, mem_mhz: float) -> list[float]:
        fn = self.nv.nvmlDeviceGetSupportedGraphicsClocks
        return [float(c) for c in call(fn, self.handle, int(mem_mhz))]

    def lock_clock(self, which: str, mhz: int) -> None:
        """Lock the ``sm`` or ``mem`` clock at ``mhz``."""
        fn = (self.nv.nvmlDeviceSetGpuLockedClocks if which == "sm"
              else self.nv.nvmlDeviceSetMemoryLockedClocks)
        call(fn, self.handle, int(mhz), int(mhz))

    def reset_clock(self, which: str) -> None:
        """Unlock the ``sm`` or ``mem`` clock."""
        fn = (self.nv.nvmlDeviceResetGpuLockedClocks if which == "sm"
              else self.nv.nvmlDeviceResetMemoryLockedClocks)
        call(fn, self.handle)


class NvidiaGpus(GpuSession):
    """One NVML session (``nvmlInit`` here, ``nvmlShutdown`` at :meth:`close`).

    Raises:
        DeviceError: nvidia-ml-py is missing or NVML does not start.
    """

    vendor = "nvidia"
    vendor_name = "NVIDIA"
    library = "NVML"
    sensor_kind = "nvml"
    visibility_vars = ("CUDA_VISIBLE_DEVICES",)

    def __init__(self) -> None:
        nv = sdk()
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise DeviceError(
                f"NVML could not start ({exc}); is the NVIDIA driver installed and loaded?"
            ) from exc
        self.nv = nv
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            with contextlib.suppress(self.nv.NVMLError):
                self.nv.nvmlShutdown()

    def count(self) -> int:
        return int(call(self.nv.nvmlDeviceGetCount))

    def handle(self, index: int) -> Any:
        """NVML's handle of physical GPU ``index``."""
        return call(self.nv.nvmlDeviceGetHandleByIndex, index)

    def uuid(self, index: int) -> str:
        return str(call(self.nv.nvmlDeviceGetUUID, self.handle(index)))

    def pci_bus_id(self, index: int) -> str | None:
        info = try_call(self.nv.nvmlDeviceGetPciInfo, self.handle(index))
        bus_id = getattr(info, "busId", None)
        if isinstance(bus_id, bytes):
            bus_id = bus_id.decode(errors="replace")
        return None if bus_id is None else normalize_pci_bus_id(str(bus_id))

    def mig_parent_uuid(self, entry: str) -> str:
        mig_handle = call(self.nv.nvmlDeviceGetHandleByUUID, entry)
        parent = call(self.nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle, mig_handle)
        return str(call(self.nv.nvmlDeviceGetUUID, parent))

    def gpu(self, index: int, device: str = "", mig_uuid: str | None = None) -> NvidiaGpu:
        """Physical GPU ``index`` (named ``device``, default ``nvidia:<index>``)."""
        handle = self.handle(index)
        uuid = str(call(self.nv.nvmlDeviceGetUUID, handle))
        return NvidiaGpu(self.nv, device or f"nvidia:{index}", index, uuid, handle, mig_uuid)

    def resolve(self, device: str, *, uuid: str | None = None) -> NvidiaGpu:
        """The GPU behind ``cuda:N`` (through the visible devices), or behind ``uuid``.

        Args:
            device: ``cuda:N`` (``cuda`` means ``cuda:0``).
            uuid: The GPU's UUID if the caller knows it (e.g. from
                ``torch.cuda.get_device_properties(N).uuid``); overrides
                ``CUDA_VISIBLE_DEVICES``.

        Raises:
            DeviceError: If the device is not visible or cannot be found.
        """
        if uuid is not None:
            entry = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
            index, mig = self.entry_index(entry, device)
        else:
            index, mig = self.physical_index(device_ordinal(device), device)
        return self.gpu(index, device, mig)

    def names(self) -> set[str]:
        """The distinct GPU model names NVML reports."""
        return {str(try_call(self.nv.nvmlDeviceGetName, self.handle(i)))
                for i in range(self.count())}
