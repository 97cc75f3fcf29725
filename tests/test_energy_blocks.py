"""Issue 46: energy per sample under block timing divides by steps, never by blocks.

Where steps are timed in blocks of k (JAX's queued blocks, torch CUDA's device events), a
record holds one time a block; the samples behind the energy window are still every step's.
A JAX run of N steps in N/k blocks that divided its window's energy by the blocks reported
k times the energy per sample (200 steps in 34 blocks: 0.0305 J/sample instead of 0.0052),
and no test failed. Here the energy comes from a fake RAPL counter advanced at a known
power (the sensor boundary), and the expected figure is derived from the run's own step
count: energy / (steps x batch).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from accelbench.execution.measure import Timings
from accelbench.execution.metering import window_readings
from accelbench.result import EnergyReading
from accelbench.spec import RunSpec
from tests.test_energy_window import POWER_W, PowercapWriter, writer  # noqa: F401


class FakeSession:
    """The meter session's stop() at its boundary: the samples it was told, and a
    reading of ``energy_j`` divided by them, as the real one does."""

    def __init__(self, energy_j: float) -> None:
        self.energy_j = energy_j
        self.samples: list[int] = []

    def stop(self, samples: int) -> tuple[tuple[EnergyReading, ...], dict[str, Any]]:
        self.samples.append(samples)
        reading = EnergyReading(device="cpu", scope="cpu-package", source="counter",
                                energy_j=self.energy_j,
                                energy_j_per_sample=self.energy_j / samples)
        return (reading,), {}


def _readings(timings: Timings, batch: int, energy_j: float) -> tuple[FakeSession,
                                                                       EnergyReading]:
    spec = RunSpec(workload="lstm", size="tiny", batch_size=batch)
    session = FakeSession(energy_j)
    readings, _ = window_readings(spec, None, session, None,  # type: ignore[arg-type]
                                  timings, {}, batch, lambda: None)
    [reading] = readings
    return session, reading


def test_a_window_of_blocks_counts_the_samples_of_every_step() -> None:
    # 200 steps in 34 blocks (33 of 6, one of 2), batch 8: 1,600 samples, not 272.
    blocks = (6,) * 33 + (2,)
    timings = Timings(warmup_times_s=(0.01,), times_s=(0.01,) * 34,
                      stop_reason="iterations", block_steps=blocks, block_size=6)
    assert timings.steps == 200 and len(timings.times_s) == 34
    session, reading = _readings(timings, batch=8, energy_j=8.32)
    assert session.samples == [1600]
    assert reading.energy_j_per_sample == pytest.approx(8.32 / 1600)  # 0.0052 J/sample


def test_one_step_a_time_counts_one_step_a_time() -> None:
    timings = Timings(warmup_times_s=(), times_s=(0.01,) * 50, stop_reason="iterations")
    assert timings.steps == 50 and timings.steps_per_block == 1
    session, _ = _readings(timings, batch=4, energy_j=1.0)
    assert session.samples == [200]


def test_a_refused_window_withdraws_the_figure_and_says_why() -> None:
    timings = Timings(warmup_times_s=(), times_s=(0.01,) * 5, stop_reason="iterations",
                      energy_short="an exact --iterations 5 count")
    _, reading = _readings(timings, batch=4, energy_j=1.0)
    assert reading.source == "unavailable" and reading.energy_j_per_sample is None
    assert "an exact --iterations 5 count" in (reading.note or "")


def test_a_jax_run_in_blocks_divides_its_energy_by_steps(
        tmp_path: Path, writer: PowercapWriter) -> None:  # noqa: F811
    """A real JAX run timed in blocks (its step is tiny, so k > 1), measured against a RAPL
    counter advanced at 40 W: the energy per sample is the window's energy over the
    samples of all its steps."""
    from accelbench import api

    r = api.run("lstm", size="tiny", framework="jax", max_time=1.0, min_iterations=3,
                target_ci=0.5, idle_s=0, store=False)
    assert r.status == "ok", r.error
    st = r.stats
    assert st is not None and st.steps_per_block > 1, st
    steps = st.n
    blocks = len(r.iteration_times_s)
    assert steps == sum(st.block_steps) and steps > blocks
    [pkg] = r.primary_energy
    assert pkg.source == "counter" and pkg.energy_j is not None and pkg.window_s
    # The counter's truth: 40 W over the window.
    assert pkg.energy_j / pkg.window_s == pytest.approx(POWER_W, rel=0.05)
    samples = steps * r.samples_per_step
    assert pkg.energy_j_per_sample == pytest.approx(pkg.energy_j / samples, rel=1e-9)
    assert r.energy_j_per_sample == pytest.approx(pkg.energy_j / samples, rel=1e-9)


# -- the rest of execution/metering.py, by value ------------------------------------------


class Ranks:
    """A rank group at its boundary: MAX over ranks is the max of the values every rank
    would give (here: this rank's and the others' ``periods``)."""

    def __init__(self, others: list[float]) -> None:
        self.others = others

    def max_all(self, values: list[float]) -> list[float]:
        return [max([*values, *self.others])]


def test_all_ranks_agree_on_the_slowest_sensors_window() -> None:
    from accelbench.execution.metering import agreed_window
    from accelbench.meters.updates import EnergyWindow

    mine = EnergyWindow.for_period(0.1)
    agreed = agreed_window(Ranks([0.5]), mine)  # type: ignore[arg-type]
    assert agreed == EnergyWindow.for_period(0.5)
    assert agreed_window(Ranks([0.0]), mine) == mine  # type: ignore[arg-type]
    # A rank without sensors takes the others' window; nobody with sensors: no window.
    assert agreed_window(Ranks([0.5]), None) == EnergyWindow.for_period(0.5)  # type: ignore[arg-type]
    assert agreed_window(Ranks([0.0]), None) is None  # type: ignore[arg-type]


def test_window_facts_are_kept_with_the_reading() -> None:
    from accelbench.execution.metering import with_window_facts

    reading = EnergyReading(device="cpu", scope="cpu-package", source="counter",
                            energy_j=1.0, details={"kept": 1})
    ext = {"from_iterations": 3, "to_iterations": 40, "rule": "r"}
    timings = Timings(warmup_times_s=(), times_s=(0.1,) * 40, stop_reason="iterations",
                      energy_extension=ext)
    out = with_window_facts(reading, {"waited_s": 2.0}, timings)
    assert out.details == {"kept": 1, "settle": {"waited_s": 2.0}, "window_extension": ext}
    plain = Timings(warmup_times_s=(), times_s=(0.1,), stop_reason="iterations")
    assert with_window_facts(reading, {}, plain).details == {"kept": 1}


def test_no_energy_says_so_for_each_device_kind() -> None:
    from accelbench.execution.metering import not_measured

    for device, scope in (("cpu", "cpu-package"), ("tpu:0", "tpu"), ("cuda:0", "gpu")):
        r = not_measured(RunSpec(workload="lstm", size="tiny", batch_size=4, device=device))
        assert (r.device, r.scope, r.source) == (device, scope, "unavailable")
        assert r.note == "energy not measured: --no-energy"
        assert r.energy_j_per_sample is None


def test_trials_are_asked_for_only_past_one() -> None:
    from accelbench.spec import MeterOptions

    called: list[int] = []
    timings = Timings(warmup_times_s=(), times_s=(0.01,) * 10, stop_reason="iterations")
    spec = RunSpec(workload="lstm", size="tiny", batch_size=2,
                   meters=MeterOptions(energy_trials=1))
    session = FakeSession(2.0)
    readings, _ = window_readings(spec, None, session, None,  # type: ignore[arg-type]
                                  timings, {}, 2, lambda: called.append(1))
    assert called == [] and session.samples == [20]
    # Two trials without a power sensor: the first window's reading, saying why.
    spec2 = RunSpec(workload="lstm", size="tiny", batch_size=2,
                    meters=MeterOptions(energy_trials=2))
    readings, _ = window_readings(spec2, None, FakeSession(2.0), None,  # type: ignore[arg-type]
                                  timings, {}, 2, lambda: called.append(1))
    assert called == [1]
    [r] = readings
    assert r.energy_j_per_sample == pytest.approx(0.1)
    assert "--energy-trials 2 not run: no power sensor" in (r.note or "")


class CountingStep:
    def __init__(self) -> None:
        self.steps = 0
        self.syncs = 0

    def step(self) -> None:
        self.steps += 1

    def synchronize(self) -> None:
        self.syncs += 1


def test_run_for_runs_synchronised_steps_for_the_time_asked() -> None:
    from accelbench.execution.metering import run_for

    step = CountingStep()
    run = run_for(step)  # type: ignore[arg-type]
    run(0.02)
    assert step.steps >= 1 and step.syncs == step.steps
    before = step.steps
    run(0.0)
    assert step.steps == before  # no time asked: no step


class TrialSession(FakeSession):
    """A session whose every window reads ``energy_j`` more (start() opens one)."""

    def __init__(self, energy_j: float) -> None:
        super().__init__(energy_j)
        self.starts = 0

    def start(self) -> None:
        self.starts += 1


def test_more_trials_run_k_minus_one_windows_after_the_first() -> None:
    from accelbench.execution.metering import more_trials
    from accelbench.meters.updates import EnergyWindow
    from accelbench.spec import MeterOptions

    spec = RunSpec(workload="lstm", size="tiny", batch_size=2,
                   meters=MeterOptions(energy_trials=3))
    window = EnergyWindow(min_s=0.0, min_steps=4, update_period_s=0.001)
    session = TrialSession(1.0)
    step = CountingStep()
    first = (EnergyReading(device="cpu", scope="cpu-package", source="counter",
                           energy_j=1.0, energy_j_per_sample=0.125),)
    [combined] = more_trials(spec, step, session, window, first)  # type: ignore[arg-type]
    assert session.starts == 2 and step.steps == 8  # two windows of four steps
    assert session.samples == [8, 8]  # batch 2 x 4 steps each
    trials = combined.details["trials"]
    assert len(trials) == 3
    assert trials[0]["delay_s"] == 0.0  # the first trial is the measured window itself
    assert all(0.0 <= t["delay_s"] <= 0.001 for t in trials[1:])


def test_the_meters_of_a_gpu_case_read_its_gpu_by_uuid_and_the_host(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """meter_session's choice of sensors, with the backend and the session opener faked at
    their boundary: a GPU case reads its GPU (by UUID) and the host CPU."""
    import accelbench.backends
    import accelbench.meters
    import accelbench.meters.registry
    from accelbench.execution.metering import meter_session

    opened: list[tuple[list[str], dict[str, Any]]] = []

    class Backend:
        def device_uuid(self, device: str) -> str | None:
            return {"cuda:0": "GPU-1234"}.get(device)

    monkeypatch.setattr(accelbench.backends, "get_backend", lambda name: Backend())
    monkeypatch.setattr(accelbench.meters.registry, "open_node_meter", lambda opts: None)
    monkeypatch.setattr(accelbench.meters, "open_session",
                        lambda devices, **kw: opened.append((devices, kw)) or "session")
    gpu = RunSpec(workload="lstm", size="tiny", batch_size=4, device="cuda:0")
    assert meter_session(gpu) == "session"
    cpu = RunSpec(workload="lstm", size="tiny", batch_size=4, device="cpu")
    assert meter_session(cpu) == "session"
    (gpu_devices, gpu_kw), (cpu_devices, cpu_kw) = opened
    assert gpu_devices == ["cuda:0", "cpu"] and gpu_kw["gpu_uuids"] == {"cuda:0": "GPU-1234"}
    assert gpu_kw["device_names"] is None and gpu_kw["extra"] == []
    assert cpu_devices == ["cpu"] and cpu_kw["gpu_uuids"] is None


def test_torch_cuda_event_blocks_divide_energy_by_steps() -> None:
    """torch on CUDA times blocks with device events (EventBlocks); here the events read a
    fake device clock (the vendor boundary) on which each step takes 2 ms. 200 steps in
    blocks: the energy of the window is divided over 200 steps' samples."""
    from accelbench.backends.torch.step import EventBlocks
    from accelbench.execution.measure import Loop, run_loop
    from accelbench.spec import MeasurementPolicy

    clock = {"ms": 0.0}

    class Event:
        t = 0.0

        def record(self, stream: object = None) -> None:
            self.t = clock["ms"]

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, other: Event) -> float:
            return other.t - self.t

    def step() -> None:
        clock["ms"] += 2.0

    policy = MeasurementPolicy(iterations=200, warmup_min=3, warmup_max=3)
    timings = run_loop(Loop(step, lambda: None, policy, 8, blocks=EventBlocks(step, Event)))
    assert timings.steps == 200 and timings.steps_per_block > 1
    assert len(timings.times_s) < 200 and sum(timings.block_steps) == 200
    assert timings.times_s[0] == pytest.approx(0.002)  # the per-step mean of a block
    assert timings.step_times_s == pytest.approx((0.002,) * 200)
    session, reading = _readings(timings, batch=8, energy_j=16.0)
    assert session.samples == [1600]
    assert reading.energy_j_per_sample == pytest.approx(0.01)


