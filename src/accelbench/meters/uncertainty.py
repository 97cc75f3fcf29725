"""A 95% bound on each energy figure, from what is known about its sensor (issue 44).

:func:`energy_bound` reads a finished :class:`~accelbench.result.EnergyReading` and
returns ``details["uncertainty"]``: the relative half-width ``rel_95`` of the interval
that holds the true energy of the reading's boundary and window (and so its energy per
sample: the sample count is exact) with at least 95% probability, and each term it is
the sum of. The terms, each relative to the reading's energy ``E`` over ``T`` seconds:

* ``edge`` (every sensor): a reading taken at a window edge holds the value of the
  sensor's latest update, up to one update period ``P`` old, and a sensor that averages
  over ``A`` seconds lags by ``A / 2``. A counter's two edges miss at most ``P`` seconds of
  the highest power seen (``P * peak / E``: the value at each edge is stale by a part of
  ``P``, at whatever power flowed then); power samples miss the change of power across
  ``A / 2 + P + interval`` at each edge (``(A / 2 + P + interval) * swing / E``, the swing
  being the range of the sensor's own updates in the window).
* ``sampling`` (power samples): a sensor that observes a share ``f`` of each update
  period (NVML on A100/H100: 25 ms of 100 ms) estimates the window's mean power from
  ``N`` samples of the load: ``1.96 * cv * sqrt((1 - f) / N)``, with ``cv`` the spread of
  the updates over their mean (for a sensor that averages ``k`` updates, such as the 1 s
  average, the spread of the underlying updates, ``sqrt(k)`` times the seen one). A load
  locked to the sensor's period breaks the independence this assumes; only trials after
  random delays (``--energy-trials``) or a counter find that out.
* ``resolution``: the counter's resolution at both edges (NVML 1 mJ, RAPL 1 uJ), or a
  reading in whole watts (IPMI) rounded by up to 0.5 W.
* ``bridged``: energy bridged across a counter reset or an unexplained decrease (RAPL),
  counted as wholly uncertain.
* ``coverage``: readings that cover only part of the window, the uncovered share.
* ``model``: a TDP estimate's stated model error, :data:`ESTIMATE_MODEL_REL` (published
  TDP-based estimates err by up to 40% against a wall meter, Fischer 2025).

Dynamic energy (the energy above the idle baseline) adds the idle baseline's spread:
:func:`with_dynamic_bound` sets ``dynamic_rel_95``, the half-width of ``E`` plus
``1.96 * s / sqrt(n) * T`` (``s`` the spread of the baseline's ``n`` readings) over the
dynamic energy.

Terms are added, not combined in quadrature: the edge and resolution terms are worst
cases, not independent errors. What is not in the bound: a sensor's calibration (vendors
state none for NVML; MLPerf Power asks meters within 5% of a reference), and energy
outside the boundary (a ``device`` figure says nothing of the host).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from accelbench.result import EnergyReading

Z95 = 1.96
"""Two-sided 95% quantile of the normal distribution."""
ESTIMATE_MODEL_REL = 0.5
"""Stated model error of a TDP estimate (relative, 95%)."""
AVERAGING_S = {"power_usage": 1.0, "average": 1.0}
"""Averaging window behind each NVML power field (Ampere and newer: a 1 s average)."""
IPMI_HALF_WATT = 0.5
"""Rounding of a reading in whole watts."""
MODEL = "issue44-v1"
"""Names the model that made a bound, so later models can be told apart."""


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _period_s(details: Mapping[str, Any]) -> float | None:
    period = details.get("update_period")
    if isinstance(period, Mapping):
        return _num(period.get("period_s"))
    return None


def _averaging(details: Mapping[str, Any], period_s: float) -> tuple[float, float]:
    """``(A, f)``: the averaging window behind each reading and the share of each update
    period the sensor observes (1 where unknown for an averaging sensor, 0 otherwise)."""
    field = details.get("power_field")
    if isinstance(field, str) and field in AVERAGING_S:
        return AVERAGING_S[field], 1.0 if _num(details.get("observed_fraction")) is None \
            else min(1.0, float(details["observed_fraction"]))
    bmc = _num(details.get("bmc_sampling_period_s"))
    if bmc is not None:
        return bmc, min(1.0, bmc / period_s)
    observed = _num(details.get("observed_fraction"))
    if observed is not None:
        return observed * period_s, min(1.0, observed)
    return 0.0, 0.0


def _sampling(details: Mapping[str, Any], period_s: float) -> dict[str, float]:
    """The edge and sampling terms of integrated power samples, in watt-seconds and as a
    relative error of the mean power."""
    values = details.get("update_values")
    if not isinstance(values, Mapping):
        return {}
    mean_w, std_w = _num(values.get("mean_w")), _num(values.get("std_w"))
    lo_w, hi_w, n = _num(values.get("min_w")), _num(values.get("max_w")), _num(values.get("n"))
    if mean_w is None or std_w is None or lo_w is None or hi_w is None or not n or mean_w <= 0:
        return {}
    avg_s, observed = _averaging(details, period_s)
    interval = _num((details.get("power_samples") or {}).get("mean_interval_s")) or 0.0
    k = max(1.0, avg_s / period_s) if avg_s > period_s else 1.0
    cv = std_w / mean_w * math.sqrt(k)
    updates = _num(details.get("sensor_updates")) or n
    out = {"edge_ws": (avg_s / 2 + period_s + interval) * (hi_w - lo_w)}
    out["sampling"] = Z95 * cv * math.sqrt(max(0.0, 1.0 - observed) / max(updates, 1.0))
    return out


def energy_bound(reading: EnergyReading) -> dict[str, Any] | None:
    """``details["uncertainty"]`` of a reading: ``{"rel_95", "terms", "boundary",
    "model"}``, or None where the reading has no energy (or too little is known of its
    sensor to bound it, which the record then shows as unavailable)."""
    energy_j = reading.energy_j
    if energy_j is None or energy_j <= 0 or reading.source == "unavailable":
        return None
    details: Mapping[str, Any] = reading.details or {}
    window_s = reading.window_s or 0.0
    terms: dict[str, float] = {}
    if reading.source == "estimate":
        terms["model"] = ESTIMATE_MODEL_REL
    else:
        period_s = _period_s(details)
        if period_s is None or window_s <= 0:
            return None
        peak_w = max(_num(reading.peak_power_w) or 0.0, _num(reading.avg_power_w) or 0.0,
                     _num((details.get("update_values") or {}).get("max_w")) or 0.0)
        if reading.source == "counter":
            terms["edge"] = period_s * peak_w / energy_j
            res = _num(reading.resolution_j) or _num(details.get("counter_unit_j")) or 0.0
            terms["resolution"] = 2 * res / energy_j
            bridged = _num(details.get("bridged_energy_j")) or 0.0
            if bridged > 0:
                terms["bridged"] = bridged / energy_j
        else:
            parts = _sampling(details, period_s)
            if not parts:
                return None
            terms["edge"] = parts["edge_ws"] / energy_j
            terms["sampling"] = parts["sampling"]
            if _num(details.get("bmc_sampling_period_s")) is not None:
                terms["resolution"] = IPMI_HALF_WATT * window_s / energy_j
        coverage = _num(details.get("coverage"))
        if coverage is not None and coverage < 1.0:
            terms["coverage"] = 1.0 - coverage
    boundary = details.get("boundary") or ("node" if reading.scope == "node" else "device")
    return {"rel_95": sum(terms.values()), "terms": terms, "boundary": boundary,
            "model": MODEL}


def with_bound(reading: EnergyReading) -> EnergyReading:
    """The reading with ``details["uncertainty"]`` set (unchanged where none can be given)."""
    bound = energy_bound(reading)
    if bound is None:
        return reading
    import dataclasses

    return dataclasses.replace(reading, details={**(reading.details or {}),
                                                 "uncertainty": bound})


def idle_spread(reading: EnergyReading, timeline_w: list[float]) -> tuple[float, int] | None:
    """``(standard deviation in W, readings)`` of an idle baseline: its sensor's distinct
    updates where known, else the power timeline's slices; None with fewer than two."""
    values = (reading.details or {}).get("update_values")
    if isinstance(values, Mapping):
        std, n = _num(values.get("std_w")), _num(values.get("n"))
        if std is not None and n and n >= 2:
            return std, int(n)
    if len(timeline_w) < 2:
        return None
    mean = sum(timeline_w) / len(timeline_w)
    var = sum((v - mean) ** 2 for v in timeline_w) / (len(timeline_w) - 1)
    return math.sqrt(var), len(timeline_w)


def with_dynamic_bound(reading: EnergyReading, idle_w: float, spread: tuple[float, int]
                       ) -> EnergyReading:
    """The reading with ``details["uncertainty"]["dynamic_rel_95"]``: the bound of its
    dynamic energy per sample (unchanged where it has no bound or no dynamic energy)."""
    bound = (reading.details or {}).get("uncertainty")
    energy_j, window_s = reading.energy_j, reading.window_s
    if not isinstance(bound, dict) or energy_j is None or not window_s:
        return reading
    dynamic_j = energy_j - idle_w * window_s
    if reading.dynamic_energy_j_per_sample is None or dynamic_j <= 0:
        return reading
    std_w, n = spread
    idle_half_j = Z95 * std_w / math.sqrt(n) * window_s
    new = {**bound, "idle_spread_w": std_w, "idle_readings": n,
           "dynamic_rel_95": (bound["rel_95"] * energy_j + idle_half_j) / dynamic_j}
    import dataclasses

    return dataclasses.replace(reading, details={**(reading.details or {}), "uncertainty": new})
