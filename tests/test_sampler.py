"""The background power sampler and the online integral behind every sampled reading."""

from __future__ import annotations

import math
import random
import threading
import time

import numpy as np
import pytest

from accelbench.meters.sampler import PowerSampler, PowerSeries


def _trapezoid(t: list[float], p: list[float]) -> float:
    return float(np.trapezoid(p, t))


# -- PowerSeries ---------------------------------------------------------------------------


def test_trapezoid_is_exact_for_piecewise_linear_power() -> None:
    series = PowerSeries()
    for t, p in [(0.0, 0.0), (1.0, 10.0), (3.0, 10.0), (4.0, 0.0)]:
        series.add_power(t, p)
    assert series.energy_j == pytest.approx(5.0 + 20.0 + 5.0)
    assert series.n_samples == 4
    assert series.peak_power_w == 10.0
    assert series.min_power_w == 0.0
    assert series.covered_s == 4.0
    assert series.mean_interval_s == pytest.approx(4.0 / 3)
    assert series.max_interval_s == 2.0


def test_bounded_memory_keeps_the_exact_integral() -> None:
    rng = random.Random(7)
    series = PowerSeries(max_bins=64)
    ts, ps = [], []
    t = 100.0
    for _ in range(10_001):
        t += rng.uniform(0.001, 0.02)
        p = rng.uniform(20.0, 300.0)
        ts.append(t)
        ps.append(p)
        series.add_power(t, p)
        assert series.stored_bins <= 64
    exact = _trapezoid(ts, ps)
    assert series.energy_j == pytest.approx(exact, rel=1e-12)
    bins = series.bins()
    # Merged bins still tile the whole span and carry every joule.
    assert bins[0][0] == ts[0]
    assert bins[-1][1] == ts[-1]
    for (_, end, _), (start, _, _) in zip(bins, bins[1:], strict=False):
        assert end == start
    assert sum(e for _, _, e in bins) == pytest.approx(exact, rel=1e-12)
    assert series.peak_power_w == max(ps)
    assert series.n_samples == len(ts)


def test_energy_mode_sums_counter_increments() -> None:
    series = PowerSeries(max_bins=4)
    series.add_energy(0.0, 123.0)  # first value only marks the start
    increments = [1.0, 2.0, 0.5, 4.0, 1.0, 1.5, 3.0]
    for i, e in enumerate(increments, start=1):
        series.add_energy(i * 0.1, e)
    assert series.energy_j == pytest.approx(sum(increments))
    assert series.peak_power_w == pytest.approx(4.0 / 0.1)
    assert series.last_power_w == pytest.approx(3.0 / 0.1)
    assert sum(e for _, _, e in series.bins()) == pytest.approx(sum(increments))


def test_timeline_is_downsampled_and_keeps_the_average() -> None:
    series = PowerSeries()
    for i in range(2001):
        series.add_power(10.0 + i * 0.01, 50.0)
    timeline = series.timeline(max_points=500, t0_s=10.0)
    assert 0 < len(timeline["t_s"]) <= 500
    assert len(timeline["t_s"]) == len(timeline["power_w"])
    assert all(p == pytest.approx(50.0) for p in timeline["power_w"])
    assert timeline["t_s"][0] >= 0.0
    assert timeline["t_s"][-1] <= 20.0


def test_time_going_backwards_is_rejected() -> None:
    series = PowerSeries()
    series.add_power(1.0, 1.0)
    with pytest.raises(ValueError):
        series.add_power(0.5, 1.0)


# -- PowerSampler --------------------------------------------------------------------------


def test_start_stop_samples_at_the_edges_and_in_between() -> None:
    calls = []

    def read() -> float:
        calls.append(time.monotonic())
        return 42.0

    sampler = PowerSampler.single(read, "x", interval_s=0.005)
    sampler.start()
    assert sampler.running
    time.sleep(0.1)
    sampler.stop()
    assert not sampler.running
    series = sampler.series["x"]
    assert series.n_samples == len(calls) >= 5
    assert series.mean_interval_s is not None
    assert 0.004 < series.mean_interval_s < 0.05
    assert series.energy_j == pytest.approx(42.0 * series.covered_s)
    sampler.stop()  # twice is harmless


