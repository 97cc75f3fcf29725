"""``accelbench doctor`` on this machine (no sensors), on a fake powercap tree, and on a
fake tree whose energy_uj cannot be read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.meters import clear_availability_cache
from accelbench.meters.doctor import Finding, diagnose, energy_measurable, render_text, to_json


@pytest.fixture(autouse=True)
def _no_gpu_libraries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No pynvml or amdsmi importable, as on a machine without GPU software."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    clear_availability_cache()
    yield
    clear_availability_cache()


def _zone(root: Path, zone: str, name: str, energy_uj: int = 0) -> Path:
    path = root / zone
    path.mkdir(parents=True)
    (path / "name").write_text(f"{name}\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text("262143328850\n")
    return path


def test_without_sensors_energy_cannot_be_measured_and_fixes_are_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "no-powercap"))
    findings = diagnose(probe_s=0.1)
    assert not energy_measurable(findings)
    by_kind = {f.kind: f for f in findings}
    assert not by_kind["nvml"].readable and "nvidia-ml-py" in by_kind["nvml"].fix
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in by_kind["nvml"].fix
    assert "--gpus all" in by_kind["nvml"].fix
    assert "amdsmi" in by_kind["amdsmi"].fix and "ROCm" in by_kind["amdsmi"].fix
    assert "no intel-rapl zones" in by_kind["rapl"].problem
    assert "modprobe intel_rapl_common" in by_kind["rapl"].fix
    text = render_text(findings)
    assert text.splitlines()[0].startswith("energy cannot be measured")
    assert "--node-meter ipmi" in text.splitlines()[0]
    assert "fix: `pip install nvidia-ml-py`" in text
    data = to_json(findings)
    json.dumps(data)
    assert {d["kind"] for d in data} >= {"nvml", "amdsmi", "rapl"}


def test_a_fake_powercap_tree_is_found_with_its_period_and_measurable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "powercap"
    _zone(root, "intel-rapl:0", "package-0")
    _zone(root, "intel-rapl:0:0", "dram")
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
    stop = threading.Event()

    def writer() -> None:  # the package counter steps every 10 ms
        value = 0
        t0 = time.monotonic()
        k = 0
        while not stop.is_set():
            k += 1
            time.sleep(max(0.0, t0 + 0.01 * k - time.monotonic()))
            value += 100_000
            tmp = root / "intel-rapl:0" / "energy_uj.tmp"
            tmp.write_text(f"{value}\n")
            os.replace(tmp, root / "intel-rapl:0" / "energy_uj")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        findings = diagnose(probe_s=0.6)
    finally:
        stop.set()
        thread.join()
    assert energy_measurable(findings)
    rapl = {f.sensor: f for f in findings if f.kind == "rapl"}
    package = rapl["rapl package-0 (intel-rapl:0)"]
    assert package.readable and package.energy and package.boundary == "device+host"
    assert package.period_how == "measured"
    assert package.update_period_s == pytest.approx(0.01, rel=0.2)
    dram = rapl["rapl dram-0 (intel-rapl:0:0)"]
    assert dram.readable and dram.period_how == "nominal" and dram.update_period_s == 1e-3
    text = render_text(findings)
    assert text.splitlines()[0] == "energy can be measured"
    assert "[ok] rapl package-0 (intel-rapl:0) [rapl, boundary device+host], updates every" in text


_CHILD = """
import json, sys
sys.modules["pynvml"] = None
sys.modules["amdsmi"] = None
from accelbench.meters.doctor import diagnose, energy_measurable, to_json
findings = diagnose(probe_s=0.05)
print(json.dumps({"measurable": energy_measurable(findings), "findings": to_json(findings)}))
"""


def test_an_unreadable_counter_gets_the_permission_fix(tmp_path: Path) -> None:
    """chmod 000 on energy_uj. Root reads it anyway, so as root the check runs in a child
    without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv), where modes apply."""
    root = tmp_path / "powercap"
    _zone(root, "intel-rapl:0", "package-0")
    os.chmod(root / "intel-rapl:0" / "energy_uj", 0)
    argv = [sys.executable, "-c", _CHILD]
    if os.geteuid() == 0:
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                "--inh-caps=-all", *argv]
    env = {**os.environ, "ACCELBENCH_POWERCAP_ROOT": str(root)}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    except FileNotFoundError:
        pytest.skip("running as root without setpriv: a 000 file stays readable")
    if done.returncode != 0 and "setpriv" in done.stderr:
        pytest.skip(f"cannot drop capabilities here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["measurable"] is False
    (package,) = [Finding(**f) for f in result["findings"] if f["kind"] == "rapl"]
    assert not package.readable
    assert package.problem == "RAPL energy counters are readable only by root"
    assert f"sudo chmod a+r {root}/intel-rapl:*/energy_uj" in package.fix
    assert f"z {root}/intel-rapl:*/energy_uj 0444 - - -" in package.fix
    assert 'SUBSYSTEM=="powercap"' in package.fix and "/etc/udev/rules.d/" in package.fix


def test_a_cpu_model_without_tdp_gets_the_exact_cpu_tdp_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cloud VM's "AMD EPYC": no RAPL, no TDP in the table. ``doctor`` names the one fix
    there, the exact command with ``--cpu-tdp-w`` (issue 47), and takes the option itself."""
    from accelbench.cli import main
    from accelbench.meters import tdp

    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "no-powercap"))
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "r.db"))
    monkeypatch.setattr(tdp, "cpu_model_name", lambda: "AMD EPYC")
    assert main(["doctor", "--probe-s", "0"]) == 1
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if "CPU estimate from TDP (AMD EPYC)" in x)
    assert line.startswith("[--]") and "not in the TDP table" in line
    assert "fix: give the CPU's TDP in watts" in text
    assert "`accelbench run WORKLOAD --cpu-tdp-w 280`" in text
    assert main(["doctor", "--probe-s", "0", "--cpu-tdp-w", "200"]) == 1  # an estimate only
    text = capsys.readouterr().out
    assert "[est] CPU estimate from TDP (AMD EPYC)" in text and "TDP = 200 W" in text
    assert "--cpu-tdp-w 280" not in text
    assert not (tmp_path / "r.db").exists()


def test_a_known_cpu_model_shows_its_tdp_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelbench.meters import tdp

    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "no-powercap"))
    monkeypatch.setattr(tdp, "cpu_model_name", lambda: "Intel(R) Core(TM) i9-13900K")
    found = {f.kind: f for f in diagnose(probe_s=0)}["tdp"]
    assert found.readable and not found.energy and "125 W" in found.problem
    assert not found.fix
