"""The measurement loop with real (sleep or busy) steps; no framework involved."""

from __future__ import annotations

import time

import numpy as np

from accelbench.execution.measure import ci_reached, measure, run_loop, warm_up
from accelbench.spec import MeasurementPolicy
from accelbench.stats import compute_stats


def _busy(seconds: float):  # type: ignore[no-untyped-def]
    def step() -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return step


def _noop() -> None:
    pass


def test_exact_iterations_and_raw_times_kept() -> None:
    pol = MeasurementPolicy(iterations=17, warmup_min=2, warmup_max=4)
    t = run_loop(_busy(0.001), _noop, pol, samples_per_step=8)
    assert len(t.times_s) == 17
    assert t.stop_reason == "iterations"
    assert 2 <= len(t.warmup_times_s) <= 4
    assert all(x >= 0.001 for x in t.times_s)


def test_adaptive_stop_on_target_ci() -> None:
    pol = MeasurementPolicy(target_ci=0.2, min_iterations=10, max_time_s=30)
    times, reason = measure(_busy(0.0005), _noop, pol, 1)
    assert reason == "target_ci"
    assert 10 <= len(times) < 1000


def test_stops_at_max_time_when_noise_is_high() -> None:
    state = {"i": 0}

    def jittery() -> None:
        state["i"] += 1
        time.sleep(0.02 if state["i"] % 2 else 0.0005)

    pol = MeasurementPolicy(target_ci=0.001, max_time_s=0.5, min_iterations=5)
    start = time.perf_counter()
    times, reason = measure(jittery, _noop, pol, 1)
    assert reason == "max_time"
    assert time.perf_counter() - start < 2.0
    assert len(times) > 5


def test_stops_at_max_iterations() -> None:
    pol = MeasurementPolicy(target_ci=0.001, max_iterations=12, min_iterations=5)
    state = {"i": 0}

    def alternating() -> None:
        state["i"] += 1
        time.sleep(0.004 if state["i"] % 2 else 0.0005)

    times, reason = measure(alternating, _noop, pol, 1)
    assert reason == "max_iterations"
    assert len(times) == 12


def test_warmup_runs_until_step_time_stops_falling() -> None:
    # Steps get faster for the first 8 iterations, then are flat.
    state = {"i": 0}

    def warming() -> None:
        state["i"] += 1
        time.sleep(max(0.002, 0.03 - 0.004 * state["i"]))

    pol = MeasurementPolicy(warmup_min=5, warmup_max=40)
    times = warm_up(warming, _noop, pol)
    assert len(times) >= 8
    assert len(times) < 40
    assert times[-1] < times[0]


def test_warmup_is_bounded_when_time_keeps_falling() -> None:
    state = {"i": 0}

    def always_faster() -> None:
        state["i"] += 1
        time.sleep(0.05 / state["i"])

    pol = MeasurementPolicy(warmup_min=5, warmup_max=9)
    assert len(warm_up(always_faster, _noop, pol)) == 9


def test_synchronize_is_inside_the_timed_region() -> None:
    # A device that is "asynchronous": the step returns at once, sync waits.
    pol = MeasurementPolicy(iterations=5, warmup_min=0, warmup_max=0)
    t = run_loop(_noop, _busy(0.003), pol, 1)
    assert min(t.times_s) >= 0.003
    assert t.warmup_times_s == ()


# -- minimum samples (issue 10) --------------------------------------------------------------


def test_warmup_minimum_is_honoured_past_its_time_limit() -> None:
    pol = MeasurementPolicy(warmup_min=4, warmup_max=10, warmup_max_time_s=0.001)
    notes: list[str] = []
    times = warm_up(_busy(0.005), _noop, pol, notes=notes)
    assert len(times) == 4
    assert len(notes) == 1 and "minimum of 4 iterations" in notes[0]
    # Within its time, no note.
    quiet: list[str] = []
    warm_up(_busy(0.0005), _noop, MeasurementPolicy(warmup_min=2, warmup_max=3), notes=quiet)
    assert quiet == []


