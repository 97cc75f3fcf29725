"""TPU energy: an estimate from the chip's published TDP, since TPUs expose no power sensor.

Cloud TPUs have no public power or energy interface (no NVML, no counters a
guest can read). Where Google has published a chip's thermal design power,
the energy of a window is estimated as TDP x window length, an upper bound
(the chip rarely draws its TDP throughout), labelled ``estimate`` with the
source. For chips without a published figure the reading is ``unavailable``
with the reason; never a number from nowhere.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.meters import clock
from accelbench.meters.common import Meter, MeterOutput, SensorInfo
from accelbench.meters.registry import DeviceMeterOptions, register_device_meter
from accelbench.result import EnergyReading


@dataclass(frozen=True, slots=True)
class ChipTdp:
    """A TPU generation's published TDP per chip."""

    tdp_w: float
    source: str


#: Published per-chip TDPs, by the generation in jax's ``device_kind`` ("TPU v4" ...).
TPU_TDP: dict[str, ChipTdp] = {
    "v2": ChipTdp(280.0, "Jouppi et al., Ten Lessons From Three Generations Shaped Google's "
                         "TPUv4i, ISCA 2021, Table 1 (TPUv2 TDP)"),
    "v3": ChipTdp(450.0, "Jouppi et al., Ten Lessons From Three Generations Shaped Google's "
                         "TPUv4i, ISCA 2021, Table 1 (TPUv3 TDP)"),
    "v4": ChipTdp(192.0, "Jouppi et al., TPU v4: An Optically Reconfigurable Supercomputer, "
                         "ISCA 2023 (TPU v4 chip maximum power)"),
}


def generation(device_kind: str) -> str | None:
    """``v4`` from ``TPU v4``; ``v5 lite`` and the like stay distinct (no TDP is assumed)."""
    m = re.match(r"^\s*tpu\s*(v\d+)(.*)$", device_kind.strip().lower())
    if not m:
        return None
    suffix = m.group(2).strip()
    return m.group(1) + (f" {suffix}" if suffix else "")


class TpuTdpMeter(Meter):
    """Energy of one TPU chip estimated as its published TDP times the window.

    Args:
        device: accelbench device string (``tpu:N``).
        device_kind: jax's ``device_kind`` of the chip (``TPU v4``).
    """

    kind = "tpu-tdp"

    def __init__(self, device: str, device_kind: str) -> None:
        super().__init__(device, "tpu")
        self.device_kind = device_kind
        gen = generation(device_kind)
        self.chip = TPU_TDP.get(gen) if gen else None
        self._t_start_s: float | None = None

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        return True, ""

    def _reason(self) -> str:
        return (f"{self.device_kind or 'this TPU'} has no public power sensor and no published "
                f"TDP in accelbench's table ({', '.join(sorted(TPU_TDP))}); energy is unknown")

    def describe(self) -> list[SensorInfo]:
        if self.chip is None:
            return [SensorInfo(name=f"{self.device} (no sensor)", kind="none",
                               device=self.device, readable=False, reason=self._reason())]
        return [SensorInfo(name=f"{self.device} TDP estimate", kind="estimate",
                           device=self.device, readable=True,
                           reason=f"{self.chip.tdp_w:g} W TDP: {self.chip.source}")]

    def start(self) -> None:
        self._t_start_s = clock.now()

    def stop(self) -> list[MeterOutput]:
        window_s = None if self._t_start_s is None else clock.now() - self._t_start_s
        self._t_start_s = None
        if self.chip is None or window_s is None:
            reading = EnergyReading(device=self.device, scope=self.scope, source="unavailable",
                                    window_s=window_s, note=self._reason())
            return [MeterOutput(reading=reading)]
        reading = EnergyReading(
            device=self.device, scope=self.scope, source="estimate",
            energy_j=self.chip.tdp_w * window_s, avg_power_w=self.chip.tdp_w,
            window_s=window_s,
            note=(f"estimate, an upper bound: {self.device_kind} TDP {self.chip.tdp_w:g} W x "
                  f"{window_s:.2f} s window; TPUs expose no power sensor (source: "
                  f"{self.chip.source})"),
        )
        return [MeterOutput(reading=reading)]


def diagnose(options: Any) -> tuple[list[Any], list[tuple[Meter, str, str]]]:
    """``accelbench doctor``'s TPU part: where TPUs are present, that their energy is an
    estimate, and the node meter that measures instead."""
    from accelbench.meters.doctor import NODE_METER_HINT, Finding

    if not any(Path("/dev").glob("accel[0-9]*")) and not os.environ.get("TPU_NAME"):
        return [], []
    return [Finding(
        sensor="TPU chips", kind="tpu", boundary="device", readable=False, energy=False,
        problem="TPUs expose no power sensor: energy is an estimate from the published TDP "
        "(an upper bound), labelled `estimate`",
        fix=NODE_METER_HINT.removeprefix("or "),
    )], []


def _open(device: str, options: DeviceMeterOptions) -> Meter:
    return TpuTdpMeter(device, options.device_name or "")


register_device_meter(
    "tpu", claims=lambda device: device.startswith("tpu:") and device[4:].isdigit(),
    open=_open, diagnose=diagnose, order=30,
)
