"""The shape of a case's step times: do they vary more than a quiet run of its kind does?

The checks (on whatever series the record keeps: per-step times, or block averages
where a backend times blocks of steps):

- the quartile ratio q3/q1 and the trimmed mean against the median, against the
  limits of the case's framework and device kind (its backend's ``quiet_shape``,
  calibrated from quiet runs with ``benchmarks/noise.py``, else :data:`SHAPE_LIMITS`);
- a split into two tight modes (:func:`two_modes`), and how the modes are arranged
  in time (:func:`arrangement`). A runtime that alternates between two step times
  (JAX on a CPU: "0.444 ms (60%) and 0.651 ms (40%)", the same from run to run)
  spreads the slow mode evenly through the run; contention comes in bursts, and a
  level shift (a clock change, a second job starting) splits the run into a before
  and an after. So two modes spread through the run (a Wald-Wolfowitz runs test
  above :data:`CLUSTERED_Z`) are described, not flagged, and the quartile and
  trimmed-mean checks are made within each mode; modes clustered in time are flagged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from accelbench.backends.base import ShapeLimits
from accelbench.backends.registry import backend_fact
from accelbench.verdicts import (  # noqa: F401  (describe_modes: re-exported)
    clustered_text,
    describe_modes,
    unstable_reasons,
)

MIN_SHAPE_SAMPLES = 5
"""Fewest times the quartile and trimmed-mean checks are made on."""
MIN_MODE_SAMPLES = 20
"""Fewest times the two-mode check is made on."""
MODE_MIN_COUNT = 3
"""Each of two modes must hold at least this many times (two outliers are not a mode)."""
MODE_MIN_SHARE = 0.1
"""Each of two modes must hold at least this share of the times."""
MODE_MIN_SEPARATION = 0.10
"""Two modes must be at least 10% apart (ratio of their medians)."""
MODE_MIN_TIGHTNESS = 4.0
"""... and their distance at least this many of their own (robust) spreads, in log time:
a long tail or a uniform spread splits at about 1.4-3.5, two real modes far above."""
CLUSTERED_Z = -3.0
"""Runs-test z below which two modes are clustered in time (bursts or a level shift).
Modes drawn independently give z ~ N(0, 1) (below -3 one time in 700); a regular
alternation gives z > 0; two blocks of 20 times give z = -4.1, bursts of ten -5 or less."""


DEFAULT_LIMITS = ShapeLimits(1.25, 0.10, "accelbench 0.3 defaults (not calibrated)")
SHAPE_LIMITS: dict[tuple[str, str], ShapeLimits] = {("*", "*"): DEFAULT_LIMITS}
"""Shape limits of any framework (``*``) by device kind (``*``: any). A framework's own
limits are its backend's ``quiet_shape`` (calibrated with ``benchmarks/noise.py``)."""


def device_kind(device: str) -> str:
    """``cuda:1`` -> ``cuda``; ``cpu`` -> ``cpu``."""
    return device.split(":", 1)[0]


def shape_limits(framework: str, device: str) -> tuple[str, ShapeLimits]:
    """The limits of a case and the key they came from (``jax/cpu``, ``*/cpu``, ``*/*``)."""
    kind = device_kind(device)
    own: Mapping[str, ShapeLimits] = backend_fact(framework, "quiet_shape", {})
    for key in ((framework, kind), (framework, "*"), ("*", kind), ("*", "*")):
        found = own.get(key[1]) if key[0] != "*" else SHAPE_LIMITS.get(key)
        if found is not None:
            return "/".join(key), found
    return "*/*", DEFAULT_LIMITS


def two_modes(times_s: ArrayLike) -> dict[str, Any] | None:
    """The best split of the times into two modes, if they form two tight, separate groups.

    The split maximises the between-group variance of log times (Otsu's method
    in one dimension), each group holding at least :data:`MODE_MIN_SHARE`. The
    times are two modes when the groups' medians are :data:`MODE_MIN_SEPARATION`
    apart and their distance is :data:`MODE_MIN_TIGHTNESS` times their pooled
    robust spread (1.4826 x MAD). Returns ``{"low_s", "high_s", "high_share",
    "tightness", "split_s"}`` for two modes (``split_s``: a time at or above it is in
    the high mode), else None.
    """
    arr = np.sort(np.asarray(times_s, dtype=float))
    n = arr.size
    if n < MIN_MODE_SAMPLES or arr[0] <= 0:
        return None
    logs = np.log(arr)
    m = max(MODE_MIN_COUNT, math.ceil(MODE_MIN_SHARE * n))
    if n - m < m:
        return None
    cums = np.cumsum(logs)
    total = cums[-1]
    ks = np.arange(m, n - m + 1)
    mean_low = cums[ks - 1] / ks
    mean_high = (total - cums[ks - 1]) / (n - ks)
    between = ks * (n - ks) * (mean_high - mean_low) ** 2
    k = int(ks[int(np.argmax(between))])
    low, high = logs[:k], logs[k:]
    med_low, med_high = float(np.median(low)), float(np.median(high))
    spread = max(
        1.4826 * float(np.sqrt((np.median(np.abs(low - med_low)) ** 2 * low.size
                                + np.median(np.abs(high - med_high)) ** 2 * high.size) / n)),
        1e-3,  # 0.1%: timer resolution; identical times are one mode, not a split
    )
    distance = med_high - med_low
    tightness = distance / spread
    if math.exp(distance) - 1.0 < MODE_MIN_SEPARATION or tightness < MODE_MIN_TIGHTNESS:
        return None
    return {
        "low_s": math.exp(med_low),
        "high_s": math.exp(med_high),
        "high_share": high.size / n,
        "tightness": tightness,
        "split_s": math.sqrt(float(arr[k - 1]) * float(arr[k])),
    }


