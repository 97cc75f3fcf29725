"""Pairing: match the cases of A and B and choose one result (or repeat group) per side.

Rules are in :mod:`accelbench.report.compare`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.errors import AccelbenchWarning
from accelbench.report.compare.axes import (
    Unpaired,
    choose_axes,
    sorted_keys,
    spec_value,
    why_unpaired,
)
from accelbench.report.compare.pairing import Cand, Pairing, pair_case, repeat_group
from accelbench.report.compare.phases import CasePhases, compare_phases
from accelbench.report.compare.stats import (
    LEVEL,
    RESAMPLES,
    SEED,
    Ratio,
    cannot_tell,
    group_ratios_and_sides,
    ratios,
)
from accelbench.report.rows import device_name, energy_kind
from accelbench.result import Result
from accelbench.store.briefs import ResultBrief

#: Decodes whole the results of candidates (briefs or results), in their order.
Loader = Callable[[Sequence[Any]], list[Result]]

MATCH_FIELDS = ("workload", "size", "batch_size", "device", "precision", "framework")
#: Matched on too where any compared result has one (a compiled step, a sweep's power
#: limit is another case); left out otherwise, so plain comparisons read as before.
OPTIONAL_MATCH_FIELDS = ("fast_paths", "settings")


@dataclass(frozen=True, kw_only=True, slots=True)
class SideRate:
    """The throughput one side of a ratio divides, with its CI: the run's own (its
    iterations), or a ``--repeats`` group's headline (mean of the runs' medians; CI over
    the runs, then iterations)."""

    samples_per_s: float | None
    ci95: tuple[float, float] | None
    runs: int = 1

    @property
    def ci_scope(self) -> str | None:
        """What :attr:`ci95` covers (``iterations of 1 run``, ``3 runs``)."""
        from accelbench.report.rows import ci_scope

        return ci_scope(self.runs) if self.ci95 is not None else None

    @classmethod
    def of_run(cls, r: Result) -> SideRate:
        """One run's throughput and CI (None where it has no usable measurement)."""
        st = r.stats if r.status == "ok" else None
        return cls(samples_per_s=st.samples_per_s if st else None,
                   ci95=st.samples_per_s_ci95 if st else None)


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
    a_rate: SideRate | None = None
    """What the throughput ratio divides on A's side (None: :attr:`a`'s own figures)."""
    b_rate: SideRate | None = None
    phases: CasePhases | None = None
    """Per-phase ratios (``--phases``); None where neither side has phases."""

    @property
    def rates(self) -> tuple[SideRate, SideRate]:
        """A's and B's throughputs as the ratio uses them (group headlines for R > 1)."""
        return (self.a_rate or SideRate.of_run(self.a), self.b_rate or SideRate.of_run(self.b))

    @property
    def noisy(self) -> bool:
        """Whether either side is flagged noisy."""
        return self.a.noisy or self.b.noisy

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-ready form."""
        sa, sb = self.rates
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
            # The throughputs the ratio divides: a --repeats group's headline for R > 1.
            "a_samples_per_s": sa.samples_per_s,
            "b_samples_per_s": sb.samples_per_s,
            "a_samples_per_s_ci95": list(sa.ci95) if sa.ci95 else None,
            "b_samples_per_s_ci95": list(sb.ci95) if sb.ci95 else None,
            "a_ci_scope": sa.ci_scope,
            "b_ci_scope": sb.ci_scope,
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
            "phases": self.phases.to_dict() if self.phases is not None else None,
            **self.input_entries(),
        }

    @property
    def reads_data(self) -> bool:
        """Whether either side read data (``--data generated|PATH``)."""
        return self.a.input is not None or self.b.input is not None

    def input_entries(self) -> dict[str, Any]:
        """Each side's data source and stall share, where either side read data (none
        otherwise: a comparison of synthetic cases reads as before)."""
        if not self.reads_data:
            return {}
        from accelbench.data.layouts import source_of

        out: dict[str, Any] = {}
        for side, r in (("a", self.a), ("b", self.b)):
            out[f"{side}_data_source"] = source_of(r.spec.data)
            out[f"{side}_input_stall_fraction"] = r.input.stall_fraction if r.input else None
            out[f"{side}_input_bound"] = r.input_verdict is not None
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    """Everything ``accelbench compare`` reports."""

    a_label: str
    b_label: str
    axes: tuple[str, ...]
    """The axes compared across (``device``, ``precision``, ``framework``; rules in
    :mod:`~accelbench.report.compare.axes`)."""
    match_on: tuple[str, ...]
    cases: tuple[CaseComparison, ...]
    only_a: tuple[dict[str, Any], ...] = ()
    only_b: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    excluded_noisy: tuple[str, ...] = ()
    """Ids of noisy results left out (``exclude_noisy``)."""
    axis_detail: tuple[dict[str, Any], ...] = ()
    """Per axis whose values differ between A and B: compared or matched, and why."""
    unpaired: tuple[Unpaired, ...] = ()
    """The cases of either side without a partner, with the reason."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "a": self.a_label,
            "b": self.b_label,
            "axes": list(self.axes),
            "axis_detail": [dict(d) for d in self.axis_detail],
            "match_on": list(self.match_on),
            "method": {
                "ratio": "B / A",
                "ci": f"{LEVEL:.0%} percentile bootstrap, {RESAMPLES} resamples, seed {SEED}",
                "significant": "CI excludes 1, when both sides have R >= 2 runs (two-level "
                               "bootstrap: runs, then iterations); None (cannot tell) when a "
                               "side has one run",
                "energy_ci": "step times resampled, average power held fixed",
                "pairing": "same suite where both sides have one, else closest in time",
                "axes": "compared across where both selectors name different values, or "
                        "where each side holds one value and they differ; else matched on",
            },
            "cases": [c.to_dict() for c in self.cases],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
            "unpaired": [u.to_dict() for u in self.unpaired],
            "notes": list(self.notes),
            "excluded_noisy": list(self.excluded_noisy),
        }


