"""``--phases`` with PyTorch: the step split into forward, backward, optimizer (and
communication, input), timed directly and by differential loops, with energy per phase
from a sensor (here a fake powercap tree: the vendor boundary) or ``unavailable``.

Real tiny training steps throughout; the measurements run with short trials
(:class:`PhasePlan`), and no assertion depends on how fast this machine is: times are
checked for presence and consistency, energy against a fake sensor driven per iteration.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import accelbench
from accelbench.backends import get_backend
from accelbench.backends.base import PhaseSteps, phase_steps_of
from accelbench.backends.torch.phases import time_segments
from accelbench.execution.phases import (
    ESTIMATE_NOTE,
    NO_INPUT_NOTE,
    PhaseContext,
    PhasePlan,
    measure_phases,
)
from accelbench.meters import clear_availability_cache, open_session
from accelbench.meters.updates import EnergyWindow
from accelbench.phases import SUM_TOLERANCE_REL, Difference, Phases
from accelbench.result import EnergyReading, Result
from accelbench.spec import MeterOptions, RunSpec
from accelbench.store import open_store
from accelbench.workloads import get_implementation, get_workload, list_workloads
from tests.conftest import FAULTY_PLUGIN, TESTS, run_cli

SHORT = PhasePlan(trials=3, trial_s=0.03, trial_min_iterations=3, attribution_min_s=0.05,
                  attribution_min_steps=5, resamples=500)
TOYFW = str(TESTS / "plugins" / "toyfw.py")


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    clear_availability_cache()
    yield
    clear_availability_cache()
    torch.set_num_threads(before)


def _step(workload: str) -> Any:
    batch = get_workload(workload).default_batch_sizes["tiny"][0]
    spec = RunSpec(workload=workload, size="tiny", batch_size=batch, threads=1,
                   meters=MeterOptions(enabled=False))
    return get_backend("torch").build_step(spec, get_implementation(workload, "torch"))


def _median_step_s(step: Any, n: int = 7) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _check_sum(ph: Phases) -> None:
    """Within the tolerance, or the record says why not."""
    assert ph.sum_rel_diff is not None
    if abs(ph.sum_rel_diff) > SUM_TOLERANCE_REL:
        assert any(n.startswith("the in-step phases' direct times sum to") for n in ph.notes)


# -- the direct timing's logic, on fake clocks (no GPU here) -----------------------------------


def test_time_segments_host_clock_synchronises_at_each_boundary() -> None:
    now = {"t": 0.0, "syncs": 0}

    def run(seconds: float) -> Callable[[], None]:
        return lambda: now.__setitem__("t", now["t"] + seconds)

    def sync() -> None:
        now["syncs"] += 1

    out = time_segments([("forward", run(0.3)), ("backward", run(0.5)),
                         ("optimizer", run(0.1))], synchronize=sync, clock=lambda: now["t"])
    assert out == pytest.approx({"forward": 0.3, "backward": 0.5, "optimizer": 0.1})
    assert now["syncs"] == 4  # before the step and after each phase


def test_time_segments_device_events_wait_once_per_step() -> None:
    device = {"now_ms": 0.0, "waits": 0}
    streams: list[object] = []

    class FakeEvent:
        def record(self, stream: object = None) -> None:
            streams.append(stream)
            self.at = device["now_ms"]

        def synchronize(self) -> None:
            device["waits"] += 1

        def elapsed_time(self, other: FakeEvent) -> float:
            return other.at - self.at

    def run(ms: float) -> Callable[[], None]:
        return lambda: device.__setitem__("now_ms", device["now_ms"] + ms)

    def host_sync() -> None:
        raise AssertionError("events need no host synchronize between phases")

    stream = object()
    out = time_segments([("forward", run(2.0)), ("backward", run(4.0)),
                         ("communication", run(1.5)), ("optimizer", run(0.5))],
                        synchronize=host_sync, new_event=FakeEvent, stream=stream)
    assert out == pytest.approx({"forward": 0.002, "backward": 0.004,
                                 "communication": 0.0015, "optimizer": 0.0005})
    assert device["waits"] == 1 and streams == [stream] * 5


# -- every workload, in process (the build is the cost) ----------------------------------------


@pytest.mark.parametrize("workload", [w.name for w in list_workloads()])
def test_every_workload_splits_its_step_into_phases(workload: str) -> None:
    step = _step(workload)
    pieces = phase_steps_of(step)
    assert isinstance(pieces, PhaseSteps) and "host timers" in pieces.method
    assert pieces.input_copy() is None  # a CPU batch is made where it trains
    _median_step_s(step, 3)  # warm-up
    step_s = _median_step_s(step)
    loss_before = step.loss_value()
    ph = measure_phases(pieces, step_s,
                        PhaseContext(samples_per_step=step.spec.batch_size, plan=SHORT))
    assert [p.name for p in ph.phases] == ["forward", "backward", "optimizer"]
    for p in ph.phases:
        assert p.time_s is not None and p.time_s > 0 and p.in_step
        assert p.time_ci95_s is not None and p.time_ci95_s[0] <= p.time_s <= p.time_ci95_s[1]
        assert p.diff_time is not None and p.diff_time.value is not None
        assert p.diff_time.status in ("measured", "indistinguishable", "negative")
        assert p.agrees is not None
        assert p.energy is not None and p.energy.status == "unavailable"
    assert ph.attribution_steps >= SHORT.attribution_min_steps
    assert [lp.name for lp in ph.loops] == ["forward", "forward_backward", "step"]
    assert all(len(lp.time_s) == SHORT.trials and min(lp.iterations) >= 3 for lp in ph.loops)
    assert NO_INPUT_NOTE in ph.notes
    _check_sum(ph)
    # The measured window's last loss stays the record's.
    assert step.loss_value() == loss_before
    assert Phases.from_dict(json.loads(json.dumps(ph.to_dict()))) == ph


# -- energy from a fake sensor whose reading depends on the loop -------------------------------

#: Joules per iteration of each loop (the fake's truth): the step costs what forward +
#: backward costs, so the optimizer's true energy is zero.
TRUE_J = {"forward": 0.020, "forward_backward": 0.050, "step": 0.050}


class LoopDrivenPackage:
    """A powercap package whose counter advances by the running loop's joules at each of
    its iterations (so a loop's energy per iteration is exact, whatever its speed)."""

    def __init__(self, root: Path) -> None:
        zone = root / "intel-rapl:0"
        zone.mkdir(parents=True)
        (zone / "name").write_text("package-0\n")
        (zone / "max_energy_range_uj").write_text("262143328850\n")
        self.counter = zone / "energy_uj"
        self.uj = 1_000_000
        self.loop = ""
        self._write()

    def _write(self) -> None:
        tmp = self.counter.with_suffix(".tmp")
        tmp.write_text(f"{self.uj}\n")
        os.replace(tmp, self.counter)

    def on_loop(self, name: str) -> None:
        self.loop = name

    def iteration(self) -> None:
        self.uj += round(TRUE_J[self.loop] * 1e6)
        self._write()


class Metered:
    """The real torch pieces, each loop iteration also advancing the fake counter."""

    def __init__(self, pieces: PhaseSteps, fake: LoopDrivenPackage) -> None:
        self._pieces, self._fake = pieces, fake
        self.method = pieces.method

    def timed_step(self) -> dict[str, float]:
        return self._pieces.timed_step()

    def loops(self) -> dict[str, Callable[[], None]]:
        def metered(fn: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                fn()
                self._fake.iteration()
            return run

        return {k: metered(fn) for k, fn in self._pieces.loops().items()}

    def synchronize(self) -> None:
        self._pieces.synchronize()

    def input_copy(self) -> Callable[[], None] | None:
        return self._pieces.input_copy()


def test_energy_per_phase_from_a_sensor_driven_by_the_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = LoopDrivenPackage(tmp_path / "powercap")
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "powercap"))
    step = _step("lstm")
    pieces = phase_steps_of(step)
    assert pieces is not None
    window = EnergyWindow(min_s=0.05, min_steps=5, update_period_s=0.001)
    with open_session(["cpu"], interval_s=0.005, counter_poll_s=0.005, idle_s=0) as session:
        ph = measure_phases(Metered(pieces, fake), None,
                            PhaseContext(samples_per_step=2, session=session, window=window,
                                         on_loop=fake.on_loop, plan=SHORT))
    assert ph.energy_source == "counter", ph.energy_note
    assert "50 updates" in ph.energy_note or "updates of a sensor" in ph.energy_note
    for lp in ph.loops:
        assert lp.energy_j == pytest.approx([TRUE_J[lp.name]] * SHORT.trials, rel=1e-6)
    fwd, bwd, opt = (ph.get(n) for n in ("forward", "backward", "optimizer"))
    assert fwd is not None and bwd is not None and opt is not None
    assert fwd.energy is not None and fwd.energy.status == "measured"
    assert fwd.energy_j == pytest.approx(0.020, rel=0.05)
    assert bwd.energy is not None and bwd.energy.status == "measured"
    assert bwd.energy_j == pytest.approx(0.030, rel=0.05)
    # Zero true energy: shown as indistinguishable from zero, its value kept (not clipped).
    assert opt.energy is not None and opt.energy.status == "indistinguishable"
    assert opt.energy.value is not None and abs(opt.energy.value) < 1e-6
    assert opt.energy.ci95 is not None and "includes 0" in opt.energy.note
    assert ph.sum_rel_diff is None  # no measured step given
    # Each trial's counter reading has a 95% bound (edge + resolution); a phase's is its
    # loops' half-widths added over its energy: positive, and the optimizer's exact zero
    # has none as a share (its absolute half-width said instead).
    for p in (fwd, bwd):
        assert p.energy.rel_95 is not None and 0 < p.energy.rel_95 < 1, p.energy
    assert bwd.energy.rel_95 * 0.030 > fwd.energy.rel_95 * 0.020  # two loops' halves
    assert opt.energy.rel_95 is None or opt.energy.value != 0
    if opt.energy.value == 0:
        assert opt.energy.bound_note.startswith("error bound unavailable as a share")


