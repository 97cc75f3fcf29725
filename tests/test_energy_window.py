"""Energy windows long enough to mean something, energy trials, thermal settle, boundaries.

The measurement loop and the combination of trials are tested on their own; the whole
path (worker, meters, store) runs against a fake powercap tree whose counter a thread in
this process advances at a known power: the vendor boundary, nothing above it faked.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pytest

from accelbench.execution.measure import Loop, run_loop
from accelbench.meters import clear_availability_cache, open_session
from accelbench.meters.session import refuse_energy
from accelbench.meters.trials import DEFAULT_PHASE_S, combine_trials, trial_delay_s
from accelbench.meters.updates import (
    MIN_SENSOR_UPDATES,
    MIN_WINDOW_S,
    MIN_WINDOW_STEPS,
    EnergyWindow,
)
from accelbench.report.compare import ratios
from accelbench.report.rows import energy_text
from accelbench.result import EnergyReading, Result
from accelbench.spec import MeasurementPolicy, MeterOptions, RunSpec
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.sink_fakes import zone_tree

# -- the measurement loop ----------------------------------------------------------------


def _sleep_step(seconds: float = 0.002):
    return lambda: time.sleep(seconds)


def _noop() -> None:
    return None


def test_window_is_extended_past_the_timing_policy() -> None:
    window = EnergyWindow(min_s=0.3, min_steps=40, update_period_s=0.001)
    # Adaptive: stops at 3 on the CI, or at 0.05 s whatever the load; never at 40 steps.
    policy = MeasurementPolicy(target_ci=0.5, min_iterations=3, max_time_s=0.05,
                               warmup_min=1, warmup_max=1)
    t = run_loop(Loop(_sleep_step(), _noop, policy, 1, energy_window=window))
    # Every step of the extension really ran and was timed (each sleeps 2 ms); the window
    # (wall time, the loop's own time between steps included) reached its 0.3 s.
    assert len(t.times_s) >= 40 and min(t.times_s) >= 0.002
    assert t.stop_reason in ("target_ci", "max_time") and not t.energy_short
    ext = t.energy_extension
    assert ext is not None and 3 <= ext["from_iterations"] < 40
    assert ext["to_iterations"] == len(t.times_s) and ext["to_s"] >= 0.3
    assert any(f"extended for energy from {ext['from_iterations']} iterations" in n
               for n in t.notes)


def test_an_exact_count_is_never_extended() -> None:
    window = EnergyWindow(min_s=0.3, min_steps=40, update_period_s=0.001)
    policy = MeasurementPolicy(iterations=3, warmup_min=1, warmup_max=1)
    t = run_loop(Loop(_sleep_step(), _noop, policy, 1, energy_window=window))
    assert len(t.times_s) == 3 and t.stop_reason == "iterations"
    assert t.energy_short.startswith("--iterations 3 ran ")
    assert "at least 0.3 s and 40 steps" in t.energy_short
    assert "drop --iterations or use --target-ci / --max-time" in t.energy_short
    assert not any("extended for energy" in n for n in t.notes)
    ext = t.energy_extension
    assert ext is not None and ext["from_iterations"] == ext["to_iterations"] == 3


def test_failed_meters_do_not_extend_the_window() -> None:
    # Every sensor failed: the policy's stop (at most 5 steps) stands, without a figure.
    window = EnergyWindow(min_s=0.0, min_steps=1000, update_period_s=1.0)
    policy = MeasurementPolicy(target_ci=0.5, min_iterations=3, max_iterations=5,
                               warmup_min=1, warmup_max=1)
    dead = lambda: (None, "node: every power read failed so far (exit 1)")  # noqa: E731
    t = run_loop(Loop(_sleep_step(), _noop, policy, 1, energy_window=window, live_window=dead))
    assert 3 <= len(t.times_s) <= 5 and t.energy_extension is None and not t.energy_short
    assert any("failed meters do not extend the energy window (node: every power read "
               "failed so far (exit 1)): no working sensor is left" in n for n in t.notes)
    # One of two failed: the window is the working one's (10 steps), not the failed's 1000.
    live = lambda: (EnergyWindow(0.0, 10, 0.001), "node: sampling stopped")  # noqa: E731
    t = run_loop(Loop(_sleep_step(), _noop, policy, 1, energy_window=window, live_window=live))
    assert len(t.times_s) == 10 and t.energy_extension is not None
    assert any("sized from the sensors still working" in n for n in t.notes)


def test_a_meter_failing_during_the_extension_ends_it() -> None:
    window = EnergyWindow(min_s=0.0, min_steps=1000, update_period_s=1.0)
    policy = MeasurementPolicy(target_ci=0.5, min_iterations=3, max_iterations=5,
                               warmup_min=1, warmup_max=1)
    calls = [0]

    def live() -> tuple[EnergyWindow | None, str]:
        calls[0] += 1  # sized once per step past the policy's stop; fails at the 20th
        return (window, "") if calls[0] < 20 else (None, "node: sampling stopped (timeout)")

    t = run_loop(Loop(_sleep_step(), _noop, policy, 1, energy_window=window, live_window=live))
    ext = t.energy_extension
    assert ext is not None and len(t.times_s) == ext["from_iterations"] + 19
    assert any("(node: sampling stopped (timeout))" in n for n in t.notes)


def test_no_window_leaves_the_policy_alone() -> None:
    policy = MeasurementPolicy(iterations=3, warmup_min=1, warmup_max=1)
    t = run_loop(Loop(_sleep_step(), _noop, policy, 1, energy_window=None))
    assert len(t.times_s) == 3 and t.energy_extension is None and not t.energy_short


def test_a_window_already_long_enough_is_not_extended() -> None:
    window = EnergyWindow(min_s=0.0, min_steps=2, update_period_s=0.001)
    policy = MeasurementPolicy(iterations=5, warmup_min=1, warmup_max=1)
    t = run_loop(Loop(_sleep_step(), _noop, policy, 1, energy_window=window))
    assert len(t.times_s) == 5 and t.energy_extension is None


def test_strict_max_time_refuses_the_extension() -> None:
    window = EnergyWindow(min_s=5.0, min_steps=32, update_period_s=0.1)
    policy = MeasurementPolicy(max_time_s=0.2, strict_max_time=True, min_iterations=3,
                               warmup_min=1, warmup_max=1)
    t0 = time.perf_counter()
    t = run_loop(Loop(_sleep_step(0.01), _noop, policy, 1, energy_window=window))
    # Not extended to the window's 32 steps and 5 s: counted, not timed.
    assert len(t.times_s) < 32 and sum(t.times_s) < 5.0
    assert time.perf_counter() - t0 < 60, "a 0.2 s strict cap ran a minute: a hang"
    assert "--strict-max-time 0.2 s refused to extend it" in t.energy_short
    assert "at least 5 s and 32 steps" in t.energy_short


def test_the_rule_from_the_slowest_sensor() -> None:
    fast = EnergyWindow.for_period(0.001)
    assert (fast.min_s, fast.min_steps) == (MIN_WINDOW_S, MIN_WINDOW_STEPS)
    slow = EnergyWindow.for_period(1.0)  # a 1 Hz node meter: 50 updates = 50 s
    assert slow.min_s == pytest.approx(MIN_SENSOR_UPDATES * 1.0)
    assert not slow.met(1000, 49.0) and slow.met(32, 50.0) and not slow.met(31, 60.0)


# -- trials ------------------------------------------------------------------------------


def _reading(per_sample: float | None, source: str = "counter", samples: int = 100,
             device: str = "cuda:0", scope: str = "gpu", window_s: float = 5.0,
             note: str = "") -> EnergyReading:
    energy = None if per_sample is None else per_sample * samples
    return EnergyReading(
        device=device, scope=scope, source=source,  # type: ignore[arg-type]
        energy_j=energy, energy_j_per_sample=per_sample, window_s=window_s,
        avg_power_w=None if energy is None else energy / window_s, note=note,
    )


def test_trials_combine_to_the_median_with_the_spread() -> None:
    trials = [[_reading(v), _reading(0.5, device="package-0", scope="cpu-package")]
              for v in (1.0, 1.3, 1.1)]
    gpu, cpu = combine_trials(trials, [0.0, 0.05, 0.02])
    assert gpu.energy_j_per_sample == pytest.approx(1.1)
    assert gpu.energy_j == pytest.approx(340.0) and gpu.window_s == pytest.approx(15.0)
    assert gpu.avg_power_w == pytest.approx(340.0 / 15.0)
    spread = gpu.details["trials_spread"]
    assert spread["min"] == 1.0 and spread["max"] == 1.3
    assert spread["range_rel"] == pytest.approx(0.3 / 1.1)
    assert [t["delay_s"] for t in gpu.details["trials"]] == [0.0, 0.05, 0.02]
    assert "median of 3 trial(s)" in gpu.note
    assert cpu.device == "package-0" and cpu.energy_j_per_sample == pytest.approx(0.5)


def test_an_unusable_trial_is_left_out_and_counted() -> None:
    trials = [[_reading(1.0)], [_reading(None, source="unavailable", note="counter lost")],
              [_reading(2.0)]]
    [r] = combine_trials(trials)
    assert r.energy_j_per_sample == pytest.approx(1.5)
    assert "1 of 3 trials gave no usable figure" in r.note and "counter lost" in r.note


def test_trials_of_mixed_sources_take_the_less_direct_label() -> None:
    [r] = combine_trials([[_reading(1.0)], [_reading(1.0, source="integrated_samples")]])
    assert r.source == "integrated_samples" and "different sources" in r.note


def test_no_usable_trial_is_unavailable_never_zero() -> None:
    [r] = combine_trials([[_reading(None, source="unavailable")]] * 2)
    assert r.source == "unavailable" and r.energy_j_per_sample is None
    assert "none of 2 energy trials" in r.note


def test_one_trial_is_unchanged_and_delays_stay_within_one_period() -> None:
    one = [_reading(1.0)]
    assert combine_trials([one]) == tuple(one)
    rng = random.Random(0)
    delays = [trial_delay_s(0.1, rng) for _ in range(200)]
    assert all(0 <= d < 0.1 for d in delays) and max(delays) > 0.08
    assert all(0 <= trial_delay_s(None, rng) < DEFAULT_PHASE_S for _ in range(20))


def test_refused_energy_withdraws_sensor_figures_only() -> None:
    counter = _reading(1.0)
    estimate = _reading(2.0, source="estimate", device="cpu", scope="cpu-package")
    c, e = refuse_energy([counter, estimate], "window too short")
    assert c.source == "unavailable" and c.energy_j is None and c.energy_j_per_sample is None
    assert c.note.startswith("window too short") and c.details["withdrawn"]["energy_j"] == 100.0
    assert e == estimate


# -- boundaries --------------------------------------------------------------------------


def _result(boundary: str, readings: list[EnergyReading], device: str = "cuda:0") -> Result:
    meters = MeterOptions(boundary=boundary, node_meter_cmd="echo 1")  # type: ignore[arg-type]
    spec = RunSpec(workload="lstm", size="tiny", batch_size=4, device=device, meters=meters)
    return Result(id="x", spec=spec, status="ok", sample_unit="sentence", samples_per_step=4,
                  energy=tuple(readings))


GPU = _reading(1.0)
PKG = _reading(0.25, device="package-0", scope="cpu-package")
DRAM = _reading(0.05, device="dram-0", scope="dram")
NODE = _reading(2.0, source="integrated_samples", device="node", scope="node")


def test_each_boundary_adds_its_own_readings() -> None:
    readings = [GPU, PKG, DRAM, NODE]
    assert _result("device", readings).energy_j_per_sample == pytest.approx(1.0)
    assert _result("device+host", readings).energy_j_per_sample == pytest.approx(1.3)
    assert _result("node", readings).energy_j_per_sample == pytest.approx(2.0)
    assert _result("node", readings).summary()["energy_boundary"] == "node"
    cpu_case = _result("device", readings, device="cpu")
    assert cpu_case.energy_j_per_sample == pytest.approx(0.3)


def test_a_boundary_missing_a_part_has_no_figure() -> None:
    host_lost = _reading(None, source="unavailable", device="package-0", scope="cpu-package")
    assert _result("device+host", [GPU, host_lost]).energy_j_per_sample is None
    assert _result("node", [GPU, PKG]).energy_j_per_sample is None


def test_boundaries_are_shown_and_never_divided() -> None:
    assert energy_text(1.0, "measured") == "1 J"
    assert energy_text(1.0, "measured", "node") == "1 J (node)"
    assert energy_text(1.0, "estimated", "device+host") == "1 J (est., device+host)"
    times = [0.1] * 10
    _, energy = ratios(times, 4, times, 4, energy_a_j_per_sample=1.0,
                       energy_b_j_per_sample=2.0, boundaries=("device", "node"))
    assert energy.value is None and "boundaries differ (A: device, B: node)" in energy.note
    _, same = ratios(times, 4, times, 4, energy_a_j_per_sample=1.0, energy_b_j_per_sample=2.0,
                     boundaries=("node", "node"))
    assert same.value == pytest.approx(2.0)


def test_boundary_options_are_validated() -> None:
    with pytest.raises(Exception, match="--boundary node needs a node meter"):
        MeterOptions(boundary="node")
    with pytest.raises(Exception, match="unknown --boundary 'rack'"):
        MeterOptions(boundary="rack")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="--energy-trials needs energy measurement"):
        MeterOptions(enabled=False, energy_trials=3)
    with pytest.raises(Exception, match="--node-meter cmd needs --node-meter-cmd"):
        MeterOptions(node_meter="cmd")
    assert MeterOptions(node_meter_cmd="echo 5").node_meter == "cmd"


# -- a fake powercap tree advanced at a known power ---------------------------------------

POWER_W = 40.0


class PowercapWriter(threading.Thread):
    """Advances ``energy_uj`` of one package zone at ``power_w(t)``, atomically, every ms."""

    def __init__(self, zone: Path, power_w: float | None = None, ramp_w_per_s: float = 0.0):
        super().__init__(daemon=True)
        self.zone, self.base_w, self.ramp = zone, power_w or POWER_W, ramp_w_per_s
        self.halt = threading.Event()
        self.t0 = time.monotonic()
        self.energy_uj = 0.0

    def run(self) -> None:
        last = self.t0
        while not self.halt.is_set():
            now = time.monotonic()
            watts = self.base_w + self.ramp * (now - self.t0)
            self.energy_uj += watts * (now - last) * 1e6
            last = now
            tmp = self.zone / "energy_uj.tmp"
            tmp.write_text(f"{int(self.energy_uj)}\n")
            os.replace(tmp, self.zone / "energy_uj")
            time.sleep(0.001)


@pytest.fixture()
def writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root, zone = zone_tree(tmp_path)
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
    clear_availability_cache()
    w = PowercapWriter(zone)
    w.start()
    yield w
    w.halt.set()
    w.join()
    clear_availability_cache()


def test_settle_waits_for_steady_power(writer: PowercapWriter) -> None:
    with open_session(["cpu"], idle_s=0) as session:
        assert session.energy_window() is not None
        done = session.settle(time.sleep, 10.0, chunk_s=0.3)
    assert done["settled"] is True and done["settle_s"] < 5.0
    assert all(abs(p - POWER_W) < 0.1 * POWER_W for p in done["power_w"])


def test_settle_gives_up_on_drifting_power_within_its_bound(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    root, zone = zone_tree(tmp_path)
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(root))
    clear_availability_cache()
    w = PowercapWriter(zone, power_w=20.0, ramp_w_per_s=20.0)  # +100% per second at first
    w.start()
    try:
        with open_session(["cpu"], idle_s=0) as session:
            done = session.settle(time.sleep, 1.5, chunk_s=0.25)
    finally:
        w.halt.set()
        w.join()
        clear_availability_cache()
    assert done["settled"] is False and 1.4 <= done["settle_s"] < 4.0  # bounded by 1.5 s
    assert done["power_w"][-1] > done["power_w"][0] * 1.3


def test_settle_without_any_sensor_says_so() -> None:
    with open_session(["cpu"], idle_s=0) as session:  # no powercap here, no TDP
        done = session.settle(time.sleep, 5.0)
    assert done["settled"] is False and "no power or temperature sensor" in done["reason"]


# -- end to end ----------------------------------------------------------------------------


def test_a_short_run_is_extended_for_energy_and_trials_add_windows(
    tmp_path: Path, writer: PowercapWriter
) -> None:
    db = tmp_path / "r.db"
    # Adaptive (the CI, or 1 s): the policy stops far below the 5 s window.
    p = run_cli("run", "lstm", "--size", "tiny", "--max-time", "1", "--min-iterations", "3",
                "--target-ci", "0.5", "--no-idle", "--energy-trials", "2", "--json", db=db,
                ACCELBENCH_POWERCAP_ROOT=os.environ["ACCELBENCH_POWERCAP_ROOT"])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["energy_source"] == "counter" and out["energy_boundary"] == "device"
    with open_store(str(db)) as st:
        [r] = st.query()
    assert len(r.iteration_times_s) >= MIN_WINDOW_STEPS
    [pkg] = r.primary_energy
    ext = pkg.details["window_extension"]
    assert ext["from_s"] < MIN_WINDOW_S <= ext["to_s"]
    assert ext["to_iterations"] == len(r.iteration_times_s) > ext["from_iterations"] >= 3
    assert any(f"extended for energy from {ext['from_iterations']} iterations" in n
               for n in r.noise["measure_notes"])
    trials = pkg.details["trials"]
    assert len(trials) == 2 and trials[1]["window_s"] >= MIN_WINDOW_S * 0.99
    for t in trials:  # each window's counter energy is the writer's power times its length
        assert t["energy_j"] / t["window_s"] == pytest.approx(POWER_W, rel=0.03)
    assert pkg.window_s >= 2 * MIN_WINDOW_S * 0.99


def test_a_refused_extension_makes_the_energy_unavailable(
    tmp_path: Path, writer: PowercapWriter
) -> None:
    db = tmp_path / "r.db"
    # 2 s: far below the 5 s an energy window needs, so the strict cap refuses the
    # extension. One thread: on a loaded 2-core machine two OpenMP threads wait on each
    # other at every op (a tiny lstm step went from 2 ms to 1.3 s at load 4); one thread
    # keeps a step in milliseconds, so the 3 iterations fit hundreds of times over.
    p = run_cli("run", "lstm", "--size", "tiny", "--threads", "1", "--max-time", "2",
                "--strict-max-time", "--min-iterations", "3", "--no-idle", "--json", db=db,
                ACCELBENCH_POWERCAP_ROOT=os.environ["ACCELBENCH_POWERCAP_ROOT"])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["energy_j_per_sample"] is None and out["energy_source"] == "unavailable"
    assert any("refused to extend it" in n for n in out["energy_notes"])


def test_an_exact_count_runs_exactly_and_says_why_energy_is_missing(
    tmp_path: Path, writer: PowercapWriter
) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--iterations", "10", "--no-idle",
                db=db, ACCELBENCH_POWERCAP_ROOT=os.environ["ACCELBENCH_POWERCAP_ROOT"])
    assert p.returncode == 0, p.stderr
    assert "--iterations 10 ran" in " ".join(p.stdout.split())  # run's energy lines
    js = run_cli("results", "--json", db=db)
    [out] = json.loads(js.stdout)
    assert out["energy_j_per_sample"] is None and out["energy_source"] == "unavailable"
    assert out["energy_notes"][0].startswith("--iterations 10 ran ")
    with open_store(str(db)) as st:
        [r] = st.query()
    assert len(r.iteration_times_s) == 10 and r.stats is not None
    assert r.stats.stop_reason == "iterations"
    [pkg] = r.primary_energy
    assert pkg.source == "unavailable" and pkg.details["withdrawn"]["source"] == "counter"
    assert pkg.note.startswith("--iterations 10 ran ")
    assert "at least 5 s and 32 steps" in pkg.note and "drop --iterations" in pkg.note
    assert not any("extended for energy" in n for n in r.noise["measure_notes"])


def test_a_run_whose_meters_all_fail_is_not_extended(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    # A 1 Hz node meter would need a 50 s window; its every read fails.
    p = run_cli("run", "lstm", "--size", "tiny", "--threads", "1", "--max-time", "1",
                "--min-iterations", "3", "--node-meter-cmd", "exit 3", "--boundary", "node",
                "--no-idle", "--json",
                db=db, ACCELBENCH_POWERCAP_ROOT=str(tmp_path / "none"))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["energy_j_per_sample"] is None and out["energy_source"] == "unavailable"
    with open_store(str(db)) as st:
        [r] = st.query()
    assert r.stats is not None and r.stats.stop_reason in ("target_ci", "max_time")
    assert sum(r.iteration_times_s) < 10.0  # the 1 s policy, not the 50 s window
    [node] = r.primary_energy
    assert node.device == "node" and "exited with status 3" in node.note
    assert "window_extension" not in node.details
    assert any("failed meters do not extend the energy window (node: every power read "
               "failed so far (node meter command 'exit 3' exited with status 3" in n
               and "no working sensor is left" in n for n in r.noise["measure_notes"])


def test_live_window_leaves_failed_meters_out(writer: PowercapWriter) -> None:
    from accelbench.meters.external import CommandMeter
    from accelbench.meters.session import MeterSession

    with MeterSession([CommandMeter("echo 150", interval_s=0.5)], idle_s=0) as ok:
        ok.start()
        window, why = ok.live_window()
        ok.stop(samples=1)
    assert window is not None and window.min_s == pytest.approx(25.0) and why == ""
    with MeterSession([CommandMeter("exit 3", interval_s=0.5)], idle_s=0) as bad:
        bad.start()
        window, why = bad.live_window()
        bad.stop(samples=1)
    assert window is None and why.startswith("node: every power read failed so far (")
    # RAPL whose counter vanishes mid-window: polling stops on errors, the meter is out.
    with open_session(["cpu"], idle_s=0) as session:
        session.start()
        assert session.live_window() == (EnergyWindow.for_period(0.001), "")
        writer.halt.set()
        writer.join()
        (writer.zone / "energy_uj").unlink()
        deadline = time.monotonic() + 30.0  # 20 failed polls at 0.1 s, on a busy machine
        while session.live_window()[0] is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        window, why = session.live_window()
        session.stop(samples=1)
    assert window is None and why.startswith("cpu: sampling stopped (every RAPL counter")


def test_phase_sensitive_power_trials_are_flagged() -> None:
    samples = [[_reading(v, source="integrated_samples")] for v in (1.0, 1.3, 0.8)]
    [r] = combine_trials(samples)
    assert "WARNING: the trials spread by 50% of the median" in r.note
    [c] = combine_trials([[_reading(v)] for v in (1.0, 1.3, 0.8)])  # counters: no warning
    assert "WARNING" not in c.note


def test_a_node_meter_gives_the_node_boundary_end_to_end(tmp_path: Path) -> None:
    import accelbench

    meters = MeterOptions(node_meter_cmd="echo 150", node_meter_interval_s=0.1,
                          boundary="node", idle_s=0.0)
    r = accelbench.run("lstm", size="tiny", max_time=1, min_iterations=3, target_ci=0.5,
                       meters=meters, db=str(tmp_path / "r.db"))
    assert r.status == "ok" and r.energy_boundary == "node"
    [node] = r.primary_energy
    assert node.device == "node" and node.source == "integrated_samples"
    assert node.avg_power_w == pytest.approx(150.0, rel=0.01)
    # 50 updates of a 10 Hz meter is 5 s: the window was extended to it.
    assert node.window_s is not None and node.window_s >= MIN_WINDOW_S * 0.98
    assert r.energy_j_per_sample == pytest.approx(
        node.energy_j / (len(r.iteration_times_s) * 4), rel=0.01)
    assert any(e.scope == "cpu-package" for e in r.energy)  # the device is still read
    assert energy_text(r.energy_j_per_sample, "measured", r.energy_boundary).endswith("(node)")


@pytest.mark.parametrize(("args", "message"), [
    (["--boundary", "node"], "--boundary node needs a node meter"),
    (["--node-meter", "ipmx"], "unknown meter 'ipmx'; did you mean ipmi?"),
    (["--node-meter", "cmd"], "--node-meter cmd needs --node-meter-cmd"),
    (["--no-energy", "--energy-trials", "2"], "--energy-trials conflicts with --no-energy"),
    (["--energy-trials", "0"], "--energy-trials"),
    (["--cooldown-s", "5"], "--cooldown-s waits between energy trials: it needs "
                            "--energy-trials 2 or more"),
    (["--energy-trials", "2", "--cooldown-s", "-1"], "--cooldown-s"),
])
def test_bad_energy_options_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    p = run_cli("run", "lstm", "--size", "tiny", "--iterations", "3", *args,
                db=tmp_path / "r.db")
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.db").exists()


def test_doctor_on_a_machine_without_sensors(tmp_path: Path) -> None:
    p = run_cli("doctor", "--probe-s", "0", "--json",
                ACCELBENCH_POWERCAP_ROOT=str(tmp_path / "none"))
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["energy_measurable"] is False
    assert all(s["fix"] for s in out["sensors"] if not s["readable"])
