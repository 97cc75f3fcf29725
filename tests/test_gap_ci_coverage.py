"""Issue 46: the confidence level of the CIs pinned by coverage, not by their code.

A CI's level is a promise about repeated experiments: a 95% interval covers the truth in
95% of them. Each test draws many samples from a distribution whose truth is known, builds
the interval with the defaults users get, and counts how often it covers the truth. The
expected coverage comes from theory, not from the implementation; a level moved to 90% or
99% (or a quantile taken on the wrong side) moves the count outside the window. Seeds are
fixed: the counts are the same on every run.
"""

from __future__ import annotations

import numpy as np
import pytest

from accelbench.stats import (
    bootstrap_median_ci,
    ci_rel_halfwidth,
    compute_stats,
    group_stats,
    throughput_ci,
)


def test_the_median_ci_covers_the_true_median_95_percent_of_the_time() -> None:
    # 1,000 runs of 101 step times from N(1.0, 0.1): the true median is 1.0. A 95%
    # percentile bootstrap of the median covers it 93-97% of the time (90% gives ~89%,
    # 99% ~98.5% with these seeds).
    rng = np.random.default_rng(46)
    covered = 0
    for _ in range(1000):
        times = 1.0 + rng.normal(0.0, 0.1, size=101)
        low, high = bootstrap_median_ci(times, resamples=400)
        assert low <= float(np.median(times)) <= high
        covered += low <= 1.0 <= high
    assert 930 <= covered <= 970, covered


def test_the_throughput_ci_is_the_step_time_ci_inverted_at_the_same_level() -> None:
    # Throughput = samples per step / step time, so its 95% CI is the step time's,
    # inverted and swapped; compute_stats reports that one.
    rng = np.random.default_rng(7)
    times = 0.02 + rng.normal(0.0, 0.001, size=51)
    t_low, t_high = bootstrap_median_ci(times)
    assert throughput_ci(times, 8) == (8 / t_high, 8 / t_low)
    s = compute_stats(times, 8, trim_fraction=0.01, stop_reason="max_iterations")
    assert s.samples_per_s_ci95 == (8 / t_high, 8 / t_low)
    centre = 8 / float(np.median(times))
    assert s.samples_per_s == centre
    assert s.ci_rel_halfwidth == (8 / t_low - 8 / t_high) / 2 / centre


def test_the_between_run_ci_covers_the_true_throughput_at_its_level() -> None:
    # 400 cases of R = 20 runs; each run's level is drawn from N(1.0, 0.05) (the variation
    # between workers), its 3 step times add a little noise within the run. The truth
    # (samples per step / the mean of the run medians' distribution) is 1.0. The
    # between-run CI is then a percentile bootstrap of a mean of 20 values, whose coverage
    # is P(|t_19| < z * sqrt(19/20)): 0.929 for a 95% level (0.875 for 90%, 0.979 for 99%,
    # from the t distribution).
    rng = np.random.default_rng(46)
    covered = 0
    for _ in range(400):
        runs = [1.0 + rng.normal(0.0, 0.05) + rng.normal(0.0, 0.001, size=3)
                for _ in range(20)]
        g = group_stats(runs, 1, resamples=200)
        assert g.between_runs and g.ci95 is not None
        low, high = g.ci95
        assert low <= g.samples_per_s <= high
        covered += low <= 1.0 <= high
    assert 0.90 * 400 <= covered <= 0.955 * 400, covered / 400


def test_one_runs_ci_in_group_stats_is_the_within_run_ci() -> None:
    times = [0.010, 0.011, 0.012, 0.013, 0.014]
    g = group_stats([times], 4)
    assert not g.between_runs and g.runs == 1
    assert g.ci95 == throughput_ci(times, 4)
    assert g.samples_per_s == 4 / 0.012
    assert group_stats([times[:2]], 4).ci95 is None


def test_the_between_run_ci_is_the_central_95_percent_of_its_bootstrap() -> None:
    # The level exactly: the CI's bounds are the 2.5% and 97.5% quantiles of the two-level
    # bootstrap distribution (the same resamples, the same fixed seed), inverted into
    # throughput. A level a little off 95% hides in a coverage count; not here.
    from accelbench.stats import two_level_median_means

    rng = np.random.default_rng(3)
    runs = [1.0 + rng.normal(0.0, 0.05) + rng.normal(0.0, 0.01, size=7) for _ in range(4)]
    g = group_stats(runs, 8, resamples=300)
    boot = two_level_median_means(runs, resamples=300)
    assert boot.shape == (300,)
    q_low, q_high = np.quantile(boot, [0.025, 0.975])
    assert g.ci95 == (8 / q_high, 8 / q_low)
    assert g.samples_per_s == 8 / float(np.mean([np.median(r) for r in runs]))
    assert g.ci_rel_halfwidth == (8 / q_low - 8 / q_high) / 2 / g.samples_per_s
    assert g.run_samples_per_s == tuple(8 / float(np.median(r)) for r in runs)
    assert g.runs == 4 and g.between_runs
    assert g.to_dict()["note"] == "CI over 4 runs (two-level bootstrap: runs, then iterations)"
    with pytest.raises(ValueError, match="every run needs at least one time"):
        two_level_median_means([[1.0], []])
    with pytest.raises(ValueError, match="every run needs at least one time"):
        group_stats([], 1)


def test_the_median_ci_of_one_value_is_that_value() -> None:
    assert bootstrap_median_ci([0.25]) == (0.25, 0.25)
    with pytest.raises(ValueError, match="no samples"):
        bootstrap_median_ci([])
    assert ci_rel_halfwidth([0.0, 0.0, 0.0]) == float("inf")
    assert ci_rel_halfwidth([0.5, 0.5, 0.5]) == 0.0
