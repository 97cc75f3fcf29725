"""RAPL through a fake powercap tree of real files under tmp_path."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.devices import powercap
from accelbench.meters import clear_availability_cache, open_session, rapl
from accelbench.meters.common import WHOLE_WINDOW_COVERAGE
from accelbench.meters.rapl import CounterAccumulator, RaplMeter

REAL_MAX_UJ = 262_143_328_850  # a real package's max_energy_range_uj


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_availability_cache()
    yield
    clear_availability_cache()


def make_zone(
    root: Path,
    zone: str,
    name: str,
    energy_uj: int,
    max_uj: int | None = REAL_MAX_UJ,
    max_power_uw: dict[int, int] | None = None,
) -> Path:
    path = root / zone
    path.mkdir(parents=True)
    (path / "name").write_text(f"{name}\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    if max_uj is not None:
        (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    for index, value in (max_power_uw or {}).items():
        (path / f"constraint_{index}_max_power_uw").write_text(f"{value}\n")
    return path


def set_counter(root: Path, zone: str, value: int) -> None:
    """Replace energy_uj atomically, so a concurrent poll sees the old or the new value."""
    tmp = root / zone / "energy_uj.tmp"
    tmp.write_text(f"{value}\n")
    os.replace(tmp, root / zone / "energy_uj")


@pytest.fixture()
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two packages with core, uncore and DRAM sub-zones, psys, and the clutter sysfs has."""
    root = tmp_path / "powercap"
    root.mkdir()
    (root / "intel-rapl").mkdir()  # the control type directory, not a zone
    make_zone(root, "intel-rapl:0", "package-0", 1_000_000)
    make_zone(root, "intel-rapl:0:0", "core", 500_000)
    make_zone(root, "intel-rapl:0:1", "uncore", 100_000)
    make_zone(root, "intel-rapl:0:2", "dram", 2_000_000, max_uj=65_712_999_613)
    make_zone(root, "intel-rapl:1", "package-1", 3_000_000)
    make_zone(root, "intel-rapl:1:0", "dram", 4_000_000, max_uj=65_712_999_613)
    make_zone(root, "intel-rapl:2", "psys", 9_000_000)
    make_zone(root, "intel-rapl-mmio:0", "package-0", 7)  # duplicate interface: skipped
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
    return root


def _by_device(readings: tuple) -> dict:
    return {r.device: r for r in readings}


def test_discovery_reads_names_scopes_and_skips_duplicates(tree: Path) -> None:
    domains = rapl.discover_domains()
    assert [d.zone for d in domains] == [
        "intel-rapl:0",
        "intel-rapl:0:0",
        "intel-rapl:0:1",
        "intel-rapl:0:2",
        "intel-rapl:1",
        "intel-rapl:1:0",
        "intel-rapl:2",
    ]
    by_zone = {d.zone: d for d in domains}
    assert by_zone["intel-rapl:0"].device == "package-0"
    assert by_zone["intel-rapl:0"].scope == "cpu-package"
    assert by_zone["intel-rapl:0:2"].device == "dram-0"
    assert by_zone["intel-rapl:0:2"].scope == "dram"
    assert by_zone["intel-rapl:1:0"].device == "dram-1"
    assert by_zone["intel-rapl:0:0"].scope == "cpu-core"
    assert by_zone["intel-rapl:2"].scope == "platform"
    assert all(d.readable for d in domains)
    assert [d.device for d in rapl.cpu_domains()] == ["package-0", "dram-0", "package-1", "dram-1"]
    assert RaplMeter.is_available()


def test_root_is_read_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "absent"))
    assert rapl.discover_domains() == []
    assert not RaplMeter.is_available()
    make_zone(tmp_path / "other", "intel-rapl:0", "package-0", 1)
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "other"))
    assert [d.device for d in rapl.discover_domains()] == ["package-0"]
    assert RaplMeter.is_available()