def _reading(joules_per_sample: float, rel: float | None) -> EnergyReading:
    details = {"uncertainty": {"rel_95": rel}} if rel is not None else {}
    return EnergyReading(device="package-0", scope="cpu-package", source="counter",
                         energy_j=joules_per_sample * 10, energy_j_per_sample=joules_per_sample,
                         details=details)


def test_a_phase_energy_bound_by_hand() -> None:
    from accelbench.execution.phases import BOUND_NONE_NOTE, per_iteration_j, with_bounds

    # A trial: two readings inside the CPU boundary, 0.010 J/sample +- 2% and 0.005 +- 4%,
    # 2 samples a step: (0.010 + 0.005) x 2 = 0.030 J/iteration, half-width
    # (0.010 x 0.02 + 0.005 x 0.04) x 2 = 0.0008 J.
    ctx = PhaseContext(samples_per_step=2)
    joules, _, half = per_iteration_j([_reading(0.010, 0.02), _reading(0.005, 0.04)], ctx)
    assert joules == pytest.approx(0.030) and half == pytest.approx(0.0008)
    # One reading without a bound: the energy stays, its bound is unavailable.
    joules, _, half = per_iteration_j([_reading(0.010, 0.02), _reading(0.005, None)], ctx)
    assert joules == pytest.approx(0.030) and half is None
    # backward = forward_backward - forward: 0.050 - 0.020 = 0.030 J; the loops' mean
    # half-widths (0.002 and 0.001, the unread trial skipped) added: 0.003 J, 10%.
    energies = {"forward": [0.020, 0.020, 0.020], "forward_backward": [0.050, None, 0.050]}
    halves = {"forward": [0.0005, 0.001, 0.0015], "forward_backward": [0.002, None, 0.002]}
    diffs = {"forward": Difference(value=0.020, status="measured"),
             "backward": Difference(value=0.030, status="measured")}
    combos = (("forward", "forward", None), ("backward", "forward_backward", "forward"))
    out = with_bounds(diffs, energies, halves, combos)
    assert out["forward"].rel_95 == pytest.approx(0.001 / 0.020)
    assert out["backward"].rel_95 == pytest.approx(0.003 / 0.030)
    # A trial read without a bound: the phases that use its loop have none, and say why.
    halves["forward"][1] = None
    out = with_bounds(diffs, energies, halves, combos)
    assert out["forward"].rel_95 is None and out["forward"].bound_note == BOUND_NONE_NOTE
    assert out["backward"].rel_95 is None
    # Over ranks (on rank 0): each loop's joules and half-widths summed over the ranks that
    # read a sensor, a rank without one left out; a trial any reader lacks stays None.
    from accelbench.execution.phases import _energies_over_ranks

    class Gathered:  # what a RankGroup's gather hands rank 0: every rank's object, in order
        def __init__(self, others: list[dict]) -> None:
            self.others = others

        def gather(self, obj: dict) -> list[dict]:
            return [obj, *self.others]

    runs = {"forward": [(0.0, 0.020, 0), (0.0, 0.022, 0)]}
    mine_h = {"forward": [0.001, 0.002]}
    rank1 = {"e": {"forward": [0.030, 0.028]}, "h": {"forward": [0.003, None]}}
    no_sensor = {"e": None, "h": None}
    e, h = _energies_over_ranks(runs, mine_h, Gathered([rank1, no_sensor]))  # type: ignore[arg-type]
    assert e == {"forward": [pytest.approx(0.050), pytest.approx(0.050)]}
    assert h == {"forward": [pytest.approx(0.004), None]}
    assert _energies_over_ranks({"forward": [(0.0, None, 0)]}, {},
                                Gathered([no_sensor])) == (None, None)  # type: ignore[arg-type]
    # Stored and read back; a Difference without a bound keeps its old bytes.
    d = dataclasses.replace(diffs["backward"], rel_95=0.1)
    assert Difference.from_dict(json.loads(json.dumps(d.to_dict()))) == d
    assert set(diffs["backward"].to_dict()) == {"value", "ci95", "status", "note"}


