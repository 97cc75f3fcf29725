"""NVML meters with pynvml's functions replaced by autospecced fakes; all our logic runs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import create_autospec

import pynvml
import pytest

from accelbench.devices.gpu.common import parse_visible_devices
from accelbench.devices.gpu.nvidia import NvidiaGpus
from accelbench.devices.gpu.nvidia_energy import decode_throttle_reasons
from accelbench.meters import clear_availability_cache, open_session, sensor_report
from accelbench.meters import gpu as gpu_meter
from accelbench.meters.gpu import GpuMeter
from tests.fake_gpu import SimulatedGpu, install_nvml


def uuid_of(letter: str) -> str:
    return f"GPU-{letter * 8}-{letter * 4}-{letter * 4}-{letter * 4}-{letter * 12}"


@dataclass
class FakeGpu:
    """One GPU as NVML would report it: counter and power follow a constant power draw."""

    uuid: str
    power_w: float = 250.0
    name: str = "NVIDIA A100-SXM4-40GB"
    counter: bool = True
    power: bool = True
    counter_power_w: float | None = None  # if the counter disagrees with the power sensor
    counter_error: int | None = None  # NVML error code the counter raises now
    power_error: int | None = None
    power_error_every: int = 0  # fail every n-th power read
    power_reads: int = 0
    parent: FakeGpu | None = None  # set for MIG handles
    calls: list[str] = field(default_factory=list)
    stall_s: float = 0.0  # every other counter read is pre-empted this long after it reads

    def energy_mj(self) -> int:
        self.calls.append("energy")
        if not self.counter:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if self.counter_error is not None:
            raise pynvml.NVMLError(self.counter_error)
        power = self.counter_power_w if self.counter_power_w is not None else self.power_w
        value = 10**9 + int(power * time.monotonic() * 1000)
        if self.stall_s and self.calls.count("energy") % 2:
            time.sleep(self.stall_s)
        return value

    def power_mw(self) -> int:
        self.calls.append("power")
        self.power_reads += 1
        if not self.power:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if self.power_error is not None:
            raise pynvml.NVMLError(self.power_error)
        if self.power_error_every and self.power_reads % self.power_error_every == 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        return int(self.power_w * 1000)


def install(
    monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu], migs: dict[str, FakeGpu] | None = None
) -> dict[str, Any]:
    """Replace the pynvml functions accelbench calls with autospecced fakes."""
    migs = migs or {}
    mocks: dict[str, Any] = {}

    def fake(name: str, side_effect: Callable[..., Any]) -> None:
        mock = create_autospec(getattr(pynvml, name), side_effect=side_effect)
        mocks[name] = mock
        monkeypatch.setattr(pynvml, name, mock)

    def by_index(index: int) -> FakeGpu:
        if not 0 <= index < len(gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpus[index]

    def by_uuid(uuid: str) -> FakeGpu:
        for gpu in [*gpus, *migs.values()]:
            if gpu.uuid == uuid:
                return gpu
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def parent_of(handle: FakeGpu) -> FakeGpu:
        if handle.parent is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return handle.parent

    fake("nvmlInit", lambda: None)
    fake("nvmlShutdown", lambda: None)
    fake("nvmlDeviceGetCount", lambda: len(gpus))
    fake("nvmlDeviceGetHandleByIndex", by_index)
    fake("nvmlDeviceGetHandleByUUID", by_uuid)
    fake("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", parent_of)
    fake("nvmlDeviceGetUUID", lambda h: h.uuid)
    fake("nvmlDeviceGetName", lambda h: h.name)
    fake("nvmlDeviceGetTotalEnergyConsumption", lambda h: h.energy_mj())
    fake("nvmlDeviceGetPowerUsage", lambda h: h.power_mw())
    fake("nvmlDeviceGetEnforcedPowerLimit", lambda h: 400_000)
    fake(
        "nvmlDeviceGetClockInfo",
        lambda h, kind: 1410 if kind == pynvml.NVML_CLOCK_SM else 1215,
    )
    fake("nvmlDeviceGetCurrentClocksEventReasons", lambda h: 0x1 | 0x4)
    fake("nvmlDeviceGetCurrentClocksThrottleReasons", lambda h: 0x1 | 0x4)
    return mocks


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    clear_availability_cache()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    yield
    clear_availability_cache()


def measure(devices: list[str], window_s: float = 0.15, samples: int = 100, **kwargs: Any) -> tuple:
    session = open_session(devices, interval_s=0.005, idle_s=0, **kwargs)
    with session:
        session.start()
        time.sleep(window_s)
        return session.stop(samples=samples)


def test_counter_present(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(uuid_of("a"))])
    (r,), timeline = measure(["cuda:0"])
    assert r.source == "counter"
    assert r.device == "cuda:0" and r.scope == "gpu"
    assert r.energy_j == pytest.approx(250.0 * r.window_s, rel=0.01)
    assert r.avg_power_w == pytest.approx(250.0, rel=0.01)
    assert r.peak_power_w == pytest.approx(250.0)
    assert r.energy_j_per_sample == pytest.approx(r.energy_j / 100)
    assert r.resolution_j == 1e-3
    assert r.n_samples is not None and r.n_samples >= 10
    assert r.interval_s is not None and 0.004 < r.interval_s < 0.05
    assert r.cross_check_rel_diff is not None and r.cross_check_rel_diff < 0.05
    assert "WARNING" not in r.note
    assert r.details["uuid"] == uuid_of("a")
    for edge in ("start", "end"):
        state = r.details[edge]
        assert state["power_limit_w"] == 400.0
        assert state["sm_clock_mhz"] == 1410
        assert state["mem_clock_mhz"] == 1215
        assert state["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert 0 < len(timeline["cuda:0"]["t_s"]) <= 500
    assert all(p == pytest.approx(250.0) for p in timeline["cuda:0"]["power_w"])


def test_counter_absent_integrates_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(uuid_of("a"), counter=False, power_w=120.0)])
    (r,), _ = measure(["cuda:0"])
    assert r.source == "integrated_samples"
    assert r.energy_j == pytest.approx(120.0 * r.window_s, rel=0.01)
    assert r.resolution_j is None
    assert r.cross_check_rel_diff is None
    assert "no energy counter" in r.note


def test_gpu_without_power_readings_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(uuid_of("a"), counter=False, power=False)])
    (r,), timeline = measure(["cuda:0"])
    assert r.source == "unavailable"
    assert r.energy_j is None and r.energy_j_per_sample is None
    assert "reports no energy or power" in r.note
    assert timeline == {}


def test_counter_lost_mid_window_degrades_to_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(uuid_of("a"))
    install(monkeypatch, [gpu])
    session = open_session(["cuda:0"], interval_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(0.1)
        gpu.counter_error = pynvml.NVML_ERROR_GPU_IS_LOST
        (r,), _ = session.stop(samples=10)
    assert r.source == "integrated_samples" and r.window_s is not None
    assert r.energy_j == pytest.approx(250.0 * r.window_s, rel=0.02)
    assert "energy counter lost at stop" in r.note
    assert "GPU is lost" in r.note


def test_intermittent_power_errors_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(uuid_of("a"), power_error_every=3)])
    (r,), _ = measure(["cuda:0"])
    assert r.source == "counter"
    assert r.details["failed_power_reads"] > 0
    assert "power read(s) failed" in r.note
    assert r.cross_check_rel_diff is not None and r.cross_check_rel_diff < 0.05


def test_power_lost_mid_window_keeps_the_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(uuid_of("a"))
    install(monkeypatch, [gpu])
    session = open_session(["cuda:0"], interval_s=0.002, idle_s=0)
    with session:
        session.start()
        time.sleep(0.05)
        gpu.power_error = pynvml.NVML_ERROR_GPU_IS_LOST
        time.sleep(0.15)
        (r,), _ = session.stop(samples=10)
    assert r.source == "counter" and r.window_s is not None
    assert r.energy_j == pytest.approx(250.0 * r.window_s, rel=0.01)
    assert "power sampling stopped early" in r.note
    assert r.cross_check_rel_diff is None  # samples no longer cover the window


def test_everything_lost_mid_window_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(uuid_of("a"))
    install(monkeypatch, [gpu])
    session = open_session(["cuda:0"], interval_s=0.002, idle_s=0)
    with session:
        session.start()
        time.sleep(0.03)
        gpu.power_error = gpu.counter_error = pynvml.NVML_ERROR_GPU_IS_LOST
        time.sleep(0.15)
        (r,), _ = session.stop(samples=10)
    assert r.source == "unavailable"
    assert r.energy_j is None
    assert "energy counter lost" in r.note


def test_a_counter_read_preempted_at_an_edge_is_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy host pre-empts every other counter read for 30 ms after it read the counter:
    taken as it is, the stalled read's bracket would put its window edge 15 ms late, the
    power about 10% off over a 0.15 s window (227 W for 250 before the edges were read
    again). The narrowest of an edge's reads is kept instead."""
    gpu = FakeGpu(uuid_of("a"), power_w=250.0, stall_s=0.03)
    install(monkeypatch, [gpu])
    (r,), _ = measure(["cuda:0"])
    assert r.source == "counter"
    assert gpu.calls.count("energy") >= 4  # an edge read again after its stalled read
    assert r.avg_power_w == pytest.approx(250.0, rel=0.01)