def test_a_long_interval_still_gets_start_and_stop_samples() -> None:
    sampler = PowerSampler.single(lambda: 10.0, interval_s=60.0)
    sampler.start()
    time.sleep(0.02)
    t0 = time.monotonic()
    sampler.stop()
    elapsed = time.monotonic() - t0
    assert elapsed < 30.0, f"stop() took {elapsed:.0f} s: it waited out the 60 s interval"
    assert sampler.series["power"].n_samples == 2


def test_thread_ends_cleanly_when_the_read_function_raises() -> None:
    count = 0

    def read() -> float:
        nonlocal count
        count += 1
        if count > 5:
            raise OSError("sensor vanished")
        return 1.0

    sampler = PowerSampler.single(read, interval_s=0.002)
    sampler.start()
    deadline = time.monotonic() + 5.0
    while sampler.running and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not sampler.running
    assert isinstance(sampler.error, OSError)
    sampler.stop()
    assert sampler.series["power"].n_samples == 5  # what it had is kept


def test_keyboard_interrupt_in_the_main_thread_stops_the_thread() -> None:
    before = set(threading.enumerate())
    with pytest.raises(KeyboardInterrupt), PowerSampler.single(lambda: 1.0, interval_s=0.002) as s:
        time.sleep(0.02)
        raise KeyboardInterrupt
    assert not s.running
    assert set(threading.enumerate()) <= before


def test_sampler_thread_is_a_daemon() -> None:
    sampler = PowerSampler.single(lambda: 1.0, interval_s=0.01, name="accelbench-test-daemon")
    sampler.start()
    try:
        thread = next(t for t in threading.enumerate() if t.name == "accelbench-test-daemon")
        assert thread.daemon  # a Ctrl-C exit never hangs on it
    finally:
        sampler.stop()


def test_nan_values_are_skipped_and_bridged() -> None:
    count = 0

    def read() -> tuple[float, float]:
        nonlocal count
        count += 1
        return (5.0 if count % 2 else math.nan, 7.0)

    sampler = PowerSampler(read, ["a", "b"], interval_s=0.002)
    sampler.start()
    time.sleep(0.05)
    sampler.stop()
    a, b = sampler.series["a"], sampler.series["b"]
    assert 0 < a.n_samples < b.n_samples
    assert a.energy_j == pytest.approx(5.0 * a.covered_s)
    assert b.energy_j == pytest.approx(7.0 * b.covered_s)


def test_misuse_is_rejected() -> None:
    with pytest.raises(ValueError):
        PowerSampler.single(lambda: 1.0, interval_s=0.0)
    with pytest.raises(ValueError):
        PowerSampler(lambda: (1.0, 2.0), ["a", "a"])
    sampler = PowerSampler.single(lambda: 1.0)
    sampler.start()
    sampler.stop()
    with pytest.raises(RuntimeError):
        sampler.start()


def test_integration_accuracy_on_a_known_signal() -> None:
    """P(t) = a + b sin(w t): the 10 ms trapezoid is within 1% of the exact integral."""
    a, b, w = 100.0, 60.0, 2 * math.pi * 3.0
    t0 = time.monotonic()

    def power(t: float) -> float:
        return a + b * math.sin(w * (t - t0))

    def exact(t1: float, t2: float) -> float:
        return a * (t2 - t1) - b / w * (math.cos(w * (t2 - t0)) - math.cos(w * (t1 - t0)))

    sampler = PowerSampler.single(lambda: power(time.monotonic()), interval_s=0.01)
    sampler.start()
    time.sleep(0.6)
    sampler.stop()
    series = sampler.series["power"]
    assert series.t_first_s is not None and series.t_last_s is not None
    reference = exact(series.t_first_s, series.t_last_s)
    assert abs(series.energy_j - reference) / reference < 0.01
    assert series.peak_power_w is not None and series.peak_power_w <= a + b + 1e-9
