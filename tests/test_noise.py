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
from pathlib import Path
from typing import Any
from unittest.mock import create_autospec

import numpy as np
import pynvml
import pytest
from rich.console import Console

from accelbench.backends import get_backend
from accelbench.execution import noise, shape
from accelbench.execution.noise import HostSample, NoiseProbe, host_window, time_checks, two_modes
from accelbench.meters import clear_availability_cache
from accelbench.render import noise_text, results_table
from accelbench.result import Result
from accelbench.spec import MeasurementPolicy, RunSpec
from accelbench.verdicts import kinds_of, read_verdict, verdict_lines
from tests.conftest import TESTS, run_cli
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


def _jax_like(n: int = 200, seed: int = 2) -> np.ndarray:
    """JAX on a CPU, quiet: 0.444 ms and 0.651 ms, the slow mode 40% of the steps and
    spread through the run (every step draws its mode; the same from run to run)."""
    rng = np.random.default_rng(seed)
    slow = rng.random(n) < 0.4
    return np.where(slow, rng.normal(0.651e-3, 0.006e-3, n), rng.normal(0.444e-3, 0.004e-3, n))


def test_a_stable_bimodal_series_is_described_not_flagged() -> None:
    times = _jax_like()
    checks = time_checks(times, 0.01, framework="jax", device="cpu")
    assert checks["bimodal"] is True
    modes = checks["modes"]
    assert modes["low_s"] == pytest.approx(0.444e-3, rel=0.03)
    assert modes["high_s"] == pytest.approx(0.651e-3, rel=0.03)
    assert modes["arrangement"]["spread"] is True
    assert checks["q3_q1"] > 1.4  # across the modes the quartiles are wide: not the test
    assert checks["reasons"] == []
    [described] = checks["described"]
    assert "two modes" in described and "0.44" in described and "0.65" in described
    # A strict alternation (fast, slow, fast, ...) is the runtime's rhythm too.
    strict = np.where(np.arange(60) % 2 == 0, 0.444e-3, 0.651e-3)
    assert time_checks(strict, 0.01)["reasons"] == []
    # Through the probe: a quiet host, no verdict, the modes in `described`.
    v = _read(_probe_with(0.1).verdict(list(times), 0.01))
    assert v["flagged"] is False and v["kinds"] == [] and v["reasons"] == []
    assert v["described"] == [described]
    assert kinds_of(v) == () and verdict_lines(v) == []


def test_two_modes_clustered_in_time_are_unstable_timing() -> None:
    rng = np.random.default_rng(2)
    # A level shift: 120 steps at 10 ms, then 80 at 16 ms (a clock change, a job starting).
    times = np.concatenate([rng.normal(0.010, 0.0002, 120), rng.normal(0.016, 0.0003, 80)])
    checks = time_checks(times, 0.01)
    assert checks["bimodal"] is True
    assert checks["modes"]["arrangement"]["spread"] is False
    assert checks["modes"]["arrangement"]["z"] < shape.CLUSTERED_Z
    assert checks["described"] == []
    assert any("two modes clustered in time" in r for r in checks["reasons"])
    # Bursts: slow steps in runs of ten, as a competing process's time slices make them.
    burst = np.tile(np.r_[np.full(20, 0.010), np.full(10, 0.016)], 8)
    assert time_checks(burst, 0.01)["modes"]["arrangement"]["spread"] is False
    v = _read(_probe_with(0.1).verdict(list(times), 0.01))
    assert v["flagged"] is True and v["kinds"] == ["unstable"]
    assert "contention" not in v["by_kind"]
    [line] = verdict_lines(v)
    assert line.startswith("step times vary: two modes clustered in time")
    assert "busy machine" not in line


def test_a_small_level_shift_is_within_what_a_quiet_run_shows() -> None:
    """A calibrated kind (torch on a CPU) tolerates the level shifts its quiet runs show
    (a 10% minority 15% slower moves the mean by 1.5%) and describes them; a shift that
    moves the mean more (40% of the steps 20% slower: 8%) is flagged. An uncalibrated kind
    flags both."""
    rng = np.random.default_rng(3)
    small = np.concatenate([rng.normal(0.010, 0.0001, 180), rng.normal(0.0115, 0.0001, 20)])
    large = np.concatenate([rng.normal(0.010, 0.0001, 120), rng.normal(0.012, 0.0001, 80)])
    assert shape.shape_limits("torch", "cpu")[1].shift == pytest.approx(0.05)
    quiet = time_checks(small, 0.01, framework="torch", device="cpu")
    assert quiet["reasons"] == [] and quiet["modes"]["shift"] == pytest.approx(0.015, abs=0.003)
    assert any("within the 5% a quiet run of torch/cpu shows" in d for d in quiet["described"])
    flagged = time_checks(large, 0.01, framework="torch", device="cpu")
    assert any("moving the mean by about 8" in r for r in flagged["reasons"]), flagged
    gpu = time_checks(small, 0.01, framework="torch", device="cuda:0")
    assert any("two modes clustered in time" in r for r in gpu["reasons"])