def test_an_estimated_energy_gives_no_energy_phases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACCELBENCH_POWERCAP_ROOT", str(tmp_path / "none"))
    step = _step("lstm")
    pieces = phase_steps_of(step)
    assert pieces is not None
    with open_session(["cpu"], idle_s=0, cpu_tdp_w=65.0) as session:
        assert session.energy_window() is None  # a TDP estimate: nothing to size
        ph = measure_phases(pieces, None,
                            PhaseContext(samples_per_step=2, session=session,
                                         window=session.energy_window(), plan=SHORT))
    assert ph.energy_source == "unavailable" and ph.energy_note == ESTIMATE_NOTE
    assert all(p.energy is not None and p.energy.status == "unavailable"
               and p.energy.note == ESTIMATE_NOTE for p in ph.phases)


def test_a_near_deadline_keeps_the_direct_times_and_says_why_no_loops_ran() -> None:
    step = _step("lstm")
    pieces = phase_steps_of(step)
    assert pieces is not None
    ph = measure_phases(pieces, None,
                        PhaseContext(samples_per_step=2, plan=SHORT,
                                     deadline_s=time.perf_counter() + 0.2))
    assert [p.name for p in ph.phases] == ["forward", "backward", "optimizer"]
    assert all(p.time_s is not None and p.diff_time is None and p.agrees is None
               for p in ph.phases)
    assert ph.loops == () and ph.energy_source == "unavailable"
    assert any(n.startswith("differential loops not run") and "--timeout" in n
               for n in ph.notes)


