"""Issue 44: compare's energy ratio CI holds each side's 95% error bound (worst cases)."""

from __future__ import annotations

import pytest

from accelbench.report.compare import ratios
from accelbench.report.compare.stats import mean_bound, widen_by_bounds

A = (0.10, 0.12, 0.11, 0.09, 0.10)
B = (0.05, 0.06, 0.055, 0.045, 0.05)


def test_the_bounds_widen_the_ratio_ci_as_worst_cases_by_hand() -> None:
    # EB/EA in (0.7, 0.9) from timing; A may be off by 2%, B by 3%: the lowest ratio is
    # B at its lowest over A at its highest, 0.7 x 0.97 / 1.02; the highest the reverse.
    low, high = widen_by_bounds((0.7, 0.9), 0.02, 0.03)  # type: ignore[misc]
    assert low == pytest.approx(0.7 * 0.97 / 1.02) == pytest.approx(0.665686, abs=1e-6)
    assert high == pytest.approx(0.9 * 1.03 / 0.98) == pytest.approx(0.945918, abs=1e-6)
    # 10% on each side: the CI reaches 0.9 x 1.1 / 0.9 = 1.1, across 1.
    assert widen_by_bounds((0.7, 0.9), 0.1, 0.1)[1] == pytest.approx(1.1)  # type: ignore[index]
    # A bound of 100% on A leaves the ratio without an upper limit: no CI.
    assert widen_by_bounds((0.7, 0.9), 1.0, 0.1) is None


def test_ratios_carry_both_bounds_and_say_when_a_side_has_none() -> None:
    _, plain = ratios(A, 4, B, 4, energy_a_j_per_sample=0.5, energy_b_j_per_sample=0.2)
    assert plain.ci95 is not None
    _, bounded = ratios(A, 4, B, 4, energy_a_j_per_sample=0.5, energy_b_j_per_sample=0.2,
                        energy_bounds=(0.1, 0.2))
    assert bounded.value == pytest.approx(0.4) and bounded.ci95 is not None
    assert bounded.ci95[0] == pytest.approx(plain.ci95[0] * 0.8 / 1.1)
    assert bounded.ci95[1] == pytest.approx(plain.ci95[1] * 1.2 / 0.9)
    assert "95% error bounds of A (+- 10%) and B (+- 20%)" in bounded.note
    # Wide enough to cross 1: no longer significant.
    _, wide = ratios(A, 4, B, 4, energy_a_j_per_sample=0.5, energy_b_j_per_sample=0.2,
                     energy_bounds=(0.5, 0.5))
    assert wide.ci95 is not None and wide.ci95[1] > 1.0 and wide.significant is False
    # A record stored before bounds: the timing CI, and the note says what it lacks.
    _, old = ratios(A, 4, B, 4, energy_a_j_per_sample=0.5, energy_b_j_per_sample=0.2,
                    energy_bounds=(None, 0.2))
    assert old.ci95 == plain.ci95
    assert "error bound unavailable on A: the CI covers timing noise only" in old.note


def test_a_groups_bound_adds_its_runs_half_widths() -> None:
    # Runs of 1 J (+-10%) and 3 J (+-20%): half-widths 0.1 + 0.6 over 4 J = 17.5%.
    assert mean_bound([1.0, 3.0], [0.1, 0.2]) == pytest.approx(0.175)
    assert mean_bound([1.0, 3.0], [0.1, None]) is None