def test_shape_limits_come_from_the_backends_by_framework_and_device_kind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert shape.shape_limits("jax", "cpu")[0] == "jax/cpu"
    assert shape.shape_limits("torch", "cpu")[0] == "torch/cpu"
    # No entry for the kind: the framework's any-device row, else the defaults.
    assert shape.shape_limits("toyfw", "cuda:1") == ("*/*", shape.DEFAULT_LIMITS)
    assert shape.device_kind("cuda:1") == "cuda"
    # The limit used is the case's own: a spread between two limits passes one, not the
    # other (limits of this test's own, so a new calibration does not move it).
    monkeypatch.setattr(type(get_backend("torch")), "quiet_shape",
                        {"cpu": shape.ShapeLimits(1.25, 0.10, "test")})
    monkeypatch.setattr(type(get_backend("jax")), "quiet_shape",
                        {"*": shape.ShapeLimits(1.45, 0.10, "test")})
    times = np.random.default_rng(9).permutation(np.linspace(1.0, 1.35 ** 2, 41)) * 1e-3
    jax = time_checks(times, 0.01, framework="jax", device="cuda:0")
    torch = time_checks(times, 0.01, framework="torch", device="cpu")
    assert 1.25 < jax["q3_q1"] < 1.45
    assert jax["reasons"] == [] and jax["limits"]["key"] == "jax/*"
    assert any("the limit for torch/cpu" in r for r in torch["reasons"])


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


def test_host_window_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise, "logical_cpus", lambda: 8)
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


def test_a_short_window_never_has_more_busy_cores_than_the_machine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/stat counts 10 ms ticks: a 0.1 s window of 2 busy CPUs can read 0.244 s."""
    monkeypatch.setattr(noise, "logical_cpus", lambda: 2)
    a = HostSample(t_s=10.0, busy_s=100.0, steal_s=0.0, own_s=5.0, load_avg_1m=4.0)
    b = HostSample(t_s=10.1, busy_s=100.244, steal_s=0.0, own_s=5.09, load_avg_1m=4.0)
    w = host_window(a, b, case_cores=1)
    assert w["busy_cores"] == pytest.approx(2.0)
    assert w["other_cores"] == pytest.approx(1.1)


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
    quiet = _read(_probe_with(0.1).verdict(list(_tight()), 0.01))
    assert quiet["flagged"] is False and quiet["reasons"] == []
    assert quiet["host"]["judged"] == "during"
    loaded = _read(_probe_with(0.9).verdict(list(_tight()), 0.01, ["a note"]))
    assert loaded["flagged"] is True
    [reason] = loaded["reasons"]
    assert reason.startswith("other processes used 0.90 CPU cores during the measurement")
    assert "load average 1.70" in reason
    assert loaded["measure_notes"] == ["a note"]
    # Host contention is the contention verdict, worded as a busy machine with its figures.
    assert loaded["kinds"] == ["contention"] and loaded["by_kind"] == {"contention": [reason]}
    assert verdict_lines(loaded) == [f"busy machine: {reason}"]
    # Contention and a runtime's two modes: flagged for the contention only.
    # Contention and two modes spread through the run: flagged for the contention; the
    # modes described without calling them the runtime's (steady heavy competition
    # spreads slow steps through a run too: benchmarks/noise.py saw it in 12 of 31 runs).
    both = _read(_probe_with(0.9).verdict(list(_jax_like()), 0.01))
    assert both["kinds"] == ["contention"]
    [described] = both["described"]
    assert "other processes competed" in described and "runtime" not in described
    # A window too short to judge is not judged (the before-window here is shorter still).
    short = _read(_probe_with(5.0, window_s=0.05).verdict(list(_tight()), 0.01))
    assert short["host"]["judged"] is None and short["flagged"] is False


def _read(stored: dict[str, Any]) -> dict[str, Any]:
    """The record's ``noise`` as stored (figures, no verdict) with its verdict read."""
    assert not {"flagged", "kinds", "by_kind", "reasons"} & set(stored), stored
    return {**stored, **read_verdict(stored)}


def _record(noise_dict: dict[str, Any], rid: str = "r1") -> Result:
    return Result(id=rid, spec=RunSpec(workload="lstm", size="tiny", batch_size=4),
                  status="ok", sample_unit="sequence", samples_per_step=4, noise=noise_dict)


