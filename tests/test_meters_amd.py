"""AMD SMI meters with a fake ``amdsmi`` module injected at the import boundary."""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from unittest.mock import create_autospec

import pynvml
import pytest

from accelbench.devices.gpu import amd_energy
from accelbench.devices.gpu.amd import VISIBILITY_VARS, AmdGpus
from accelbench.meters import clear_availability_cache, open_session
from accelbench.meters import gpu as gpu_meter
from accelbench.meters.gpu import GpuMeter

RESOLUTION_UJ = 15.3


class AmdSmiException(Exception):
    """Base of the fake module's errors, like amdsmi's own."""


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, status: str) -> None:
        super().__init__(f"Error code: {status}")


@dataclass
class FakeAmdGpu:
    uuid: str
    power_w: float = 300.0
    counter: bool = True
    power: bool = True
    offset_j: float = 0.0  # a fault: added to the accumulator from now on
    timestamps: bool = False  # report the counter's timestamp (ns) like ROCm 6
    resolution_uj: float = RESOLUTION_UJ
    virtualization_mode: int = 1  # AMDSMI_VIRTUALIZATION_MODE_BAREMETAL
    power_cap_uw: int = 550_000_000
    bdf: str = "0000:00:00.0"  # PCI bus id

    def energy_count(self) -> dict[str, Any]:
        if not self.counter:
            raise AmdSmiLibraryException("AMDSMI_STATUS_NOT_SUPPORTED")
        now = time.monotonic()
        joules = self.power_w * now + self.offset_j
        ticks = int(joules / (self.resolution_uj * 1e-6))
        stamp = int(now * 1e9) if self.timestamps else 0
        return {
            "energy_accumulator": ticks,
            "counter_resolution": self.resolution_uj,
            "timestamp": stamp,
        }

    def power_info(self) -> dict[str, Any]:
        value: Any = self.power_w if self.power else "N/A"
        return {
            "current_socket_power": value,
            "average_socket_power": "N/A",
            "gfx_voltage": 800,
            "power_limit": 550_000_000,
        }


def fake_amdsmi(gpus: list[FakeAmdGpu]) -> types.ModuleType:
    smi = types.ModuleType("amdsmi")
    smi.AmdSmiException = AmdSmiException  # type: ignore[attr-defined]
    smi.AmdSmiLibraryException = AmdSmiLibraryException  # type: ignore[attr-defined]
    smi.AmdSmiInitFlags = types.SimpleNamespace(INIT_AMD_GPUS=2)  # type: ignore[attr-defined]
    smi.amdsmi_init = lambda flags=None: None  # type: ignore[attr-defined]
    smi.amdsmi_shut_down = lambda: None  # type: ignore[attr-defined]
    smi.amdsmi_get_processor_handles = lambda: list(gpus)  # type: ignore[attr-defined]
    smi.amdsmi_get_gpu_device_uuid = lambda h: h.uuid  # type: ignore[attr-defined]
    smi.amdsmi_get_gpu_device_bdf = lambda h: h.bdf  # type: ignore[attr-defined]
    smi.amdsmi_get_energy_count = lambda h: h.energy_count()  # type: ignore[attr-defined]
    smi.amdsmi_get_power_info = lambda h: h.power_info()  # type: ignore[attr-defined]
    smi.amdsmi_get_power_cap_info = lambda h: {  # type: ignore[attr-defined]
        "power_cap": h.power_cap_uw,
        "default_power_cap": h.power_cap_uw,
        "dpm_cap": 2100,
        "min_power_cap": 0,
        "max_power_cap": h.power_cap_uw,
    }
    smi.amdsmi_get_gpu_virtualization_mode = lambda h: {  # type: ignore[attr-defined]
        "mode": h.virtualization_mode
    }
    smi.AmdSmiTemperatureType = types.SimpleNamespace(EDGE=0, HOTSPOT=1)  # type: ignore[attr-defined]
    smi.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT=0)  # type: ignore[attr-defined]
    smi.amdsmi_get_temp_metric = lambda h, kind, metric: 61 if kind == 0 else 75  # type: ignore[attr-defined]
    return smi


