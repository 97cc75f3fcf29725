"""AMD knob through AMD SMI (``amdsmi``, imported here only): the power cap
(microwatts in AMD SMI, watts here)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any, TypeVar

from accelbench.errors import ConfigError, UnsupportedError
from accelbench.tuning.base import PrivilegeError

INSTALL_HINT = "pip install amdsmi (the version of your ROCm)"
PRIVILEGE_HINT = "changing an AMD GPU's power cap needs root (run with sudo)"
_NO_PERM = 10
"""``AMDSMI_STATUS_NO_PERM`` (amdsmi.h)."""
_T = TypeVar("_T")


def _amdsmi() -> ModuleType:
    try:
        import amdsmi
    except ImportError as exc:
        raise UnsupportedError(f"amdsmi is not installed: {INSTALL_HINT}") from exc
    return amdsmi


def _errors(smi: ModuleType) -> tuple[type[BaseException], ...]:
    base = getattr(smi, "AmdSmiException", None)
    return (base,) if isinstance(base, type) and issubclass(base, BaseException) else (Exception,)


def _call(smi: ModuleType, fn: Callable[..., _T], *args: Any) -> _T:
    try:
        return fn(*args)
    except _errors(smi) as exc:
        name = getattr(fn, "__name__", "amdsmi call")
        code = getattr(exc, "err_code", None)
        text = str(exc).upper()
        if code == _NO_PERM or "NO_PERM" in text or "PERMISSION" in text:
            raise PrivilegeError(f"{name}: permission denied; {PRIVILEGE_HINT}") from exc
        raise UnsupportedError(f"{name} failed: {exc}") from exc


@contextlib.contextmanager
def _session() -> Iterator[ModuleType]:
    smi = _amdsmi()
    try:
        smi.amdsmi_init()
    except _errors(smi) as exc:
        raise UnsupportedError(f"AMD SMI could not start ({exc}); is amdgpu loaded?") from exc
    try:
        yield smi
    finally:
        with contextlib.suppress(*_errors(smi)):
            smi.amdsmi_shut_down()


def gpu_count() -> int:
    """GPUs AMD SMI sees (raises UnsupportedError without it)."""
    with _session() as smi:
        return len(_call(smi, smi.amdsmi_get_processor_handles))


class AmdPowerCap:
    """The power cap (``power_limit_w``) of AMD GPU ``index``."""

    name = "power_limit_w"

    def __init__(self, index: int) -> None:
        self.index = index
        self.device = f"amd:{index}"

    @contextlib.contextmanager
    def _gpu(self) -> Iterator[tuple[ModuleType, Any]]:
        with _session() as smi:
            handles = _call(smi, smi.amdsmi_get_processor_handles)
            if self.index >= len(handles):
                raise UnsupportedError(f"AMD SMI sees {len(handles)} GPU(s), no index "
                                       f"{self.index}")
            yield smi, handles[self.index]

    def _info(self, smi: ModuleType, h: Any) -> dict[str, Any]:
        info = _call(smi, smi.amdsmi_get_power_cap_info, h)
        if not isinstance(info, dict) or not isinstance(info.get("power_cap"), int | float):
            raise UnsupportedError("amdsmi_get_power_cap_info gave no power cap")
        return info

    def read(self) -> Any:
        with self._gpu() as (smi, h):
            return {"cap_uw": int(self._info(smi, h)["power_cap"])}

    def allowed(self) -> Sequence[float]:
        with self._gpu() as (smi, h):
            info = self._info(smi, h)
            return [float(info["min_power_cap"]) / 1e6, float(info["max_power_cap"]) / 1e6]

    def check_writable(self) -> None:
        with self._gpu() as (smi, h):  # the current cap back: no change, same privilege
            _call(smi, smi.amdsmi_set_power_cap, h, 0, int(self._info(smi, h)["power_cap"]))

    def apply(self, value: float) -> None:
        with self._gpu() as (smi, h):
            info = self._info(smi, h)
            uw = int(round(value * 1e6))
            lo, hi = int(info["min_power_cap"]), int(info["max_power_cap"])
            if not lo <= uw <= hi:
                raise ConfigError(f"power cap {value:g} W is outside AMD GPU {self.index}'s "
                                  f"range {lo / 1e6:g}-{hi / 1e6:g} W")
            _call(smi, smi.amdsmi_set_power_cap, h, 0, uw)

    def restore(self, original: Any) -> None:
        with self._gpu() as (smi, h):
            _call(smi, smi.amdsmi_set_power_cap, h, 0, int(original["cap_uw"]))

    def describe(self, original: Any) -> str:
        return f"{original['cap_uw'] / 1e6:g} W"
