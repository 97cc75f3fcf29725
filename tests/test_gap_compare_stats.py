"""Issue 46: compare's ratios B/A by value, direction, CI level and every edge.

Expected values are computed here from the times given; the CI level is pinned by
coverage (two samples of one distribution: the 95% CI of their ratio holds 1 in 93-97% of
1,000 trials), the significance rule at its boundary (a CI that touches 1 is not
significant).
"""

from __future__ import annotations

import numpy as np
import pytest

from accelbench.report.compare import cannot_tell, group_ratios, ratios
from accelbench.report.compare.stats import MIN_CI_SAMPLES, ONE_RUN_NOTE, Ratio
from tests.test_gap_report_ratios import FP32_TIMES, JAX_TIMES, result

A = (0.10, 0.12, 0.11, 0.09, 0.10)  # median 0.10, mean 0.104
B = (0.05, 0.06, 0.055, 0.045, 0.05)  # median 0.05, mean 0.052


def test_the_throughput_ratio_is_b_over_a_with_samples_per_step() -> None:
    tput, energy = ratios(A, 4, B, 2, energy_a_j_per_sample=0.5, energy_b_j_per_sample=0.2)
    # (2 / 0.05) / (4 / 0.10) = 1.0; the energy ratio 0.2 / 0.5 = 0.4.
    assert tput.value == pytest.approx(1.0)
    tput, energy = ratios(A, 4, B, 4, energy_a_j_per_sample=0.5, energy_b_j_per_sample=0.2)
    assert tput.value == pytest.approx(2.0)
    assert tput.ci95 is not None and tput.ci95[0] <= 2.0 <= tput.ci95[1]
    assert tput.ci95[0] > 1.0 and tput.significant is True
    assert energy.value == pytest.approx(0.4)
    assert energy.ci95 is not None and energy.ci95[0] <= 0.4 <= energy.ci95[1]
    assert energy.significant is True
    # No error bound given for either side (issue 44): the CI is timing only, and says so.
    assert energy.note == ("CI from step-time resampling, average power held fixed; error "
                           "bound unavailable on A and B: the CI covers timing noise only, "
                           "not the sensors' error")
    # Swapped sides: the inverse ratios.
    back, back_e = ratios(B, 4, A, 4, energy_a_j_per_sample=0.2, energy_b_j_per_sample=0.5)
    assert back.value == pytest.approx(0.5) and back.ci95 is not None
    assert back.ci95[1] < 1.0 and back.significant is True
    assert back_e.value == pytest.approx(2.5)


def test_the_ratio_ci_covers_the_truth_at_its_level() -> None:
    # Both sides from one distribution: the true ratio is 1.
    rng = np.random.default_rng(46)
    covered = 0
    for _ in range(1000):
        a = 0.1 + rng.normal(0.0, 0.005, size=41)
        b = 0.1 + rng.normal(0.0, 0.005, size=41)
        tput, _ = ratios(a, 1, b, 1, resamples=300)
        assert tput.ci95 is not None
        covered += tput.ci95[0] <= 1.0 <= tput.ci95[1]
        assert tput.significant is (not tput.ci95[0] <= 1.0 <= tput.ci95[1])
    assert 930 <= covered <= 975, covered


def test_a_ci_is_given_from_three_iterations_a_side() -> None:
    assert MIN_CI_SAMPLES == 3
    two, two_e = ratios(A[:2], 1, B[:3], 1, energy_a_j_per_sample=1.0,
                        energy_b_j_per_sample=0.5)
    assert two.ci95 is None and two.significant is None
    assert two.note == "fewer than 3 iterations on a side: no CI"
    assert two.value == pytest.approx(0.11 / 0.055)
    assert two_e.value == pytest.approx(0.5) and two_e.ci95 is None
    assert two_e.note == two.note
    three, _ = ratios(A[:3], 1, B[:3], 1)
    assert three.ci95 is not None and three.note == ""
    side_b, _ = ratios(A[:3], 1, B[:2], 1)
    assert side_b.ci95 is None


def test_energy_edges_say_why_there_is_no_ratio() -> None:
    def energy(ea: float | None, eb: float | None, bounds: tuple[str, str] = ("device",
                                                                              "device")) -> Ratio:
        return ratios(A, 1, B, 1, energy_a_j_per_sample=ea, energy_b_j_per_sample=eb,
                      boundaries=bounds)[1]

    assert energy(None, 1.0).note == "energy unavailable on A"
    assert energy(1.0, None).note == "energy unavailable on B"
    assert energy(None, None).note == "energy unavailable on A and B"
    assert energy(0.0, 1.0).note == "energy per sample of A is not positive"
    assert energy(0.0, 1.0).value is None
    assert energy(1e-9, 1e-9).value == pytest.approx(1.0)
    differ = energy(1.0, 1.0, ("device", "node"))
    assert differ.value is None
    assert differ.note == "energy boundaries differ (A: device, B: node); not compared"
    none_a, none_e = ratios((), 1, B, 1)
    assert none_a.value is None and none_a.note == "no iteration times on side A"
    assert none_e.note == "no iteration times on side A"
    assert ratios(A, 1, (), 1)[0].note == "no iteration times on side B"


