"""NVIDIA knobs through NVML (``pynvml``, imported here only): the power management
limit (milliwatts in NVML, watts here) and locked graphics and memory clocks (MHz)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any, TypeVar

from accelbench.errors import ConfigError, UnsupportedError
from accelbench.tuning.base import PrivilegeError

INSTALL_HINT = "pip install nvidia-ml-py"
PRIVILEGE_HINT = (
    "changing NVIDIA power limits and clocks needs root (run with sudo), with persistence "
    "mode on (`sudo nvidia-smi -pm 1` or the nvidia-persistenced daemon)"
)
_T = TypeVar("_T")


def _pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as exc:
        raise UnsupportedError(f"nvidia-ml-py is not installed: {INSTALL_HINT}") from exc
    return pynvml


def _call(nv: ModuleType, fn: Callable[..., _T], *args: Any) -> _T:
    """Call NVML, translating a refused privilege into :class:`PrivilegeError`."""
    try:
        return fn(*args)
    except nv.NVMLError as exc:
        name = getattr(fn, "__name__", "NVML call")
        if getattr(exc, "value", None) == nv.NVML_ERROR_NO_PERMISSION:
            raise PrivilegeError(f"{name}: permission denied; {PRIVILEGE_HINT}") from exc
        if getattr(exc, "value", None) == nv.NVML_ERROR_NOT_SUPPORTED:
            raise UnsupportedError(f"{name}: not supported on this GPU") from exc
        raise UnsupportedError(f"{name} failed: {exc}") from exc


@contextlib.contextmanager
def _device(index: int) -> Iterator[tuple[ModuleType, Any]]:
    nv = _pynvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise UnsupportedError(f"NVML could not start ({exc}); is the NVIDIA driver "
                               "loaded?") from exc
    try:
        yield nv, _call(nv, nv.nvmlDeviceGetHandleByIndex, index)
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


def gpu_count() -> int:
    """GPUs NVML sees (raises UnsupportedError without NVML)."""
    nv = _pynvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise UnsupportedError(f"NVML could not start ({exc})") from exc
    try:
        return int(_call(nv, nv.nvmlDeviceGetCount))
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


class NvidiaKnob:
    """Power limit (``power_limit_w``) or a locked clock (``sm_clock_mhz``,
    ``mem_clock_mhz``) of NVIDIA GPU ``index``."""

    def __init__(self, name: str, index: int) -> None:
        if name not in ("power_limit_w", "sm_clock_mhz", "mem_clock_mhz"):
            raise ConfigError(f"{name} is not an NVIDIA knob")
        self.name = name
        self.index = index
        self.device = f"nvidia:{index}"

    def read(self) -> Any:
        with _device(self.index) as (nv, h):
            if self.name == "power_limit_w":
                return {"limit_mw": int(_call(nv, nv.nvmlDeviceGetPowerManagementLimit, h))}
        # NVML cannot read whether clocks are locked; an unlocked clock is the default
        # state and the one put back (nvmlDeviceReset*LockedClocks).
        return {"locked": None}

    def allowed(self) -> Sequence[float]:
        with _device(self.index) as (nv, h):
            if self.name == "power_limit_w":
                lo, hi = _call(nv, nv.nvmlDeviceGetPowerManagementLimitConstraints, h)
                return [lo / 1000.0, hi / 1000.0]
            mems = [float(m) for m in _call(nv, nv.nvmlDeviceGetSupportedMemoryClocks, h)]
            if self.name == "mem_clock_mhz":
                return sorted(set(mems))
            sms: set[float] = set()
            for m in mems:
                sms.update(float(c) for c in
                           _call(nv, nv.nvmlDeviceGetSupportedGraphicsClocks, h, int(m)))
            return sorted(sms)

    def check_writable(self) -> None:
        # Writing the current limit back changes nothing and fails exactly when a change
        # would (NVML_ERROR_NO_PERMISSION); the clocks need the same privilege.
        with _device(self.index) as (nv, h):
            current = _call(nv, nv.nvmlDeviceGetPowerManagementLimit, h)
            _call(nv, nv.nvmlDeviceSetPowerManagementLimit, h, current)

    def apply(self, value: float) -> None:
        with _device(self.index) as (nv, h):
            if self.name == "power_limit_w":
                lo, hi = _call(nv, nv.nvmlDeviceGetPowerManagementLimitConstraints, h)
                mw = int(round(value * 1000))
                if not lo <= mw <= hi:
                    raise ConfigError(f"power limit {value:g} W is outside GPU {self.index}'s "
                                      f"range {lo / 1000:g}-{hi / 1000:g} W")
                _call(nv, nv.nvmlDeviceSetPowerManagementLimit, h, mw)
            elif self.name == "sm_clock_mhz":
                _call(nv, nv.nvmlDeviceSetGpuLockedClocks, h, int(value), int(value))
            else:
                _call(nv, nv.nvmlDeviceSetMemoryLockedClocks, h, int(value), int(value))

    def restore(self, original: Any) -> None:
        with _device(self.index) as (nv, h):
            if self.name == "power_limit_w":
                _call(nv, nv.nvmlDeviceSetPowerManagementLimit, h, int(original["limit_mw"]))
            elif self.name == "sm_clock_mhz":
                _call(nv, nv.nvmlDeviceResetGpuLockedClocks, h)
            else:
                _call(nv, nv.nvmlDeviceResetMemoryLockedClocks, h)

    def describe(self, original: Any) -> str:
        if self.name == "power_limit_w":
            return f"{original['limit_mw'] / 1000:g} W"
        return "unlocked"