def _weaker_kind(a: str, b: str) -> str:
    order = ["unavailable", "estimated", "partly estimated", "measured"]
    return min(a, b, key=order.index)


def compare_results(
    a: Sequence[Result] | Sequence[ResultBrief] | Sequence[Any],
    b: Sequence[Result] | Sequence[ResultBrief] | Sequence[Any],
    *,
    a_label: str = "A",
    b_label: str = "B",
    resamples: int = RESAMPLES,
    exclude_noisy: bool = False,
    named: Mapping[str, tuple[str | None, str | None]] | None = None,
    load: Loader | None = None,
) -> Comparison:
    """Match the cases of ``a`` and ``b``, pair like with like, compute the ratios B/A.

    ``a`` and ``b`` are results, or their briefs (:mod:`accelbench.store.briefs`) with
    ``load`` decoding the ones a case compares: matching and pairing read the briefs, so
    only the paired results (and their repeat groups) are decoded whole.

    ``named``: per axis, the values the selectors of A and B name (None: not named);
    an axis both name with different values is compared, any other only where each
    side holds exactly one value of it and they differ (see :func:`choose_axes`).

    Warns (:class:`~accelbench.errors.AccelbenchWarning`) when a compared result is
    noisy, insufficient or diverged: its ratio may mislead or is missing.
    """
    loader: Loader = load or _as_results
    notes: list[str] = []
    excluded: list[str] = []
    if exclude_noisy:
        excluded = [r.id for r in (*a, *b) if r.noisy]
        a = [r for r in a if not r.noisy]
        b = [r for r in b if not r.noisy]
        if excluded:
            notes.append(f"--exclude-noisy: left out {len(excluded)} noisy result(s)")
    axes, axis_detail = choose_axes(_spec_view(a), _spec_view(b), named or {})
    match_on = tuple(f for f in MATCH_FIELDS if f not in axes) + tuple(
        f for f in OPTIONAL_MATCH_FIELDS
        if any(spec_value(r, f) for r in (*_spec_view(a), *_spec_view(b))))
    notes += [d["note"] for d in axis_detail if d["how"] == "matched"]
    side_a: dict[tuple[Any, ...], list[Any]] = _group(a, match_on)
    side_b: dict[tuple[Any, ...], list[Any]] = _group(b, match_on)
    if not axes and {r.id for r in a} == {r.id for r in b}:
        notes.append("A and B select the same results")
    cases: list[CaseComparison] = [
        compare_case(dict(zip(match_on, key, strict=True)), side_a[key], side_b[key],
                      resamples, loader)
        for key in sorted_keys(side_a.keys() & side_b.keys())
    ]
    used: set[str] = set()
    for case in cases:
        used.update(case.a_runs, case.b_runs)
    ignored = 0
    if cases:
        for both in side_a.keys() & side_b.keys():
            ignored += sum(r.id not in used for r in (*side_a[both], *side_b[both]))
    if ignored:
        same = sum(1 for c in cases if c.pairing.method == "same_suite")
        notes.append(
            f"{ignored} other result(s) of the matched cases not used: {same} of {len(cases)} "
            "case(s) paired within one suite, the rest by closest start time (see 'paired')"
        )
    only_a = tuple(dict(zip(match_on, k, strict=True))
                   for k in sorted_keys(side_a.keys() - side_b.keys()))
    only_b = tuple(dict(zip(match_on, k, strict=True))
                   for k in sorted_keys(side_b.keys() - side_a.keys()))
    unpaired = tuple(
        Unpaired(side="A", key=key, result_ids=tuple(r.id for r in side_a[_key(key, match_on)]),
                 reason=why_unpaired(key, _spec_view(b), match_on, "B")) for key in only_a
    ) + tuple(
        Unpaired(side="B", key=key, result_ids=tuple(r.id for r in side_b[_key(key, match_on)]),
                 reason=why_unpaired(key, _spec_view(a), match_on, "A")) for key in only_b
    )
    if not cases:
        notes.append(
            "no case appears on both sides (matched on " + ", ".join(match_on) + ")"
        )
    warn_inputs(cases)
    return Comparison(
        a_label=a_label, b_label=b_label, axes=axes, match_on=match_on, cases=tuple(cases),
        only_a=only_a, only_b=only_b, notes=tuple(notes), excluded_noisy=tuple(excluded),
        axis_detail=tuple(axis_detail), unpaired=unpaired,
    )