def test_more_trials_cool_down_between_trials_on_the_simulated_clock() -> None:
    from accelbench.execution.metering import more_trials
    from accelbench.meters import clock
    from accelbench.meters.updates import EnergyWindow
    from accelbench.spec import MeterOptions
    from tests.sensor_sim import SimClock

    spec = RunSpec(workload="lstm", size="tiny", batch_size=2,
                   meters=MeterOptions(energy_trials=3, cooldown_s=30.0))
    window = EnergyWindow(min_s=0.0, min_steps=4, update_period_s=0.001)
    first = (EnergyReading(device="cpu", scope="cpu-package", source="counter",
                           energy_j=1.0, energy_j_per_sample=0.125),)
    sim = SimClock(t0_s=0.0)
    clock.use_simulated_time(sim)
    wall = time.monotonic()
    try:
        [combined] = more_trials(spec, CountingStep(), TrialSession(1.0), window,  # type: ignore[arg-type]
                                 first)
    finally:
        clock.use_simulated_time(None)
    delays = [t["delay_s"] for t in combined.details["trials"][1:]]
    # Two later trials, each after 30 s of cooldown and its random delay: simulated.
    assert sim.now() == pytest.approx(60.0 + sum(delays))
    assert time.monotonic() - wall < 10.0  # never slept the minute
    assert combined.details["cooldown_s"] == 30.0
    assert "waited 30 s (--cooldown-s) before each of the 2 later energy trials" in combined.note
