"""Energy over several measurement windows (``--energy-trials K``).

A power sensor that averages a short window per update (NVML on A100/H100: 25 ms
every 100 ms) sees the same phase of a periodic load in every update when the
load's period locks to the sensor's. Starting each window after a random delay
(Yang, Adamek & Armour, SC'24, arXiv 2312.02741) samples other phases; the energy
per sample is then the median over the K windows, with their spread, so that one
unlucky phase or one throttled window does not become the figure.

What trials cannot do: for power samples of a load locked to the sensor's period, each
window's error depends on its phase (in ``tests/test_energy_accuracy.py`` from -47% to
+32%), and a median of a few phases stays biased. Such readings get a note when their
trials spread by more than :data:`PHASE_WARN_REL`; only an energy counter is immune.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections.abc import Sequence
from typing import Any

from accelbench.meters.common import join_notes
from accelbench.result import EnergyReading

DEFAULT_PHASE_S = 0.1
"""Delay range when a sensor's update period is unknown (NVML's ~100 ms)."""
MAX_DELAY_S = 2.0
"""Longest random delay between trials."""
PHASE_WARN_REL = 0.10
"""Trials of power samples spreading by more than this (range over median) get a note."""
DRIFT_MIN_TRIALS = 3
"""Fewest trials a drift is judged from."""
DRIFT_REL = 0.03
"""Rise of the trials' power, first to last over the mean, above which it drifts."""
DRIFT_PAIRS = 0.75
"""Share of trial pairs whose later trial draws more power, for a drift."""
_TRUST = ("counter", "integrated_samples", "estimate")
"""Sources from most to least direct; trials of mixed sources take the least direct."""


def trial_delay_s(update_period_s: float | None, rng: random.Random) -> float:
    """A random delay before a trial after the first: uniform over one sensor update period.

    Args:
        update_period_s: The slowest sensor's update period, or None when unknown
            (then :data:`DEFAULT_PHASE_S`).
        rng: The random source (seeded by the caller, so a record is reproducible).
    """
    period = update_period_s if update_period_s and update_period_s > 0 else DEFAULT_PHASE_S
    return rng.uniform(0.0, min(period, MAX_DELAY_S))


def between_trials(cooldown_s: float, update_period_s: float | None,
                   rng: random.Random) -> float:
    """Wait before an energy trial after the first: ``cooldown_s`` (``--cooldown-s``),
    then a random delay (:func:`trial_delay_s`); returns that delay (the record keeps it).

    The cooldown lets a device that warmed during the last trial cool back towards where
    the first started: ML.ENERGY saw back-to-back trials drift upward as a GPU warms, and
    a median of drifting trials is no steady state (:func:`thermal_drift` says when they
    do). Waits through :func:`accelbench.meters.clock.sleep`, so a simulated clock (tests,
    benchmarks) advances instead of sleeping.
    """
    from accelbench.meters import clock

    delay = trial_delay_s(update_period_s, rng)
    clock.sleep(max(0.0, cooldown_s) + delay)
    return delay


def thermal_drift(powers: Sequence[float | None]) -> dict[str, Any] | None:
    """Whether the trials' average power drifts upward, as a device still warming does
    (ML.ENERGY saw back-to-back trials drift so): ``{"power_w", "rise_rel", "rising_pairs",
    "drifting"}``, or None with fewer than :data:`DRIFT_MIN_TRIALS` trials with a power.

    ``rise_rel`` is the least-squares line's rise from the first trial to the last over
    the mean power; ``rising_pairs`` the share of trial pairs in which the later one is
    higher. Drifting: a rise above :data:`DRIFT_REL` in at least :data:`DRIFT_PAIRS` of
    the pairs (one hot trial among cool ones is not a drift).
    """
    p = [float(v) for v in powers if v is not None]
    k = len(p)
    if k < DRIFT_MIN_TRIALS or len(p) != len(powers):
        return None
    mean = sum(p) / k
    if mean <= 0:
        return None
    x_mean = (k - 1) / 2
    slope = sum((i - x_mean) * (v - mean) for i, v in enumerate(p)) / sum(
        (i - x_mean) ** 2 for i in range(k))
    rise = slope * (k - 1) / mean
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    rising = sum(p[j] > p[i] for i, j in pairs) / len(pairs)
    return {"power_w": p, "rise_rel": rise, "rising_pairs": rising,
            "drifting": rise > DRIFT_REL and rising >= DRIFT_PAIRS}


def _median_bound(usable: Sequence[EnergyReading]) -> dict[str, Any] | None:
    """The 95% bound of the median over trials: the widest trial's (the median is off by
    more only when half the trials miss their own bounds, each at most 5% likely); None
    when a trial has none."""
    bounds: list[dict[str, Any]] = []
    for r in usable:
        b = (r.details or {}).get("uncertainty")
        if not isinstance(b, dict) or "rel_95" not in b:
            return None
        bounds.append(b)
    if not bounds:
        return None
    widest = max(bounds, key=lambda b: b["rel_95"])
    return {**widest, "trials": len(bounds), "rule": "median of trials: the widest bound"}


def _key(reading: EnergyReading) -> tuple[str, str]:
    return reading.device, reading.scope


