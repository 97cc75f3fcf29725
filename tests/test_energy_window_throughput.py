"""Figures shown together agree (issue 44): J/sample is the window's energy over its
samples, the headline throughput is the median step's; on a constant 45 W source with
uneven steps the two multiply to more than 45 W, so the window's own throughput is shown
beside the median one, and J/sample x it is the average power."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from accelbench.render import print_result
from accelbench.result import EnergyReading
from tests.test_store import make_result

#: Uneven steps (median 0.10 s, the window 0.70 s for 5 steps of 4 sentences).
TIMES = (0.1, 0.1, 0.1, 0.2, 0.2)


def test_j_per_sample_times_the_window_throughput_is_the_power() -> None:
    import dataclasses

    from accelbench.stats import compute_stats

    window_s, samples = sum(TIMES), 4 * len(TIMES)
    energy_j = 45.0 * window_s  # a constant 45 W source over the window
    reading = EnergyReading(device="cpu", scope="cpu-package", source="counter",
                            energy_j=energy_j, energy_j_per_sample=energy_j / samples,
                            avg_power_w=45.0, window_s=window_s)
    r = make_result("win000000001", energy=(reading,))
    r = dataclasses.replace(r, iteration_times_s=TIMES, stats=compute_stats(
        TIMES, 4, trim_fraction=0.0, stop_reason="iterations"))
    assert r.samples_per_s == pytest.approx(40.0)  # the median step's
    assert r.energy_window_samples_per_s == pytest.approx(samples / window_s)
    assert r.energy_j_per_sample * r.energy_window_samples_per_s == pytest.approx(45.0)
    assert r.energy_j_per_sample * r.samples_per_s == pytest.approx(63.0)  # not the power
    assert r.summary()["energy_window_samples_per_s"] == pytest.approx(28.571, rel=1e-3)
    out = io.StringIO()
    print_result(Console(file=out, width=300), r)
    line = next(s for s in out.getvalue().splitlines() if "J/sentence" in s)
    assert "average power 45.0 W = J/sentence x the window's 28.57 sentences/s" in line
    assert "(the headline 40/s is the median step's)" in line


def test_no_window_throughput_without_an_energy_figure() -> None:
    r = make_result("win000000002")
    assert r.energy_window_samples_per_s is None
    assert r.summary()["energy_window_samples_per_s"] is None
