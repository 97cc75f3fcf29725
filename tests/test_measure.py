"""The measurement loop with real (sleep or busy) steps; no framework involved."""

from __future__ import annotations

import time

from accelbench.runner.measure import measure, run_loop, warm_up
from accelbench.spec import MeasurementPolicy


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