def test_cross_check_warns_above_five_percent(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(uuid_of("a"), power_w=200.0, counter_power_w=260.0)])
    (r,), _ = measure(["cuda:0"])
    assert r.source == "counter"
    assert r.cross_check_rel_diff == pytest.approx(60 / 260, rel=0.05)
    assert "WARNING" in r.note and "differ by" in r.note


def test_a_counter_that_does_not_advance_is_not_a_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(uuid_of("a"), power_w=180.0, counter_power_w=0.0)])
    (r,), _ = measure(["cuda:0"])
    assert r.source == "integrated_samples"
    assert r.energy_j is not None and r.energy_j > 0
    assert "did not advance" in r.note


def four_gpus() -> list[FakeGpu]:
    return [
        FakeGpu(uuid_of(c), power_w=p)
        for c, p in zip("abcd", (100.0, 200.0, 300.0, 400.0), strict=True)
    ]


def test_visible_devices_by_uuid_measure_only_those_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = four_gpus()
    install(monkeypatch, gpus)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{uuid_of('c')},{uuid_of('a')}")
    readings, _ = measure(["cuda:0", "cuda:1"])
    by = {r.device: r for r in readings}
    assert by["cuda:0"].details["uuid"] == uuid_of("c")
    assert by["cuda:0"].avg_power_w == pytest.approx(300.0, rel=0.01)
    assert by["cuda:1"].details["uuid"] == uuid_of("a")
    assert by["cuda:1"].avg_power_w == pytest.approx(100.0, rel=0.01)
    # The hidden GPUs were never sampled.
    assert "power" not in gpus[1].calls and "energy" not in gpus[1].calls
    assert "power" not in gpus[3].calls and "energy" not in gpus[3].calls


