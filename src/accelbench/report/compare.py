"""Compare two selections of results: throughput and energy ratios with bootstrap CIs.

Selector syntax (for ``accelbench compare A B``):

- ``KEY=VALUE[,KEY=VALUE...]``: every result matching all pairs. Keys: ``device``,
  ``precision``, ``framework``, ``workload``, ``size``, ``suite`` (suite id), ``tag``,
  ``id`` (prefix), e.g. ``device=cuda:0``, ``precision=amp_bf16,device=cuda:0`` or
  ``framework=jax``.
- ``suite:SUITE_ID`` or ``id:PREFIX``: explicitly a suite or one result.
- a bare word: a suite id if one matches it exactly, else a unique result-id prefix.

Cases of A and B are matched on (workload, size, batch size, device, precision,
framework) minus the compared axes: device is an axis when A and B hold different
sets of devices, precision and framework likewise (``framework=torch
framework=jax`` gives the JAX/torch ratios per workload and precision).

Pairing like with like: when a side holds several results of one case, the pair is
taken from one suite where both sides have results from one (the newest such
suite), otherwise the two results closest in time (measured under the most similar
conditions); ``ok`` results are preferred. Each case says how it was paired (suite
ids, start times, time apart). A ``diverged`` or ``insufficient`` result never gets a
ratio. A noisy input (see :attr:`accelbench.result.Result.noisy`) raises an
:class:`~accelbench.errors.AccelbenchWarning`; ``exclude_noisy`` leaves noisy results
out before pairing.

Methods (``B / A``; a throughput ratio above 1 means B is faster, an energy ratio
below 1 means B needs less energy per sample):

- throughput ratio = (spsB / median tB) / (spsA / median tA), with a 95% percentile
  bootstrap CI from resampling each side's raw iteration times independently
  (fixed seed, 2000 resamples).
- repeated runs: the runs of one case (``--repeats``; one suite id and case key) form a
  group. When both sides have R >= 2 runs, the ratio is of the groups' headlines
  (samples per step / mean of the runs' median step times) and its CI a two-level
  bootstrap of each side (runs, then iterations: :func:`accelbench.stats.group_stats`),
  which covers the variation between workers; significant when that CI excludes 1.
  When a side has one run, the CI covers within-run noise only: step times move between
  workers by far more than one run's CI, so ``significant`` is None ("cannot tell") with
  a note saying so, whatever the CI.
- energy ratio = EB / EA of the stored energies per sample. Energy per sample is
  average power x step time / samples per step, so its CI resamples the iteration
  times of each side (the unit of resampling) with the average power held fixed:
  E* = E x mean(t*) / mean(t). The CI thus covers timing variability only, not the
  power sensor's own error. Without energy on both sides there is no ratio; with
  fewer than 3 iterations on a side there is a ratio but no CI, never an invented one.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from accelbench.errors import AccelbenchWarning, ConfigError
from accelbench.report.rows import (
    ENERGY_KIND_SHORT,
    device_name,
    energy_kind,
    parse_time,
    short_time,
)
from accelbench.result import Result
from accelbench.spec import normalize_framework, normalize_precision
from accelbench.store import ResultFilter, Store

RESAMPLES = 2000
SEED = 20200519
LEVEL = 0.95
MIN_CI_SAMPLES = 3
"""No CI from fewer iterations on a side (the record's own rule: see Stats)."""
MATCH_FIELDS = ("workload", "size", "batch_size", "device", "precision", "framework")
#: Matched on too where any compared result has one (a compiled step, a sweep's power
#: limit is another case); left out otherwise, so plain comparisons read as before.
OPTIONAL_MATCH_FIELDS = ("fast_paths", "settings")
AXES = ("device", "precision", "framework")

SELECTOR_KEYS = {
    "device": "device",
    "precision": "precision",
    "framework": "framework",
    "workload": "workload",
    "size": "size",
    "suite": "suite_id",
    "suite_id": "suite_id",
    "tag": "tag",
    "id": "id",
}



@dataclass(frozen=True, kw_only=True, slots=True)
class Selector:
    """A parsed selector."""

    text: str
    kind: Literal["filter", "suite", "id", "word"]
    pairs: tuple[tuple[str, str], ...] = ()
    """(ResultFilter field, value) pairs of a ``filter`` selector."""
    value: str = ""
    """The suite id, id prefix or bare word of the other kinds."""


def parse_selector(text: str) -> Selector:
    """Parse the selector syntax in the module docstring.

    Raises:
        ConfigError: empty selector, unknown key, or a pair without a value.
    """
    text = text.strip()
    if not text:
        raise ConfigError("empty selector; use e.g. device=cuda:0, suite:ID or a result id")
    for prefix, kind in (("suite:", "suite"), ("id:", "id")):
        if text.startswith(prefix) and "=" not in text:
            value = text[len(prefix):]
            if not value:
                raise ConfigError(f"selector {text!r} lacks a value after {prefix!r}")
            return Selector(text=text, kind=kind, value=value)  # type: ignore[arg-type]
    if "=" not in text:
        return Selector(text=text, kind="word", value=text)
    pairs = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ConfigError(f"selector part {part!r} must look like KEY=VALUE")
        if key not in SELECTOR_KEYS:
            raise ConfigError(
                f"unknown selector key {key!r}; use one of {', '.join(sorted(SELECTOR_KEYS))}"
            )
        name = SELECTOR_KEYS[key]
        if name == "precision":
            value = normalize_precision(value)
        elif name == "framework":
            value = normalize_framework(value)
        pairs.append((name, value))
    return Selector(text=text, kind="filter", pairs=tuple(pairs))


def select(store: Store, selector: Selector, base: ResultFilter | None = None) -> list[Result]:
    """The results ``selector`` picks (restricted by ``base``), newest first.

    Raises:
        ConfigError: nothing matches, or an id prefix is ambiguous.
    """
    base = base or ResultFilter()
    if selector.kind == "word":
        in_suite = store.query(_merge(base, {"suite_id": selector.value}))
        if in_suite:
            return in_suite
        ids = store.ids_with_prefix(selector.value)
        if not ids:
            raise ConfigError(
                f"{selector.text!r} is neither a suite id nor a result id in {store.url}; "
                "selectors look like device=cuda:0, suite:ID or id:PREFIX"
            )
        return _by_id(store, selector, ids, base)
    if selector.kind == "suite":
        found = store.query(_merge(base, {"suite_id": selector.value}))
        if not found:
            raise ConfigError(f"no results of suite {selector.value!r} match in {store.url}")
        return found
    if selector.kind == "id":
        return _by_id(store, selector, store.ids_with_prefix(selector.value), base)
    fields = dict(selector.pairs)
    rid = fields.pop("id", None)
    found = store.query(_merge(base, fields))
    if rid is not None:
        found = [r for r in found if r.id.startswith(rid)]
    if not found:
        raise ConfigError(f"no results match {selector.text!r} in {store.url}")
    return found


def _merge(base: ResultFilter, fields: dict[str, str]) -> ResultFilter:
    for name, value in fields.items():
        current = getattr(base, name)
        if current is not None and current != value:
            raise ConfigError(f"selector sets {name}={value} but the filters say {current}")
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def _by_id(store: Store, selector: Selector, ids: list[str], base: ResultFilter) -> list[Result]:
    if not ids:
        raise ConfigError(f"no result id starts with {selector.value!r} in {store.url}")
    if len(ids) > 1:
        raise ConfigError(
            f"result-id prefix {selector.value!r} is ambiguous ({', '.join(ids[:2])}, ...); "
            "type more characters"
        )
    result = store.get(ids[0])
    if result is None:  # pragma: no cover - deleted between the two reads
        raise ConfigError(f"result {ids[0]} vanished from {store.url}")
    return [result]


# -- statistics -------------------------------------------------------------------------


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


def _resample_stats(
    times_s: np.ndarray, rng: np.random.Generator, resamples: int
) -> tuple[np.ndarray, np.ndarray]:
    """Medians and means of ``resamples`` bootstrap resamples of ``times_s``."""
    n = times_s.size
    medians = np.empty(resamples)
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        draws = times_s[rng.integers(0, n, size=(stop - start, n))]
        medians[start:stop] = np.median(draws, axis=1)
        means[start:stop] = draws.mean(axis=1)
    return medians, means


def _interval(values: np.ndarray) -> tuple[float, float]:
    alpha = (1.0 - LEVEL) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _significant(ci: tuple[float, float]) -> bool:
    return ci[0] > 1.0 or ci[1] < 1.0


def ratios(
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
    med_a, mean_a = _resample_stats(ta, rng, resamples)
    med_b, mean_b = _resample_stats(tb, rng, resamples)
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
    """Throughput and energy ratios B/A of two groups of runs (each at least 2 ``ok`` runs
    with times), with CIs that cover the variation between runs.

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
            ba = va[rng.integers(0, va.size, size=(resamples, va.size))].mean(axis=1)
            bb = vb[rng.integers(0, vb.size, size=(resamples, vb.size))].mean(axis=1)
            eci = _interval(bb / ba)
            energy = Ratio(value=float(vb.mean() / va.mean()), ci95=eci,
                           significant=_significant(eci),
                           note=f"R = {va.size} / {vb.size} runs: bootstrap over runs")
    return tput, energy


def repeat_group(chosen: Result, candidates: Sequence[Result]) -> list[Result]:
    """The ``ok`` runs of ``chosen``'s case in its suite (its ``--repeats`` group; one
    suite id and case key), oldest first; ``[chosen]`` when it has no suite."""
    if chosen.suite_id is None or chosen.status != "ok":
        return [chosen]
    key = chosen.spec.case_key()
    group = [r for r in candidates if r.status == "ok" and r.suite_id == chosen.suite_id
             and r.spec.case_key() == key and r.iteration_times_s]
    if chosen not in group:
        group.append(chosen)
    return sorted(group, key=lambda r: (r.started_at, r.id))


# -- matching ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Pairing:
    """How the two results of a case were chosen, so a reader can judge the pair."""

    method: Literal["same_suite", "closest_in_time", "only"]
    """``same_suite``: both from one suite; ``closest_in_time``: the closest of several
    candidates (no common suite); ``only``: each side had one candidate."""
    a_suite_id: str | None
    b_suite_id: str | None
    a_started_at: str
    b_started_at: str
    time_apart_s: float | None
    """Seconds between the two results' starts, where both timestamps parse."""
    candidates_a: int = 1
    candidates_b: int = 1

    @property
    def text(self) -> str:
        """``same suite`` or ``5.2 h apart`` (narrow tables)."""
        if self.method == "same_suite":
            return "same suite"
        return f"{_fmt_apart(self.time_apart_s)} apart" if self.time_apart_s is not None \
            else "times unknown"

    @property
    def detail(self) -> str:
        """Suite ids and start times of both sides (wide tables)."""
        if self.method == "same_suite":
            return f"suite {self.a_suite_id}; A {short_time(self.a_started_at)}, " \
                f"B {short_time(self.b_started_at)}"
        how = "closest in time" if self.method == "closest_in_time" else "only runs"
        return (f"{how}: A {short_time(self.a_started_at)} ({self.a_suite_id or 'no suite'}), "
                f"B {short_time(self.b_started_at)} ({self.b_suite_id or 'no suite'})")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return dataclasses.asdict(self)


def _fmt_apart(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _start(r: Result) -> Any:
    return parse_time(r.started_at) or parse_time(r.finished_at)


def _apart_s(a: Result, b: Result) -> float | None:
    ta, tb = _start(a), _start(b)
    return abs((ta - tb).total_seconds()) if ta is not None and tb is not None else None


def pair_case(cands_a: Sequence[Result], cands_b: Sequence[Result]
              ) -> tuple[Result, Result, Pairing]:
    """Choose one result per side for a case (rules in the module docstring)."""
    pool_a = [r for r in cands_a if r.status == "ok"] or list(cands_a)
    pool_b = [r for r in cands_b if r.status == "ok"] or list(cands_b)
    pairs = [(ra, rb) for ra in pool_a for rb in pool_b if ra.id != rb.id] \
        or [(ra, rb) for ra in pool_a for rb in pool_b]
    same = [(ra, rb) for ra, rb in pairs
            if ra.suite_id is not None and ra.suite_id == rb.suite_id]
    method: Literal["same_suite", "closest_in_time", "only"]
    if same:
        ra, rb = max(same, key=lambda p: (max(p[0].finished_at, p[1].finished_at),
                                          p[0].id, p[1].id))
        method = "same_suite"
    else:
        def closeness(p: tuple[Result, Result]) -> tuple[Any, ...]:
            apart = _apart_s(*p)
            newest = max(p[0].finished_at, p[1].finished_at)
            return (apart is None, apart or 0.0, _neg(newest), p[0].id, p[1].id)

        ra, rb = min(pairs, key=closeness)
        method = "only" if len(pool_a) == 1 and len(pool_b) == 1 else "closest_in_time"
    return ra, rb, Pairing(
        method=method, a_suite_id=ra.suite_id, b_suite_id=rb.suite_id,
        a_started_at=ra.started_at, b_started_at=rb.started_at, time_apart_s=_apart_s(ra, rb),
        candidates_a=len(cands_a), candidates_b=len(cands_b),
    )


def _neg(stamp: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in stamp)


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseComparison:
    """One matched case: A's and B's results and the ratios B/A."""

    key: dict[str, Any]
    """The matched fields (workload, size, batch_size and the non-axis device/precision)."""
    a: Result
    b: Result
    throughput: Ratio
    energy: Ratio
    energy_kind: str
    """``measured`` when both sides' energy is measured, else the weaker provenance."""
    pairing: Pairing
    a_runs: tuple[str, ...] = ()
    """Ids of A's runs the ratio used (its repeat group; empty: just :attr:`a`)."""
    b_runs: tuple[str, ...] = ()

    @property
    def noisy(self) -> bool:
        """Whether either side is flagged noisy."""
        return self.a.noisy or self.b.noisy

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-ready form."""
        sa, sb = self.a.stats, self.b.stats
        return {
            **self.key,
            "a_id": self.a.id,
            "b_id": self.b.id,
            "a_suite_id": self.a.suite_id,
            "b_suite_id": self.b.suite_id,
            "a_started_at": self.a.started_at,
            "b_started_at": self.b.started_at,
            "pairing": self.pairing.method,
            "a_repeats": max(1, len(self.a_runs)),
            "b_repeats": max(1, len(self.b_runs)),
            "a_run_ids": list(self.a_runs) or [self.a.id],
            "b_run_ids": list(self.b_runs) or [self.b.id],
            "time_apart_s": self.pairing.time_apart_s,
            "a_noisy": self.a.noisy,
            "b_noisy": self.b.noisy,
            "a_noise_reasons": list(self.a.noise_reasons),
            "b_noise_reasons": list(self.b.noise_reasons),
            "a_device": self.a.spec.device,
            "b_device": self.b.spec.device,
            "a_device_name": device_name(self.a),
            "b_device_name": device_name(self.b),
            "a_precision": self.a.spec.precision,
            "b_precision": self.b.spec.precision,
            "a_framework": self.a.spec.framework,
            "b_framework": self.b.spec.framework,
            "a_status": self.a.status,
            "b_status": self.b.status,
            "sample_unit": self.a.sample_unit,
            "a_samples_per_s": sa.samples_per_s if sa else None,
            "b_samples_per_s": sb.samples_per_s if sb else None,
            "throughput_ratio": self.throughput.value,
            "throughput_ratio_ci95": list(self.throughput.ci95) if self.throughput.ci95
            else None,
            "throughput_significant": self.throughput.significant,
            "throughput_note": self.throughput.note,
            "a_energy_j_per_sample": self.a.energy_j_per_sample,
            "b_energy_j_per_sample": self.b.energy_j_per_sample,
            "energy_ratio": self.energy.value,
            "energy_ratio_ci95": list(self.energy.ci95) if self.energy.ci95 else None,
            "energy_significant": self.energy.significant,
            "energy_note": self.energy.note,
            "energy_kind": self.energy_kind,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    """Everything ``accelbench compare`` reports."""

    a_label: str
    b_label: str
    axes: tuple[str, ...]
    """Fields that differ between A and B (``device``, ``precision``, ``framework``)."""
    match_on: tuple[str, ...]
    cases: tuple[CaseComparison, ...]
    only_a: tuple[dict[str, Any], ...] = ()
    only_b: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    excluded_noisy: tuple[str, ...] = ()
    """Ids of noisy results left out (``exclude_noisy``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "a": self.a_label,
            "b": self.b_label,
            "axes": list(self.axes),
            "match_on": list(self.match_on),
            "method": {
                "ratio": "B / A",
                "ci": f"{LEVEL:.0%} percentile bootstrap, {RESAMPLES} resamples, seed {SEED}",
                "significant": "CI excludes 1, when both sides have R >= 2 runs (two-level "
                               "bootstrap: runs, then iterations); None (cannot tell) when a "
                               "side has one run",
                "energy_ci": "step times resampled, average power held fixed",
                "pairing": "same suite where both sides have one, else closest in time",
            },
            "cases": [c.to_dict() for c in self.cases],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
            "notes": list(self.notes),
            "excluded_noisy": list(self.excluded_noisy),
        }


def _weaker_kind(a: str, b: str) -> str:
    order = ["unavailable", "estimated", "partly estimated", "measured"]
    return min(a, b, key=order.index)


def compare_results(
    a: Sequence[Result],
    b: Sequence[Result],
    *,
    a_label: str = "A",
    b_label: str = "B",
    resamples: int = RESAMPLES,
    exclude_noisy: bool = False,
) -> Comparison:
    """Match the cases of ``a`` and ``b``, pair like with like, compute the ratios B/A.

    Warns (:class:`~accelbench.errors.AccelbenchWarning`) when a compared result is
    noisy, insufficient or diverged: its ratio may mislead or is missing.
    """
    axes = tuple(
        ax for ax in AXES
        if {getattr(r.spec, ax) for r in a} != {getattr(r.spec, ax) for r in b}
    )
    match_on = tuple(f for f in MATCH_FIELDS if f not in axes) + tuple(
        f for f in OPTIONAL_MATCH_FIELDS if any(_spec_value(r, f) for r in (*a, *b)))
    notes: list[str] = []
    excluded: list[str] = []
    if exclude_noisy:
        excluded = [r.id for r in (*a, *b) if r.noisy]
        a = [r for r in a if not r.noisy]
        b = [r for r in b if not r.noisy]
        if excluded:
            notes.append(f"--exclude-noisy: left out {len(excluded)} noisy result(s)")
    side_a, side_b = _group(a, match_on), _group(b, match_on)
    if not axes and {r.id for r in a} == {r.id for r in b}:
        notes.append("A and B select the same results")
    cases = []
    for key in sorted(side_a.keys() & side_b.keys(), key=lambda k: tuple(map(str, k))):
        ra, rb, pairing = pair_case(side_a[key], side_b[key])
        if ra.status != "ok" or rb.status != "ok":
            bad = ", ".join(
                f"{lab} is {r.status}" for lab, r in (("A", ra), ("B", rb)) if r.status != "ok"
            )
            tput = energy = Ratio(value=None, note=bad)
            runs_a = runs_b = [ra]
        else:
            runs_a = repeat_group(ra, side_a[key])
            runs_b = repeat_group(rb, side_b[key])
            if len(runs_a) >= 2 and len(runs_b) >= 2 and not (
                    {r.id for r in runs_a} & {r.id for r in runs_b}):
                tput, energy = group_ratios(runs_a, runs_b, resamples=resamples)
            else:
                runs_a, runs_b = [ra], [rb]
                tput, energy = ratios(
                    ra.iteration_times_s, ra.samples_per_step, rb.iteration_times_s,
                    rb.samples_per_step, energy_a_j_per_sample=ra.energy_j_per_sample,
                    energy_b_j_per_sample=rb.energy_j_per_sample,
                    boundaries=(ra.energy_boundary, rb.energy_boundary), resamples=resamples,
                )
                one = _one_run_sides(ra, side_a[key], rb, side_b[key])
                tput, energy = cannot_tell(tput, one), cannot_tell(energy, one)
        cases.append(
            CaseComparison(
                key=dict(zip(match_on, key, strict=True)), a=ra, b=rb, throughput=tput,
                energy=energy, energy_kind=_weaker_kind(energy_kind(ra), energy_kind(rb)),
                pairing=pairing, a_runs=tuple(r.id for r in runs_a),
                b_runs=tuple(r.id for r in runs_b),
            )
        )
    used = {i for c in cases for i in (*c.a_runs, *c.b_runs)}
    ignored = sum(1 for k in side_a.keys() & side_b.keys()
                  for r in (*side_a[k], *side_b[k]) if r.id not in used) \
        if cases else 0
    if ignored:
        same = sum(1 for c in cases if c.pairing.method == "same_suite")
        notes.append(
            f"{ignored} other result(s) of the matched cases not used: {same} of {len(cases)} "
            "case(s) paired within one suite, the rest by closest start time (see 'paired')"
        )
    only_a = tuple(dict(zip(match_on, k, strict=True)) for k in side_a.keys() - side_b.keys())
    only_b = tuple(dict(zip(match_on, k, strict=True)) for k in side_b.keys() - side_a.keys())
    if not cases:
        notes.append(
            "no case appears on both sides (matched on " + ", ".join(match_on) + ")"
        )
    _warn_inputs(cases)
    return Comparison(
        a_label=a_label, b_label=b_label, axes=axes, match_on=match_on, cases=tuple(cases),
        only_a=only_a, only_b=only_b, notes=tuple(notes), excluded_noisy=tuple(excluded),
    )


def _one_run_sides(ra: Result, cands_a: Sequence[Result], rb: Result,
                   cands_b: Sequence[Result]) -> str:
    """Which side(s) lack a second run: ``A``, ``B`` or ``A and B``."""
    one_a = len(repeat_group(ra, cands_a)) < 2
    one_b = len(repeat_group(rb, cands_b)) < 2
    if one_a and one_b:
        return "A and B"
    if one_a:
        return "A"
    return "B" if one_b else "A and B (the same runs)"


def _warn_inputs(cases: Sequence[CaseComparison]) -> None:
    """One warning line for noisy inputs, one for inputs without a usable measurement."""
    noisy: dict[str, Result] = {}
    failed: dict[str, Result] = {}
    for c in cases:
        for r in (c.a, c.b):
            if r.noisy:
                noisy[r.id] = r
            if r.status in ("insufficient", "diverged"):
                failed[r.id] = r
    if noisy:
        listed = "; ".join(
            f"{r.id[:8]} ({', '.join(r.noise_reasons[:1]) or 'flagged'})"
            for r in list(noisy.values())[:3]
        ) + ("; ..." if len(noisy) > 3 else "")
        warnings.warn(
            f"{len(noisy)} compared result(s) are noisy, their ratios may mislead: {listed}; "
            "rerun on a quiet machine or pass --exclude-noisy",
            AccelbenchWarning, stacklevel=3,
        )
    if failed:
        listed = ", ".join(f"{r.id[:8]} ({r.status})" for r in list(failed.values())[:3])
        warnings.warn(
            f"{len(failed)} compared result(s) have no usable measurement and no ratio: "
            f"{listed} (insufficient: too few iterations under a hard time cap; diverged: "
            "the loss became NaN/Inf)",
            AccelbenchWarning, stacklevel=3,
        )


def _group(
    results: Sequence[Result], match_on: Sequence[str]
) -> dict[tuple[Any, ...], list[Result]]:
    out: dict[tuple[Any, ...], list[Result]] = {}
    for r in results:
        out.setdefault(tuple(_spec_value(r, f) for f in match_on), []).append(r)
    return out


def _spec_value(r: Result, name: str) -> Any:
    """A match field's value; a data-parallel case's device carries its topology
    (``cuda:0 1x8``), so cases on different rank counts never pair silently."""
    from accelbench.report.rows import topology_text

    value = getattr(r.spec, name)
    if name == "fast_paths":
        return "+".join(value.enabled())
    if name == "settings":
        return " ".join(f"{k}={v:g}" for k, v in value.given().items())
    if name == "device":
        topo = r.spec.topology
        value = f"{value}{topology_text(topo.nnodes, topo.nproc_per_node, lead=' ')}"
    return value


def compare(
    store: Store, a: str, b: str, *, base: ResultFilter | None = None,
    resamples: int = RESAMPLES, exclude_noisy: bool = False,
) -> Comparison:
    """Resolve selectors ``a`` and ``b`` in ``store`` and compare them."""
    ra = select(store, parse_selector(a), base)
    rb = select(store, parse_selector(b), base)
    return compare_results(ra, rb, a_label=a, b_label=b, resamples=resamples,
                           exclude_noisy=exclude_noisy)


# -- rendering --------------------------------------------------------------------------

CSV_COLUMNS = (
    "workload", "size", "batch_size", "device", "precision", "framework", "a_id", "b_id",
    "a_device", "b_device", "a_precision", "b_precision", "a_framework", "b_framework",
    "a_status", "b_status", "sample_unit",
    "a_samples_per_s", "b_samples_per_s", "throughput_ratio", "throughput_ratio_ci95_low",
    "throughput_ratio_ci95_high", "throughput_significant", "a_energy_j_per_sample",
    "b_energy_j_per_sample", "energy_ratio", "energy_ratio_ci95_low", "energy_ratio_ci95_high",
    "energy_significant", "energy_kind", "throughput_note", "energy_note", "pairing",
    "a_suite_id", "b_suite_id", "a_started_at", "b_started_at", "time_apart_s", "a_noisy",
    "b_noisy",
)


def to_csv(comparison: Comparison) -> str:
    """One CSV row per matched case."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    for case in comparison.cases:
        row = case.to_dict()
        for name in ("throughput_ratio", "energy_ratio"):
            ci = row.pop(f"{name}_ci95")
            row[f"{name}_ci95_low"] = ci[0] if ci else ""
            row[f"{name}_ci95_high"] = ci[1] if ci else ""
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()


def _fmt_ratio(r: Ratio) -> str:
    if r.value is None:
        return r.note or "-"
    text = f"{r.value:.3f}"
    if r.ci95:
        text += f" [{r.ci95[0]:.3f}, {r.ci95[1]:.3f}]"
    return text


def _fmt_sig(r: Ratio) -> str:
    if r.significant is None:
        return "?" if r.ci95 is not None else "-"
    return "yes" if r.significant else "no"


def _rate_cell(r: Result) -> str:
    from accelbench.render import fmt_rate

    st = r.stats
    text = fmt_rate(st.samples_per_s) if st and r.status == "ok" else r.status
    return text + ("[bold yellow]![/bold yellow]" if r.noisy else "")


def _case_label(case: CaseComparison, match_on: Sequence[str]) -> str:
    parts = []
    for f in match_on:
        value = case.key[f]
        if f == "batch_size":
            parts.append(f"bs={value}")
        elif (f == "framework" and value == "torch") or value == "":
            continue
        elif f == "fast_paths":
            parts.append(f"+{value}")
        else:
            parts.append(str(value))
    return " ".join(parts)


def table(comparison: Comparison, *, wide: bool = False) -> Any:
    """A rich table of the comparison: narrow by default (fits 80 columns: the case, both
    throughputs with a noisy mark, the ratios with CIs and how the pair was chosen);
    ``wide`` adds the compared values, ids, energy notes and the pairing's suites and
    times."""
    from rich import box
    from rich.table import Table

    title = f"B = {comparison.b_label}  vs  A = {comparison.a_label}  (ratios B/A)"
    noisy = any(c.noisy for c in comparison.cases)
    if not wide:
        t = Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, padding=(0, 0),
                  show_edge=False, title_justify="left")
        t.add_column("case", overflow="fold")
        t.add_column("A /s", justify="right", no_wrap=True)
        t.add_column("B /s", justify="right", no_wrap=True)
        t.add_column("throughput B/A [95% CI]", no_wrap=True)
        t.add_column("sig.", no_wrap=True)
        t.add_column("energy B/A", overflow="fold")
        t.add_column("paired", overflow="fold")
        for case in comparison.cases:
            energy = _fmt_ratio(case.energy) if case.energy.value is not None else "-"
            short = ENERGY_KIND_SHORT.get(case.energy_kind)
            if case.energy.value is not None and short:
                energy += f" ({short})"
            t.add_row(
                _case_label(case, comparison.match_on), _rate_cell(case.a), _rate_cell(case.b),
                _fmt_ratio(case.throughput) if case.throughput.value is not None else "-",
                _fmt_sig(case.throughput), energy, _paired_text(case),
            )
        captions = []
        if noisy:
            captions.append("! noisy input (reasons: --json)")
        if _any_cannot_tell(comparison):
            captions.append(CANT_TELL_CAPTION)
        if captions:
            t.caption = "\n".join(captions)
            t.caption_justify = "left"
        return t

    t = Table(title=title, header_style="bold")
    for col in (*comparison.match_on, *(f"{ax} A/B" for ax in comparison.axes),
                "A /s", "B /s", "throughput B/A [95% CI]", "sig.",
                "energy/sample B/A [95% CI]", "sig.", "ids A/B", "paired"):
        t.add_column(col)
    for case in comparison.cases:
        axis_cells = [
            f"{getattr(case.a.spec, ax)} / {getattr(case.b.spec, ax)}" for ax in comparison.axes
        ]
        energy = _fmt_ratio(case.energy)
        if case.energy.value is not None and case.energy_kind != "measured":
            energy += f" ({case.energy_kind})"
        t.add_row(
            *(str(case.key[f]) for f in comparison.match_on),
            *axis_cells,
            _rate_cell(case.a),
            _rate_cell(case.b),
            _fmt_ratio(case.throughput),
            _fmt_sig(case.throughput),
            energy,
            _fmt_sig(case.energy),
            f"{case.a.id[:8]} / {case.b.id[:8]}",
            _runs_text(case) + case.pairing.detail,
        )
    captions = []
    if noisy:
        from rich.markup import escape

        captions.append("! noisy input: " + "; ".join(
            f"{r.id[:8]}: {escape(', '.join(r.noise_reasons)) or 'flagged'}"
            for r in {r.id: r for c in comparison.cases for r in (c.a, c.b) if r.noisy}.values()
        ))
    if _any_cannot_tell(comparison):
        captions.append(CANT_TELL_CAPTION)
    if captions:
        t.caption = "\n".join(captions)
        t.caption_justify = "left"
    return t


CANT_TELL_CAPTION = ("? can't tell: a side has one run, whose CI covers within-run noise "
                     "only; rerun both with --repeats 3")


def _any_cannot_tell(comparison: Comparison) -> bool:
    return any(c.throughput.significant is None and c.throughput.ci95 is not None
               for c in comparison.cases)


def _runs_text(case: CaseComparison) -> str:
    ra, rb = max(1, len(case.a_runs)), max(1, len(case.b_runs))
    return f"R={ra}/{rb}; " if ra > 1 or rb > 1 else ""


def _paired_text(case: CaseComparison) -> str:
    return _runs_text(case) + case.pairing.text