def test_several_domains_measured_exactly(tree: Path) -> None:
    session = open_session(["cpu"], interval_s=0.005, counter_poll_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(0.03)
        set_counter(tree, "intel-rapl:0", 1_000_000 + 2_500_000)
        set_counter(tree, "intel-rapl:0:2", 2_000_000 + 400_000)
        set_counter(tree, "intel-rapl:1", 3_000_000 + 1_000_000)
        set_counter(tree, "intel-rapl:0:0", 999_999_999)  # core is inside the package
        time.sleep(0.03)
        readings, timeline = session.stop(samples=50)
    by = _by_device(readings)
    assert list(by) == ["package-0", "dram-0", "package-1", "dram-1"]
    assert by["package-0"].energy_j == pytest.approx(2.5)
    assert by["dram-0"].energy_j == pytest.approx(0.4)
    assert by["package-1"].energy_j == pytest.approx(1.0)
    assert by["dram-1"].energy_j == pytest.approx(0.0, abs=1e-12)  # measured zero, not missing
    for r in readings:
        assert r.source == "counter" and r.energy_j is not None
        assert r.scope in ("cpu-package", "dram")
        assert r.window_s is not None and r.window_s > 0.05
        assert r.avg_power_w == pytest.approx(r.energy_j / r.window_s)
        # Under load the poller can start late in the window: then the energy covers part
        # of it and is divided by the samples of that part (said in the note).
        coverage = r.details.get("coverage")
        covered = 50 * coverage if coverage is not None and coverage < WHOLE_WINDOW_COVERAGE else 50
        assert r.energy_j_per_sample == pytest.approx(r.energy_j / covered)
        assert r.n_samples is not None and r.n_samples >= 3
        assert r.interval_s is not None
        assert r.cross_check_rel_diff is None  # the samples are the counter itself
        assert r.details["wraps"] == 0
    assert set(timeline) == set(by)
    assert by["package-0"].peak_power_w is not None and by["package-0"].peak_power_w > 2.5 / 0.06


def test_a_wraparound_is_corrected(tree: Path) -> None:
    set_counter(tree, "intel-rapl:0", REAL_MAX_UJ - 1_000)
    session = open_session(["cpu"], interval_s=0.005, counter_poll_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(0.02)
        set_counter(tree, "intel-rapl:0", 500)
        time.sleep(0.02)
        readings, _ = session.stop(samples=1)
    package = _by_device(readings)["package-0"]
    assert package.energy_j == pytest.approx(1_500e-6)
    assert package.details["wraps"] == 1
    assert package.source == "counter"
    assert "reset" not in package.note


def test_several_wraps_in_one_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer thread drives the counter through six wraps while the sampler polls."""
    max_uj = 10_000_000  # 10 J: wraps every 500 ms at the 20 W written here
    step_uj = 3_000_000
    steps = 20
    root = tmp_path / "powercap"
    # At most 40 W: the counter cannot wrap within 250 ms, so a poll delayed by a loaded
    # machine (tens of ms at a load of 25) still sees every wrap; 25 ms (400 W, 15 ms steps)
    # left the window rightly unavailable under such load.
    make_zone(root, "intel-rapl:0", "package-0", 0, max_uj=max_uj, max_power_uw={0: 40_000_000})
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))

    def writer() -> None:
        total = 0
        for _ in range(steps):
            time.sleep(0.15)
            total += step_uj
            set_counter(root, "intel-rapl:0", total % max_uj)

    session = open_session(["cpu"], interval_s=0.002, counter_poll_s=0.002, idle_s=0)
    with session:
        session.start()
        thread = threading.Thread(target=writer)
        thread.start()
        thread.join()
        time.sleep(0.01)
        readings, _ = session.stop(samples=10)
    (package,) = readings
    assert package.details["wraps"] == steps * step_uj // max_uj == 6
    assert package.energy_j == pytest.approx(steps * step_uj * 1e-6, rel=1e-9)
    assert package.details["resets"] == 0


def test_a_counter_reset_is_bridged_with_a_note(tree: Path) -> None:
    set_counter(tree, "intel-rapl:0", 5_000_000_000)
    session = open_session(["cpu"], interval_s=0.005, counter_poll_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(0.02)
        set_counter(tree, "intel-rapl:0", 5_001_000_000)
        time.sleep(0.03)
        set_counter(tree, "intel-rapl:0", 1_000)  # reset: not a plausible wrap
        time.sleep(0.03)
        set_counter(tree, "intel-rapl:0", 1_001_000)
        time.sleep(0.02)
        readings, _ = session.stop(samples=1)
    package = _by_device(readings)["package-0"]
    assert package.details["resets"] == 1
    assert package.details["wraps"] == 0
    assert "reset" in package.note
    # Two counted joules; the reset interval is bridged at the (idle) rate before it.
    assert package.energy_j == pytest.approx(2.0, abs=0.01)


def test_missing_max_energy_range_is_noted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "powercap"
    make_zone(root, "intel-rapl:0", "package-0", 9_000_000, max_uj=None)
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
    session = open_session(["cpu"], interval_s=0.005, counter_poll_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(0.02)
        set_counter(root, "intel-rapl:0", 9_500_000)
        time.sleep(0.02)
        set_counter(root, "intel-rapl:0", 100)  # wrap or reset: cannot tell
        time.sleep(0.02)
        readings, _ = session.stop(samples=1)
    (package,) = readings
    assert package.source == "counter"
    assert "max_energy_range_uj missing" in package.note
    assert package.details["max_energy_range_uj"] is None
    assert package.details["unknown_decreases"] == 1
    assert package.energy_j is not None and 0.5 <= package.energy_j < 1.0


def _deny_energy_reads(monkeypatch: pytest.MonkeyPatch, zones: set[str]) -> None:
    """Make energy_uj of ``zones`` fail to open the way a 0400 root file does for a user."""
    real_open_text = powercap.open_text

    def open_text(path: Path) -> str:
        if path.name == "energy_uj" and path.parent.name in zones:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open_text(path)

    monkeypatch.setattr(powercap, "open_text", open_text)


def test_root_only_counters_are_unavailable_with_the_fix(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _deny_energy_reads(monkeypatch, {p.name for p in tree.iterdir()})
    assert not RaplMeter.is_available()
    assert "sudo chmod a+r" in RaplMeter.unavailable_reason()
    session = open_session(["cpu"], idle_s=0)
    with session:
        session.start()
        readings, timeline = session.stop(samples=10)
    (cpu,) = readings
    assert cpu.source == "unavailable"
    assert cpu.energy_j is None
    assert cpu.energy_j_per_sample is None
    assert f"sudo chmod a+r {tree}/intel-rapl:*/energy_uj" in cpu.note
    assert "run as root" in cpu.note
    assert timeline == {}


def test_root_only_counters_fall_back_to_a_labelled_estimate(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _deny_energy_reads(monkeypatch, {p.name for p in tree.iterdir()})
    session = open_session(["cpu"], idle_s=0, cpu_tdp_w=65.0)
    with session:
        session.start()
        time.sleep(0.05)
        (cpu,), _ = session.stop(samples=10)
    assert cpu.source == "estimate"
    assert "estimated" in cpu.note
    assert "sudo chmod a+r" in cpu.note


def test_one_unreadable_domain_is_unavailable_not_zero(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _deny_energy_reads(monkeypatch, {"intel-rapl:0:2"})
    session = open_session(["cpu"], interval_s=0.005, counter_poll_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(0.02)
        readings, _ = session.stop(samples=10)
    by = _by_device(readings)
    assert by["package-0"].source == "counter"
    assert by["dram-0"].source == "unavailable"
    assert by["dram-0"].energy_j is None
    assert "sudo chmod a+r" in by["dram-0"].note


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_chmod_000_counter_is_unreadable(tree: Path) -> None:
    os.chmod(tree / "intel-rapl:0" / "energy_uj", 0)
    package = next(d for d in rapl.discover_domains() if d.zone == "intel-rapl:0")
    assert not package.readable
    assert "sudo chmod a+r" in package.reason


def test_a_counter_that_cannot_be_read_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "powercap"
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").mkdir()  # reading a directory fails like a broken sysfs node
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
    (domain,) = rapl.discover_domains()
    assert not domain.readable
    assert "cannot read" in domain.reason


def test_timeline_is_bounded(tree: Path) -> None:
    session = open_session(["cpu"], interval_s=0.001, counter_poll_s=0.001, idle_s=0)
    value = 1_000_000

    # 2 s of 1 ms polls: up to 2000 samples, four times the 500 the timeline keeps, so
    # that a sampler thread starved to a quarter of its polls on a busy machine still
    # takes more than the timeline holds (35 steps took 461 of the 500 at load 7).
    steps = 100
    with session:
        session.start()
        for _ in range(steps):
            value += 20_000
            set_counter(tree, "intel-rapl:0", value)
            time.sleep(0.02)
        readings, timeline = session.stop(samples=1)
    package = _by_device(readings)["package-0"]
    assert package.n_samples is not None and package.n_samples > 500
    assert 0 < len(timeline["package-0"]["t_s"]) <= 500
    assert package.energy_j == pytest.approx(steps * 0.02)


def test_list_sensors_covers_every_zone(tree: Path) -> None:
    sensors = rapl.list_sensors()
    assert len(sensors) == 7
    assert all(s.readable and s.kind == "rapl" for s in sensors)
    core = next(s for s in sensors if "core" in s.name and "uncore" not in s.name)
    assert "not added" in core.reason


def test_list_sensors_without_rapl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "nothing"))
    (sensor,) = rapl.list_sensors()
    assert not sensor.readable
    assert "no intel-rapl zones" in sensor.reason


# -- the accumulator on its own --------------------------------------------------------------


def test_accumulator_wrap_reset_and_unknown() -> None:
    acc = CounterAccumulator(1_000_000, max_rate_per_s=1e10)
    assert acc.update(999_000, 0.0) == 0.0
    assert acc.update(999_500, 0.01) == 500.0
    assert acc.update(200, 0.02) == 1_000_000 - 999_500 + 200  # wrap
    assert acc.wraps == 1
    # A decrease implying more than max_rate_per_s is a reset, bridged at the last rate.
    acc = CounterAccumulator(10**12, max_rate_per_s=1e10)
    acc.update(5 * 10**9, 0.0)
    acc.update(5 * 10**9 + 1_000, 0.01)  # 100 kuJ/s
    assert acc.update(10, 0.02) == pytest.approx(1_000.0)
    assert acc.resets == 1 and acc.wraps == 0
    acc = CounterAccumulator(None, max_rate_per_s=1e10)
    acc.update(100, 0.0)
    assert acc.update(50, 0.01) == 50.0  # no rate known yet: counted from zero
    assert acc.unknown_decreases == 1


def test_a_counter_vanishing_late_scales_over_the_covered_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counter answers for the first ~93% of the window, then its file disappears.

    The energy read is that of the covered part; divided by all samples it would be ~7%
    low while labelled a whole counter reading. It must be divided by the covered samples.
    """
    power_w = 50.0
    root = tmp_path / "powercap"
    make_zone(root, "intel-rapl:0", "package-0", 0)
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
    window_s, vanish_s = 1.0, 0.93
    stop = threading.Event()

    def writer(t0: float) -> None:  # the counter follows a constant 50 W draw exactly
        while not stop.is_set():
            elapsed = time.monotonic() - t0
            if elapsed >= vanish_s:
                os.unlink(root / "intel-rapl:0" / "energy_uj")
                return
            set_counter(root, "intel-rapl:0", int(power_w * elapsed * 1e6))
            time.sleep(0.001)

    samples = 1000  # processed at a steady rate over the whole window
    session = open_session(["cpu"], interval_s=0.005, counter_poll_s=0.005, idle_s=0)
    with session:
        t0 = time.monotonic()
        session.start()
        thread = threading.Thread(target=writer, args=(t0,))
        thread.start()
        time.sleep(window_s - (time.monotonic() - t0))
        readings, _ = session.stop(samples=samples)
        whole_s = time.monotonic() - t0
        stop.set()
        thread.join()
    (package,) = readings
    coverage = package.details["coverage"]
    assert 0.85 < coverage < 0.97  # the counter really vanished late
    assert package.source == "counter"
    assert package.energy_j is not None and package.window_s is not None
    assert package.avg_power_w == pytest.approx(power_w, rel=0.03)
    truth = power_w * whole_s / samples  # the whole window's energy per sample
    naive = package.energy_j / samples
    assert naive < 0.97 * truth  # the old figure: low by the uncovered share
    assert package.energy_j_per_sample == pytest.approx(truth, rel=0.03)
    assert package.energy_j_per_sample == pytest.approx(package.energy_j / (samples * coverage))
    assert f"cover {coverage:.1%} of the window" in package.note
    assert "per-sample energy is over the" in package.note


def test_a_whole_window_needs_no_coverage_scaling(tree: Path) -> None:
    session = open_session(["cpu"], interval_s=0.005, counter_poll_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(0.2)  # edges of ~0.5 ms stay under 1%
        readings, _ = session.stop(samples=10)
    for r in readings:
        assert r.details["coverage"] > 0.99
        assert r.energy_j_per_sample == pytest.approx((r.energy_j or 0.0) / 10)
        assert "cover" not in r.note


def test_a_short_window_is_whole_however_long_its_last_read_takes(
        tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first read is taken at start and the last at stop, so the readings cover all
    the work: a last read (or a late poller) that takes longer than the work is no
    uncovered part of the window (no coverage scaling, the energy per sample exact). A
    busy machine gave a 55 ms window's loop 9% more energy per iteration that way."""
    slow = {"on": False}
    read_int = rapl.powercap.read_int

    def slow_sysfs(path: Path) -> int:
        if slow["on"]:
            time.sleep(0.1)
        return read_int(path)

    monkeypatch.setattr(rapl.powercap, "read_int", slow_sysfs)
    session = open_session(["cpu"], interval_s=0.005, counter_poll_s=0.005, idle_s=0)
    with session:
        session.start()
        time.sleep(0.01)
        set_counter(tree, "intel-rapl:0", 1_000_000 + 500_000)
        time.sleep(0.02)
        slow["on"] = True
        readings, _ = session.stop(samples=10)
    package = _by_device(readings)["package-0"]
    assert package.energy_j == pytest.approx(0.5)
    assert "cover" not in package.note, package.note
    assert package.energy_j_per_sample == pytest.approx(0.05)


# -- adaptive poll: every wrap seen, a long gap flagged ----------------------------------------

SMALL_RANGE_UJ = 8_000_000
"""8 J: at the zone's 100 W maximum the counter can wrap every 80 ms."""
STEP_UJ = 95_000
"""The fake writer adds 95 mJ per step, a step at most every millisecond (at most 95 W,
about 85 W at the pace sleep() keeps): the counter wraps every ~95 ms, faster than the
default 100 ms poll, and never jumps (a real counter updates every ~1 ms)."""


def _small_range_zone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "powercap"
    make_zone(
        root,
        "intel-rapl:0",
        "package-0",
        0,
        max_uj=SMALL_RANGE_UJ,
        # The largest constraint bounds the power: 100 W, not the 80 W long-term one.
        max_power_uw={0: 80_000_000, 1: 100_000_000},
    )
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
    return root


class CounterWriter(threading.Thread):
    """Advances energy_uj by STEP_UJ per millisecond for ``steps`` steps, wrapping at
    SMALL_RANGE_UJ.

    ``stall_at``: at that step, replace energy_uj by a FIFO for ``stall_s``, so the poller's
    next read blocks (a stalled sysfs read, a suspended VM) while the counter runs on at
    95 W; the value after the stall is then handed to the blocked read.
    """

    def __init__(self, root: Path, steps: int, stall_at: int | None = None,
                 stall_s: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.root, self.steps = root, steps
        self.stall_at, self.stall_s = stall_at, stall_s
        self.total_uj = 0
        self.stalled = False

    def _stall(self) -> None:
        counter = self.root / "intel-rapl:0" / "energy_uj"
        fifo = self.root / "intel-rapl:0" / "energy_uj.fifo"
        os.mkfifo(fifo)
        os.replace(fifo, counter)
        time.sleep(self.stall_s)
        self.total_uj += int(95.0 * self.stall_s * 1e6)
        deadline = time.monotonic() + 5.0
        while True:  # the poller is blocked opening the FIFO; hand it the value
            try:
                fd = os.open(counter, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:
                if time.monotonic() > deadline:
                    set_counter(self.root, "intel-rapl:0", 0)  # never leave a FIFO behind
                    raise
                time.sleep(0.001)
        # The path becomes a regular file again before the blocked read is answered, so a
        # poll that comes after it (this thread may be descheduled for a while on a loaded
        # machine) reads the file instead of blocking on a FIFO nobody will write again.
        set_counter(self.root, "intel-rapl:0", self.total_uj % SMALL_RANGE_UJ)
        os.write(fd, f"{self.total_uj % SMALL_RANGE_UJ}\n".encode())
        os.close(fd)
        self.stalled = True

    def run(self) -> None:
        for step in range(self.steps):
            if step == self.stall_at:
                self._stall()
            self.total_uj += STEP_UJ
            set_counter(self.root, "intel-rapl:0", self.total_uj % SMALL_RANGE_UJ)
            time.sleep(0.001)


def test_poll_interval_is_derived_from_the_wrap_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _small_range_zone(tmp_path, monkeypatch)
    make_zone(root, "intel-rapl:1", "package-1", 0)  # real range, no constraint file
    make_zone(root, "intel-rapl:2", "package-2", 0, max_uj=1_000_000)  # 1 J, no constraint
    small, real, tiny = rapl.discover_domains()
    assert small.max_power_w == 100.0 and small.max_power_file == "constraint_1_max_power_uw"
    assert small.wrap_period_s == pytest.approx(0.08)
    poll_s, why = rapl.poll_interval([small, real], 0.1)
    assert poll_s == pytest.approx(0.04)
    assert why.startswith("half the shortest wrap period: intel-rapl:0 can wrap every 0.08 s")
    # No constraint: 10 kW is assumed; a real package then wraps after 26 s at the earliest,
    # so the requested poll stands.
    assert real.max_power_w == rapl.MAX_PLAUSIBLE_DOMAIN_W
    assert real.wrap_period_s == pytest.approx(26.2, rel=1e-2)
    poll_s, why = rapl.poll_interval([real], 0.1)
    assert poll_s == 0.1 and "no constraint_*_max_power_uw" in why
    # A range too small for any poll: the fastest poll, and gaps will flag the window.
    poll_s, why = rapl.poll_interval([tiny], 0.1)
    assert poll_s == rapl.MIN_POLL_S and "gap longer than a wrap period" in why


def test_adaptive_poll_counts_every_wrap_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counter wraps about every 95 ms, faster than the default 100 ms poll: a fixed
    poll would lose whole ranges; the derived 40 ms poll sees every wrap."""
    root = _small_range_zone(tmp_path, monkeypatch)
    writer = CounterWriter(root, steps=1000)
    session = open_session(["cpu"], idle_s=0)  # the default 100 ms counter poll requested
    with session:
        session.start()
        writer.start()
        writer.join()
        time.sleep(0.05)
        (package,), _ = session.stop(samples=100)
    assert package.source == "counter"
    assert package.details["poll_interval_s"] == pytest.approx(0.04)
    assert "half the shortest wrap period" in package.details["poll_reason"]
    assert package.details["wrap_period_s"] == pytest.approx(0.08)
    assert package.details["max_power_source"] == "constraint_1_max_power_uw"
    assert package.details["wraps"] == writer.total_uj // SMALL_RANGE_UJ == 11
    assert package.details["max_read_gap_s"] < 0.08
    # Exact: every microjoule the writer added, through ten or more wraps.
    assert package.energy_j == pytest.approx(writer.total_uj * 1e-6, rel=1e-9)
    assert package.energy_j_per_sample == pytest.approx(writer.total_uj * 1e-6 / 100, rel=1e-9)


def test_a_gap_longer_than_the_wrap_period_is_flagged_not_miscounted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read blocks for 0.3 s (almost four wrap periods) while the counter runs on: wraps
    are lost, so the window's energy is unavailable, with the gap and the wrap period named."""
    root = _small_range_zone(tmp_path, monkeypatch)
    writer = CounterWriter(root, steps=500, stall_at=250, stall_s=0.3)
    session = open_session(["cpu"], idle_s=0)
    with session:
        session.start()
        writer.start()
        writer.join()
        readings, timeline = session.stop(samples=100)
    assert writer.stalled
    (package,) = readings
    assert package.source == "unavailable"
    assert package.energy_j is None and package.energy_j_per_sample is None
    assert package.details["long_gaps"] >= 1
    assert package.details["max_read_gap_s"] >= 0.3
    assert "exceed the counter's wrap period of 0.08 s" in package.note
    assert f"the longest {package.details['max_read_gap_s']:.3g} s" in package.note
    assert "wraps may have been missed" in package.note
    assert "package-0" not in timeline  # no timeline from a mis-counted series


def test_update_period_nominal_when_the_poll_only_bounds_it(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meter = rapl.open_cpu_meter(interval_s=0.01)
    assert meter is not None
    assert meter.update_period_s() == rapl.NOMINAL_UPDATE_PERIOD_S
    # A counter the hardware updates every millisecond, like a real one, whatever the load:
    # its value a function of the time it is read (a writer thread, starved for tens of ms
    # under a load of 25, made the poll see an unchanged counter and measure a period).
    real_read_int = powercap.read_int
    t0 = time.monotonic()

    def read_int(path: Path) -> int:
        if path.name == "energy_uj":
            return 1_000_000 + 1_000 * int((time.monotonic() - t0) / 0.001)
        return real_read_int(path)

    monkeypatch.setattr(powercap, "read_int", read_int)
    try:
        meter.start()
        time.sleep(0.3)
        outputs = meter.stop()
    finally:
        meter.close()
    package = outputs[0].reading
    period = package.details["update_period"]
    assert period["nominal"] is True and period["period_s"] == rapl.NOMINAL_UPDATE_PERIOD_S
    assert period["upper_bound_s"] == pytest.approx(0.01, rel=0.5)
    assert "upper bound" in period["note"]
    assert package.window_s is not None
    assert package.details["sensor_updates"] == int(package.window_s / 1e-3)
    assert meter.update_period_s() == rapl.NOMINAL_UPDATE_PERIOD_S


def test_update_period_measured_when_the_counter_updates_slower_than_the_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "powercap"
    make_zone(root, "intel-rapl:0", "package-0", 0)
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
    meter = rapl.open_cpu_meter(interval_s=0.002)
    assert meter is not None
    meter.start()
    t0 = time.monotonic()
    for k in range(1, 26):  # the counter steps every 40 ms
        time.sleep(max(0.0, t0 + 0.04 * k - time.monotonic()))
        set_counter(root, "intel-rapl:0", 50_000 * k)
    outputs = meter.stop()
    meter.close()
    package = outputs[0].reading
    period = package.details["update_period"]
    assert "nominal" not in period and period["upper_bound"] is False
    assert period["period_s"] == pytest.approx(0.04, rel=0.1)
    assert package.details["sensor_updates"] == pytest.approx(25, abs=2)
    assert meter.update_period_s() == pytest.approx(0.04, rel=0.1)