def _as_results(cands: Sequence[Any]) -> list[Result]:
    return list(cands)


def _spec_view(cands: Sequence[Any]) -> Sequence[Result]:
    """``cands`` for the axis rules, which read only ``spec`` (a brief has the result's)."""
    return cands


def _key(key: dict[str, Any], match_on: Sequence[str]) -> tuple[Any, ...]:
    return tuple(key[f] for f in match_on)


def compare_case(key: dict[str, Any], cands_a: Sequence[Cand], cands_b: Sequence[Cand],
                  resamples: int, load: Loader) -> CaseComparison:
    """One matched case: its pair, and the ratios over the repeat groups where both sides
    have at least two runs, else of the pair with no significance claim."""
    ca, cb, pairing = pair_case(cands_a, cands_b)
    ra, rb = load([ca, cb])
    rates: tuple[SideRate | None, SideRate | None] = (None, None)
    if ra.status != "ok" or rb.status != "ok":
        bad = ", ".join(
            f"{lab} is {r.status}" for lab, r in (("A", ra), ("B", rb)) if r.status != "ok"
        )
        tput = energy = Ratio(value=None, note=bad)
        runs_a = runs_b = [ra]
    else:
        group_a = repeat_group(ca, cands_a)
        group_b = repeat_group(cb, cands_b)
        if len(group_a) >= 2 and len(group_b) >= 2 and not (
                {r.id for r in group_a} & {r.id for r in group_b}):
            runs_a, runs_b = load(group_a), load(group_b)
            tput, energy, ga, gb = group_ratios_and_sides(runs_a, runs_b,
                                                          resamples=resamples)
            rates = (SideRate(samples_per_s=ga.samples_per_s, ci95=ga.ci95, runs=ga.runs),
                     SideRate(samples_per_s=gb.samples_per_s, ci95=gb.ci95, runs=gb.runs))
        else:
            runs_a, runs_b = [ra], [rb]
            tput, energy = ratios(
                ra.iteration_times_s, ra.samples_per_step, rb.iteration_times_s,
                rb.samples_per_step, energy_a_j_per_sample=ra.energy_j_per_sample,
                energy_b_j_per_sample=rb.energy_j_per_sample,
                boundaries=(ra.energy_boundary, rb.energy_boundary),
                energy_bounds=(ra.energy_rel_u95, rb.energy_rel_u95),
                resamples=resamples,
            )
            one = _one_run_sides(ca, cands_a, cb, cands_b)
            tput, energy = cannot_tell(tput, one), cannot_tell(energy, one)
    return CaseComparison(
        key=key, a=ra, b=rb, throughput=tput, energy=energy,
        energy_kind=_weaker_kind(energy_kind(ra), energy_kind(rb)), pairing=pairing,
        a_runs=tuple(r.id for r in runs_a), b_runs=tuple(r.id for r in runs_b),
        a_rate=rates[0], b_rate=rates[1], phases=compare_phases(ra, rb),
    )


def _one_run_sides(ra: Cand, cands_a: Sequence[Cand], rb: Cand,
                   cands_b: Sequence[Cand]) -> str:
    """Which side(s) lack a second run: ``A``, ``B`` or ``A and B``."""
    one_a = len(repeat_group(ra, cands_a)) < 2
    one_b = len(repeat_group(rb, cands_b)) < 2
    if one_a and one_b:
        return "A and B"
    if one_a:
        return "A"
    return "B" if one_b else "A and B (the same runs)"


def warn_inputs(cases: Sequence[CaseComparison]) -> None:
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
    results: Sequence[Any], match_on: Sequence[str]
) -> dict[tuple[Any, ...], list[Any]]:
    out: dict[tuple[Any, ...], list[Any]] = {}
    values: dict[int, tuple[Any, ...]] = {}  # per distinct spec (briefs share theirs)
    for r in results:
        key = values.get(id(r.spec))
        if key is None:
            key = values[id(r.spec)] = tuple(spec_value(r, f) for f in match_on)
        out.setdefault(key, []).append(r)
    return out
