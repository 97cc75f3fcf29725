"""A device meter added in this one file: an "NPU" whose energy counter and power are read
from the file named in $ACCELBENCH_TEST_NPU_FILE (watts, what a vendor library would
answer); it claims ``npu:N`` and sees ``npu:0``. Nothing else in accelbench names it:
the session, ``accelbench power``, ``devices`` and ``doctor`` find it in the registry."""

from __future__ import annotations

import os
import time
from typing import Any

from accelbench.errors import MeterError
from accelbench.meters.common import Meter, MeterOutput, NullMeter, SensorInfo
from accelbench.meters.registry import DeviceMeterOptions, register_device_meter
from accelbench.result import EnergyReading


def read_watts() -> float:
    try:
        with open(os.environ.get("ACCELBENCH_TEST_NPU_FILE", ""), encoding="ascii") as f:
            return float(f.read())
    except (OSError, ValueError) as exc:
        raise MeterError(f"NPU power file unreadable: {exc}") from exc


class NpuMeter(Meter):
    kind = "test_npu"

    def __init__(self, device: str) -> None:
        super().__init__(device, "npu")
        self._t0_s: float | None = None

    def describe(self) -> list[SensorInfo]:
        return [SensorInfo(f"{self.device} energy counter", "test_npu", self.device, True, "")]

    def start(self) -> None:
        self._t0_s = time.monotonic()

    def stop(self) -> list[MeterOutput]:
        window_s = time.monotonic() - (self._t0_s or time.monotonic())
        watts = read_watts()
        reading = EnergyReading(device=self.device, scope=self.scope, source="counter",
                                energy_j=watts * window_s, avg_power_w=watts,
                                window_s=window_s, note="test NPU counter")
        return [MeterOutput(reading=reading)]


def available() -> tuple[bool, str]:
    try:
        read_watts()
    except MeterError as exc:
        return False, str(exc)
    return True, ""


def open_npu(device: str, options: DeviceMeterOptions) -> Meter:
    ok, why = available()
    return NpuMeter(device) if ok else NullMeter(device, "npu", why)


def sensors() -> list[SensorInfo]:
    ok, why = available()
    return [SensorInfo("NPU 0 energy counter", "test_npu", "npu:0", ok, why)]


def activity(device: str, uuid: str | None) -> dict[str, Any]:
    return {"processes": [{"pid": 4242, "used_memory_bytes": None}], "throttle_reasons": []}


register_device_meter(
    "test_npu", claims=lambda device: device.startswith("npu:"), open=open_npu,
    available=available, sensors=sensors, visible=lambda: ["npu:0"], activity=activity,
)
