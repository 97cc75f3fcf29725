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


def widen_by_bounds(ci: tuple[float, float], bound_a: float, bound_b: float
                    ) -> tuple[float, float] | None:
    """An energy ratio's CI widened by each side's 95% error bound, as worst cases.

    The bootstrap CI ``(low, high)`` of ``EB / EA`` covers timing noise; each side's
    figure may also be off by up to its relative bound (``EA`` by ``bound_a``, ``EB`` by
    ``bound_b``). Taken together at their worst, the true ratio lies in
    ``(low x (1 - bound_b) / (1 + bound_a), high x (1 + bound_b) / (1 - bound_a))`` (the
    bounds added to the CI as worst cases, as the bound's own terms are added). None
    where A's bound is 100% or more: the ratio then has no upper limit.
    """
    if bound_a >= 1.0:
        return None
    return (ci[0] * max(0.0, 1.0 - bound_b) / (1.0 + bound_a),
            ci[1] * (1.0 + bound_b) / (1.0 - bound_a))


def with_bounds(energy: Ratio, bounds: tuple[float | None, float | None]) -> Ratio:
    """``energy`` (a ratio B/A with its bootstrap CI) with both sides' 95% error bounds
    in its CI (:func:`widen_by_bounds`); where a side has none (a record stored before
    bounds existed), the CI is unchanged and the note says it holds timing noise only."""
    if energy.value is None or energy.ci95 is None:
        return energy
    missing = [side for side, b in zip(("A", "B"), bounds, strict=True) if b is None]
    if missing:
        note = (f"error bound unavailable on {' and '.join(missing)}: the CI covers timing "
                "noise only, not the sensors' error")
        return Ratio(value=energy.value, ci95=energy.ci95, significant=energy.significant,
                     note=f"{energy.note}; {note}" if energy.note else note)
    bound_a, bound_b = float(bounds[0] or 0.0), float(bounds[1] or 0.0)
    ci = widen_by_bounds(energy.ci95, bound_a, bound_b)
    text = (f"widened by the 95% error bounds of A (+- {100 * bound_a:.2g}%) and B "
            f"(+- {100 * bound_b:.2g}%) as worst cases")
    if ci is None:
        return Ratio(value=energy.value, note=f"{energy.note}; A's error bound is "
                     f"{100 * bound_a:.0f}%: the ratio has no upper limit, so no CI")
    return Ratio(value=energy.value, ci95=ci, significant=_significant(ci),
                 note=f"{energy.note}; {text}" if energy.note else text)


def mean_bound(energies: Sequence[float | None], bounds: Sequence[float | None]
               ) -> float | None:
    """The 95% relative bound of the mean of several runs' energies: their half-widths
    added (worst case, as :func:`accelbench.result.energy_rel_bound` adds a boundary's
    readings) over their sum; None where a run has none."""
    total = half = 0.0
    for e, b in zip(energies, bounds, strict=True):
        if e is None or b is None:
            return None
        total += e
        half += abs(e) * b
    return half / total if total > 0 else None


def ratios(  # noqa: PLR0913
    times_a_s: Sequence[float],
    samples_per_step_a: int,
    times_b_s: Sequence[float],
    samples_per_step_b: int,
    *,
    energy_a_j_per_sample: float | None = None,
    energy_b_j_per_sample: float | None = None,
    boundaries: tuple[str, str] = ("device", "device"),
    energy_bounds: tuple[float | None, float | None] = (None, None),
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
        energy_bounds: A's and B's 95% relative error bounds of their energy per sample
            (:attr:`accelbench.result.Result.energy_rel_u95`), added to the energy
            ratio's CI as worst cases (:func:`with_bounds`); None where a side has none.
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
        energy = with_bounds(energy, energy_bounds)
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
            energy = with_bounds(
                Ratio(value=float(vb.mean() / va.mean()), ci95=eci,
                      significant=_significant(eci),
                      note=f"R = {va.size} / {vb.size} runs: bootstrap over runs"),
                (mean_bound(ea, [r.energy_rel_u95 for r in runs_a]),
                 mean_bound(eb, [r.energy_rel_u95 for r in runs_b])))
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