def test_visible_devices_by_index_and_uuid_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, four_gpus())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,GPU-bbbb")
    readings, _ = measure(["cuda:0", "cuda:1"], window_s=0.05)
    assert [r.details["uuid"] for r in readings] == [uuid_of("d"), uuid_of("b")]
    assert [r.details["nvml_index"] for r in readings] == [3, 1]


def test_device_beyond_the_visible_ones_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, four_gpus())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    (r,), _ = measure(["cuda:1"], window_s=0.01)
    assert r.source == "unavailable" and r.energy_j is None
    assert "not visible" in r.note and "CUDA_VISIBLE_DEVICES='2'" in r.note
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    (r,), _ = measure(["cuda:0"], window_s=0.01)
    assert r.source == "unavailable" and "0 GPU(s) visible" in r.note


def test_explicit_uuid_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, four_gpus())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    bare = uuid_of("b").removeprefix("GPU-")  # torch prints UUIDs without the prefix
    (r,), _ = measure(["cuda:0"], window_s=0.05, gpu_uuids={"cuda:0": bare})
    assert r.details["uuid"] == uuid_of("b")


def test_mig_instance_is_measured_through_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = four_gpus()
    mig_uuid = "MIG-12345678-1234-1234-1234-123456789abc"
    mig = FakeGpu(mig_uuid, counter=False, power=False, parent=gpus[2])
    install(monkeypatch, gpus, migs={mig_uuid: mig})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", mig_uuid)
    (r,), _ = measure(["cuda:0"])
    assert r.source == "counter"
    assert r.details["uuid"] == uuid_of("c")
    assert r.details["mig_uuid"] == mig_uuid
    assert "MIG instance" in r.note and "whole physical GPU" in r.note


def test_index_order_caveat_for_mixed_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = four_gpus()
    gpus[1].name = "NVIDIA GeForce RTX 4090"
    install(monkeypatch, gpus)
    (r,), _ = measure(["cuda:0"], window_s=0.05)
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in r.note
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    (r,), _ = measure(["cuda:0"], window_s=0.05)
    assert "CUDA_DEVICE_ORDER" not in r.note


def test_no_nvidia_driver_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    lib_missing = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setattr(
        pynvml, "nvmlInit", create_autospec(pynvml.nvmlInit, side_effect=lib_missing)
    )
    assert not NvidiaGpus.is_available()
    assert "NVML could not start" in NvidiaGpus.unavailable_reason()
    (r,), _ = measure(["cuda:0"], window_s=0.01)
    assert r.source == "unavailable" and r.energy_j is None
    assert "NVML could not start" in r.note