def test_significance_needs_the_ci_to_exclude_one() -> None:
    # Constant equal sides: the ratio is 1 and every resample's too; a CI of (1, 1)
    # touches 1 and is not significant.
    same, _ = ratios((0.1,) * 5, 1, (0.1,) * 5, 1)
    assert same.value == 1.0 and same.ci95 == (1.0, 1.0) and same.significant is False
    # B constant 0.1 s and A constant just slower or just faster: CIs (x, x) off 1.
    faster, _ = ratios((0.1001,) * 5, 1, (0.1,) * 5, 1)
    assert faster.ci95 is not None and faster.ci95[0] > 1.0 and faster.significant is True
    slower, _ = ratios((0.0999,) * 5, 1, (0.1,) * 5, 1)
    assert slower.ci95 is not None and slower.ci95[1] < 1.0 and slower.significant is True


def test_one_run_a_side_drops_the_significance_claim() -> None:
    tput, _ = ratios(A, 1, B, 1)
    told = cannot_tell(tput, "A")
    assert told.value == tput.value and told.ci95 == tput.ci95
    assert told.significant is None and told.note == ONE_RUN_NOTE.format(side="A")
    noted = cannot_tell(Ratio(value=2.0, note="first"), "B")
    assert noted.note == "first; " + ONE_RUN_NOTE.format(side="B")
    missing = Ratio(value=None, note="why")
    assert cannot_tell(missing, "A") is missing


def test_group_ratios_by_value_and_direction() -> None:
    a = [result(f"ga{i}", tuple(t + d for t in FP32_TIMES), suite="g", energy_per_sample=e)
         for i, (d, e) in enumerate(((-0.01, 0.4), (0.01, 0.6)))]
    b = [result(f"gb{i}", tuple(t + d for t in JAX_TIMES), framework="jax", suite="g",
                energy_per_sample=e) for i, (d, e) in enumerate(((-0.01, 0.2), (0.01, 0.4)))]
    tput, energy = group_ratios(a, b, resamples=400)
    # Means of run medians: A (0.09 + 0.11) / 2 = 0.10, B (0.07 + 0.09) / 2 = 0.08.
    assert tput.value == pytest.approx(1.25)
    assert tput.ci95 is not None and tput.ci95[0] <= 1.25 <= tput.ci95[1]
    assert tput.note == "R = 2 / 2 runs: two-level bootstrap (runs, then iterations)"
    # Energy: mean 0.3 over mean 0.5.
    assert energy.value == pytest.approx(0.6)
    assert energy.ci95 is not None and energy.ci95[0] <= 0.6 <= energy.ci95[1]
    assert energy.note.startswith("R = 2 / 2 runs: bootstrap over runs; error bound "
                                  "unavailable on A and B")
    back, back_e = group_ratios(b, a, resamples=400)
    assert back.value == pytest.approx(0.8) and back_e.value == pytest.approx(0.5 / 0.3)
    no_e = [result("gn0", FP32_TIMES, suite="g"), result("gn1", FP32_TIMES, suite="g")]
    assert group_ratios(a, no_e, resamples=50)[1].note == "energy unavailable on a run"
    zero = [result(f"gz{i}", FP32_TIMES, suite="g", energy_per_sample=0.0) for i in (0, 1)]
    assert group_ratios(zero, a, resamples=50)[1].note == \
        "energy per sample of A is not positive"


def test_the_energy_ci_scales_the_ratio_by_the_resampled_step_time() -> None:
    # Average power held fixed: a resample's energy per sample moves with its mean step
    # time. A's times constant; B's seven of 0.1 s and one of 1.0 s (mean 0.2125 s). In
    # (7/8)^8 = 34% of resamples B draws no 1.0 s step, so the CI's 2.5% bound is exactly
    # the ratio at B's smallest possible mean, 0.5 x 0.1 / 0.2125; the 97.5% one lies
    # above the ratio (the long right tail of B's mean).
    _, energy = ratios((0.1,) * 8, 1, (0.1,) * 7 + (1.0,), 1,
                       energy_a_j_per_sample=1.0, energy_b_j_per_sample=0.5)
    assert energy.value == 0.5 and energy.ci95 is not None
    assert energy.ci95[0] == pytest.approx(0.5 * 0.1 / 0.2125)
    assert energy.ci95[1] > 0.9