def _spread(values: list[float]) -> dict[str, float]:
    med = statistics.median(values)
    out = {"median": med, "min": min(values), "max": max(values)}
    if med:
        out["range_rel"] = (max(values) - min(values)) / abs(med)
    return out


def _combine(group: list[EnergyReading], delays_s: Sequence[float]) -> EnergyReading:
    usable = [r for r in group
              if r.source != "unavailable" and r.energy_j is not None
              and r.energy_j_per_sample is not None]
    per_trial: list[dict[str, Any]] = [
        {"source": r.source, "energy_j": r.energy_j, "window_s": r.window_s,
         "energy_j_per_sample": r.energy_j_per_sample,
         "avg_power_w": r.avg_power_w,
         "delay_s": delays_s[i] if i < len(delays_s) else 0.0}
        for i, r in enumerate(group)
    ]
    k = len(group)
    if not usable:
        first = group[0]
        details = dict(first.details)
        details["trials"] = per_trial
        return dataclasses.replace(
            first, details=details,
            note=join_notes(f"none of {k} energy trials gave a usable figure", first.note),
        )
    per_sample = [r.energy_j_per_sample for r in usable if r.energy_j_per_sample is not None]
    sources = {r.source for r in usable}
    source = next((s for s in reversed(_TRUST) if s in sources), usable[0].source)
    energy_j = sum(r.energy_j for r in usable if r.energy_j is not None)
    window_s = sum(r.window_s or 0.0 for r in usable)
    peaks = [r.peak_power_w for r in usable if r.peak_power_w is not None]
    dynamic = [r.dynamic_energy_j_per_sample for r in usable
               if r.dynamic_energy_j_per_sample is not None]
    checks = [r.cross_check_rel_diff for r in usable if r.cross_check_rel_diff is not None]
    counts = [r.n_samples for r in usable if r.n_samples is not None]
    spread = _spread(per_sample)
    details = dict(usable[0].details)
    details["trials"] = per_trial
    details["trials_spread"] = spread
    bound = _median_bound(usable)
    if bound is None:
        details.pop("uncertainty", None)
    else:
        details["uncertainty"] = bound
    notes = [f"energy per sample is the median of {len(usable)} trial(s)"
             + (f" (range {spread['range_rel']:.1%} of the median)" if "range_rel" in spread
                else "")]
    if source == "integrated_samples" and spread.get("range_rel", 0.0) > PHASE_WARN_REL:
        notes.append(
            f"WARNING: the trials spread by {spread['range_rel']:.0%} of the median: power "
            "samples of this load depend on its phase against the sensor's updates, so the "
            "figure is uncertain by about that much (a GPU with an energy counter is not)"
        )
    drift = thermal_drift([r.avg_power_w for r in usable])
    if drift is not None:
        details["thermal_drift"] = drift
        if drift["drifting"]:
            notes.append(
                f"WARNING: thermal drift: power rose {drift['rise_rel']:.1%} across the "
                f"{len(usable)} energy trials (the device was still warming; the median "
                "trial is not its steady state): settle first with --settle-s S, or let "
                "it cool between trials with --cooldown-s S"
            )
    if len(usable) < k:
        notes.append(f"{k - len(usable)} of {k} trials gave no usable figure")
    if len(sources) > 1:
        notes.append(f"trials used different sources ({', '.join(sorted(sources))}); "
                     f"labelled {source}")
    seen: set[str] = set()
    for r in group:
        for part in r.note.split("; ") if r.note else ():
            if part and part not in seen:
                seen.add(part)
                notes.append(part)
    return dataclasses.replace(
        usable[0],
        source=source,
        energy_j=energy_j,
        window_s=window_s or None,
        avg_power_w=energy_j / window_s if window_s > 0 else None,
        peak_power_w=max(peaks) if peaks else None,
        energy_j_per_sample=spread["median"],
        dynamic_energy_j_per_sample=statistics.median(dynamic) if dynamic else None,
        cross_check_rel_diff=max(checks) if checks else None,
        n_samples=sum(counts) if counts else None,
        note=join_notes(*notes),
        details=details,
    )


def combine_trials(
    trials: Sequence[Sequence[EnergyReading]], delays_s: Sequence[float] = ()
) -> tuple[EnergyReading, ...]:
    """One reading per device and scope from the readings of K windows.

    ``energy_j`` and ``window_s`` are totals over the usable trials (so average power is
    over all of them); ``energy_j_per_sample`` and ``dynamic_energy_j_per_sample`` are
    medians over trials; ``details["trials"]`` keeps each trial and
    ``details["trials_spread"]`` the median, min, max and range relative to the median.
    A trial that gave no figure is left out of the median and counted in the note.

    Args:
        trials: The readings of each trial, from ``MeterSession.stop`` (per-sample
            energy set).
        delays_s: The random delay before each trial (0 for the first), for the record.

    Returns:
        The combined readings in the order of their first appearance; with one trial,
        that trial's readings unchanged.
    """
    if not trials:
        return ()
    if len(trials) == 1:
        return tuple(trials[0])
    groups: dict[tuple[str, str], list[EnergyReading]] = {}
    for readings in trials:
        for reading in readings:
            groups.setdefault(_key(reading), []).append(reading)
    return tuple(_combine(group, delays_s) for group in groups.values())
