"""Rendering: a comparison as CSV rows or a rich table (narrow or wide)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from accelbench.csvsafe import csv_row
from accelbench.report.compare.pair import CaseComparison, Comparison
from accelbench.report.compare.phases import CSV_COLUMNS as PHASE_CSV_COLUMNS
from accelbench.report.compare.stats import Ratio
from accelbench.report.rows import DEFAULT_FRAMEWORK, ENERGY_KIND_SHORT
from accelbench.result import Result
from accelbench.verdicts import INPUT_BOUND_STALL

CSV_COLUMNS = (
    "workload", "size", "batch_size", "device", "precision", "framework", "a_id", "b_id",
    "a_device", "b_device", "a_precision", "b_precision", "a_framework", "b_framework",
    "a_status", "b_status", "sample_unit",
    "a_samples_per_s", "b_samples_per_s", "a_ci_scope", "b_ci_scope", "throughput_ratio",
    "throughput_ratio_ci95_low",
    "throughput_ratio_ci95_high", "throughput_significant", "a_energy_j_per_sample",
    "b_energy_j_per_sample", "energy_ratio", "energy_ratio_ci95_low", "energy_ratio_ci95_high",
    "energy_significant", "energy_kind", "throughput_note", "energy_note", "pairing",
    "a_suite_id", "b_suite_id", "a_started_at", "b_started_at", "time_apart_s", "a_noisy",
    "b_noisy", *PHASE_CSV_COLUMNS, "compared_axes", "unpaired_side", "unpaired_reason",
)


def to_csv(comparison: Comparison) -> str:
    """One CSV row per matched case, then one per unpaired case (``unpaired_side`` A or
    B, ``unpaired_reason``, its newest result's id; no ratio). ``compared_axes`` names
    the axes each ratio crosses (``+``-joined)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    axes = "+".join(comparison.axes)
    for case in comparison.cases:
        row = case.to_dict()
        row["compared_axes"] = axes
        for name in ("throughput_ratio", "energy_ratio"):
            ci = row.pop(f"{name}_ci95")
            row[f"{name}_ci95_low"] = ci[0] if ci else ""
            row[f"{name}_ci95_high"] = ci[1] if ci else ""
        if case.phases is not None:
            row.update(case.phases.csv_values())
        writer.writerow(csv_row(row))  # formula-like text quoted (CSV injection)
    for u in comparison.unpaired:
        side = u.side.lower()
        writer.writerow(csv_row({**u.key,
                                 f"{side}_id": u.result_ids[0] if u.result_ids else "",
                                 "compared_axes": axes, "unpaired_side": u.side,
                                 "unpaired_reason": u.reason}))
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


def _rate_cell(case: CaseComparison, side: str, *, wide: bool = False) -> str:
    """The throughput the ratio divides on ``side`` (``a`` or ``b``): a run's, or for a
    --repeats group its headline with the group's CI (second line, ``±2.1%`` narrow)."""
    from accelbench.render import fmt_rate
    from accelbench.report.rows import ci_unreliable

    r: Result = getattr(case, side)
    rate = case.rates[0 if side == "a" else 1]
    noisy = "[bold yellow]![/bold yellow]" if r.noisy else ""
    if rate.samples_per_s is None:
        return r.status + noisy
    text = fmt_rate(rate.samples_per_s) + noisy + _stall_text(case, r)
    if rate.runs < 2 or rate.ci95 is None:
        return text
    low, high = rate.ci95
    rel = (high - low) / 2 / rate.samples_per_s
    if ci_unreliable(rel):
        return text + f"\nunreliable ({rate.runs} runs)"
    if wide:
        return text + f"\n[{fmt_rate(low)}, {fmt_rate(high)}]"
    return text + f"\n\u00b1{rel * 100:.2g}%"


def _stall_text(case: CaseComparison, r: Result) -> str:
    """Where either side read data: this side's stall share on a second line (``stall
    12%``, ``stall 12% IB`` when input-bound, ``synthetic`` for a side that read none)."""
    if not case.reads_data:
        return ""
    if r.input is None:
        return "\nsynthetic"
    frac = r.input.stall_fraction
    if frac is None:
        return "\nstall unavailable"
    return f"\nstall {100 * frac:.0f}%" + (" IB" if r.input_verdict is not None else "")


def _case_label(case: CaseComparison, match_on: Sequence[str]) -> str:
    """The case's key, torch (the default framework) left unsaid."""
    return _key_label({f: "" if f == "framework" and v == DEFAULT_FRAMEWORK else v
                       for f, v in case.key.items()}, match_on)


def table(comparison: Comparison, *, wide: bool = False) -> Any:
    """A rich table of the comparison: narrow by default (fits 80 columns: the case, both
    throughputs the ratio divides with a noisy mark (a --repeats group's headline and CI
    for R > 1), the ratios with CIs and which runs were paired);
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
                _case_label(case, comparison.match_on), _rate_cell(case, "a"),
                _rate_cell(case, "b"),
                _fmt_ratio(case.throughput) if case.throughput.value is not None else "-",
                _fmt_sig(case.throughput), energy, _paired_text(case),
            )
        captions = _narrow_captions(comparison, noisy)
        if captions:
            t.caption = "\n".join(captions)
            t.caption_justify = "left"
        return t

    from accelbench.fit_table import KEEP, Col, FitTable

    # Within the terminal: a match field holding one value in every row is the first left
    # out (named under the table), then pairing details; never a compared axis.
    ft = FitTable(title=title, wide=True, columns=[
        *(Col(header=f, priority=900, axis=True) for f in comparison.match_on),
        *(Col(header=f"{ax} A/B", priority=KEEP) for ax in comparison.axes),
        Col(header="A /s", priority=90, justify="right"),
        Col(header="B /s", priority=90, justify="right"),
        Col(header="throughput B/A [95% CI]", priority=KEEP),
        Col(header="sig.", priority=70),
        Col(header="energy/sample B/A [95% CI]", priority=80, fold_min=14),
        Col(header="energy sig.", priority=40),
        Col(header="ids A/B", priority=60),
        Col(header="paired", priority=30, fold_min=16),
    ], left_out_hint="--json has every field")
    for case in comparison.cases:
        axis_cells = [
            f"{getattr(case.a.spec, ax)} / {getattr(case.b.spec, ax)}" for ax in comparison.axes
        ]
        energy = _fmt_ratio(case.energy)
        if case.energy.value is not None and case.energy_kind != "measured":
            energy += f" ({case.energy_kind})"
        ft.add_row(
            *(str(case.key[f]) for f in comparison.match_on),
            *axis_cells,
            _rate_cell(case, "a", wide=True),
            _rate_cell(case, "b", wide=True),
            _fmt_ratio(case.throughput),
            _fmt_sig(case.throughput),
            energy,
            _fmt_sig(case.energy),
            f"{case.a.id[:8]} / {case.b.id[:8]}",
            _runs_text(case) + ("" if _grouped(case) and case.pairing.method == "same_suite"
                                else case.pairing.detail),
        )
    captions = []
    if noisy:  # plain text under the table: no markup to escape
        captions.append("! noisy input: " + "; ".join(
            f"{r.id[:8]}: {', '.join(r.noise_reasons) or 'flagged'}"
            for r in {r.id: r for c in comparison.cases for r in (c.a, c.b) if r.noisy}.values()
        ))
    if _any_cannot_tell(comparison):
        captions.append(CANT_TELL_CAPTION)
    if any(c.reads_data for c in comparison.cases):
        captions.append(STALL_CAPTION)
    ft.legend = captions
    return ft


STALL_CAPTION = ("stall: the share of the step spent waiting for the next batch "
                 "(--data); IB: input-bound (over "
                 f"{100 * INPUT_BOUND_STALL:.0f}%; why with `accelbench results show ID`)")
def _narrow_captions(comparison: Comparison, noisy: bool) -> list[str]:
    captions = []
    if noisy:
        captions.append("!: an input was measured on a busy machine or its step times "
                        "vary (see why with `accelbench results show ID`)")
    if _any_cannot_tell(comparison):
        captions.append(CANT_TELL_CAPTION)
    if any(c.reads_data for c in comparison.cases):
        captions.append(STALL_CAPTION)
    return captions


CANT_TELL_CAPTION = ("? can't tell: a side has one run, whose CI covers within-run noise "
                     "only; rerun both with --repeats 3")


def _any_cannot_tell(comparison: Comparison) -> bool:
    return any(c.throughput.significant is None and c.throughput.ci95 is not None
               for c in comparison.cases)


def _grouped(case: CaseComparison) -> bool:
    return len(case.a_runs) > 1 or len(case.b_runs) > 1


def _runs_text(case: CaseComparison) -> str:
    """``3 vs 3 runs, suite X`` (one suite) or ``3 vs 3 runs, suites X / Y; `` for
    repeat groups: which runs the ratio and both throughputs come from."""
    if not _grouped(case):
        return ""
    ra, rb = max(1, len(case.a_runs)), max(1, len(case.b_runs))
    sa, sb = case.a.suite_id, case.b.suite_id
    where = f"suite {sa}" if sa == sb else f"suites {sa} / {sb}"
    return f"{ra} vs {rb} runs, {where}" + ("" if sa == sb else "; ")


def _paired_text(case: CaseComparison) -> str:
    if _grouped(case):
        return _runs_text(case) + ("" if case.a.suite_id == case.b.suite_id
                                   else case.pairing.text)
    return case.pairing.text


def _bounded(value: float | None, bounds: tuple[float, float] | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" + (f"\n{bounds[0]:.3g}-{bounds[1]:.3g}" if bounds else "")


_ENERGY_SHORT = {"indistinguishable": "\u22480", "negative": "neg.", "unavailable": "n/a",
                 "measured": "ok"}


def _no_energy_ratio(a: str, b: str) -> str:
    """``n/a both``, ``B \u22480``: why a phase has no energy ratio (narrow)."""
    if a == b:
        return f"{_ENERGY_SHORT[a]} both"
    return ", ".join(f"{side} {_ENERGY_SHORT[s]}" for side, s in (("A", a), ("B", b))
                     if s != "measured")


PHASE_CAPTION = ("phases: B/A per sample; time: direct, energy: differential loops; under "
                 "each ratio, bounds from both sides' CIs; \u22480: energy "
                 "indistinguishable from 0, neg.: negative, n/a: unavailable (--json says why)")


def phase_tables(comparison: Comparison) -> tuple[list[Any], list[str]]:
    """The per-phase ratios of the cases whose two results have phases (``--phases``):
    one rich table a case (fits 80 columns), and the lines to print after them (the
    legend, and the cases where one side lacks phases)."""
    from rich import box
    from rich.table import Table

    from accelbench.report.phase_view import ms

    tables, lines = [], []
    for case in comparison.cases:
        ph = case.phases
        if ph is None:
            continue
        label = _case_label(case, comparison.match_on)
        if not ph.available:
            lines.append(f"phases: {label}: {ph.note}")
            continue
        t = Table(title=f"phases of {label} (B/A)", header_style="bold",
                  box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False, title_justify="left")
        for col in ("phase", "A ms", "B ms", "time B/A", "energy B/A", "change"):
            t.add_column(col, no_wrap=True,
                         justify="right" if col in ("A ms", "B ms") else "left")
        for r in ph.ratios:
            change = "\n".join(c for c in (r.time_change, r.energy_change) if c)
            t.add_row(r.phase, ms(r.a_time_s), ms(r.b_time_s),
                      _bounded(r.time_ratio, r.time_bounds),
                      _bounded(r.energy_ratio, r.energy_bounds) if r.energy_ratio is not None
                      else _no_energy_ratio(r.a_energy_status, r.b_energy_status),
                      change or "-")
        tables.append(t)
        if ph.note:
            lines.append(f"phases: {label}: {ph.note}")
    if tables:
        lines.insert(0, PHASE_CAPTION)
    return tables, lines


#: Unpaired cases listed under the table; the rest are counted (--json lists all).
UNPAIRED_SHOWN = 20


def footer_lines(comparison: Comparison) -> list[str]:
    """The plain lines after the table: what was compared and matched on, and each
    unpaired case with the reason (the first :data:`UNPAIRED_SHOWN`)."""
    compared = "; ".join(d["note"] for d in comparison.axis_detail
                         if d["how"] != "matched") or "the two selections (no axis differs)"
    lines = [f"compared: {compared}", f"matched on: {', '.join(comparison.match_on)}"]
    if comparison.unpaired:
        lines.append(f"unpaired: {len(comparison.only_a)} case(s) only in A, "
                     f"{len(comparison.only_b)} only in B (no ratio):")
        for u in comparison.unpaired[:UNPAIRED_SHOWN]:
            label = _key_label(u.key, comparison.match_on) or "(all)"
            lines.append(f"  {u.side} only: {label}: {u.reason}")
        rest = len(comparison.unpaired) - UNPAIRED_SHOWN
        if rest > 0:
            lines.append(f"  ... and {rest} more (--json or --csv lists every one)")
    return lines


def _key_label(key: dict[str, Any], match_on: Sequence[str]) -> str:
    parts = []
    for f in match_on:
        value = key[f]
        if f == "batch_size":
            parts.append(f"bs={value}")
        elif value == "":
            continue
        elif f == "fast_paths":
            parts.append(f"+{value}")
        else:
            parts.append(str(value))
    return " ".join(parts)
