"""The one bootstrap (:func:`accelbench.stats.bootstrap`) and every figure drawn from it.

The figures below were printed by the five resampling implementations this one replaced
(a record's CI, ``--repeats``' two levels, ``compare``'s ratios and group ratios,
``--phases``' differences), on the same inputs and seeds: they must not move by a bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from accelbench import stats
from accelbench.execution import phases as measured_phases
from accelbench.report.compare import group_ratios, ratios
from tests.test_gap_report_ratios import FP32_TIMES, JAX_TIMES, result


def _times() -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(7)
    return list(rng.normal(0.010, 0.001, 57)), list(rng.normal(0.008, 0.0012, 43))


def test_the_figures_of_the_five_former_implementations_are_unchanged() -> None:
    a, b = _times()
    assert stats.bootstrap_median_ci(a) == (0.00952224672396607, 0.010063781774255062)
    assert stats.throughput_ci(a, 4) == (397.46489835786275, 420.0689307842233)
    assert stats.group_stats([a, b, a[:20]], 4).ci95 == (401.87577065606354,
                                                         505.5144633693882)
    assert stats.two_level_median_means([a, b], resamples=50)[:3].tolist() == [
        0.00884755316621539, 0.008770413287791974, 0.009114542557012082]
    tput, energy = ratios(a, 4, b, 4, energy_a_j_per_sample=0.5, energy_b_j_per_sample=0.2)
    assert tput.ci95 == (1.1797838211805103, 1.3133222947394632)
    assert energy.ci95 == (0.3812519826729505, 0.41944058253063937)
    ga = [result(f"ga{i}", tuple(t + d for t in FP32_TIMES), suite="g", energy_per_sample=e)
          for i, (d, e) in enumerate(((-0.01, 0.4), (0.01, 0.6), (0.0, 0.5)))]
    gb = [result(f"gb{i}", tuple(t + d for t in JAX_TIMES), framework="jax", suite="g",
                 energy_per_sample=e) for i, (d, e) in enumerate(((-0.01, 0.2), (0.01, 0.4)))]
    g_tput, g_energy = group_ratios(ga, gb, resamples=400)
    assert g_tput.ci95 == (1.044844844844845, 1.5714285714285712)
    assert g_energy.ci95 == (0.35294117647058826, 0.9230769230769231)
    series = {"full": [0.5, 0.52, 0.49, 0.51, 0.5], "fwd": [0.2, 0.21, 0.19, 0.2, 0.22]}
    differences = getattr(measured_phases, "_differences")  # noqa: B009  (the loops' CIs)
    diff = differences(series, (("forward", "fwd", None), ("backward", "full", "fwd")),
                       measured_phases.PhasePlan(), 3, "time")
    assert diff["forward"].ci95 == (0.196, 0.21200000000000002)
    assert diff["backward"].ci95 == (0.288, 0.312)


def test_the_draws_do_not_depend_on_the_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    a, _ = _times()
    whole = stats.bootstrap(a, 301, np.random.default_rng(5), ("median", "mean"))
    monkeypatch.setattr(stats, "_MAX_DRAWS", 57 * 7)  # 7 resamples at a time, 43 chunks
    chunked = stats.bootstrap(a, 301, np.random.default_rng(5), ("median", "mean"))
    assert [x.tolist() for x in chunked] == [x.tolist() for x in whole]
    # Each figure is its statistic of one draw: the draws by hand agree.
    idx = np.random.default_rng(5).integers(0, len(a), size=(301, len(a)))
    draws = np.asarray(a)[idx]
    assert whole[0].tolist() == np.median(draws, axis=1).tolist()
    assert whole[1].tolist() == draws.mean(axis=1).tolist()


def test_a_bootstrap_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="no samples"):
        stats.bootstrap([], 10, np.random.default_rng(0))