def test_sensor_report_lists_hidden_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = four_gpus()
    gpus[3].counter = False
    install(monkeypatch, gpus)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    report = [s for s in sensor_report() if s["kind"].startswith("nvml")]
    assert len(report) == 8
    energy = {s["name"].split(":")[0]: s for s in report if s["kind"] == "nvml-energy"}
    assert energy["GPU 1"]["device"] == "cuda:0"
    assert energy["GPU 3"]["device"] == "cuda:1"
    assert energy["GPU 3"]["readable"] is False and "not supported" in energy["GPU 3"]["reason"]
    assert energy["GPU 0"]["device"] == "" and "not visible" in energy["GPU 0"]["reason"]
    assert gpu_meter.visible_devices() == ["cuda:0", "cuda:1"]


def test_helpers() -> None:
    assert decode_throttle_reasons(0) == []
    assert decode_throttle_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_throttle_reasons(0x10000) == ["other_0x10000"]
    assert parse_visible_devices(None) is None
    assert parse_visible_devices("") == []
    assert parse_visible_devices("0, 2,foo,1") == ["0", "2"]
    assert parse_visible_devices("1,-1,0") == ["1"]
    assert parse_visible_devices("GPU-ab,MIG-cd") == ["GPU-ab", "MIG-cd"]


def test_power_read_by_field_with_average_and_memory_power(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu = SimulatedGpu(name="NVIDIA A100-SXM4-80GB", memory_w=42.0)
    install_nvml(monkeypatch, gpu)
    meter = gpu_meter.open_meter("cuda:0", interval_s=0.005)
    assert isinstance(meter, GpuMeter) and meter.kind == "nvml"
    assert meter.update_period_s() == pytest.approx(0.1)  # nominal until measured
    assert meter.temperature_c() == 55.0
    with meter:
        gpu.start_workload()
        meter.start()
        time.sleep(0.3)
        (out,) = meter.stop()
    r = out.reading
    assert r.source == "counter"
    assert r.details["power_field"] == "instant"
    assert r.details["cross_check_field"] == "instant"
    assert r.details["memory_power_mean_w"] == pytest.approx(42.0)
    assert 100.0 <= r.details["power_average_field_mean_w"] <= 400.0
    assert r.details["observed_fraction"] == pytest.approx(0.25)
    assert "SC'24" in r.details["observed_fraction_source"]
    # The peak is an instant reading (a 25 ms mean that can catch a whole burst), not
    # the 1 s average.
    assert r.peak_power_w is not None and r.peak_power_w > 300.0


def test_instant_field_unsupported_falls_back_to_average(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_nvml(monkeypatch, SimulatedGpu(instant_field=False, counter=False))
    (r,), _ = measure(["cuda:0"], window_s=0.2)
    assert r.source == "integrated_samples"
    assert r.details["power_field"] == "average"
    assert "NVML_FI_DEV_POWER_INSTANT unsupported" in r.note


def test_no_power_fields_fall_back_to_power_usage_labelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_nvml(monkeypatch, SimulatedGpu(fields=False))
    (r,), _ = measure(["cuda:0"], window_s=0.2)
    assert r.details["power_field"] == "power_usage"
    assert "1 s average on Ampere" in r.note
    assert "memory_power_mean_w" not in r.details


def test_observed_fraction_absent_where_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    install_nvml(monkeypatch, SimulatedGpu(name="NVIDIA GeForce RTX 4090", counter=False))
    (r,), _ = measure(["cuda:0"], window_s=0.2)
    assert r.source == "integrated_samples"
    assert "observed_fraction" not in r.details
    assert "observes only" not in r.note


def test_update_period_is_measured_from_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = SimulatedGpu(update_s=0.05, averaging_s=0.0125, period_s=0.13)
    install_nvml(monkeypatch, gpu)
    meter = gpu_meter.open_meter("cuda:0", interval_s=0.005)
    with meter:
        gpu.start_workload()
        meter.start()
        time.sleep(1.0)
        (out,) = meter.stop()
        measured = meter.update_period_s()
    period = out.reading.details["update_period"]
    assert period["period_s"] == pytest.approx(0.05, rel=0.1)
    assert not period["upper_bound"]
    assert measured == pytest.approx(period["period_s"])
    assert out.reading.details["sensor_updates"] >= 15


def test_constant_power_keeps_the_nominal_period(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(uuid_of("a"))])
    (r,), _ = measure(["cuda:0"], window_s=0.2)
    # A constant reading never changes: no update is visible, the nominal period stands.
    assert r.details["update_period"] == {"period_s": 0.1, "nominal": True}
    assert r.details["sensor_updates"] == int(r.window_s / 0.1)