def test_old_records_read_back_with_their_verdicts() -> None:
    # A 0.3 record: `flagged` and `reasons` only, host and shape reasons mixed.
    old = _record({"flagged": True, "reasons": [
        "other processes used 1.20 CPU cores during the measurement (more than 0.5)",
        "step times spread widely: q3/q1 = 1.49 (> 1.25)",
    ]})
    assert old.noisy and old.noise_kinds == ("contention", "unstable")
    assert verdict_lines(old.noise) == [
        "busy machine: other processes used 1.20 CPU cores during the measurement "
        "(more than 0.5)",
        "step times vary: step times spread widely: q3/q1 = 1.49 (> 1.25)",
    ]
    assert old.summary()["noise_kinds"] == ["contention", "unstable"]
    assert _record({"flagged": True, "reasons": ["load average 3.1 on 2 CPUs"]}).noise_kinds \
        == ("contention",)
    assert _record({}).noise_kinds == () and not _record({}).noisy
    # The tables word it: the wide table's noise column, the narrow one's legend.
    assert noise_text(old) == "; ".join(verdict_lines(old.noise))
    console = Console(width=80, record=True)
    console.print(results_table([old]))
    text = console.export_text()
    assert "!: busy machine or step times vary" in text
    assert "see why with `accelbench results show ID`" in text
    assert "noisy (reasons" not in text


# -- real cases in real workers, quiet and under a competing load --------------------------

# At least a second of measurement, however fast this CPU runs the step: a verdict about
# other processes needs a window of MIN_HOST_WINDOW_S or more (300 exact steps took 0.196 s
# on a quiet machine and judged nothing).
LOADED_POLICY = MeasurementPolicy(min_time_s=1.0, max_time_s=3.0, max_iterations=100_000,
                                  warmup_min=5, warmup_max=5, timeout_s=300)


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


def test_a_suite_under_contention_says_so_in_one_line(
        busy_loop: subprocess.Popen[bytes], tmp_path: Path) -> None:
    db = tmp_path / "busy.db"
    args = ["--plugin", str(TESTS / "plugins" / "run_busy.py"), "suite", "quick",
            "--workload", "run_busy", "--precision", "fp32", "--min-time", "1", "--max-time", "3",
            "--no-energy", "--suite-id", "busy1"]
    proc = run_cli(*args, db=db)
    assert proc.returncode == 0, proc.stderr
    assert busy_loop.poll() is None
    # One summary about the noise, wrapped to the terminal (80 columns without one): how
    # many, which verdict, what to do, each flagged case on a line, where the reasons are;
    # no per-case reasons.
    err = proc.stderr.splitlines()
    at = next(i for i, ln in enumerate(err)
              if ln.startswith("accelbench: warning: 1 of 1 case(s) flagged"))
    block = err[at:next(i for i, ln in enumerate(err) if " results show " in ln) + 1]
    text = " ".join(ln.strip() for ln in block)
    assert "1 of 1 case(s) flagged: 1 measured on a busy machine" in text, proc.stderr
    assert "rerun them when the machine is quiet" in text
    assert any(ln.startswith("  ") and "run_busy tiny bs=64 fp32 cpu: busy machine" in ln
               for ln in block), proc.stderr
    assert "--verbose" in text and " results show " in text
    assert all(len(ln) <= 80 for ln in block if " results show " not in ln), proc.stderr
    assert "CPU cores" not in proc.stderr  # the per-case figures are --verbose's
    # The progress line of the case names the verdict too.
    assert "[1/1] run_busy tiny bs=64 fp32 torch: ok" in proc.stderr
    assert "(flagged: busy machine" in proc.stderr
    # The table's legend in words.
    assert "!: busy machine" in proc.stdout
    # --verbose: the case's own line, with the figures, instead of the summary.
    verbose = run_cli(*args, "--force", "--verbose", db=db)
    assert verbose.returncode == 0, verbose.stderr
    lines = [ln for ln in verbose.stderr.splitlines()
             if ln.startswith("accelbench:") and "busy machine" in ln]
    assert lines and all(" measured on a busy machine: other processes used " in ln
                         for ln in lines), verbose.stderr
    assert "case(s) flagged" not in verbose.stderr


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
    # One thread: the worker used some CPU and at most about one core (ticks of 10 ms blur
    # short windows). No lower bound beyond "some": on a loaded machine the worker's share
    # of a core is whatever the scheduler gave it (0.29 was seen with 6 other jobs).
    assert 0.0 < during["own_cores"] < 1.4
    assert during["own_share"] == pytest.approx(during["own_cores"])
    cpu_flag = any(reason.startswith("other processes used") for reason in r.noise_reasons)
    assert cpu_flag == (during["other_cores"] > noise.OTHER_CORES_MAX)
    assert r.noise["times"]["n"] == len(r.iteration_times_s) > 0  # every measured step
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
    return _read(probe.verdict(list(_tight()), 0.01))


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


def test_gpu_listing_no_process_is_no_other_process(fake_gpu: dict[str, Any]) -> None:
    fake_gpu["pids"] = []  # NVML may list none (not even this worker) before CUDA starts
    v = _gpu_verdict()
    assert v["gpu"]["end"]["available"] is True and v["gpu"]["end"]["processes"] == []
    assert v["gpu"]["other_pids"] == [] and "pid_remark" not in v["gpu"]
    assert not any("other process" in r for r in v["reasons"])


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
