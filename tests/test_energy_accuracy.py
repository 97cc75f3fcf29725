"""How accurate the energy figure is, simulated at the vendor boundary (issue 11).

A fake pynvml (tests/fake_gpu.py) reports a known bursty power signal through NVML's
sensor model on A100/H100 (SC'24: 25 ms averaged per 100 ms update; a 1 s average
behind nvmlDeviceGetPowerUsage; a counter updated every 100 ms). Real meter sessions,
real sampler threads and real time read it; the true energy of each window is known
exactly, so the error of each method is measured, not assumed.

The signal: 100 W idle before each window; from the window's start a square wave,
400 W bursts of 50 ms (shorter than the 75 ms the sensor never sees) every 170 ms.
A second, phase-locked signal (60 ms bursts every 200 ms, a multiple of the sensor's
100 ms, the sensor's updates landing mid-burst and mid-idle) is SC'24's worst case.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterator

import pytest

from accelbench.meters import clear_availability_cache, open_session
from accelbench.meters.trials import combine_trials, trial_delay_s
from accelbench.result import EnergyReading
from tests.fake_gpu import SimulatedGpu, install_nvml

SAMPLES = 1000
"""Samples processed per window (any constant: per-sample energy is energy / SAMPLES)."""


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    clear_availability_cache()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield
    clear_availability_cache()


def window(gpu: SimulatedGpu, seconds: float, phase_s: float | None = None
           ) -> tuple[EnergyReading, float]:
    """One measured window with the workload starting as it opens: (reading, true J).
    ``phase_s``: a sensor update falls this far into the run (the phase a trial's delay
    would give it, fixed rather than left to the clock)."""
    session = open_session(["cuda:0"], idle_s=0)
    with session:
        t0 = gpu.start_workload()
        if phase_s is not None:
            gpu.grid_offset_s = (t0 + phase_s) % gpu.update_s
        session.start()
        time.sleep(seconds)
        (reading,), _ = session.stop(samples=SAMPLES)
        gpu.stop_workload()
    assert reading.window_s is not None
    # The window opens a few microseconds after the workload starts (the counter read).
    true_j = gpu.energy_j(t0, t0 + reading.window_s)
    return reading, true_j


def rel_error(measured_j: float | None, true_j: float) -> float:
    assert measured_j is not None
    return (measured_j - true_j) / true_j


def test_naive_polling_of_the_one_second_average_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(a) No counter, no power fields: integrating nvmlDeviceGetPowerUsage (1 s average)."""
    gpu = SimulatedGpu(counter=False, fields=False)
    install_nvml(monkeypatch, gpu)
    time.sleep(1.0)  # a full second of idle history behind the 1 s average
    reading, true_j = window(gpu, 2.0)
    err = rel_error(reading.energy_j, true_j)
    print(f"naive 1 s average, 2 s window: error {err:+.1%}")
    assert reading.source == "integrated_samples"
    assert reading.details["power_field"] == "power_usage"
    assert "1 s average" in reading.note
    assert abs(err) > 0.10


def phase_locked(**kwargs: object) -> SimulatedGpu:
    return SimulatedGpu(period_s=0.2, burst_s=0.06, lock_phase_s=0.03, **kwargs)  # type: ignore[arg-type]


def test_naive_polling_is_off_when_the_load_locks_to_the_sensor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(a) The phase-locked signal: the 1 s average inherits the 25 ms windows' bias."""
    gpu = phase_locked(counter=False, fields=False)
    install_nvml(monkeypatch, gpu)
    time.sleep(1.0)
    reading, true_j = window(gpu, 2.0)
    err = rel_error(reading.energy_j, true_j)
    print(f"naive 1 s average, phase-locked load, 2 s window: error {err:+.1%}")
    assert reading.details["power_field"] == "power_usage"
    assert abs(err) > 0.10


