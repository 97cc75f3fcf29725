"""NVIDIA knobs on :mod:`accelbench.devices.gpu.nvidia`: the power management limit
(milliwatts in NVML, watts here) and locked graphics and memory clocks (MHz)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from accelbench.devices.gpu.nvidia import NvidiaGpu, NvidiaGpus
from accelbench.errors import ConfigError

NVIDIA_KNOBS = ("power_limit_w", "sm_clock_mhz", "mem_clock_mhz")


class NvidiaKnob:
    """Power limit (``power_limit_w``) or a locked clock (``sm_clock_mhz``,
    ``mem_clock_mhz``) of NVIDIA GPU ``index`` (NVML's index)."""

    def __init__(self, name: str, index: int) -> None:
        if name not in NVIDIA_KNOBS:
            raise ConfigError(f"{name} is not an NVIDIA knob")
        self.name = name
        self.index = index
        self.device = f"nvidia:{index}"

    @contextlib.contextmanager
    def _gpu(self) -> Iterator[NvidiaGpu]:
        with NvidiaGpus() as gpus:
            yield gpus.gpu(self.index)

    def read(self) -> Any:
        if self.name == "power_limit_w":
            with self._gpu() as gpu:
                return {"limit_mw": gpu.power_limit_mw()}
        # NVML cannot read whether clocks are locked; an unlocked clock is the default
        # state and the one put back (nvmlDeviceReset*LockedClocks).
        return {"locked": None}

    def allowed(self) -> Sequence[float]:
        with self._gpu() as gpu:
            if self.name == "power_limit_w":
                lo, hi = gpu.power_limit_range_mw()
                return [lo / 1000.0, hi / 1000.0]
            mems = gpu.supported_memory_clocks()
            if self.name == "mem_clock_mhz":
                return sorted(set(mems))
            sms: set[float] = set()
            for m in mems:
                sms.update(gpu.supported_graphics_clocks(m))
            return sorted(sms)

    def check_writable(self) -> None:
        # Writing the current limit back changes nothing and fails exactly when a change
        # would (NVML_ERROR_NO_PERMISSION); the clocks need the same privilege.
        with self._gpu() as gpu:
            gpu.set_power_limit_mw(gpu.power_limit_mw())

    def apply(self, value: float) -> None:
        with self._gpu() as gpu:
            if self.name == "power_limit_w":
                lo, hi = gpu.power_limit_range_mw()
                mw = int(round(value * 1000))
                if not lo <= mw <= hi:
                    raise ConfigError(f"power limit {value:g} W is outside GPU {self.index}'s "
                                      f"range {lo / 1000:g}-{hi / 1000:g} W")
                gpu.set_power_limit_mw(mw)
            else:
                gpu.lock_clock("sm" if self.name == "sm_clock_mhz" else "mem", int(value))

    def restore(self, original: Any) -> None:
        with self._gpu() as gpu:
            if self.name == "power_limit_w":
                gpu.set_power_limit_mw(int(original["limit_mw"]))
            else:
                gpu.reset_clock("sm" if self.name == "sm_clock_mhz" else "mem")

    def describe(self, original: Any) -> str:
        if self.name == "power_limit_w":
            return f"{original['limit_mw'] / 1000:g} W"
        return "unlocked"
