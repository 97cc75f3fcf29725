"""Statistics: ratios B/A of throughput and energy per sample, with bootstrap CIs.

Methods are in :mod:`accelbench.report.compare`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.result import Result
from accelbench.stats import GroupStats, bootstrap

RESAMPLES = 2000
SEED = 20200519
LEVEL = 0.95
MIN_CI_SAMPLES = 3
"""No CI from fewer iterations on a side (the record's own rule: see Stats)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Ratio:
    """A ratio B/A with its 95% CI, or the reason it has none."""

    value: float | None
    ci95: tuple[float, float] | None = None
    significant: bool | None = None
    """Whether the CI excludes 1; None without a CI."""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {
            "value": self.value,
            "ci95": list(self.ci95) if self.ci95 else None,
            "significant": self.significant,
            "note": self.note,
        }


def _interval(values: np.ndarray) -> tuple[float, float]:
    alpha = (1.0 - LEVEL) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _significant(ci: tuple[float, float]) -> bool:
    return ci[0] > 1.0 or ci[1] < 1.0


def ratios(  # noqa: PLR0913
    times_a_s: Sequence[float],
    samples_per_step_a: int,
    times_b_s: Sequence[float],
    samples_per_step_b: int,
    *,
    energy_a_j_per_sample: float | None = None,
    energy_b_j_per_sample: float | None = None,
    boundaries: tuple[str, str] = ("device", "device"),
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[Ratio, Ratio]:
    """Throughput ratio and energy-per-sample ratio B/A (methods in the module docstring).

    Args:
        times_a_s: Raw measured iteration times of A.
        samples_per_step_a: Samples per step of A.
        times_b_s: Raw measured iteration times of B.
        samples_per_step_b: Samples per step of B.
        energy_a_j_per_sample: Stored energy per sample of A, None when unavailable.
        energy_b_j_per_sample: Likewise for B.
        boundaries: What A's and B's energy figures cover (``device``, ``device+host``,
            ``node``); figures of different boundaries are never divided.
        resamples: Bootstrap resamples.
        seed: Seed of the generator (fixed: the same samples give the same CI).

    Returns:
        ``(throughput_ratio, energy_ratio)``.
    """
    ta = np.asarray(times_a_s, dtype=float)
    tb = np.asarray(times_b_s, dtype=float)
    if ta.size == 0 or tb.size == 0:
        side = "A" if ta.size == 0 else "B"
        none = Ratio(value=None, note=f"no iteration times on side {side}")
        return none, none
    tput_a = samples_per_step_a / float(np.median(ta))
    tput_b = samples_per_step_b / float(np.median(tb))
    tput_value = tput_b / tput_a
    if boundaries[0] != boundaries[1]:
        energy = Ratio(value=None, note=f"energy boundaries differ (A: {boundaries[0]}, "
                                        f"B: {boundaries[1]}); not compared")
    elif energy_a_j_per_sample is None or energy_b_j_per_sample is None:
        side = "A and B" if energy_a_j_per_sample is None and energy_b_j_per_sample is None \
            else ("A" if energy_a_j_per_sample is None else "B")
        energy = Ratio(value=None, note=f"energy unavailable on {side}")
    elif energy_a_j_per_sample <= 0:
        energy = Ratio(value=None, note="energy per sample of A is not positive")
    else:
        energy = Ratio(value=energy_b_j_per_sample / energy_a_j_per_sample)
    if ta.size < MIN_CI_SAMPLES or tb.size < MIN_CI_SAMPLES:
        note = f"fewer than {MIN_CI_SAMPLES} iterations on a side: no CI"
        return (
            Ratio(value=tput_value, note=note),
            energy if energy.value is None else Ratio(value=energy.value, note=note),
        )
    rng = np.random.default_rng(seed)
    med_a, mean_a = bootstrap(ta, resamples, rng, ("median", "mean"))
    med_b, mean_b = bootstrap(tb, resamples, rng, ("median", "mean"))
    boot_tput = (samples_per_step_b / med_b) / (samples_per_step_a / med_a)
    ci = _interval(boot_tput)
    tput = Ratio(value=tput_value, ci95=ci, significant=_significant(ci))
    if energy.value is not None:
        boot_energy = energy.value * (mean_b / tb.mean()) / (mean_a / ta.mean())
        eci = _interval(boot_energy)
        energy = Ratio(
            value=energy.value, ci95=eci, significant=_significant(eci),
            note="CI from step-time resampling, average power held fixed",
        )
    return tput, energy


ONE_RUN_NOTE = ("R = 1 on {side}: the CI covers within-run noise only and cannot support "
                "a significance claim (measure both with --repeats 3 or more)")


def cannot_tell(r: Ratio, side: str) -> Ratio:
    """``r`` with no significance claim: a side has one run (see the module docstring)."""
    if r.value is None:
        return r
    note = ONE_RUN_NOTE.format(side=side)
    return Ratio(value=r.value, ci95=r.ci95, significant=None,
                 note=f"{r.note}; {note}" if r.note else note)


def group_ratios(
    runs_a: Sequence[Result], runs_b: Sequence[Result], *,
    resamples: int = RESAMPLES, seed: int = SEED,
) -> tuple[Ratio, Ratio]:
    """Throughput and energy ratios B/A of two groups of runs (see
    :func:`group_ratios_and_sides`)."""
    tput, energy, _, _ = group_ratios_and_sides(runs_a, runs_b, resamples=resamples,
                                                seed=seed)
    return tput, energy


def group_ratios_and_sides(
    runs_a: Sequence[Result], runs_b: Sequence[Result], *,
    resamples: int = RESAMPLES, seed: int = SEED,
) -> tuple[Ratio, Ratio, GroupStats, GroupStats]:
    """Throughput and energy ratios B/A of two groups of runs (each at least 2 ``ok`` runs
    with times), with CIs that cover the variation between runs, and each side's group
    headline (the throughputs the ratio divides, with their own CIs over the runs).

    Throughput: the groups' headlines, two-level bootstrap per side (independent streams
    of one fixed seed). Energy: the ratio of the runs' mean energies per sample, with a
    bootstrap over runs (each run's energy is one draw).
    """
    from accelbench.stats import group_stats, two_level_median_means

    spa, spb = runs_a[0].samples_per_step, runs_b[0].samples_per_step
    ta = [np.asarray(r.iteration_times_s, dtype=float) for r in runs_a]
    tb = [np.asarray(r.iteration_times_s, dtype=float) for r in runs_b]
    ga, gb = group_stats(ta, spa, resamples=resamples), group_stats(tb, spb,
                                                                     resamples=resamples)
    value = gb.samples_per_s / ga.samples_per_s
    ss = np.random.SeedSequence(seed).spawn(3)
    ma = two_level_median_means(ta, resamples=resamples, rng=np.random.default_rng(ss[0]))
    mb = two_level_median_means(tb, resamples=resamples, rng=np.random.default_rng(ss[1]))
    ci = _interval((spb / mb) / (spa / ma))
    note = f"R = {len(runs_a)} / {len(runs_b)} runs: two-level bootstrap (runs, then iterations)"
    tput = Ratio(value=value, ci95=ci, significant=_significant(ci), note=note)
    bounds = {r.energy_boundary for r in (*runs_a, *runs_b)}
    ea = [r.energy_j_per_sample for r in runs_a]
    eb = [r.energy_j_per_sample for r in runs_b]
    if len(bounds) > 1:
        energy = Ratio(value=None, note="energy boundaries differ; not compared")
    elif any(e is None for e in (*ea, *eb)):
        energy = Ratio(value=None, note="energy unavailable on a run")
    else:
        va, vb = np.asarray(ea, dtype=float), np.asarray(eb, dtype=float)
        if va.mean() <= 0:
            energy = Ratio(value=None, note="energy per sample of A is not positive")
        else:
            rng = np.random.default_rng(ss[2])
            [ba] = bootstrap(va, resamples, rng, ("mean",))
            [bb] = bootstrap(vb, resamples, rng, ("mean",))
            eci = _interval(bb / ba)
            energy = Ratio(value=float(vb.mean() / va.mean()), ci95=eci,
                           significant=_significant(eci),
                           note=f"R = {va.size} / {vb.size} runs: bootstrap over runs")
    return tput, energy, ga, gb


def seed_ratio(values_a: Sequence[float], values_b: Sequence[float], *, what: str,
               resamples: int = RESAMPLES, seed: int = SEED) -> Ratio:
    """The ratio B/A of the means of two sets of per-seed figures (time-, energy- or
    samples-to-target of the runs that reached the target), with a percentile bootstrap CI
    over the seeds (each run one draw, the sides resampled independently from one fixed
    seed); no CI with fewer than :data:`MIN_CI_SAMPLES` figures on a side."""
    va, vb = np.asarray(values_a, dtype=float), np.asarray(values_b, dtype=float)
    if va.size == 0 or vb.size == 0:
        side = "A and B" if va.size == 0 and vb.size == 0 else ("A" if va.size == 0 else "B")
        return Ratio(value=None, note=f"no run reached the target on {side}: no {what} ratio")
    if va.mean() <= 0:
        return Ratio(value=None, note=f"the {what} of A is not positive")
    value = float(vb.mean() / va.mean())
    if va.size < MIN_CI_SAMPLES or vb.size < MIN_CI_SAMPLES:
        return Ratio(value=value, note=f"{va.size} / {vb.size} runs reached the target: a CI "
                     f"needs {MIN_CI_SAMPLES} on each side")
    rng = np.random.default_rng(seed)
    [ma] = bootstrap(va, resamples, rng, ("mean",))
    [mb] = bootstrap(vb, resamples, rng, ("mean",))
    ci = _interval(mb / ma)
    return Ratio(value=value, ci95=ci, significant=_significant(ci),
                 note=f"{va.size} / {vb.size} reached runs: bootstrap over seeds")
