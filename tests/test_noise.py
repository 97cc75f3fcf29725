"""Noise awareness: competing CPU load flags a case; shape checks of the raw times; the GPU
probe with pynvml faked at its boundary.

The loaded-case test runs a real case in a real worker while a real busy-loop process
competes for the CPUs. This machine is shared, so the quiet case is only checked for
plausible, self-consistent numbers, not for a clean verdict.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any
from unittest.mock import create_autospec

import numpy as np
import pynvml
import pytest

from accelbench.execution import noise
from accelbench.execution.noise import HostSample, NoiseProbe, host_window, time_checks, two_modes
from accelbench.meters import clear_availability_cache
from accelbench.spec import MeasurementPolicy
from tests.test_isolation import run_plugin_case
from tests.test_meters_nvml import FakeGpu, install, uuid_of

# -- shape checks on synthetic times -------------------------------------------------------


def _tight(n: int = 200, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.010, 0.0002, n)


def test_tight_times_are_clean() -> None:
    checks = time_checks(_tight(), 0.01)
    assert checks["reasons"] == []
    assert checks["bimodal"] is False
    assert checks["q3_q1"] < 1.05
    assert abs(checks["trimmed_rel_diff"]) < 0.01


def test_two_modes_are_flagged() -> None:
    rng = np.random.default_rng(2)
    times = np.concatenate([rng.normal(0.010, 0.0002, 120), rng.normal(0.016, 0.0003, 80)])
    rng.shuffle(times)
    checks = time_checks(times, 0.01)
    assert checks["bimodal"] is True
    modes = checks["modes"]
    assert modes["low_s"] == pytest.approx(0.010, rel=0.03)
    assert modes["high_s"] == pytest.approx(0.016, rel=0.03)
    assert modes["high_share"] == pytest.approx(0.4)
    assert any("two modes" in r for r in checks["reasons"])
    assert any("q3/q1" in r for r in checks["reasons"])  # 40% in the slow mode: wide quartiles


def test_a_long_tail_or_a_flat_spread_is_not_two_modes() -> None:
    rng = np.random.default_rng(3)
    assert two_modes(rng.lognormal(np.log(0.01), 0.05, 300)) is None
    assert two_modes(rng.uniform(0.010, 0.011, 300)) is None
    assert two_modes([0.01] * 50) is None  # identical times: one mode
    assert two_modes([0.01, 0.02] * 4) is None  # too few to tell


def test_outliers_pull_the_trimmed_mean_from_the_median() -> None:
    times = list(_tight(40))
    times[:4] = [0.05] * 4  # 10% of the steps 5x slower: an interruption, not a mode
    checks = time_checks(times, 0.01)
    assert checks["trimmed_rel_diff"] > 0.1
    assert any("trimmed mean" in r for r in checks["reasons"])


def test_wide_quartiles_are_flagged() -> None:
    times = np.random.default_rng(4).uniform(0.005, 0.015, 100)
    checks = time_checks(times, 0.01)
    assert checks["q3_q1"] > 1.25
    assert any("q3/q1" in r for r in checks["reasons"])


def test_host_window_arithmetic() -> None:
    a = HostSample(t_s=10.0, busy_s=100.0, steal_s=1.0, own_s=5.0, load_avg_1m=1.0)
    b = HostSample(t_s=12.0, busy_s=104.0, steal_s=1.2, own_s=6.8, load_avg_1m=2.5)
    w = host_window(a, b, case_cores=2)
    assert w["window_s"] == pytest.approx(2.0)
    assert w["busy_cores"] == pytest.approx(2.0)
    assert w["own_cores"] == pytest.approx(0.9)
    assert w["other_cores"] == pytest.approx(1.1)
    assert w["steal_cores"] == pytest.approx(0.1)
    assert w["own_share"] == pytest.approx(0.45)
    assert w["load_avg_1m"] == 2.5


def _probe_with(during_other_cores: float, window_s: float = 1.0) -> NoiseProbe:
    probe = NoiseProbe()
    probe.configure("cpu", case_cores=1)
    t = time.monotonic()
    probe._before = HostSample(t_s=probe._t0.t_s + 0.01, busy_s=probe._t0.busy_s,
                               steal_s=0.0, own_s=probe._t0.own_s, load_avg_1m=0.5)
    probe._w0 = HostSample(t_s=t, busy_s=0.0, steal_s=0.0, own_s=0.0, load_avg_1m=0.5)
    probe._w1 = HostSample(t_s=t + window_s, busy_s=(1.0 + during_other_cores) * window_s,
                           steal_s=0.0, own_s=window_s, load_avg_1m=1.7)
    return probe


def test_verdict_thresholds_on_other_processes() -> None:
    quiet = _probe_with(0.1).verdict(list(_tight()), 0.01)
    assert quiet["flagged"] is False and quiet["reasons"] == []
    assert quiet["host"]["judged"] == "during"
    loaded = _probe_with(0.9).verdict(list(_tight()), 0.01, ["a note"])
    assert loaded["flagged"] is True
    [reason] = loaded["reasons"]
    assert reason.startswith("other processes used 0.90 CPU cores during the measurement")
    assert "load average 1.70" in reason
    assert loaded["measure_notes"] == ["a note"]
    # A window too short to judge is not judged (the before-window here is shorter still).
    short = _probe_with(5.0, window_s=0.05).verdict(list(_tight()), 0.01)
    assert short["host"]["judged"] is None and short["flagged"] is False


# -- real cases in real workers, quiet and under a competing load --------------------------

LOADED_POLICY = MeasurementPolicy(iterations=300, warmup_min=5, warmup_max=5, timeout_s=300)


@pytest.fixture
def busy_loop() -> Iterator[subprocess.Popen[bytes]]:
    """A real competing process: one core spinning for as long as the test needs it."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.3)  # let it reach the scheduler's steady state
    yield proc
    proc.kill()
    proc.wait()