def arrangement(times_s: ArrayLike, split_s: float) -> dict[str, Any]:
    """How the two modes lie in time: the Wald-Wolfowitz runs test of the sequence of
    modes (``runs``, ``expected_runs``, ``z``), the high mode's share in each quarter of
    the run, and ``spread``: True when the modes are not clustered (z >= :data:`CLUSTERED_Z`)."""
    high = np.asarray(times_s, dtype=float) >= split_s
    n = int(high.size)
    n_high = int(high.sum())
    n_low = n - n_high
    runs = 1 + int(np.count_nonzero(high[1:] != high[:-1])) if n else 0
    out: dict[str, Any] = {"runs": runs}
    if n_high == 0 or n_low == 0 or n < 3:
        return {**out, "z": None, "spread": False}
    mu = 2.0 * n_high * n_low / n + 1.0
    var = (mu - 1.0) * (mu - 2.0) / (n - 1.0)
    z = (runs - mu) / math.sqrt(var) if var > 0 else 0.0
    quarters = [float(q.mean()) for q in np.array_split(high, 4) if q.size]
    return {**out, "expected_runs": mu, "z": z, "quarter_high_share": quarters,
            "spread": z >= CLUSTERED_Z}


def _spread_stats(arr: np.ndarray, trim_fraction: float) -> tuple[float, float, float | None,
                                                                  float | None]:
    from accelbench.stats import trimmed_mean

    median = float(np.median(arr))
    trimmed = trimmed_mean(arr, trim_fraction)
    q1, q3 = (float(v) for v in np.quantile(arr, [0.25, 0.75]))
    rel = trimmed / median - 1.0 if median > 0 else None
    ratio = q3 / q1 if q1 > 0 else None
    return median, trimmed, rel, ratio


def time_checks(times_s: ArrayLike, trim_fraction: float, *, framework: str = "*",
                device: str = "*", contended: bool = False) -> dict[str, Any]:
    """Shape statistics of the measured times (the figures the unstable verdict reads);
    ``reasons`` (they vary more than a quiet run of this framework and device kind: the
    verdict, :func:`accelbench.verdicts.unstable_reasons`, not stored) and ``described``
    (stable behaviour, not flagged).
    ``contended``: other processes competed (a busy machine); steady heavy competition
    also spreads slow steps through a run, so its modes are not called the runtime's."""
    arr = np.asarray(times_s, dtype=float)
    key, limits = shape_limits(framework, device)
    out: dict[str, Any] = {"n": int(arr.size), "limits": {"key": key, **asdict(limits)}}
    described: list[str] = []
    if arr.size >= MIN_SHAPE_SAMPLES:
        median, trimmed, rel, ratio = _spread_stats(arr, trim_fraction)
        q1, q3 = (float(v) for v in np.quantile(arr, [0.25, 0.75]))
        out.update(median_s=median, trimmed_mean_s=trimmed, trim_fraction=trim_fraction,
                   trimmed_rel_diff=rel, q1_s=q1, q3_s=q3, q3_q1=ratio)
    modes = two_modes(arr) if arr.size >= MIN_MODE_SAMPLES else None
    out["bimodal"] = modes is not None
    groups: list[tuple[str | None, np.ndarray]] = [(None, arr)]
    if modes is not None:
        modes["arrangement"] = arrangement(arr, modes["split_s"])
        out["modes"] = modes
        if modes["arrangement"]["spread"]:
            described.append(
                f"step times alternate between two modes, {describe_modes(modes)}, spread "
                "through the run " + ("(other processes competed: they may be theirs)"
                                      if contended else
                                      "(the runtime's own rhythm, not interference)"))
            high = arr >= modes["split_s"]
            groups = [("fast", arr[~high]), ("slow", arr[high])]
        else:
            share = min(modes["high_share"], 1.0 - modes["high_share"])
            shift = share * (modes["high_s"] / modes["low_s"] - 1.0)
            modes["shift"] = shift
            if shift <= limits.shift:  # above it, a verdict (accelbench.verdicts)
                described.append(f"{clustered_text(modes)} of about {shift:.1%}, within the "
                                 f"{limits.shift:.0%} a quiet run of {key} shows)")
    # The figures the unstable verdict reads (accelbench.verdicts.unstable_reasons): the
    # quartile ratio and trimmed-mean distance of the series, or of each mode.
    out["groups"] = []
    if arr.size >= MIN_SHAPE_SAMPLES:
        for mode, group in groups:
            if group.size < MIN_SHAPE_SAMPLES:
                continue
            _m, _t, rel, ratio = _spread_stats(group, trim_fraction)
            out["groups"].append({"mode": mode, "n": int(group.size), "q3_q1": ratio,
                                  "trimmed_rel_diff": rel})
    out["reasons"] = unstable_reasons(out)
    out["described"] = described
    return out