def test_measurement_goes_on_to_the_minimum_past_max_time() -> None:
    state = {"i": 0}

    def jittery() -> None:  # never reaches a tight CI
        state["i"] += 1
        time.sleep(0.008 if state["i"] % 2 else 0.001)

    pol = MeasurementPolicy(target_ci=0.001, max_time_s=0.01, min_iterations=8, warmup_max=0,
                            warmup_min=0)
    t = run_loop(jittery, _noop, pol, 1)
    assert len(t.times_s) == 8
    assert t.stop_reason == "max_time"
    assert not t.below_minimum
    assert len(t.notes) == 1 and "past --max-time 0.01 s to the minimum of 8" in t.notes[0]


def test_strict_max_time_cuts_below_the_minimum() -> None:
    pol = MeasurementPolicy(target_ci=0.001, max_time_s=0.01, min_iterations=8, warmup_max=0,
                            warmup_min=0, strict_max_time=True)
    t = run_loop(_busy(0.004), _noop, pol, 1)
    assert 1 <= len(t.times_s) < 8
    assert t.stop_reason == "max_time"
    assert t.below_minimum
    assert "--strict-max-time" in t.notes[-1] and "no CI" in t.notes[-1]


def test_exact_iterations_below_the_minimum_are_honoured() -> None:
    pol = MeasurementPolicy(iterations=2, min_iterations=10, warmup_min=0, warmup_max=0)
    t = run_loop(_busy(0.001), _noop, pol, 1)
    assert len(t.times_s) == 2 and not t.below_minimum and t.notes == ()


def test_adaptive_stop_decides_on_the_reported_ci() -> None:
    """The stop test is the reported CI: equal decisions up to 256 times; above, where a
    cheap screen runs first, a stop still always means a reported CI within the target."""
    rng = np.random.default_rng(11)
    targets = (0.005, 0.01, 0.02, 0.05)
    for trial in range(40):
        n = int(rng.integers(10, 250)) if trial < 30 else int(rng.integers(257, 600))
        times = list(rng.lognormal(np.log(0.01), float(rng.uniform(0.01, 0.2)), n))
        rel = compute_stats(times, 32, trim_fraction=0.01, stop_reason="target_ci")
        assert rel.ci_rel_halfwidth is not None
        for target in targets:
            reached = ci_reached(times, 32, target)
            if n <= 256:
                assert reached == (rel.ci_rel_halfwidth <= target), trial
            elif reached:
                assert rel.ci_rel_halfwidth <= target, trial


def test_a_target_ci_stop_reports_a_ci_within_the_target() -> None:
    pol = MeasurementPolicy(target_ci=0.03, min_iterations=10, max_time_s=20,
                            warmup_min=0, warmup_max=0)
    state = {"i": 0}

    def noisy() -> None:
        state["i"] += 1
        end = time.perf_counter() + 0.0005 * (1 + (state["i"] * 7919 % 13) / 13)
        while time.perf_counter() < end:
            pass

    t = run_loop(noisy, _noop, pol, 4)
    st = compute_stats(t.times_s, 4, trim_fraction=0.01, stop_reason=t.stop_reason)
    assert t.stop_reason == "target_ci"
    assert st.ci_rel_halfwidth is not None and st.ci_rel_halfwidth <= 0.03


def test_insufficient_case_through_the_worker() -> None:
    from tests.test_isolation import run_plugin_case

    strict = MeasurementPolicy(max_time_s=0.005, strict_max_time=True, min_iterations=10,
                               warmup_min=1, warmup_max=1, target_ci=0.001)
    r = run_plugin_case("run_busy", "run_busy.py", policy=strict, batch_size=64)
    assert r.status == "insufficient", r.error
    assert r.stats is not None and r.stats.n < 10
    assert r.stats.samples_per_s_ci95 is None and r.stats.ci_rel_halfwidth is None
    assert "--strict-max-time" in (r.error or "")

    lenient = MeasurementPolicy(max_time_s=0.001, min_iterations=10, warmup_min=1,
                                warmup_max=1, target_ci=0.001)
    r = run_plugin_case("run_busy", "run_busy.py", policy=lenient, batch_size=64)
    assert r.status == "ok", r.error
    assert r.stats is not None and r.stats.n == 10 and r.stats.ci_rel_halfwidth is not None
    assert any("past --max-time" in n for n in r.noise["measure_notes"])
