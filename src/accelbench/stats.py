"""Statistics of raw iteration times: median, trimmed mean, bootstrap CI.

All functions take raw per-iteration step times in seconds and never drop
data silently; the trimmed mean generalises the paper's protocol (drop the
10 highest and 10 lowest of 1000 iterations) as a fraction.

No confidence interval is given from fewer than :data:`MIN_CI_SAMPLES` times: a
percentile bootstrap of one or two values is a point or the range of two draws,
which would look like a tight interval while saying nothing. The adaptive stop
of :mod:`accelbench.execution.measure` decides with :func:`throughput_ci_rel_halfwidth`,
the statistic :func:`compute_stats` reports, so a case stopped on ``target_ci``
reports a CI within the target.

:func:`group_stats` gives the headline of a case measured in several runs (``--repeats``):
a two-level bootstrap (runs, then iterations within each run), so its CI covers the
variation between workers, which one run's CI does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

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
    [medians] = bootstrap(arr, resamples, np.random.default_rng(_SEED))
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


# -- repeated runs ------------------------------------------------------------------------
#
# One run's CI describes the noise within that run only: the step time of a case also
# moves between workers (memory layout, thread placement, clocks, neighbours), often by far
# more than the within-run CI. With R >= 2 runs of one case the headline is a two-level
# bootstrap: resample the runs, then the iterations within each resampled run.
#
# The statistic is the mean of the runs' median step times (throughput = samples per step
# / that mean): each run is one draw of the between-run effect and counts once, whatever
# its length (the adaptive stop gives runs different lengths; a pooled median would let the
# longest run dominate and would understate the between-run spread). For R = 1 it is the
# run's median, the single-run headline.

MIN_REPEATS_FOR_GROUP_CI = 2
"""Fewest runs of a case for a CI that covers the variation between runs."""


Statistic = Literal["median", "mean"]
"""A statistic :func:`bootstrap` computes of each resample."""
_STATISTICS: dict[str, Callable[..., np.ndarray]] = {"median": np.median, "mean": np.mean}
_MAX_DRAWS = 2_000_000
"""Values drawn at once: memory stays bounded for long runs (n up to 1e5)."""


def bootstrap(values: ArrayLike, resamples: int, rng: np.random.Generator,
              statistics: Sequence[Statistic] = ("median",)) -> tuple[np.ndarray, ...]:
    """The one resampling of accelbench: ``resamples`` draws of ``values`` with
    replacement (each as many values as ``values``), and each of ``statistics`` of every
    draw, one array of ``resamples`` figures per statistic, in order.

    The draws are ``rng.integers(0, n, size=(rows, n))`` in chunks of rows; numpy's
    generator gives the same indices chunked or at once, so the figures depend on the
    values, ``resamples`` and the generator's state only. Every bootstrap CI (a record's,
    ``--repeats``' two levels, ``compare``'s ratios, ``--phases``' differences) draws here.

    Raises:
        ValueError: no values.
    """
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("no samples")
    out = tuple(np.empty(resamples) for _ in statistics)
    chunk = max(1, _MAX_DRAWS // arr.size)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        draws = arr[rng.integers(0, arr.size, size=(stop - start, arr.size))]
        for figures, name in zip(out, statistics, strict=True):
            figures[start:stop] = _STATISTICS[name](draws, axis=1)
    return out


def two_level_median_means(
    runs_times_s: Sequence[ArrayLike],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Bootstrap distribution of the mean of run medians: ``resamples`` values.

    Each resample draws R runs with replacement, then, within each drawn run, its
    iterations with replacement (a fresh inner resample for every draw), and averages the
    drawn runs' medians.
    """
    runs = [np.asarray(t, dtype=float) for t in runs_times_s]
    if not runs or any(r.size == 0 for r in runs):
        raise ValueError("every run needs at least one time")
    rng = rng if rng is not None else np.random.default_rng(_SEED)
    n_runs = len(runs)
    picks = rng.integers(0, n_runs, size=(resamples, n_runs))
    # One independent inner median per (resample, position): a run drawn twice in one
    # resample gets two different inner resamples.
    inner = np.stack([bootstrap(r, resamples * n_runs, rng)[0] for r in runs])
    slots = np.arange(resamples * n_runs).reshape(resamples, n_runs)
    return np.asarray(inner[picks, slots].mean(axis=1))


@dataclass(frozen=True, slots=True)
class GroupStats:
    """The headline of a case measured in R runs (fresh workers)."""

    runs: int
    samples_per_s: float
    """Samples per step / the mean of the runs' median step times."""
    ci95: tuple[float, float] | None
    """Two-level bootstrap CI (runs, then iterations) when ``runs >= 2``; for one run the
    run's own (within-run) CI, or None from fewer than :data:`MIN_CI_SAMPLES` times."""
    ci_rel_halfwidth: float | None
    between_runs: bool
    """Whether the CI covers the variation between runs (``runs >= 2``); False: it covers
    the noise within one run only and supports no claim about another run."""
    run_samples_per_s: tuple[float, ...]
    """Each run's own throughput at its median, in run order."""

    @property
    def note(self) -> str:
        """One line on what the CI covers."""
        if self.between_runs:
            return f"CI over {self.runs} runs (two-level bootstrap: runs, then iterations)"
        return ("one run: the CI covers within-run noise only; it cannot support a claim "
                "about another run (use --repeats 3 or more)")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {
            "runs": self.runs,
            "samples_per_s": self.samples_per_s,
            "ci95": list(self.ci95) if self.ci95 else None,
            "ci_rel_halfwidth": self.ci_rel_halfwidth,
            "between_runs": self.between_runs,
            "run_samples_per_s": list(self.run_samples_per_s),
            "note": self.note,
        }


def group_stats(
    runs_times_s: Sequence[ArrayLike], samples_per_step: int, *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> GroupStats:
    """The headline throughput and CI of a case from the raw times of its runs.

    Raises:
        ValueError: no runs, or a run without times.
    """
    runs = [np.asarray(t, dtype=float) for t in runs_times_s]
    if not runs or any(r.size == 0 for r in runs):
        raise ValueError("every run needs at least one time")
    medians = [float(np.median(r)) for r in runs]
    tput = samples_per_step / float(np.mean(medians))
    per_run = tuple(samples_per_step / m for m in medians)
    if len(runs) < MIN_REPEATS_FOR_GROUP_CI:
        only = runs[0]
        if only.size < MIN_CI_SAMPLES:
            return GroupStats(1, tput, None, None, False, per_run)
        low, high = throughput_ci(only, samples_per_step, resamples=resamples)
        return GroupStats(1, tput, (low, high), _rel_halfwidth(low, high, tput), False,
                          per_run)
    boot = two_level_median_means(runs, resamples=resamples)
    alpha = (1.0 - 0.95) / 2.0
    low_t, high_t = np.quantile(boot, [alpha, 1.0 - alpha])
    low, high = samples_per_step / float(high_t), samples_per_step / float(low_t)
    return GroupStats(len(runs), tput, (low, high), _rel_halfwidth(low, high, tput), True,
                      per_run)