@pytest.fixture(autouse=True)
def _no_nvidia(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No NVIDIA driver, whatever this machine has, so cuda:N goes to AMD SMI."""
    lib_missing = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setattr(
        pynvml, "nvmlInit", create_autospec(pynvml.nvmlInit, side_effect=lib_missing)
    )
    for var in VISIBILITY_VARS:
        monkeypatch.delenv(var, raising=False)
    clear_availability_cache()
    yield
    clear_availability_cache()


def measure(devices: list[str], window_s: float = 0.15) -> tuple:
    session = open_session(devices, interval_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(window_s)
        return session.stop(samples=10)


def test_counter_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi([FakeAmdGpu("GPU-aa11")]))
    (r,), timeline = measure(["cuda:0"])
    assert r.source == "counter"
    assert r.energy_j == pytest.approx(300.0 * r.window_s, rel=0.01)
    assert r.resolution_j == pytest.approx(RESOLUTION_UJ * 1e-6)
    assert r.peak_power_w == pytest.approx(300.0)
    assert r.cross_check_rel_diff is not None and r.cross_check_rel_diff < 0.05
    assert r.details["sensor"] == "amdsmi" and r.details["uuid"] == "GPU-aa11"
    assert "cuda:0" in timeline


def test_only_power(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeAmdGpu("GPU-aa11", power_w=150.0, counter=False)]
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(gpus))
    (r,), _ = measure(["cuda:0"])
    assert r.source == "integrated_samples"
    assert r.energy_j == pytest.approx(150.0 * r.window_s, rel=0.01)
    assert "no energy counter" in r.note


def test_neither_counter_nor_power(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeAmdGpu("GPU-aa11", counter=False, power=False)]
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(gpus))
    (r,), _ = measure(["cuda:0"], window_s=0.01)
    assert r.source == "unavailable" and r.energy_j is None
    assert "reports no energy or power" in r.note


def test_hip_visible_devices_selects_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeAmdGpu("GPU-aa11", power_w=100.0), FakeAmdGpu("GPU-bb22", power_w=200.0)]
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(gpus))
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    (r,), _ = measure(["cuda:0"])
    assert r.details["uuid"] == "GPU-bb22"
    assert r.avg_power_w == pytest.approx(200.0, rel=0.01)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "GPU-aa")
    (r,), _ = measure(["cuda:0"], window_s=0.05)
    assert r.details["uuid"] == "GPU-aa11"
    (r,), _ = measure(["cuda:1"], window_s=0.01)
    assert r.source == "unavailable" and "not visible" in r.note


def test_amdsmi_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # import amdsmi -> ImportError
    assert not AmdGpus.is_available()
    assert "pip install amdsmi" in AmdGpus.unavailable_reason()
    meter = gpu_meter.open_meter("cuda:0")
    assert meter.kind == "null"
    (r,), _ = measure(["cuda:0"], window_s=0.01)
    assert r.source == "unavailable" and r.energy_j is None
    assert "pip install amdsmi" in r.note
    (sensor,) = gpu_meter.vendor_sensors(AmdGpus)
    assert not sensor.readable and "pip install amdsmi" in sensor.reason


def test_list_sensors(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeAmdGpu("GPU-aa11"), FakeAmdGpu("GPU-bb22", counter=False)]
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(gpus))
    sensors = gpu_meter.vendor_sensors(AmdGpus)
    assert [(s.kind, s.device, s.readable) for s in sensors] == [
        ("amdsmi-energy", "cuda:0", True),
        ("amdsmi-power", "cuda:0", True),
        ("amdsmi-energy", "cuda:1", False),
        ("amdsmi-power", "cuda:1", True),
    ]
    assert gpu_meter.visible_devices() == ["cuda:0", "cuda:1"]


def test_field_helpers() -> None:
    power_w, energy_j = amd_energy.power_w_from_info, amd_energy.energy_j_from_count
    assert power_w({"socket_power": 41, "current_socket_power": "N/A"}) == 41.0
    assert power_w({"average_socket_power": "N/A"}) is None
    assert energy_j({"power": 1000, "counter_resolution": 15.3}) == pytest.approx(0.0153)
    assert energy_j({"energy_accumulator": "N/A", "counter_resolution": 1}) is None


def faulty_window(monkeypatch: pytest.MonkeyPatch, gpu: FakeAmdGpu, fault_j: float) -> Any:
    """A window during which the accumulator jumps by ``fault_j`` joules (then carries on)."""
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi([gpu]))
    session = open_session(["cuda:0"], interval_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(0.1)
        gpu.offset_j = fault_j
        time.sleep(0.1)
        (r,), _ = session.stop(samples=10)
    return r


def test_backward_counter_is_flagged_never_a_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    r = faulty_window(monkeypatch, FakeAmdGpu("GPU-aa11"), fault_j=-50.0)
    assert r.source == "unavailable"
    assert r.energy_j is None and r.energy_j_per_sample is None
    assert "went backwards" in r.note and "issue 115" in r.note


def test_backward_step_that_recovers_by_the_end_is_still_flagged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # -0.03 J: the end value is still above the start, so only the polls see the step.
    r = faulty_window(monkeypatch, FakeAmdGpu("GPU-aa11"), fault_j=-0.03 * 300)
    assert r.source == "unavailable" and r.energy_j is None
    assert "went backwards" in r.note
    assert r.details["counter_polls"] > 10


def test_implausible_counter_step_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    # +5 kJ in 100 ms: 50 kW, far above the 550 W cap.
    r = faulty_window(monkeypatch, FakeAmdGpu("GPU-aa11"), fault_j=5000.0)
    assert r.source == "unavailable" and r.energy_j is None
    assert "above 2x the power cap of 550 W" in r.note and "issue 38" in r.note
    assert r.details["power_cap_w"] == pytest.approx(550.0)


def test_resolution_and_timestamps_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeAmdGpu("GPU-aa11", power_w=250.0, timestamps=True, resolution_uj=1.0)
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi([gpu]))
    meter = gpu_meter.open_meter("cuda:0", interval_s=0.005)
    assert isinstance(meter, GpuMeter) and meter.kind == "amdsmi"
    assert meter.update_period_s() == pytest.approx(amd_energy.NOMINAL_UPDATE_PERIOD_S)
    assert meter.temperature_c() == 61.0
    with meter:
        meter.start()
        time.sleep(0.15)
        (out,) = meter.stop()
    r = out.reading
    assert r.source == "counter"
    assert r.resolution_j == pytest.approx(1e-6)
    assert r.window_s is not None
    assert r.details["counter_span_s"] == pytest.approx(r.window_s, rel=0.05)
    assert r.energy_j == pytest.approx(250.0 * r.window_s, rel=0.01)


def test_vm_guest_refuses_the_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeAmdGpu("GPU-aa11", power_w=200.0, virtualization_mode=3)  # GUEST
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi([gpu]))
    (r,), _ = measure(["cuda:0"])
    assert r.source == "integrated_samples"
    assert "virtual-machine guest" in r.note
    assert r.energy_j == pytest.approx(200.0 * r.window_s, rel=0.01)
