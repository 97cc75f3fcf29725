"""Statistics of raw iteration times: median, trimmed mean, bootstrap CI.

All functions take raw per-iteration step times in seconds and never drop
data silently; the trimmed mean generalises the paper's protocol (drop the
10 highest and 10 lowest of 1000 iterations) as a fraction.

No confidence interval is given from fewer than :data:`MIN_CI_SAMPLES` times: a
percentile bootstrap of one or two values is a point or the range of two draws,
which would look like a tight interval while saying nothing. The adaptive stop
of :mod:`accelbench.runner.measure` decides with :func:`throughput_ci_rel_halfwidth`,
the statistic :func:`compute_stats` reports, so a case stopped on ``target_ci``
reports a CI within the target.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from accelbench.result import Stats
from accelbench.spec import StopReason

BOOTSTRAP_RESAMPLES = 2000
CHECK_RESAMPLES = 400
"""Resamples of the cheap screening check in the adaptive loop (confirmed with
:data:`BOOTSTRAP_RESAMPLES` before the loop stops)."""
MIN_CI_SAMPLES = 3
"""Fewest measured times a CI is computed from."""
_SEED = 20200519  # fixed: the same samples always give the same interval


def trimmed_mean(times_s: ArrayLike, fraction: float) -> float:
    """Mean after dropping ``floor(fraction * n)`` values at each end."""
    arr = np.sort(np.asarray(times_s, dtype=float))
    if arr.size == 0:
        raise ValueError("no samples")
    k = int(fraction * arr.size)
    if 2 * k >= arr.size:
        k = (arr.size - 1) // 2
    return float(arr[k : arr.size - k].mean())


def bootstrap_median_ci(
    values: ArrayLike, *, resamples: int = BOOTSTRAP_RESAMPLES, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the median of ``values``."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("no samples")
    if arr.size == 1:
        return float(arr[0]), float(arr[0])
    rng = np.random.default_rng(_SEED)
    # Chunked so memory stays bounded for long runs (n up to 1e5).
    medians = np.empty(resamples)
    chunk = max(1, 2_000_000 // arr.size)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, arr.size, size=(stop - start, arr.size))
        medians[start:stop] = np.median(arr[idx], axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(medians, [alpha, 1.0 - alpha])
    return float(low), float(high)


def throughput_ci(
    times_s: ArrayLike, samples_per_step: int, *, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """95% CI of the throughput at the median step time (samples/s)."""
    low_t, high_t = bootstrap_median_ci(times_s, resamples=resamples)
    # Throughput is monotone decreasing in step time, so the bounds swap.
    return samples_per_step / high_t, samples_per_step / low_t


def ci_rel_halfwidth(times_s: ArrayLike, *, resamples: int = CHECK_RESAMPLES) -> float:
    """Half-width of the median step time's CI relative to the median (cheap check)."""
    low, high = bootstrap_median_ci(times_s, resamples=resamples)
    med = float(np.median(np.asarray(times_s, dtype=float)))
    return (high - low) / 2.0 / med if med > 0 else float("inf")


def throughput_ci_rel_halfwidth(
    times_s: ArrayLike, samples_per_step: int = 1, *, resamples: int = BOOTSTRAP_RESAMPLES
) -> float:
    """Half-width of the throughput CI relative to the throughput at the median.

    The statistic :attr:`Stats.ci_rel_halfwidth` holds: with the default
    ``resamples`` and the same ``samples_per_step`` it is computed the same way,
    bit for bit (the bootstrap's seed is fixed). ``inf`` from fewer than
    :data:`MIN_CI_SAMPLES` times.
    """
    arr = np.asarray(times_s, dtype=float)
    if arr.size < MIN_CI_SAMPLES:
        return float("inf")
    median = float(np.median(arr))
    if median <= 0 or float(arr.min()) <= 0:
        return float("inf")
    low, high = throughput_ci(arr, samples_per_step, resamples=resamples)
    return _rel_halfwidth(low, high, samples_per_step / median)


def _rel_halfwidth(low: float, high: float, centre: float) -> float:
    return (high - low) / 2.0 / centre


def compute_stats(
    times_s: ArrayLike,
    samples_per_step: int,
    *,
    trim_fraction: float,
    stop_reason: StopReason,
    with_ci: bool = True,
) -> Stats:
    """Every statistic the record keeps, from the raw measured times.

    The CI is None from fewer than :data:`MIN_CI_SAMPLES` times, or when
    ``with_ci`` is False (an ``insufficient`` case: too few for the policy).
    """
    arr = np.asarray(times_s, dtype=float)
    if arr.size == 0:
        raise ValueError("no measured iterations")
    median = float(np.median(arr))
    tput = samples_per_step / median
    ci: tuple[float, float] | None = None
    rel: float | None = None
    if with_ci and arr.size >= MIN_CI_SAMPLES:
        low, high = throughput_ci(arr, samples_per_step)
        ci, rel = (low, high), _rel_halfwidth(low, high, tput)
    return Stats(
        n=int(arr.size),
        median_s=median,
        mean_s=float(arr.mean()),
        trimmed_mean_s=trimmed_mean(arr, trim_fraction),
        trim_fraction=trim_fraction,
        std_s=float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        min_s=float(arr.min()),
        max_s=float(arr.max()),
        samples_per_s=tput,
        samples_per_s_ci95=ci,
        ci_rel_halfwidth=rel,
        stop_reason=stop_reason,
    )
