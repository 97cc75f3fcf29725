"""devices/gpu: the one visible-devices mapping (index, UUID, PCI bus id), the one vendor
fallback (NVIDIA, AMD, none) and the vendor errors translated where they enter. Fakes only
at the vendor boundary: pynvml functions (tests/fake_tuning.py) and an ``amdsmi`` module."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import create_autospec

import pynvml
import pytest

from accelbench.devices import gpu
from accelbench.devices.errors import DeviceError, DeviceNotSupportedError, PrivilegeError
from accelbench.devices.gpu import AmdGpus, NoGpus, NvidiaGpus, nvidia
from accelbench.devices.gpu.common import normalize_pci_bus_id, parse_visible_devices
from accelbench.errors import MeterError, UnsupportedError
from accelbench.tuning.base import gpu_device, knob_for
from tests.fake_tuning import KnobState, fake_uuid, install_nvml_knobs
from tests.test_meters_amd import FakeAmdGpu, fake_amdsmi

VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in VARS:
        monkeypatch.delenv(var, raising=False)
    gpu.clear_cache()
    yield
    gpu.clear_cache()


@pytest.fixture
def four(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KnobState:
    """Four fake NVIDIA GPUs; GPU i sits at PCI bus id 0000:1i:00.0."""
    state = KnobState(tmp_path / "knobs.json").create(nvidia_count=4)
    install_nvml_knobs(state, monkeypatch.setattr)
    pci = lambda h: types.SimpleNamespace(busId=f"00000000:{0x10 + h:02X}:00.0".encode())  # noqa: E731
    monkeypatch.setattr(pynvml, "nvmlDeviceGetPciInfo", pci)
    return state


def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    lib_missing = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setattr(
        pynvml, "nvmlInit", create_autospec(pynvml.nvmlInit, side_effect=lib_missing)
    )


@pytest.mark.parametrize(("visible", "expected"), [
    (None, [0, 1, 2, 3]),
    ("3", [3]),
    ("2,0", [2, 0]),
    (fake_uuid(1), [1]),
    (fake_uuid(2)[:12], [2]),  # a unique prefix, as CUDA accepts
    (fake_uuid(3).removeprefix("GPU-"), []),  # CUDA needs the GPU- prefix
    ("0000:13:00.0,12:00.0", [3, 2]),  # PCI bus ids, domain optional
    ("1,bogus,2", [1]),  # CUDA ignores everything from an invalid entry on
    ("", []),
])
def test_visible_devices_map_to_physical_gpus(
    four: KnobState, monkeypatch: pytest.MonkeyPatch, visible: str | None, expected: list[int]
) -> None:
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with NvidiaGpus() as gpus:
        assert gpus.visible_count() == len(expected)
        assert [gpus.physical_index(n)[0] for n in range(len(expected))] == expected
        assert [gpus.resolve(f"cuda:{n}").uuid for n in range(len(expected))] == [
            fake_uuid(i) for i in expected]
        with pytest.raises(DeviceError, match="not visible to this process"):
            gpus.physical_index(len(expected))
    assert [gpu_device(n) for n in range(len(expected))] == [f"nvidia:{i}" for i in expected]


def test_bad_entries_are_refused(four: KnobState, monkeypatch: pytest.MonkeyPatch) -> None:
    with NvidiaGpus() as gpus:
        for entry, why in (("GPU-0000000", "ambiguous"), ("GPU-ffff", "no GPU with UUID"),
                           ("7", "no GPU with index 7"), ("0000:99:00.0", "PCI bus id")):
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", entry)
            with pytest.raises(DeviceError, match=why):
                gpus.physical_index(0)
        with pytest.raises(DeviceError, match="expected 'cuda:N'"):
            gpus.resolve("cpu")
    with pytest.raises(UnsupportedError, match="no GPU 0 to tune"):
        gpu_device(0)


def test_pci_and_visible_parsing() -> None:
    assert normalize_pci_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert normalize_pci_bus_id("3b:00.1") == "0000:3b:00.1"
    assert normalize_pci_bus_id("3") is None
    assert parse_visible_devices(None) is None
    assert parse_visible_devices("MIG-abc, 0000:3b:00.0,-1,2") == ["MIG-abc", "0000:3b:00.0"]


def test_vendor_fallback_nvidia_then_amd_then_none(
    four: KnobState, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi([FakeAmdGpu("GPU-aa11")]))
    assert gpu.detect() is NvidiaGpus
    no_nvml(monkeypatch)
    gpu.clear_cache()
    assert gpu.detect() is AmdGpus
    assert gpu_device(0) == "amd:0" and knob_for(gpu_device(0), "power_limit_w").device == "amd:0"
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # import amdsmi -> ImportError
    gpu.clear_cache()
    assert gpu.detect() is NoGpus
    with gpu.open_gpus() as none:
        assert isinstance(none, NoGpus) and none.count() == 0
        assert "NVIDIA: NVML could not start" in none.reason
        assert "AMD: amdsmi is not installed: pip install amdsmi" in none.reason
    with pytest.raises(UnsupportedError, match="no GPU 0 to tune: NVIDIA: NVML could not"):
        gpu_device(0)


def test_availability_is_cached(four: KnobState, monkeypatch: pytest.MonkeyPatch) -> None:
    init = create_autospec(pynvml.nvmlInit, side_effect=lambda: None)
    monkeypatch.setattr(pynvml, "nvmlInit", init)
    assert NvidiaGpus.is_available() and NvidiaGpus.is_available()
    assert gpu.detect() is NvidiaGpus
    assert init.call_count == 1
    gpu.clear_cache()
    assert NvidiaGpus.is_available() and init.call_count == 2


def test_amd_visible_devices_by_uuid_and_pci(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeAmdGpu("GPU-aa11", bdf="0000:c1:00.0"), FakeAmdGpu("GPU-bb22", bdf="0000:c2:00.0")]
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(gpus))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # HIP's variable decides on ROCm
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "GPU-bb22,c1:00.0")
    with AmdGpus() as smi:
        assert [smi.resolve(f"cuda:{n}").uuid for n in (0, 1)] == ["GPU-bb22", "GPU-aa11"]
        assert smi.visible_count() == 2


def test_vendor_errors_are_translated(four: KnobState, monkeypatch: pytest.MonkeyPatch) -> None:
    four.update(lambda s: s["nvidia"].update(deny=True))
    with NvidiaGpus() as gpus:
        target = gpus.gpu(0)
        with pytest.raises(PrivilegeError, match="needs root") as refused:
            target.set_power_limit_mw(200_000)
        assert isinstance(refused.value, UnsupportedError | MeterError)
        with pytest.raises(DeviceNotSupportedError, match="not supported on this GPU"):
            target.power_fields_w([pynvml.NVML_FI_DEV_POWER_INSTANT])
    monkeypatch.setattr(pynvml, "nvmlSystemGetDriverVersion", lambda: b"550.54.15")
    assert nvidia.driver_version() == "550.54.15"
    no_nvml(monkeypatch)
    assert nvidia.driver_version() is None
