"""Time estimates said before a case starts: from an earlier run of the same case, from
similar runs' FLOP rate, or from the peak; never a figure without a basis."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from accelbench.planning import facts
from accelbench.planning.estimate import estimate_case, fmt_duration, loop_seconds
from accelbench.result import EnergyReading, Result
from accelbench.spec import MeasurementPolicy, MeterOptions, RunSpec
from accelbench.stats import compute_stats
from accelbench.store import open_store


def _result(rid: str, spec: RunSpec, step_s: float, flop_per_sample: float | None) -> Result:
    times = tuple(step_s * (1 + 0.01 * (i % 3)) for i in range(12))
    return Result(
        id=rid, spec=spec, status="ok", sample_unit="image",
        samples_per_step=spec.batch_size,
        stats=compute_stats(times, spec.batch_size, trim_fraction=0.0,
                            stop_reason="iterations"),
        iteration_times_s=times, build_time_s=4.0, flop_per_sample=flop_per_sample,
        started_at="2026-01-01T00:00:00.000+00:00", finished_at="2026-01-01T00:01:00.000+00:00",
    )


def test_loop_seconds_honours_the_minimum_and_the_cap() -> None:
    pol = MeasurementPolicy(warmup_min=5, min_iterations=10, max_time_s=60.0)
    # Slow steps: the minimum dominates (10 measured + 5 warm-up).
    assert loop_seconds(pol, 20.0) == pytest.approx(15 * 20.0)
    # Fast steps: measurement runs to max_time (an upper estimate), warm-up ~10 steps.
    assert loop_seconds(pol, 0.01) == pytest.approx(0.1 + 10.0)  # max_iterations 1000 x 0.01
    exact = MeasurementPolicy(iterations=7, warmup_min=5)
    assert loop_seconds(exact, 1.0) == pytest.approx(10 + 7)


def test_estimate_from_a_previous_run_of_the_same_case(tmp_path: Path) -> None:
    spec = RunSpec(workload="resnet50", size="paper", batch_size=64,
                   meters=MeterOptions(enabled=False))
    with open_store(str(tmp_path / "r.db")) as st:
        before = estimate_case(spec, st)
        assert before is None or before.basis != "previous run"
        st.save(_result("a1", spec, 12.0, None))
        est = estimate_case(spec, st)
    assert est is not None and est.basis == "previous run"
    assert est.step_s == pytest.approx(12.0, rel=0.02)
    # build 4 s + start (under a second with the warm worker) + (5 warm-up + 10 measured)
    # x 12 s
    assert 15 * est.step_s + 4.0 < est.seconds <= 15 * est.step_s + 4.0 + 1.0
    assert fmt_duration(est.seconds) == f"{est.seconds / 60:.0f} min"


def test_estimate_from_similar_runs_flop_rate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Made-up facts go into a cache of this test's own, never the session's.
    monkeypatch.setenv("ACCELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    facts.remember("vgg16", "paper", "torch", {"param_count": 1, "flop_per_sample": 2e9,
                                                "forward_flop_per_sample": 1e9})
    other = RunSpec(workload="resnet50", size="paper", batch_size=64)
    tiny = RunSpec(workload="lstm", size="tiny", batch_size=4)  # another size: not a basis
    spec = RunSpec(workload="vgg16", size="paper", batch_size=64)
    with open_store(str(tmp_path / "r.db")) as st:
        # resnet50 ran at 64 images x 1e9 FLOP / 0.64 s = 1e11 FLOP/s.
        st.save(_result("b1", other, 0.64, 1e9))
        st.save(_result("b2", tiny, 0.64, 1e3))
        est = estimate_case(spec, st)
    assert est is not None and est.basis.startswith("similar runs")
    assert est.step_s == pytest.approx(2e9 * 64 / 1e11, rel=0.03)


def test_no_basis_no_figure(tmp_path: Path) -> None:
    spec = RunSpec(workload="never_counted_workload", size="tiny", batch_size=1,
                   device="cuda:0")
    with open_store(str(tmp_path / "r.db")) as st:
        assert estimate_case(spec, st) is None


def test_a_quick_case_is_estimated_at_its_build_and_steps_not_a_worker_s_start(
        tmp_path: Path) -> None:
    """A fresh worker cost ~8 s a case before the warm fork server; now under a second
    (suite quick records: 0.05-0.35 s), so a tiny case estimates at about its build plus
    its steps."""
    pol = MeasurementPolicy(iterations=10)
    spec = RunSpec(workload="lstm", size="tiny", batch_size=4, policy=pol,
                   meters=MeterOptions(enabled=False))
    with open_store(str(tmp_path / "r.db")) as st:
        st.save(dataclasses.replace(_result("t1", spec, 0.01, None), build_time_s=0.5))
        est = estimate_case(spec, st)
    assert est is not None and est.basis == "previous run"
    steps = loop_seconds(pol, est.step_s)
    assert 0.5 + steps < est.seconds < 0.5 + steps + 1.0
    assert est.seconds < 2.0


def test_a_case_never_run_takes_the_builds_of_its_framework_size_and_device(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    facts.remember("vgg16", "tiny", "torch", {"param_count": 1, "flop_per_sample": 2e6,
                                               "forward_flop_per_sample": 1e6})
    spec = RunSpec(workload="vgg16", size="tiny", batch_size=8,
                   meters=MeterOptions(enabled=False))

    def seconds(st: object) -> tuple[float, float]:
        est = estimate_case(spec, st)  # type: ignore[arg-type]
        assert est is not None and est.basis.startswith("similar runs")
        return est.seconds - loop_seconds(spec.policy, est.step_s), est.step_s

    with open_store(str(tmp_path / "r.db")) as st:
        for i, build in enumerate((1.0, 3.0, 0.2)):  # the median: 1 s
            other = RunSpec(workload=("lstm", "bert", "vit")[i], size="tiny", batch_size=8)
            st.save(dataclasses.replace(_result(f"o{i}", other, 0.01, 1e5),
                                        build_time_s=build))
        with_builds, _ = seconds(st)
    assert 1.0 < with_builds < 1.0 + 1.0  # the median build + a sub-second start
    with open_store(str(tmp_path / "other.db")) as st:  # builds only at another size
        st.save(dataclasses.replace(
            _result("p1", RunSpec(workload="lstm", size="paper", batch_size=8), 0.01, 1e5),
            build_time_s=30.0))
        st.save(_result("t1", RunSpec(workload="lstm", size="tiny", batch_size=8), 0.01,
                        1e5))  # build 4 s: the only one of this size
        assert 4.0 < seconds(st)[0] < 5.0


def test_phases_add_their_pass_to_the_estimate(tmp_path: Path) -> None:
    """--phases: the attribution pass and the differential loops' calibration and trials
    come after the window; where a sensor reads, each trial fills an energy window (5 s and
    the pass's 10% margin), else a short one (0.2 s). Whether a sensor read is what the
    case's previous run says (its energy source)."""
    pol = MeasurementPolicy(iterations=10, warmup_min=2, warmup_max=2)
    plain = RunSpec(workload="lstm", size="tiny", batch_size=4, policy=pol,
                    meters=MeterOptions(enabled=False))
    phased = dataclasses.replace(plain, policy=dataclasses.replace(pol, phases=True))
    metered = dataclasses.replace(phased, meters=MeterOptions())
    with open_store(str(tmp_path / "r.db")) as st:
        st.save(_result("p1", plain, 0.002, None))
        base = estimate_case(plain, st)
        quick = estimate_case(phased, st)
    assert base is not None and quick is not None
    step = base.step_s  # about 2 ms
    calibration = 0.05 + 2 * step
    direct = step + 200 * step  # one untimed step, then 200 (the pass's most) < 0.5 s
    # No sensor: the direct steps, then 3 loops x (calibration + 5 trials x 0.2 s).
    assert quick.seconds - base.seconds == pytest.approx(
        direct + 3 * (calibration + 5 * 0.2))
    idle = MeterOptions().idle_s
    for source, trial in (("counter", 1.1 * 5.0), ("estimate", 0.2), ("unavailable", 0.2)):
        reading = EnergyReading(device="cpu", scope="cpu-package", source=source)  # type: ignore[arg-type]
        with open_store(str(tmp_path / f"{source}.db")) as st:
            st.save(dataclasses.replace(_result("m1", metered, 0.002, None),
                                        energy=(reading,)))
            est = estimate_case(metered, st)
        assert est is not None and est.basis == "previous run"
        # A previous run with energy measured: the trials fill a window; an estimated or
        # unavailable energy (no sensor: the 85 s estimate of a 48 s run) keeps them short.
        assert est.seconds - base.seconds == pytest.approx(
            direct + 3 * (calibration + 5 * trial) + idle), source


def test_the_loop_of_a_run_with_slow_bursts_is_its_mean_not_its_median(
        tmp_path: Path) -> None:
    """A busy run's steps: median 1 ms, mean 10 ms; 1,000 steps took 10 s, not 1 s."""
    pol = MeasurementPolicy(max_iterations=1000, max_time_s=60.0, warmup_min=1, warmup_max=1)
    spec = RunSpec(workload="lstm", size="tiny", batch_size=4, policy=pol,
                   meters=MeterOptions(enabled=False))
    times = tuple(0.001 if i % 10 else 0.091 for i in range(1000))
    r = dataclasses.replace(_result("b1", spec, 0.001, None), iteration_times_s=times,
                            stats=compute_stats(times, 4, trim_fraction=0.0,
                                                stop_reason="max_iterations"))
    with open_store(str(tmp_path / "r.db")) as st:
        st.save(r)
        est = estimate_case(spec, st)
    assert est is not None and est.step_s == pytest.approx(0.001)
    assert est.seconds > 10.0
