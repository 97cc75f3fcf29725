"""The device-meter registry: a meter added in one file (tests/plugins/device_meter_plugin.py)
is used by the run's meter session, ``accelbench power``, ``devices`` and ``doctor`` with no
other edit; the contention check asks the registry, so an AMD GPU (amdsmi faked at its
boundary) gets it as an NVIDIA one does."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from accelbench.errors import ConfigError
from accelbench.execution.noise import NoiseProbe
from accelbench.meters import clear_availability_cache, open_session, registry
from accelbench.verdicts import contention_reasons
from accelbench.workloads.registry import load_plugin
from tests.conftest import run_cli
from tests.test_meters_amd import FakeAmdGpu, fake_amdsmi

PLUGIN = Path(__file__).parent / "plugins" / "device_meter_plugin.py"


@pytest.fixture
def npu_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "npu_watts"
    path.write_text("40\n", encoding="ascii")
    monkeypatch.setenv("ACCELBENCH_TEST_NPU_FILE", str(path))
    return path


def test_builtin_device_meters_in_order() -> None:
    kinds = [p.kind for p in registry.device_meters()]
    assert kinds[:3] == ["gpu", "cpu", "tpu"]
    assert registry.device_meter_for("cuda:1").kind == "gpu"  # type: ignore[union-attr]
    assert registry.device_meter_for("cpu").kind == "cpu"  # type: ignore[union-attr]
    assert registry.device_meter_for("tpu:0").kind == "tpu"  # type: ignore[union-attr]
    assert registry.device_meter_for("xpu:0") is None


@pytest.fixture
def npu_plugin(npu_file: Path) -> Iterator[Path]:
    """The plugin loaded in this process, forgotten afterwards."""
    load_plugin(str(PLUGIN))
    yield npu_file
    registry.unregister_device_meter("test_npu")
    assert registry.device_meter_for("npu:0") is None


def test_a_device_meter_in_one_file_is_used_by_the_session(npu_plugin: Path) -> None:
    npu_file = npu_plugin
    assert registry.device_meter_for("npu:0").kind == "test_npu"  # type: ignore[union-attr]
    with open_session(["npu:0"], idle_s=0) as session:
        session.start()
        time.sleep(0.02)
        (r,), _ = session.stop(samples=4)
    assert r.device == "npu:0" and r.source == "counter" and r.avg_power_w == 40.0
    assert r.energy_j_per_sample == pytest.approx(r.energy_j / 4)
    # The contention check asks the same registry.
    state = registry.device_activity("npu:0")
    assert state["available"] is True and state["processes"][0]["pid"] == 4242
    npu_file.unlink()
    with open_session(["npu:0"], idle_s=0) as session:
        session.start()
        (r,), _ = session.stop(samples=4)
    assert r.source == "unavailable" and "NPU power file unreadable" in r.note
    assert registry.device_activity("npu:0")["available"] is False


def test_a_device_meter_in_one_file_is_used_by_power_devices_and_doctor(
    npu_file: Path,
) -> None:
    env = {"ACCELBENCH_PLUGINS": str(PLUGIN), "ACCELBENCH_TEST_NPU_FILE": str(npu_file)}
    power = run_cli("power", "--duration", "0.2", "--interval-ms", "50", **env)
    assert power.returncode == 0, power.stderr
    assert "npu:0: 40.0 W average" in power.stdout
    devices = run_cli("devices", "--json", **env)
    assert devices.returncode == 0, devices.stderr
    assert "NPU 0 energy counter" in devices.stdout
    doctor = run_cli("doctor", "--json", "--probe-s", "0.05", **env)
    found = [f for f in json.loads(doctor.stdout)["sensors"] if f["kind"] == "test_npu"]
    assert found and found[0]["readable"] is True and found[0]["energy"] is True
    assert doctor.returncode == 0, doctor.stderr  # a measured energy figure exists


def test_registering_refuses_bad_kinds_and_taken_ones() -> None:
    def claims(device: str) -> bool:
        return False

    with pytest.raises(ConfigError, match="kind must be lower case"):
        registry.register_device_meter("Bad Kind", claims=claims, open=lambda d, o: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError, match="already registered"):
        registry.register_device_meter("gpu", claims=claims, open=lambda d, o: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError, match="claims must be callable"):
        registry.register_device_meter("x_npu", claims=3, open=lambda d, o: None)  # type: ignore[arg-type,return-value]


@pytest.fixture
def amd_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAmdGpu]:
    """One AMD GPU (amdsmi faked at its import boundary), no NVIDIA driver."""
    missing = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    def no_nvml() -> None:
        raise missing

    monkeypatch.setattr(pynvml, "nvmlInit", no_nvml)
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    gpu = FakeAmdGpu("GPU-aa11")
    smi = fake_amdsmi([gpu])
    procs: list[int] = []
    smi.amdsmi_get_gpu_process_list = lambda h: [  # type: ignore[attr-defined]
        {"name": "python", "pid": pid, "mem": 2**30} for pid in procs]
    smi.amdsmi_get_gpu_activity = lambda h: {"gfx_activity": 93}  # type: ignore[attr-defined]
    gpu.procs = procs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "amdsmi", smi)
    clear_availability_cache()
    yield gpu
    clear_availability_cache()


def _verdict() -> dict:
    probe = NoiseProbe()
    probe.configure("cuda:0", case_cores=None)
    probe.before_done()
    probe.window_start()
    probe.window_stop()
    probe.gpu_end()
    return probe.verdict([0.01] * 20, 0.01)


def test_an_amd_gpu_gets_the_contention_check(amd_gpu: FakeAmdGpu) -> None:
    amd_gpu.procs[:] = [os.getpid()]  # type: ignore[attr-defined]
    v = _verdict()
    end = v["gpu"]["end"]
    assert end["available"] is True and end["uuid"] == "GPU-aa11"
    assert end["gpu_util_percent"] == 93 and end["temperature_c"] == 61
    assert end["processes"] == [{"pid": os.getpid(), "used_memory_bytes": 2**30}]
    assert v["gpu"]["other_pids"] == [] and contention_reasons({}, v["gpu"]) == []
    amd_gpu.procs[:] = [os.getpid(), 515151]  # type: ignore[attr-defined]
    v = _verdict()
    assert v["gpu"]["before"]["available"] is True
    assert v["gpu"]["other_pids"] == [515151]
    (reason,) = contention_reasons({}, v["gpu"])  # the busy-machine verdict, read
    assert "1 other process(es) used cuda:0" in reason and "515151" in reason


def test_doctor_probes_an_amd_gpu_and_says_why_nvml_is_not_there(amd_gpu: FakeAmdGpu) -> None:
    from accelbench.meters.doctor import diagnose, energy_measurable

    findings = diagnose(probe_s=0.05)
    amd = [f for f in findings if f.kind == "amdsmi"]
    assert amd and amd[0].readable and amd[0].energy and amd[0].sensor.startswith("amdsmi cuda:0")
    (nvml,) = [f for f in findings if f.kind == "nvml"]
    assert not nvml.readable and "NVML could not start" in nvml.problem and nvml.fix
    assert energy_measurable(findings)
