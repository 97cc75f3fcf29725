"""The report's phase figures (``--phases``): stacked bars of the time per step and of the
energy per sample by phase, one bar per workload x size x batch x precision x framework x
device (the newest ``ok`` run of each case that has phases).

Time: the in-step phases' direct times stacked, the input phase (outside the measured
step) hatched after them, and a black tick at the measured step time, so the sum check is
seen. Energy: the phases whose differential energy is ``measured`` stacked (J per
sample); a phase indistinguishable from zero, negative or unavailable is not drawn but
named beside its bar (never drawn as zero), and a tick marks the record's own energy per
sample where it has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.phase_summary import energy_status, step_time
from accelbench.phases import PHASE_NAMES
from accelbench.report.plots import Chart, new_figure, render_chart, row_source
from accelbench.report.rows import DEFAULT_FRAMEWORK, CaseRow
from accelbench.result import Result

PHASE_COLOURS = {"input": "#8C8C8C", "forward": "#4C72B0", "backward": "#DD8452",
                 "optimizer": "#55A868", "communication": "#C44E52"}
_STATUS_SHORT = {"indistinguishable": "\u22480", "negative": "negative",
                 "unavailable": "n/a"}


def bar_label(row: CaseRow) -> str:
    """``resnet50 paper bs=64 fp32 cuda:0`` (+ the framework where not the default)."""
    fw = "" if row.framework == DEFAULT_FRAMEWORK else f" {row.framework}"
    return f"{row.workload} {row.size} bs={row.batch_size} {row.precision}{fw} {row.device}"


def phase_rows(latest: Sequence[CaseRow], by_id: dict[str, Result]
               ) -> list[tuple[CaseRow, Result]]:
    """The charted cases: ``latest`` rows whose result is ``ok`` and has phases."""
    out = []
    for row in latest:
        r = by_id.get(row.result_id)
        if r is not None and r.phases is not None and row.rankable:
            out.append((row, r))
    return sorted(out, key=lambda p: bar_label(p[0]))


def _legend(fig: Any, names: Sequence[str], tick: str) -> None:
    """The phases drawn (in step order) and the black tick's meaning."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(facecolor=PHASE_COLOURS[n], label=n,
                     hatch="//" if n == "input" else None, edgecolor="white")
               for n in PHASE_NAMES if n in names]
    handles.append(Line2D([], [], color="black", marker="|", linestyle="none", markersize=12,
                          label=tick))
    fig.legend(handles=handles, loc="outside lower center", ncols=min(6, len(handles)),
               fontsize=8, frameon=False)


def time_chart(cases: Sequence[tuple[CaseRow, Result]]) -> Chart | None:
    """Time per step by phase (ms), stacked; None without a case with phases."""
    if not cases:
        return None
    fig = new_figure(9.0, 0.45 * len(cases) + 1.6)
    ax = fig.subplots()
    seen: list[str] = []
    sources = []
    over = 0
    for i, (row, r) in enumerate(cases):
        assert r.phases is not None
        left = 0.0
        ordered = [p for p in r.phases.phases if p.in_step] + \
            [p for p in r.phases.phases if not p.in_step]
        for p in ordered:
            if p.time_s is None:
                continue
            width = p.time_s * 1e3
            ax.barh(i, width, left=left, color=PHASE_COLOURS.get(p.name, "#999999"),
                    hatch=None if p.in_step else "//", edgecolor="white",
                    alpha=0.35 if row.noisy else 1.0)
            left += width
            seen.append(p.name)
        step_s = step_time(r.phases, r.stats.median_s if r.stats else None)
        if step_s:
            ax.plot([step_s * 1e3], [i], marker="|", color="black", markersize=18,
                    markeredgewidth=2)
        if r.phases.sum_within_tolerance is False:
            over += 1
        sources.append(row_source(row, bar_label(row)))
    ax.set_yticks(range(len(cases)))
    ax.set_yticklabels([bar_label(row) for row, _ in cases], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms per training step (direct attribution pass)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    _legend(fig, seen, "measured step time")
    title = "Where the step's time goes (--phases): time per step by phase"
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    caption = ("Stacked: each phase's direct time (an attribution pass after the measured "
               "window, synchronised at the phase boundaries); hatched: input, outside the "
               "measured step; black tick: the measured step time.")
    if over:
        caption += (f" {over} case(s) whose phases miss the step time by more than 10% "
                    "(synchronising costs time and loses fusion): see the phase table.")
    return render_chart(fig, "phases_time", title,
                        f"{title}: stacked horizontal bars, one per case", caption, sources)


def energy_chart(cases: Sequence[tuple[CaseRow, Result]]) -> Chart | None:
    """Energy per sample by phase (J), stacked from the measured phases; None where no
    case has a measured phase energy."""
    drawn = [(row, r) for row, r in cases if r.phases is not None and any(
        energy_status(p) == "measured" for p in r.phases.phases)]
    if not drawn:
        return None
    fig = new_figure(9.0, 0.45 * len(drawn) + 1.6)
    ax = fig.subplots()
    seen: list[str] = []
    sources = []
    for i, (row, r) in enumerate(drawn):
        assert r.phases is not None
        per = max(1, r.samples_per_step)
        left = 0.0
        undrawn = []
        for p in r.phases.phases:
            status = energy_status(p)
            if status == "measured" and p.energy is not None and p.energy.value is not None:
                width = p.energy.value / per
                ax.barh(i, width, left=left, color=PHASE_COLOURS.get(p.name, "#999999"),
                        edgecolor="white", alpha=0.35 if row.noisy else 1.0)
                left += width
                seen.append(p.name)
            else:
                undrawn.append(f"{p.name} {_STATUS_SHORT.get(status, status)}")
        total = r.energy_j_per_sample
        if total is not None:
            ax.plot([total], [i], marker="|", color="black", markersize=18,
                    markeredgewidth=2)
        if undrawn:
            ax.annotate(", ".join(undrawn), (max(left, total or 0.0), i),
                        xytext=(6, 0), textcoords="offset points", va="center", fontsize=7,
                        color="#555555")
        sources.append(row_source(row, bar_label(row)))
    ax.set_yticks(range(len(drawn)))
    ax.set_yticklabels([bar_label(row) for row, _ in drawn], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("J per sample (differential steady-state loops)", fontsize=9)
    ax.margins(x=0.25)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    _legend(fig, seen, "the record's energy per sample")
    title = "Where the step's energy goes (--phases): energy per sample by phase"
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    left_out = len(cases) - len(drawn)
    caption = ("Stacked: phases whose energy difference is measured (its CI excludes 0). "
               "Named beside a bar, not drawn: \u22480 = indistinguishable from zero, "
               "negative (the loops did not add up), n/a = unavailable; the phase table "
               "gives their figures and reasons. Black tick: the case's energy per sample.")
    if left_out:
        caption += f" {left_out} case(s) with phases but no measured phase energy: table only."
    return render_chart(fig, "phases_energy", title,
                        f"{title}: stacked horizontal bars, one per case", caption, sources)
