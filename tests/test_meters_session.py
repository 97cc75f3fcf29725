"""The session end to end on this machine (no sensors), the estimate, and the live view."""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from accelbench.errors import ConfigError
from accelbench.meters import clear_availability_cache, open_session, sensor_report, watch_power
from accelbench.meters import tdp as est
from accelbench.meters.tdp import estimate_power_w, lookup_tdp_w


@pytest.fixture(autouse=True)
def _no_powercap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty powercap root, so the CPU has no sensor whatever this machine has."""
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "no-powercap"))
    clear_availability_cache()
    yield
    clear_availability_cache()


def _cpu_in_table() -> bool:
    return lookup_tdp_w(est.cpu_model_name()) is not None


def _accelbench_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("accelbench-")]


@pytest.mark.skipif(_cpu_in_table(), reason="this CPU's TDP is in the table; it would estimate")
def test_cpu_without_sensor_or_tdp_is_unavailable() -> None:
    session = open_session(["cpu"], idle_s=0)
    with session:
        session.start()
        time.sleep(0.02)
        readings, timeline = session.stop(samples=32)
    (cpu,) = readings
    assert cpu.device == "cpu" and cpu.scope == "cpu-package"
    assert cpu.source == "unavailable"
    assert cpu.energy_j is None  # never 0
    assert cpu.energy_j_per_sample is None and cpu.avg_power_w is None
    assert "no power sensor and no TDP known; pass --cpu-tdp-w" in cpu.note
    assert timeline == {}


def test_cpu_with_a_tdp_is_a_labelled_estimate() -> None:
    session = open_session(["cpu"], idle_s=0, cpu_tdp_w=65.0)
    with session:
        session.start()
        time.sleep(0.25)
        (cpu,), timeline = session.stop(samples=10)
    assert cpu.source == "estimate"
    assert cpu.energy_j is not None and cpu.energy_j > 0
    assert "estimated" in cpu.note
    assert "TDP = 65 W" in cpu.note and "util =" in cpu.note
    assert cpu.window_s is not None and cpu.avg_power_w is not None
    assert 0.3 * 65.0 <= cpu.avg_power_w <= 65.0
    assert cpu.energy_j == pytest.approx(cpu.avg_power_w * cpu.window_s)
    assert cpu.energy_j_per_sample == pytest.approx(cpu.energy_j / 10)
    assert cpu.details["tdp_source"] == "user"
    assert "cpu" in timeline


def test_idle_baseline_gives_dynamic_energy() -> None:
    session = open_session(["cpu"], idle_s=0.2, cpu_tdp_w=100.0)
    with session:
        idle = session.measure_idle()
        assert set(idle) == {"cpu"}
        session.start()
        deadline = time.monotonic() + 0.25
        while time.monotonic() < deadline:  # some load
            sum(i * i for i in range(1000))
        (cpu,), _ = session.stop(samples=20)
    assert cpu.idle_power_w == pytest.approx(idle["cpu"])
    assert cpu.energy_j is not None and cpu.window_s is not None
    expected = (cpu.energy_j - idle["cpu"] * cpu.window_s) / 20
    assert cpu.dynamic_energy_j_per_sample == pytest.approx(expected)


def test_zero_idle_is_a_no_op() -> None:
    session = open_session(["cpu"], idle_s=0, cpu_tdp_w=65.0)
    t0 = time.monotonic()
    with session:
        assert session.measure_idle() == {}
    # Nothing sampled: idle_s=0 measures no idle window (one would take seconds; a
    # generous bound, so a loaded machine does not fail it).
    elapsed = time.monotonic() - t0
    assert elapsed < 5.0, f"{elapsed:.1f} s with idle_s=0: an idle window was sampled"
    assert not _accelbench_threads()


def test_every_device_gets_a_reading_and_none_is_zero() -> None:
    session = open_session(["cpu", "cuda", "cuda:0", "xla:0"], idle_s=0)
    with session:
        session.start()
        readings, _ = session.stop(samples=4)
    assert [r.device for r in readings] == ["cpu", "cuda:0", "xla:0"]
    for r in readings:
        if r.source == "unavailable":
            assert r.energy_j is None and r.note
        else:
            assert r.energy_j is not None
    assert "no power meter for device 'xla:0'" in readings[-1].note


def test_keyboard_interrupt_releases_the_threads() -> None:
    with pytest.raises(KeyboardInterrupt), open_session(["cpu"], idle_s=0, cpu_tdp_w=65.0) as s:
        s.start()
        assert _accelbench_threads()
        raise KeyboardInterrupt
    assert not _accelbench_threads()


def test_zero_samples_leave_per_sample_energy_empty() -> None:
    session = open_session(["cpu"], idle_s=0, cpu_tdp_w=65.0)
    with session:
        session.start()
        time.sleep(0.12)
        (cpu,), _ = session.stop(samples=0)
        with pytest.raises(ConfigError):
            session.start()
            session.stop(samples=-1)
    assert cpu.energy_j is not None and cpu.energy_j_per_sample is None
    assert "no samples processed" in cpu.note


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        open_session(["cpu"], interval_s=0)
    with pytest.raises(ConfigError):
        open_session(["cpu"], idle_s=-1)
    with pytest.raises(ConfigError):
        open_session(["cpu"], cpu_tdp_w=0)


def test_tdp_table_and_model() -> None:
    assert lookup_tdp_w("Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz") == ("xeon e5-2698 v4", 135.0)
    assert lookup_tdp_w("AMD EPYC 7742 64-Core Processor") == ("epyc 7742", 225.0)
    assert lookup_tdp_w("Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz") == ("core i7-8700k", 95.0)
    assert lookup_tdp_w("Intel(R) Core(TM) i5-12400F") is None  # no partial-word match
    assert lookup_tdp_w("Intel(R) Xeon(R) Processor") is None
    assert estimate_power_w(100.0, 0.0) == pytest.approx(30.0)
    assert estimate_power_w(100.0, 1.0) == pytest.approx(100.0)
    assert estimate_power_w(100.0, 0.5) == pytest.approx(65.0)
    assert estimate_power_w(100.0, 2.0) == pytest.approx(100.0)


# -- live view and sensor listing ------------------------------------------------------------


def _fake_rapl(root: Path) -> None:
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("1000\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")


def test_sensor_report_lists_every_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_rapl(tmp_path / "pc")
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "pc"))
    report = sensor_report()
    assert {"name", "kind", "device", "readable", "reason"} <= set(report[0])
    kinds = {r["kind"] for r in report}
    assert "rapl" in kinds and "estimate" in kinds
    rapl_rows = [r for r in report if r["kind"] == "rapl"]
    assert rapl_rows[0]["readable"] is True and rapl_rows[0]["device"] == "cpu"


def test_watch_power_plain_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_rapl(tmp_path / "pc")
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "pc"))
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    watch_power(20, 0.15, console)
    text = out.getvalue()
    assert "package-0=" in text and "t=" in text
    assert "package-0:" in text and "(counter)" in text  # the summary
    assert not _accelbench_threads()


def test_watch_power_live_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_rapl(tmp_path / "pc")
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "pc"))
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    watch_power(50, 0.2, console)
    assert "power W" in out.getvalue()


@pytest.mark.skipif(_cpu_in_table(), reason="this CPU's TDP is in the table; it would estimate")
def test_watch_power_without_sensors_says_why() -> None:
    out = io.StringIO()
    watch_power(10, 0.05, Console(file=out, force_terminal=False, width=200))
    text = out.getvalue()
    assert "no readable power sensor" in text
    assert "pass --cpu-tdp-w" in text


def test_watch_power_rejects_bad_options() -> None:
    console = Console(file=io.StringIO())
    with pytest.raises(ConfigError):
        watch_power(0, 1.0, console)
    with pytest.raises(ConfigError):
        watch_power(10, 0.0, console)
    for bad in (float("nan"), float("inf")):  # would watch forever
        with pytest.raises(ConfigError):
            watch_power(10, bad, console)
    with pytest.raises(ConfigError):
        watch_power(10, 1.0, console, cpu_tdp_w=float("nan"))


def test_watch_power_estimates_the_whole_machine_with_a_given_tdp() -> None:
    buf = io.StringIO()
    watch_power(50, 0.3, Console(file=buf, width=200), cpu_tdp_w=80.0)
    text = buf.getvalue()
    assert "cpu: " in text and "(estimate)" in text


def test_the_estimate_bills_only_this_process_cpu_time() -> None:
    """A real busy-loop process runs through the window while this process sleeps: the
    estimate must not bill its CPU time to the case (system-wide utilisation would)."""
    import subprocess
    import sys

    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        session = open_session(["cpu"], idle_s=0, cpu_tdp_w=100.0)
        with session:
            c0, t0 = time.process_time(), time.monotonic()
            session.start()
            time.sleep(0.5)
            (quiet,), _ = session.stop(samples=10)
            c1, t1 = time.process_time(), time.monotonic()
            session.start()
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:  # this process's own work
                sum(i * i for i in range(1000))
            (busy,), _ = session.stop(samples=10)
            c2, t2 = time.process_time(), time.monotonic()
        assert hog.poll() is None
    finally:
        hog.kill()
        hog.wait()
    cpus = os.cpu_count() or 1
    # The hog kept at least one CPU busy throughout; none of it is billed to this process.
    assert quiet.details["utilisation"] < 0.1 / cpus + 0.03
    assert quiet.details["utilisation"] == pytest.approx((c1 - c0) / ((t1 - t0) * cpus),
                                                         abs=0.03)
    assert quiet.avg_power_w == pytest.approx(30.0, abs=100 * 0.7 * 0.1)
    assert "other processes are not counted" in quiet.note
    # This process's own busy loop is billed: exactly its CPU time (however much of a CPU
    # this shared machine gave it).
    assert busy.details["utilisation"] == pytest.approx((c2 - c1) / ((t2 - t1) * cpus),
                                                        abs=0.03)
    assert busy.details["utilisation"] > quiet.details["utilisation"]
    assert busy.avg_power_w is not None and quiet.avg_power_w is not None
    assert busy.avg_power_w > quiet.avg_power_w
