"""Ratio pairs of the report: mixed precision over fp32, each framework over the base one.

A pair is two runs of one case that differ only in the compared field (precision or
framework), the same suite's preferred, else the closest in time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from accelbench.report import plots
from accelbench.report.compare import cannot_tell, group_ratios, ratios
from accelbench.report.rows import (
    DEFAULT_FRAMEWORK,
    CaseRow,
    newest_per_case,
    parse_time,
    short_time,
)
from accelbench.result import Result

_CASE_FIELDS = ("device", "device_name", "workload", "size", "batch_size", "precision",
                "framework", "nnodes", "nproc_per_node")  # ranks: never pair 1x8 with 1x1


def _case_pairs(rows: Sequence[CaseRow], axis: str, base_value: str
               ) -> list[tuple[CaseRow, CaseRow]]:
    """(base run, run) pairs of the same case that differ only in ``axis``.

    For each case's newest run (a quiet one where there is one) whose ``axis`` is not
    ``base_value``, the base run (``axis == base_value``) of the same suite is preferred
    (measured under the same conditions), else the one closest in time. Only ``ok``
    runs pair: ``diverged`` and ``insufficient`` ones never enter a ratio.
    """
    match = [f for f in _CASE_FIELDS if f != axis]
    bases: dict[tuple[Any, ...], list[CaseRow]] = {}
    for r in rows:
        if getattr(r, axis) == base_value and r.rankable:
            bases.setdefault(tuple(getattr(r, f) for f in match), []).append(r)
    out = []
    for r in newest_per_case(rows, prefer_quiet=True):
        if getattr(r, axis) == base_value:
            continue
        candidates = bases.get(tuple(getattr(r, f) for f in match))
        if candidates:
            when = _row_time(r)

            def rank(c: CaseRow, r: CaseRow = r, when: Any = when) -> tuple[Any, ...]:
                same = r.suite_id is not None and c.suite_id == r.suite_id
                cw = _row_time(c)
                apart = abs((cw - when).total_seconds()) if cw and when else float("inf")
                return (not same, apart, c.noisy, _desc_key(c.finished_at))

            out.append((min(candidates, key=rank), r))
    return out


def _row_time(row: CaseRow) -> Any:
    """When a run started (else finished), parsed; None where neither parses."""
    return parse_time(row.started_at) or parse_time(row.finished_at)


def _desc_key(stamp: str) -> tuple[int, ...]:
    """A sort key that orders timestamps newest first."""
    return tuple(-ord(c) for c in stamp)


def _pair_source(base: CaseRow, r: CaseRow) -> str:
    """Which runs a ratio pairs, for the chart's label."""
    if r.suite_id is not None and base.suite_id == r.suite_id:
        return f"suite {r.suite_id} ({short_time(r.started_at or r.finished_at)})"
    return (f"{base.result_id[:8]} {short_time(base.started_at or base.finished_at)} vs "
            f"{r.result_id[:8]} {short_time(r.started_at or r.finished_at)} (closest in time)")


def _ratio_bar(base: CaseRow, r: CaseRow, label: str, tput: Any) -> plots.Speedup:
    """The chart bar of a throughput ratio ``r`` over ``base``."""
    return plots.Speedup(
        label=label, precision=r.precision, value=tput.value, ci95=tput.ci95,
        significant=tput.significant, noisy=base.noisy or r.noisy,
        source=_pair_source(base, r),
        sources=(plots.row_source(base, f"{label} (base)"), plots.row_source(r, label)),
    )


def left_out_count(rows: Sequence[CaseRow]) -> int:
    """Runs kept out of every chart because they hold no valid measurement."""
    return sum(1 for r in rows if r.status in ("insufficient", "diverged"))


def precision_speedups(rows: Sequence[CaseRow], by_id: Mapping[str, Result]
                       ) -> list[plots.Speedup]:
    """Each non-fp32 case's newest run over an fp32 run of the same case (same framework)."""
    out = []
    for base, r in _case_pairs(rows, "precision", "fp32"):
        tput, _ = _pair_ratios(by_id[base.result_id], by_id[r.result_id], by_id)
        if tput.value is None:
            continue
        framework = "" if r.framework == DEFAULT_FRAMEWORK else f" ({r.framework})"
        out.append(_ratio_bar(
            base, r, f"{r.device} {r.workload} {r.size} bs={r.batch_size}: {r.precision}"
            f"{framework}", tput))
    return out


def _pair_ratios(ra: Result, rb: Result, by_id: Mapping[str, Result]) -> tuple[Any, Any]:
    """B/A throughput and energy ratios of two cases: over their ``--repeats`` groups when
    both have at least two runs (the CI covers between-run variation), else from the two
    runs with no significance claim (one run's CI cannot support one)."""
    from accelbench.report.stored import repeat_runs

    group_a, group_b = repeat_runs(ra, by_id), repeat_runs(rb, by_id)
    if len(group_a) >= 2 and len(group_b) >= 2:
        return group_ratios(group_a, group_b)
    tput, energy = ratios(
        ra.iteration_times_s, ra.samples_per_step, rb.iteration_times_s,
        rb.samples_per_step, energy_a_j_per_sample=ra.energy_j_per_sample,
        energy_b_j_per_sample=rb.energy_j_per_sample,
        boundaries=(ra.energy_boundary, rb.energy_boundary),
    )
    side = "A and B" if len(group_a) < 2 and len(group_b) < 2 else (
        "A" if len(group_a) < 2 else "B")
    return cannot_tell(tput, side), cannot_tell(energy, side)


def base_framework(rows: Sequence[CaseRow]) -> str:
    """The framework the others are compared to: the default one where the rows hold it,
    else the first present by name (the frameworks come from the data, never a list)."""
    present = sorted({r.framework for r in rows})
    if DEFAULT_FRAMEWORK in present or not present:
        return DEFAULT_FRAMEWORK
    return present[0]


def framework_ratios(rows: Sequence[CaseRow], by_id: Mapping[str, Result], base_fw: str
                     ) -> tuple[list[plots.Speedup], list[dict[str, Any]]]:
    """Each other framework over ``base_fw``, for every case measured in both (the same
    suite's pair preferred).

    Returns the chart's bars and the table rows (throughput and energy-per-sample
    ratios with their bootstrap CIs; ``base`` and ``other`` name the frameworks).
    """
    bars, table = [], []
    for base, r in _case_pairs(rows, "framework", base_fw):
        ra, rb = by_id[base.result_id], by_id[r.result_id]
        tput, energy = _pair_ratios(ra, rb, by_id)
        if tput.value is None:
            continue
        bars.append(_ratio_bar(
            base, r, f"{r.device} {r.workload} {r.size} bs={r.batch_size} {r.precision}", tput))
        table.append({
            "device": r.device, "workload": r.workload, "size": r.size,
            "batch_size": r.batch_size, "precision": r.precision,
            "base": base_fw, "other": r.framework,
            "base_samples_per_s": base.samples_per_s, "other_samples_per_s": r.samples_per_s,
            "throughput_ratio": tput.value, "throughput_ci95": tput.ci95,
            "throughput_significant": tput.significant,
            "energy_ratio": energy.value, "energy_ci95": energy.ci95,
            "energy_note": energy.note, "compile_s": rb.compile_s,
            "same_suite": r.suite_id is not None and base.suite_id == r.suite_id,
            "noisy": base.noisy or r.noisy, "source": _pair_source(base, r),
        })
    return bars, table