def test_a_case_under_a_busy_loop_is_flagged_noisy(busy_loop: subprocess.Popen[bytes]) -> None:
    r = run_plugin_case("run_busy", "run_busy.py", policy=LOADED_POLICY, batch_size=64)
    assert busy_loop.poll() is None  # the load was there all along
    assert r.status == "ok", r.error
    assert r.noisy, r.noise
    during = r.noise["host"]["during"]
    assert r.noise["host"]["judged"] == "during"
    assert during["other_cores"] > noise.OTHER_CORES_MAX
    assert any(reason.startswith("other processes used") for reason in r.noise_reasons)
    assert r.summary()["noisy"] is True


def test_a_quiet_case_records_plausible_host_numbers() -> None:
    r = run_plugin_case("run_busy", "run_busy.py", policy=LOADED_POLICY, batch_size=64)
    assert r.status == "ok", r.error
    host = r.noise["host"]
    cpus = host["cpus"]
    assert host["case_cores"] == 1
    for key in ("before", "during"):
        w = host[key]
        assert w["window_s"] > 0
        assert 0.0 <= w["other_cores"] <= cpus + 0.2
        assert 0.0 <= w["busy_cores"] <= cpus + 0.2
        assert w["load_avg_1m"] is None or w["load_avg_1m"] >= 0
    during = host["during"]
    assert during["window_s"] >= noise.MIN_HOST_WINDOW_S
    # One thread: the worker used about one core (ticks of 10 ms blur short windows).
    assert 0.3 < during["own_cores"] < 1.4
    assert during["own_share"] == pytest.approx(during["own_cores"])
    cpu_flag = any(reason.startswith("other processes used") for reason in r.noise_reasons)
    assert cpu_flag == (during["other_cores"] > noise.OTHER_CORES_MAX)
    assert r.noise["times"]["n"] == 300
    assert r.noise["gpu"] == {}


# -- the GPU probe, pynvml faked at its boundary -------------------------------------------


class _Proc:
    def __init__(self, pid: int, used: int) -> None:
        self.pid = pid
        self.usedGpuMemory = used


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    clear_availability_cache()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    mocks = install(monkeypatch, [FakeGpu(uuid_of("a"))])
    state: dict[str, Any] = {"pids": [], "mask": 0x4}
    for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons"):
        mocks[name].side_effect = lambda h: state["mask"]

    def fake(name: str, side_effect: Any) -> None:
        monkeypatch.setattr(pynvml, name, create_autospec(getattr(pynvml, name),
                                                          side_effect=side_effect))

    fake("nvmlDeviceGetComputeRunningProcesses",
         lambda h: [_Proc(pid, 2**30) for pid in state["pids"]])
    fake("nvmlDeviceGetGraphicsRunningProcesses", lambda h: [])
    fake("nvmlDeviceGetMaxClockInfo", lambda h, kind: 1980)
    fake("nvmlDeviceGetTemperature", lambda h, sensor: 61)

    class _Util:
        gpu, memory = 97, 40

    fake("nvmlDeviceGetUtilizationRates", lambda h: _Util())
    yield state
    clear_availability_cache()


def _gpu_verdict() -> dict[str, Any]:
    probe = NoiseProbe()
    probe.configure("cuda:0", case_cores=None, gpu_uuid=None)
    probe.before_done()
    probe.window_start()
    probe.window_stop()
    probe.gpu_end()
    return probe.verdict(list(_tight()), 0.01)


def test_gpu_probe_records_clocks_and_accepts_the_worker_alone(fake_gpu: dict[str, Any]) -> None:
    import os

    fake_gpu["pids"] = [os.getpid()]
    v = _gpu_verdict()
    end = v["gpu"]["end"]
    assert end["available"] is True
    assert end["sm_clock_mhz"] == 1410 and end["max_sm_clock_mhz"] == 1980
    assert end["throttle_reasons"] == ["sw_power_cap"]  # a busy GPU at its cap: not noise
    assert end["gpu_util_percent"] == 97 and end["temperature_c"] == 61
    assert end["processes"] == [{"pid": os.getpid(), "used_memory_bytes": 2**30}]
    assert v["gpu"]["other_pids"] == []
    assert v["flagged"] is False, v["reasons"]


def test_other_gpu_processes_and_thermal_slowdown_are_flagged(fake_gpu: dict[str, Any]) -> None:
    import os

    fake_gpu["pids"] = [os.getpid(), 424242]
    fake_gpu["mask"] = 0x40  # hw_thermal_slowdown
    v = _gpu_verdict()
    assert v["flagged"] is True
    assert v["gpu"]["other_pids"] == [424242]
    assert any("1 other process(es) used cuda:0" in r and "424242" in r for r in v["reasons"])
    assert any("hw_thermal_slowdown" in r for r in v["reasons"])


def test_gpu_pids_from_another_namespace(fake_gpu: dict[str, Any]) -> None:
    fake_gpu["pids"] = [7, 9]  # a container: NVML reports host PIDs, none is ours
    v = _gpu_verdict()
    assert v["gpu"]["other_pids"] == [9]
    assert "PID namespace" in v["gpu"]["pid_remark"]


def test_gpu_probe_without_nvml_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", create_autospec(pynvml.nvmlInit,
                                                            side_effect=broken))
    state = noise.gpu_state("cuda:0", None)
    assert state["available"] is False and "NVML could not start" in state["reason"]
    assert noise.gpu_state("cpu", None)["available"] is False
