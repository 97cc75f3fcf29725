"""The arithmetic of training to a target: MLPerf's score across seeds, MLPerf's
reference-convergence-point (RCP) check and Zeus's cost. Plain numbers in, plain numbers out;
no framework.

MLPerf Training (training_rules.adoc, "Benchmark Results" and "Reference Convergence
Points"): a benchmark result drops the fastest and the slowest run and averages the rest (one
run that did not converge may be the one dropped as slowest; two make the result invalid).
The RCP check takes the reference runs' olympic mean and their standard deviation (numpy's,
ddof 0, as the appendix's figures are) and finds the lowest mean a set of submission runs may
have: the mean at which a one-sided two-sample Student's t-test (pooled variance, the same
spread on both sides) reaches p = 0.05, with the reference's kept runs on one side and the
submission's kept runs on the other. A faster mean is flagged.

Zeus (Chung et al., NSDI 2023): cost = eta * energy + (1 - eta) * max_power * time.

The Student t distribution is computed exactly for whole degrees of freedom (the closed
finite sums of Abramowitz and Stegun 26.7.3 and 26.7.4), so no statistics package is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: MLPerf's significance level for the convergence check.
RCP_P_VALUE = 0.05


def t_abs_cdf(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with ``df`` (a whole number >= 1) degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df == 1:
        return 2 * theta / math.pi
    if df % 2 == 1:
        total, term = 1.0, 1.0
        for k in range(1, (df - 3) // 2 + 1):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + s * math.cos(theta) * total)
    total, term = 1.0, 1.0
    for k in range(1, (df - 2) // 2 + 1):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return s * total


def t_quantile_one_sided(p: float, df: int) -> float:
    """The t with P(T > t) = ``p`` (0 < p < 0.5), by bisection on the exact CDF."""
    if not 0 < p < 0.5:
        raise ValueError(f"one-sided p must be in (0, 0.5), got {p}")
    want = 1 - 2 * p
    lo, hi = 0.0, 1.0
    while t_abs_cdf(hi, df) < want:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_abs_cdf(mid, df) < want:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def olympic(values: Sequence[float]) -> list[float]:
    """The values without their lowest and highest one (sorted); needs at least three."""
    if len(values) < 3:
        raise ValueError(f"dropping the fastest and slowest needs >= 3 runs, got {len(values)}")
    return sorted(values)[1:-1]


@dataclass(frozen=True, kw_only=True, slots=True)
class Score:
    """MLPerf's score of a set of runs: the mean of the kept runs and its CI."""

    mean: float
    """Mean of the runs left once the fastest and slowest are dropped."""
    ci_low: float
    ci_high: float
    """Two-sided t interval of that mean at ``confidence`` (equal to the mean with one kept run)."""
    kept: int
    confidence: float
    not_converged: int
    """Runs that did not reach the target (at most one: it is the slowest, dropped)."""


def mlperf_score(values: Sequence[float | None], *, confidence: float = 0.95) -> Score:
    """Drop the fastest and slowest run, average the rest, with a t interval.

    ``None`` is a run that did not reach the target: one may be dropped as the slowest;
    more than one makes the result invalid (``ValueError``, as MLPerf rules it).
    """
    misses = sum(v is None for v in values)
    if misses > 1:
        raise ValueError(f"{misses} runs did not reach the target; MLPerf allows at most one")
    done = [float(v) for v in values if v is not None]
    kept = olympic(done + [math.inf] * misses)
    if math.inf in kept:
        raise ValueError("too few runs reached the target to score")
    mean = float(np.mean(kept))
    if len(kept) < 2:
        return Score(mean=mean, ci_low=mean, ci_high=mean, kept=len(kept),
                     confidence=confidence, not_converged=misses)
    half = t_quantile_one_sided((1 - confidence) / 2, len(kept) - 1) * float(
        np.std(kept, ddof=1)) / math.sqrt(len(kept))
    return Score(mean=mean, ci_low=mean - half, ci_high=mean + half, kept=len(kept),
                 confidence=confidence, not_converged=misses)


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergenceLimit:
    """What reference runs allow: the lowest mean a set of submission runs may have."""

    reference_mean: float
    reference_sd: float
    min_mean: float
    max_speedup: float
    """reference_mean / min_mean - 1 (0.0353 is 3.53 %)."""


def rcp_limit(reference: Sequence[float], *, submission_runs: int,
              p_value: float = RCP_P_VALUE) -> ConvergenceLimit:
    """The convergence limit of ``reference`` runs (epochs or samples to converge) for a
    submission of ``submission_runs`` runs, both scored olympic (fastest and slowest
    dropped), by MLPerf's one-sided pooled-variance t-test at ``p_value``."""
    ref = olympic(reference)
    sub_kept = submission_runs - 2
    if sub_kept < 1:
        raise ValueError(f"a submission needs >= 3 runs, got {submission_runs}")
    mean, sd = float(np.mean(ref)), float(np.std(ref))
    t = t_quantile_one_sided(p_value, len(ref) + sub_kept - 2)
    min_mean = mean - t * sd * math.sqrt(1 / len(ref) + 1 / sub_kept)
    return ConvergenceLimit(reference_mean=mean, reference_sd=sd, min_mean=min_mean,
                            max_speedup=mean / min_mean - 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergenceCheck:
    """A set of runs against a reference's limit."""

    limit: ConvergenceLimit
    mean: float
    """The runs' olympic mean."""
    too_fast: bool
    """The mean is below the limit: converging implausibly fast (MLPerf would reject it)."""


def rcp_check(runs: Sequence[float], reference: Sequence[float], *,
              p_value: float = RCP_P_VALUE) -> ConvergenceCheck:
    """Whether ``runs`` converge faster than ``reference`` allows."""
    limit = rcp_limit(reference, submission_runs=len(runs), p_value=p_value)
    mean = float(np.mean(olympic(runs)))
    return ConvergenceCheck(limit=limit, mean=mean, too_fast=mean < limit.min_mean)


def zeus_cost(*, energy_j: float, time_s: float, max_power_w: float, eta: float) -> float:
    """Zeus's cost of a run: eta * energy + (1 - eta) * max_power * time (joules)."""
    if not 0 <= eta <= 1:
        raise ValueError(f"eta must be in [0, 1], got {eta}")
    return eta * energy_j + (1 - eta) * max_power_w * time_s