def test_counter_primary_is_within_five_percent_when_phase_locked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(b) The counter sees the unobserved 75% too: the phase lock does not bias it."""
    gpu = phase_locked()
    install_nvml(monkeypatch, gpu)
    reading, true_j = window(gpu, 3.0)
    err = rel_error(reading.energy_j, true_j)
    instant_err = rel_error(reading.details["integrated_energy_j"], true_j)
    print(f"counter, phase-locked, 3 s: error {err:+.2%}; instant integral {instant_err:+.1%}")
    assert reading.source == "counter"
    assert abs(err) < 0.05
    # The cross-check exposes the instant field's bias (> 5%: a warning in the note).
    assert reading.cross_check_rel_diff is not None and reading.cross_check_rel_diff > 0.05
    assert "WARNING" in reading.note


def test_counter_primary_is_within_five_percent(monkeypatch: pytest.MonkeyPatch) -> None:
    """(b) The shipped method: the counter, cross-checked against the instant field.
    (d) The sensor's update period is detected from the window's own readings."""
    gpu = SimulatedGpu()
    install_nvml(monkeypatch, gpu)
    reading, true_j = window(gpu, 3.0)
    err = rel_error(reading.energy_j, true_j)
    instant_err = rel_error(reading.details["integrated_energy_j"], true_j)
    period = reading.details["update_period"]
    print(
        f"counter, 3 s window: error {err:+.2%}; instant-field integral {instant_err:+.2%}; "
        f"update period {period['period_s'] * 1e3:.1f} ms ({period['updates']} updates)"
    )
    assert reading.source == "counter"
    assert abs(err) < 0.05
    assert reading.details["power_field"] == "instant"
    assert reading.details["cross_check_field"] == "instant"
    assert reading.cross_check_rel_diff is not None
    assert reading.details["observed_fraction"] == pytest.approx(0.25)
    assert reading.details["memory_power_mean_w"] == pytest.approx(30.0)
    assert "power_average_field_mean_w" in reading.details
    # (d)
    assert not period.get("nominal") and not period["upper_bound"]
    assert period["period_s"] == pytest.approx(gpu.update_s, rel=0.10)
    assert reading.details["sensor_updates"] >= 25


def test_power_only_trials_with_random_delays(monkeypatch: pytest.MonkeyPatch) -> None:
    """(c) No counter: K windows after random delays, energy per sample the median."""
    gpu = SimulatedGpu(counter=False)
    install_nvml(monkeypatch, gpu)
    rng = random.Random(11)
    trials: list[tuple[EnergyReading, ...]] = []
    true_per_sample: list[float] = []
    errors: list[float] = []
    delays: list[float] = []
    for k in range(5):
        delay = trial_delay_s(gpu.update_s, rng) if k else 0.0
        delays.append(delay)
        time.sleep(delay)
        reading, true_j = window(gpu, 2.0)
        assert reading.source == "integrated_samples"
        trials.append((reading,))
        true_per_sample.append(true_j / SAMPLES)
        errors.append(rel_error(reading.energy_j, true_j))
    (combined,) = combine_trials(trials, delays)
    true_median = statistics.median(true_per_sample)
    err = rel_error(combined.energy_j_per_sample, true_median)
    print(
        "power only, 5 x 2 s windows: per-trial errors "
        + ", ".join(f"{e:+.1%}" for e in errors)
        + f"; median of trials {err:+.2%}"
    )
    assert "observes only 25%" in trials[0][0].note
    assert len(combined.details["trials"]) == 5
    assert abs(err) < 0.05


def test_power_only_trials_when_phase_locked_show_their_spread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(c) on the phase-locked signal: delays move the phase, so trials disagree widely
    (each update sees either a burst or idle). The five trials land at five phases spread
    over one update period, as uniform random delays do on average; set here, not left to
    the clock (under load, real sleeps once put all five near one phase: 3% spread).
    The median of 5 is printed for the record, not asserted within 5%: it cannot be met
    honestly here (per-trial errors span about -47% to +32%; even the mean over uniform
    phases needs on the order of 100 trials for 5%). Only the counter holds for such a
    load. What the record must show is that the figure is phase-sensitive: its spread."""
    gpu = phase_locked(counter=False)
    install_nvml(monkeypatch, gpu)
    trials: list[tuple[EnergyReading, ...]] = []
    true_per_sample: list[float] = []
    errors: list[float] = []
    for k in range(5):
        reading, true_j = window(gpu, 2.0, phase_s=0.03 + k * gpu.update_s / 5)
        trials.append((reading,))
        true_per_sample.append(true_j / SAMPLES)
        errors.append(rel_error(reading.energy_j, true_j))
    (combined,) = combine_trials(trials)
    err = rel_error(combined.energy_j_per_sample, statistics.median(true_per_sample))
    print(
        "power only, phase-locked, 5 x 2 s: per-trial errors "
        + ", ".join(f"{e:+.1%}" for e in errors)
        + f"; median of trials {err:+.1%}"
    )
    assert combined.details["trials_spread"]["range_rel"] > 0.10
