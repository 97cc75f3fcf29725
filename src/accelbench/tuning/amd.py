"""AMD knob on :mod:`accelbench.devices.gpu.amd`: the power cap (microwatts in AMD SMI,
watts here)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from accelbench.devices.gpu.amd import AmdGpu, AmdGpus
from accelbench.errors import ConfigError


class AmdPowerCap:
    """The power cap (``power_limit_w``) of AMD GPU ``index`` (AMD SMI's index)."""

    name = "power_limit_w"

    def __init__(self, index: int) -> None:
        self.index = index
        self.device = f"amd:{index}"

    @contextlib.contextmanager
    def _gpu(self) -> Iterator[AmdGpu]:
        with AmdGpus() as gpus:
            yield gpus.gpu(self.index)

    def read(self) -> Any:
        with self._gpu() as gpu:
            return {"cap_uw": int(gpu.power_cap_info()["power_cap"])}

    def allowed(self) -> Sequence[float]:
        with self._gpu() as gpu:
            info = gpu.power_cap_info()
            return [float(info["min_power_cap"]) / 1e6, float(info["max_power_cap"]) / 1e6]

    def check_writable(self) -> None:
        with self._gpu() as gpu:  # the current cap back: no change, same privilege
            gpu.set_power_cap_uw(int(gpu.power_cap_info()["power_cap"]))

    def apply(self, value: float) -> None:
        with self._gpu() as gpu:
            info = gpu.power_cap_info()
            uw = int(round(value * 1e6))
            lo, hi = int(info["min_power_cap"]), int(info["max_power_cap"])
            if not lo <= uw <= hi:
                raise ConfigError(f"power cap {value:g} W is outside AMD GPU {self.index}'s "
                                  f"range {lo / 1e6:g}-{hi / 1e6:g} W")
            gpu.set_power_cap_uw(uw)

    def restore(self, original: Any) -> None:
        with self._gpu() as gpu:
            gpu.set_power_cap_uw(int(original["cap_uw"]))

    def describe(self, original: Any) -> str:
        return f"{original['cap_uw'] / 1e6:g} W"
