"""Ratio pairs of the report: mixed precision over fp32, each framework over the base one.

A pair is two runs of one case that differ only in the compared field (precision or
framework), the same suite's preferred, else the closest in time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
                "framework", "nnodes", "nproc_per_node",  # ranks: never pair 1x8 with 1x1
                "parallel")  # nor an FSDP case with a DDP one


def _case_pairs(rows: Iterable[CaseRow], axis: str, base_value: str,
                latest: Sequence[CaseRow] | None = None) -> list[tuple[CaseRow, CaseRow]]:
    """(base run, run) pairs of the same case that differ only in ``axis``.

    For each case's newest run (a quiet one where there is one; ``latest``, where the
    caller has them) whose ``axis`` is not ``base_value``, the base run (``axis ==
    base_value``) of the same suite is preferred (measured under the same conditions),
    else the one closest in time. Only ``ok`` runs pair: ``diverged`` and
    ``insufficient`` ones never enter a ratio. The bases are chosen in one pass over
    ``rows``, keeping the best so far of each run (the first of equals, as :func:`min`).
    """
    match = [f for f in _CASE_FIELDS if f != axis]
    if latest is None:
        latest = newest_per_case(rows, prefer_quiet=True)
    runs = [r for r in latest if getattr(r, axis) != base_value]
    waiting: dict[tuple[Any, ...], list[int]] = {}
    for i, r in enumerate(runs):
        waiting.setdefault(tuple(getattr(r, f) for f in match), []).append(i)
    best: dict[int, tuple[tuple[Any, ...], CaseRow]] = {}
    if waiting:
        for c in rows:
            if getattr(c, axis) != base_value or not c.rankable:
                continue
            for i in waiting.get(tuple(getattr(c, f) for f in match), ()):
                rank = _rank(c, runs[i])
                if i not in best or rank < best[i][0]:
                    best[i] = (rank, c)
    return [(best[i][1], r) for i, r in enumerate(runs) if i in best]


def _rank(c: CaseRow, r: CaseRow) -> tuple[Any, ...]:
    """How well base run ``c`` pairs with ``r`` (smaller is better): the same suite, then
    the closest in time, then quiet, then the newest."""
    same = r.suite_id is not None and c.suite_id == r.suite_id
    when, cw = _row_time(r), _row_time(c)
    apart = abs((cw - when).total_seconds()) if cw and when else float("inf")
    return (not same, apart, c.noisy, _desc_key(c.finished_at))


def _prepare(by_id: Mapping[str, Result], pairs: Sequence[tuple[CaseRow, CaseRow]]) -> None:
    """Let a store's ``by_id`` find the repeat groups of every paired run in one pass."""
    from accelbench.report.stored import StoredResults

    if isinstance(by_id, StoredResults) and pairs:
        by_id.prepare_groups(row.result_id for pair in pairs for row in pair)


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


def left_out_count(rows: Iterable[CaseRow]) -> int:
    """Runs kept out of every chart because they hold no valid measurement."""
    return sum(1 for r in rows if r.status in ("insufficient", "diverged"))


def precision_speedups(rows: Iterable[CaseRow], by_id: Mapping[str, Result],
                       latest: Sequence[CaseRow] | None = None) -> list[plots.Speedup]:
    """Each non-fp32 case's newest run over an fp32 run of the same case (same framework;
    ``latest``: :func:`newest_per_case` of ``rows`` preferring quiet runs, if known)."""
    out = []
    pairs = _case_pairs(rows, "precision", "fp32", latest)
    _prepare(by_id, pairs)
    for base, r in pairs:
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
        energy_bounds=(ra.energy_rel_u95, rb.energy_rel_u95),
    )
    side = "A and B" if len(group_a) < 2 and len(group_b) < 2 else (
        "A" if len(group_a) < 2 else "B")
    return cannot_tell(tput, side), cannot_tell(energy, side)


def base_framework(rows: Iterable[CaseRow]) -> str:
    """The framework the others are compared to: the default one where the rows hold it,
    else the first present by name (the frameworks come from the data, never a list)."""
    return base_of({r.framework for r in rows})


def base_of(frameworks: Iterable[str]) -> str:
    """:func:`base_framework` of rows whose frameworks are ``frameworks``."""
    present = sorted(set(frameworks))
    if DEFAULT_FRAMEWORK in present or not present:
        return DEFAULT_FRAMEWORK
    return present[0]


def framework_ratios(rows: Iterable[CaseRow], by_id: Mapping[str, Result], base_fw: str,
                     latest: Sequence[CaseRow] | None = None,
                     ) -> tuple[list[plots.Speedup], list[dict[str, Any]]]:
    """Each other framework over ``base_fw``, for every case measured in both (the same
    suite's pair preferred).

    Returns the chart's bars and the table rows (throughput and energy-per-sample
    ratios with their bootstrap CIs; ``base`` and ``other`` name the frameworks).
    """
    bars, table = [], []
    pairs = _case_pairs(rows, "framework", base_fw, latest)
    _prepare(by_id, pairs)
    for base, r in pairs:
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
