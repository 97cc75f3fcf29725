"""``accelbench sweep``: device knobs set in order and always restored (after success, an
exception in a case, SIGINT, and SIGKILL + the next command), a refused privilege changing
nothing. Fakes only at the vendor boundary (pynvml functions, an ``amdsmi`` module, sysfs
trees in tmp_path, state in a file shared by processes); real workers, real SQLite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelbench import api, cli
from accelbench.errors import ConfigError, UnsupportedError
from accelbench.spec import DeviceSettings
from accelbench.store import open_store
from accelbench.store import restores as rs
from accelbench.tuning import guard
from accelbench.tuning.amd import AmdPowerCap
from accelbench.tuning.base import PrivilegeError, knob_for
from accelbench.tuning.cpu import CPUFREQ_ROOT_ENV, CpuFreqKnob, RaplLimitKnob
from accelbench.tuning.nvidia import NvidiaKnob
from tests.conftest import cli_env, cli_process
from tests.fake_tuning import (
    STATE_ENV,
    KnobState,
    cpufreq_tree,
    fake_amdsmi,
    fake_uuid,
    install_nvml_knobs,
    rapl_tree,
)

TESTS = Path(__file__).resolve().parent
BUSY = str(TESTS / "plugins" / "run_busy.py")
KNOBS_PLUGIN = str(TESTS / "plugins" / "fake_knobs.py")
CASE = ["run_busy", "--plugin", BUSY, "--size", "tiny", "--no-idle", "--gpu", "0"]


@pytest.fixture
def gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KnobState:
    """A fake NVIDIA GPU 0 at 300 W (range 100-400 W) in this process."""
    state = KnobState(tmp_path / "knobs.json").create()
    install_nvml_knobs(state, monkeypatch.setattr)
    monkeypatch.setenv(STATE_ENV, str(state.path))
    return state


@pytest.fixture
def cpu_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    files = cpufreq_tree(tmp_path / "cpu")
    monkeypatch.setenv(CPUFREQ_ROOT_ENV, str(tmp_path / "cpu"))
    return files


def sub_env(db: Path, state: KnobState, cpu_root: Path) -> dict[str, str]:
    return cli_env(db, ACCELBENCH_PLUGINS=KNOBS_PLUGIN, **{STATE_ENV: str(state.path)},
                   **{CPUFREQ_ROOT_ENV: str(cpu_root)})


def pending_rows(db: Path) -> list[rs.PendingRestore]:
    with open_store(str(db)) as st:
        return rs.pending(st)


# -- knobs at the vendor boundary (no worker) --------------------------------------------


def test_nvidia_knobs(gpu: KnobState) -> None:
    power = NvidiaKnob("power_limit_w", 0)
    assert power.read() == {"limit_mw": 300_000}
    assert list(power.allowed()) == [100.0, 400.0]
    power.check_writable()  # writes 300 W back: no change
    power.apply(250)
    assert gpu.read()["nvidia"]["limit_mw"] == 250_000
    with pytest.raises(ConfigError, match="outside"):
        power.apply(450)
    power.restore({"limit_mw": 300_000})
    sm = knob_for("nvidia:0", "sm_clock_mhz")
    assert 1980.0 in sm.allowed() and 705.0 in sm.allowed()
    sm.apply(1500)
    assert gpu.read()["nvidia"]["sm_locked"] == [1500, 1500]
    sm.restore(sm.read())
    assert gpu.read()["nvidia"]["sm_locked"] is None
    assert gpu.sets("nvidia", "SetPowerManagementLimit") == [300_000, 250_000, 300_000]


def test_amd_power_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = KnobState(tmp_path / "knobs.json").create()
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(state))
    cap = AmdPowerCap(0)
    original = cap.read()
    assert original == {"cap_uw": 250_000_000} and list(cap.allowed()) == [100.0, 300.0]
    cap.apply(150)
    assert state.read()["amd"]["cap_uw"] == 150_000_000
    cap.restore(original)
    assert state.read()["amd"]["cap_uw"] == 250_000_000
    state.update(lambda s: s["amd"].update(deny=True))
    with pytest.raises(PrivilegeError, match="root"):
        cap.check_writable()


def test_cpufreq_and_rapl(cpu_tree: list[Path], tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    freq = CpuFreqKnob()
    original = freq.read()
    assert list(freq.allowed()) == [800_000.0, 3_000_000.0]
    freq.apply(2_000_000)
    assert [f.read_text().strip() for f in cpu_tree] == ["2000000", "2000000"]
    with pytest.raises(ConfigError, match="outside"):
        freq.apply(4_000_000)
    freq.restore(original)
    assert [f.read_text().strip() for f in cpu_tree] == ["3000000", "3000000"]
    limits = rapl_tree(tmp_path / "powercap", packages=2)
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "powercap"))
    rapl = RaplLimitKnob()
    before = rapl.read()
    assert list(rapl.allowed()) == [1e-6, 200.0]
    rapl.apply(90)
    assert [f.read_text().strip() for f in limits] == ["90000000", "90000000"]
    sub = tmp_path / "powercap" / "intel-rapl:0" / "intel-rapl:0:0"
    assert (sub / "constraint_0_power_limit_uw").read_text() == "7\n"  # dram left alone
    rapl.restore(before)
    assert [f.read_text().strip() for f in limits] == ["125000000", "125000000"]


def test_auto_spans_the_allowed_range(gpu: KnobState, cpu_tree: list[Path]) -> None:
    from accelbench.cli.sweep import plan_settings

    args = cli.build_parser().parse_args(
        ["sweep", "x", "--gpu", "0", "--power-limits", "auto"])
    settings, target, knobs = plan_settings(args)
    watts = [s.power_limit_w for s in settings]
    assert watts[0] == 400 and watts[-1] == 100 and len(watts) == 8
    assert watts == sorted(watts, reverse=True) and target.gpu == "nvidia:0"
    args = cli.build_parser().parse_args(
        ["sweep", "x", "--cpu-max-freqs", "auto", "--sm-clocks", "1980,705", "--gpu", "0"])
    settings, _, _ = plan_settings(args)
    assert len(settings) == 16 and settings[0] == DeviceSettings(
        sm_clock_mhz=1980, cpu_max_freq_khz=3_000_000)
    assert all(s.cpu_max_freq_khz % 100_000 == 0 for s in settings)  # type: ignore[operator]
    with pytest.raises(ConfigError, match="--power-limits 450 is outside nvidia:0's range"):
        plan_settings(cli.build_parser().parse_args(
            ["sweep", "x", "--gpu", "0", "--power-limits", "200,450"]))
    assert gpu.read()["log"] == []
    with pytest.raises(ConfigError, match="--gpu N"):
        plan_settings(cli.build_parser().parse_args(["sweep", "x", "--power-limits", "200"]))


def test_refused_privilege_changes_nothing(
    gpu: KnobState, cpu_tree: list[Path], db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gpu.update(lambda s: s["nvidia"].update(deny=True))
    rc = cli.main(["sweep", *CASE, "--power-limits", "200,250", "--cpu-max-freqs", "2000000"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "permission denied" in err and "root" in err and "nvidia-smi -pm 1" in err
    assert gpu.read()["nvidia"]["limit_mw"] == 300_000 and gpu.read()["log"] == []
    assert [f.read_text().strip() for f in cpu_tree] == ["3000000", "3000000"]
    assert not db_path.exists() or pending_rows(db_path) == []


def test_live_owner_left_alone_dead_owner_restored(gpu: KnobState, db_path: Path) -> None:
    with open_store(str(db_path)) as st:
        rs.add(st, device="nvidia:0", knob="power_limit_w", original={"limit_mw": 300_000})
        gpu.update(lambda s: s["nvidia"].update(limit_mw=200_000))
        assert guard.restore_orphans(st) == 0  # this process owns it and is alive
        assert gpu.read()["nvidia"]["limit_mw"] == 200_000
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    with open_store(str(db_path)) as st, st.engine.begin() as conn:
        conn.execute(rs._t.update().values(owner_pid=int(dead.stdout)))
    lines: list[str] = []
    assert guard.restore_at_startup(str(db_path), log=lines.append) == 1
    assert gpu.read()["nvidia"]["limit_mw"] == 300_000 and pending_rows(db_path) == []
    assert len(lines) == 1 and "restored nvidia:0 power_limit_w to 300 W" in lines[0]
    assert not rs.host_has_pending(str(db_path.parent / "missing.db"))
    assert not (db_path.parent / "missing.db").exists()  # the check creates no store


def test_knob_held_by_another_live_sweep_is_refused(gpu: KnobState, db_path: Path) -> None:
    with open_store(str(db_path)) as st:
        rs.add(st, device="nvidia:0", knob="power_limit_w", original={"limit_mw": 300_000})
        with st.engine.begin() as conn:  # owned by a live process that is not this one
            conn.execute(rs._t.update().values(owner_pid=os.getppid()))
        with pytest.raises(UnsupportedError, match=f"pid {os.getppid()}"), guard.applied(
                st, DeviceSettings(power_limit_w=200), guard.Target(gpu="nvidia:0")):
            pass
    assert gpu.read()["log"] == []  # nothing read as "original", nothing set


# -- real sweeps ------------------------------------------------------------------------------


def test_exception_inside_a_case_restores(gpu: KnobState, cpu_tree: list[Path],
                                          db_path: Path) -> None:
    api.load_plugins([BUSY])
    case = api.plan_run("run_busy", size="tiny", iterations=3, meters=api.make_meter_options(
        idle_s=0), settings=DeviceSettings(power_limit_w=200, cpu_max_freq_khz=1_500_000))
    seen: list[Any] = []

    def on_event(ev: Any) -> None:
        if ev.kind == "progress":
            seen.append((gpu.read()["nvidia"]["limit_mw"], cpu_tree[0].read_text().strip()))
            raise RuntimeError("boom inside the case")

    target = guard.Target(gpu="nvidia:0")
    with open_store(str(db_path)) as st, pytest.raises(RuntimeError, match="boom"):
        api.run_cases(st, "sweep-x", [case], False, on_event,
                      case_context=lambda c: guard.applied(st, c.spec.settings, target,
                                                           log=lambda _l: None))
    assert seen == [(200_000, "1500000")]  # set while the case ran
    assert gpu.read()["nvidia"]["limit_mw"] == 300_000
    assert [f.read_text().strip() for f in cpu_tree] == ["3000000", "3000000"]
    assert pending_rows(db_path) == []


def test_sweep_visits_in_order_and_restores(gpu: KnobState, cpu_tree: list[Path],
                                            db_path: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    env = sub_env(db_path, gpu, tmp_path / "cpu")
    args = ["sweep", *CASE, "--iterations", "3", "--power-limits", "350,200",
            "--cpu-max-freqs", "2000000", "--suite-id", "sw1"]
    proc = cli_process(args, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # Probe (current value back), then each setting followed by the original.
    assert gpu.sets("nvidia", "SetPowerManagementLimit") == [
        300_000, 350_000, 300_000, 200_000, 300_000]
    assert [f.read_text().strip() for f in cpu_tree] == ["3000000", "3000000"]
    assert proc.stderr.count("accelbench: restored nvidia:0 power_limit_w to 300 W") == 2
    assert pending_rows(db_path) == []
    with open_store(str(db_path)) as st:
        stored = sorted(st.query(), key=lambda r: r.started_at)
    assert [r.spec.settings.power_limit_w for r in stored] == [350, 200]
    assert {r.spec.settings.cpu_max_freq_khz for r in stored} == {2_000_000}
    assert "time-optimal: power_limit_w=" in proc.stdout
    assert "energy" in proc.stdout  # energy figure, or why there is none
    # Resume (in this process, where the fakes are installed): both settings are
    # stored, so nothing is measured or changed but the privilege probe.
    assert cli.main(args) == 0
    assert gpu.sets("nvidia", "SetPowerManagementLimit")[5:] == [300_000]
    capsys.readouterr()
    assert cli.main(["sweep-report", "sw1", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["points"]) == 2


def _start_sweep(db: Path, gpu: KnobState, cpu_root: Path) -> subprocess.Popen[str]:
    args = ["sweep", *CASE, "--iterations", "100000", "--power-limits", "200,250",
            "--cpu-max-freqs", "1500000"]
    return subprocess.Popen([sys.executable, "-m", "accelbench.cli", *args],
                            env=sub_env(db, gpu, cpu_root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_applied(proc: subprocess.Popen[str], gpu: KnobState, db: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if gpu.read()["nvidia"]["limit_mw"] == 200_000 and db.exists():
            time.sleep(1.0)  # into the case's worker
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("the sweep never set the first limit")


@pytest.fixture
def reap() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


# SIGTERM takes the same path (cli.py turns it into an exception, exit 143); one signal
# keeps this file within its time budget.
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130)])
def test_signal_mid_case_restores(gpu: KnobState, cpu_tree: list[Path], db_path: Path,
                                  tmp_path: Path, reap: list[Any], sig: int, code: int) -> None:
    proc = _start_sweep(db_path, gpu, tmp_path / "cpu")
    reap.append(proc)
    _wait_applied(proc, gpu, db_path)
    assert cpu_tree[0].read_text().strip() == "1500000"
    proc.send_signal(sig)
    # Margin for a loaded machine: the sweep kills its worker at once, but restoring and
    # exiting are a Python process's work on CPUs that other tests keep busy.
    _out, err = proc.communicate(timeout=240)
    assert proc.returncode == code, err
    assert gpu.read()["nvidia"]["limit_mw"] == 300_000
    assert 250_000 not in gpu.sets("nvidia", "SetPowerManagementLimit")  # stopped there
    assert [f.read_text().strip() for f in cpu_tree] == ["3000000", "3000000"]
    assert "restored nvidia:0 power_limit_w to 300 W" in err
    assert pending_rows(db_path) == []


def test_sigkill_then_next_command_restores(gpu: KnobState, cpu_tree: list[Path],
                                            db_path: Path, tmp_path: Path,
                                            reap: list[Any]) -> None:
    proc = _start_sweep(db_path, gpu, tmp_path / "cpu")
    reap.append(proc)
    _wait_applied(proc, gpu, db_path)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert gpu.read()["nvidia"]["limit_mw"] == 200_000  # left changed
    assert {(p.device, p.knob) for p in pending_rows(db_path)} == {
        ("nvidia:0", "power_limit_w"), ("cpu", "cpu_max_freq_khz")}
    env = sub_env(db_path, gpu, tmp_path / "cpu")
    nxt = cli_process(["results"], env=env, timeout=120)
    assert nxt.returncode == 0, nxt.stderr
    assert gpu.read()["nvidia"]["limit_mw"] == 300_000
    assert [f.read_text().strip() for f in cpu_tree] == ["3000000", "3000000"]
    lines = [ln for ln in nxt.stderr.splitlines() if "restored" in ln]
    assert len(lines) == 2 and all(f"pid {proc.pid}" in ln for ln in lines)
    assert pending_rows(db_path) == []


# -- the GPU a sweep sets is the GPU its meter reads -------------------------------------


@pytest.fixture
def four_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KnobState]:
    """Four fake NVIDIA GPUs at 300 W (range 100-400 W) in this process."""
    from accelbench.meters import clear_availability_cache

    state = KnobState(tmp_path / "knobs.json").create(nvidia_count=4)
    install_nvml_knobs(state, monkeypatch.setattr)
    monkeypatch.setenv(STATE_ENV, str(state.path))
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    clear_availability_cache()
    yield state
    clear_availability_cache()


@pytest.mark.parametrize("visible", ["3", fake_uuid(3), fake_uuid(3)[:12], "1,3"])
def test_sweep_sets_the_visible_gpu_it_measures(
    four_gpus: KnobState, db_path: Path, monkeypatch: pytest.MonkeyPatch, visible: str
) -> None:
    from accelbench.cli.sweep import plan_settings
    from accelbench.meters import gpu as gpu_meter

    physical = int(visible.split(",")[-1]) if visible[0].isdigit() else 3
    ordinal = len(visible.split(",")) - 1  # cuda:N of physical GPU 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    args = cli.build_parser().parse_args(
        ["sweep", "x", "--device", f"cuda:{ordinal}", "--power-limits", "200"])
    settings, target, knobs = plan_settings(args)
    assert target.gpu == f"nvidia:{physical}" and [k.device for k in knobs] == ["nvidia:3"]
    meter = gpu_meter.open_meter(f"cuda:{ordinal}", interval_s=0.005)
    with open_store(str(db_path)) as st, meter, guard.applied(st, settings[0], target,
                                                               log=lambda _: None):
        state = four_gpus.read()
        assert state["nvidia3"]["limit_mw"] == 200_000
        assert [state[k]["limit_mw"] for k in ("nvidia", "nvidia1", "nvidia2")] == [300_000] * 3
        meter.start()
        time.sleep(0.02)
        (out,) = meter.stop()
    assert out.reading.details["nvml_index"] == 3
    assert out.reading.details["uuid"] == fake_uuid(3)
    assert four_gpus.read()["nvidia3"]["limit_mw"] == 300_000
    for other in (0, 1, 2):
        assert four_gpus.sets("nvidia", "SetPowerManagementLimit", gpu=other) == []


def test_cli_sweep_under_cuda_visible_devices(four_gpus: KnobState, cpu_tree: list[Path],
                                              db_path: Path, tmp_path: Path) -> None:
    env = sub_env(db_path, four_gpus, tmp_path / "cpu")
    env["CUDA_VISIBLE_DEVICES"] = "3"
    args = ["sweep", *CASE, "--iterations", "3", "--power-limits", "250"]
    proc = cli_process(args, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # The probe (current value back), the setting, the original: all on physical GPU 3.
    assert four_gpus.sets("nvidia", "SetPowerManagementLimit", gpu=3) == [
        300_000, 250_000, 300_000]
    assert four_gpus.sets("nvidia", "SetPowerManagementLimit", gpu=0) == []
    assert "restored nvidia:3 power_limit_w to 300 W" in proc.stderr