# -- through the CLI and the store -------------------------------------------------------------


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_run_phases_is_stored_and_an_old_record_reads_back(tmp_path: Path,
                                                           framework: str) -> None:
    if framework == "jax":
        pytest.importorskip("jax")
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--framework", framework, "--phases",
                "--iterations", "10", "--no-energy", db=db)
    assert p.returncode == 0, p.stderr
    with open_store(str(db)) as st:
        [r] = st.query()
    assert r.status == "ok", r.error
    ph = r.phases
    assert ph is not None and r.stats is not None
    assert [x.name for x in ph.phases] == ["forward", "backward", "optimizer"]
    assert ph.step_time_s == pytest.approx(r.stats.median_s)
    _check_sum(ph)
    assert ph.energy_source == "unavailable" and "--no-energy" in ph.energy_note
    assert all(x.energy is not None and x.energy.status == "unavailable"
               and "--no-energy" in x.energy.note for x in ph.phases)
    assert len(r.iteration_times_s) == 10  # the headline window as asked
    # A record from before phases existed (no "phases" key) reads back without them.
    old = r.to_dict()
    del old["phases"]
    assert Result.from_dict(old).phases is None


def test_a_failing_phase_pass_keeps_the_headline_measurement(tmp_path: Path) -> None:
    # The API: warm-up counts have no flags. The worker is the real isolated one.
    r = accelbench.run("test_fails_after_12", size="tiny", phases=True, iterations=10,
                       warmup_min=2, warmup_max=2, energy=False, store=str(tmp_path / "r.db"),
                       plugins=[FAULTY_PLUGIN])
    assert r.status == "ok" and r.stats is not None and len(r.iteration_times_s) == 10
    assert r.phases is not None and r.phases.phases == ()
    assert r.phases.notes == ("the phase pass failed: ValueError: fails after the measured "
                              "window",)


def test_two_gloo_ranks_have_a_communication_phase(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--nproc-per-node", "2", "--phases",
                "--iterations", "10", "--no-energy", db=db)
    assert p.returncode == 0, p.stdout + p.stderr
    with open_store(str(db)) as st:
        [r] = st.query()
    assert r.status == "ok", r.error
    ph = r.phases
    assert ph is not None, r.error
    assert [x.name for x in ph.phases] == ["forward", "backward", "optimizer", "communication"]
    comm = ph.get("communication")
    assert comm is not None and comm.time_s is not None and comm.time_s > 0
    assert comm.diff_time is not None and comm.diff_time.value is not None
    assert {lp.name for lp in ph.loops} == {"forward", "forward_backward", "step",
                                            "step_no_sync"}
    assert "no_sync" in ph.method and "all-reduce" in ph.method
    _check_sum(ph)


def test_a_framework_without_phase_steps_refuses_phases(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    out = run_cli("--plugin", TOYFW, "run", "toy_regression", "--framework", "toyfw",
                  "--size", "tiny", "--no-energy", "--phases", db=db)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "accelbench: error: --phases: framework toyfw cannot split its step into phases "
        "yet; drop --phases"]
    assert not db.exists()
