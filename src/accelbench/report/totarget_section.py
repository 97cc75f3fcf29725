"""The report's "Training to a target" section: a table per stored group of runs to a
target (``accelbench train``) and its curves, the held-out metric against the training clock
and, where the energy of every evaluation point is known, against energy; each seed a line,
the target a dashed line (docs/totarget.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.report import plots
from accelbench.report.totarget import (
    group_title,
    point_energy_j,
    point_energy_rel_95,
    seed_rows,
    why_no_point_energy,
)
from accelbench.result_text import bound_text
from accelbench.totarget.record import ToTargetRecord
from accelbench.totarget.run import summarise, summary_line

#: Groups drawn in a report, newest first; the rest are counted in a note.
MAX_GROUPS = 12

EXPLAINED = (
    "Runs of `accelbench train`: each group is one command's seeds. Time-, samples- and "
    "energy-to-target are the clock, samples and energy at the evaluation that met the "
    "target (evaluation time counted, start-up apart); the score drops the fastest and "
    "slowest run (MLPerf). Curves: the held-out metric at each evaluation, one line per "
    "seed, the target dashed."
)


def _num(value: float | None, unit: str = "", missing: str = "-") -> str:
    return missing if value is None else f"{value:.4g}{unit}"


def _curve(records: Sequence[ToTargetRecord], index: int, *,
           energy: bool) -> plots.Chart | None:
    """The metric against time (or energy) per seed, the target as a line; None when a
    seed has no point with the x value."""
    first = records[0]
    fig = plots.new_figure(6.0, 3.0)
    ax = fig.subplots()
    drawn = 0
    bounds: list[float] = []
    for i, rec in enumerate(records):
        pts = rec.outcome.points
        xs = ([point_energy_j(rec, k) for k in range(len(pts))] if energy
              else [p.time_s for p in pts])
        if not pts or any(x is None for x in xs):
            if energy:
                return None
            continue
        color = plots.PALETTE[i % len(plots.PALETTE)]
        ax.plot(xs, [p.metric for p in pts], color=color,
                linewidth=1.2, marker="o", markersize=3, label=f"seed {rec.outcome.seed} "
                f"({rec.outcome.status})")
        rels = [point_energy_rel_95(rec, k) for k in range(len(pts))] if energy else []
        if rels and all(r is not None for r in rels):  # each point's 95% bound, as a bar
            ax.errorbar(xs, [p.metric for p in pts], color=color, linewidth=0,
                        xerr=[float(x or 0.0) * float(r or 0.0) for x, r in zip(xs, rels,
                                                                            strict=True)],
                        elinewidth=0.8, capsize=2)
            bounds += [float(r) for r in rels if r is not None]
        drawn += 1
    if not drawn:
        return None
    ax.axhline(first.target, color="#333333", linestyle="--", linewidth=1,
               label=f"target {first.target:.4g}")
    what = "energy (J)" if energy else "training time (s, evaluation included)"
    ax.set_xlabel(what, fontsize=9)
    ax.set_ylabel(f"held-out {first.recipe.metric}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(fontsize=7, frameon=False)
    title = (f"{first.recipe.workload} {first.recipe.size} ({first.framework}), group "
             f"{first.group_id[:8]}: held-out {first.recipe.metric} against "
             f"{'energy' if energy else 'time'}")
    ax.set_title(title, fontsize=9, loc="left")
    kind = "energy" if energy else "time"
    caption = (f"energy: {first.energy.label()}; {bound_caption(bounds)}" if energy else
               "each point an evaluation on the held-out split")
    return plots.render_chart(fig, f"totarget_{index:03d}_{kind}", title,
                              f"held-out {first.recipe.metric} against {kind}, "
                              f"{drawn} seed(s), target {first.target:.4g}", caption)


def bound_caption(bounds: list[float]) -> str:
    """What the energy curve's horizontal bars are, or why there are none."""
    if not bounds:
        return ("each point's energy: error bound unavailable (stored before point bounds, "
                "or a sensor too little is known of)")
    low, high = f"{100 * min(bounds):.2g}%", f"{100 * max(bounds):.2g}%"
    return (f"bars: each point's energy 95% bound, +- {low}"
            + (f" to {high}" if high != low else "")
            + " (widest at early points: a sensor's edge error does not shrink with the "
            "prefix)")


def _group(records: Sequence[ToTargetRecord], index: int
           ) -> tuple[dict[str, Any], list[plots.Chart]]:
    charts = [c for c in (_curve(records, index, energy=False),
                          _curve(records, index, energy=True)) if c is not None]
    no_energy = [r for r in records if r.outcome.points and any(
        point_energy_j(r, k) is None for k in range(len(r.outcome.points)))]
    notes = []
    if no_energy:
        notes.append(f"no curve against energy: {why_no_point_energy(no_energy[0])} (seed "
                     f"{no_energy[0].outcome.seed}); the curve is against time only")
    rows = [{"seed": str(row.seed), "status": row.status,
             "samples": "-" if row.samples_to_target is None else str(row.samples_to_target),
             "time": _num(row.time_to_target_s, " s"),
             "energy": (f"{row.energy_to_target_j:.4g} J {bound_text(row.energy_to_target_rel_u95)}"
                        if row.energy_to_target_j is not None
                        else "-" if row.status != "reached" else row.energy_label),
             "best": _num(row.best_metric, "", "none"), "evaluations": str(row.evaluations)}
            for row in seed_rows(records)]
    return {"title": group_title(records), "rows": rows,
            "score": summary_line(summarise(list(records))), "notes": notes,
            "charts": [c.name for c in charts]}, charts


#: Result filters that select nothing among runs to a target (the section is left out).
RESULT_ONLY = ("device", "precision", "status", "suite_id", "tag", "limit")


def totarget_section(store: Any, flt: Any = None
                     ) -> tuple[list[dict[str, Any]], list[plots.Chart], str]:
    """The section's groups (newest first, at most :data:`MAX_GROUPS`), their charts, and a
    note on what was left out ('' for none). The report's filter ``flt`` (a
    ``ResultFilter``) selects groups by workload, size and framework; a filter only results
    have leaves the section out, saying so. Nothing where the store has no such runs."""
    lister = getattr(store, "totarget_groups", None)
    if lister is None:
        return [], [], ""
    listed = [g for g in lister()
              if all(getattr(flt, k, None) in (None, getattr(g, k))
                     for k in ("workload", "size", "framework"))]
    other = [k for k in RESULT_ONLY if getattr(flt, k, None) is not None]
    if listed and other:
        return [], [], (f"runs to a target left out: --{other[0].replace('_', '-')} filters "
                        "results (`accelbench results to-target` lists the runs)")
    groups, charts = [], []
    for index, g in enumerate(listed[:MAX_GROUPS]):
        records = store.totarget_runs(group_id=g.group_id)
        if not records:
            continue
        view, drawn = _group(records, index)
        groups.append(view)
        charts += drawn
    note = (f"the newest {MAX_GROUPS} of {len(listed)} groups are shown; `accelbench results "
            "to-target` lists them all" if len(listed) > MAX_GROUPS else "")
    return groups, charts, note
