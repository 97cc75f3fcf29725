"""The ``accelbench report`` output: a self-contained HTML page, its figures, a Markdown summary.

``index.html`` embeds every figure as a ``data:`` URI and loads nothing from
the network (no scripts, fonts or style sheets from elsewhere); the same
figures are written as PNG and SVG under ``figures/``, and ``summary.md``
holds the tables in Markdown. The HTML template autoescapes everything, so
user-typed labels (tags, custom workload names) are shown, never interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from accelbench.backends.registry import framework_label
from accelbench.errors import ConfigError
from accelbench.report import data_view, phase_plots, phase_view, plots, totarget_section
from accelbench.report.cost import CaseCost, CostConfig, case_cost
from accelbench.report.markdown import markdown_chunks, render_markdown
from accelbench.report.outputs import atomic_paths, atomic_write_bytes
from accelbench.report.pairs import base_of, framework_ratios, precision_speedups
from accelbench.report.rows import CaseRow
from accelbench.report.sections import (
    FIGURES_DIR,
    ROOFLINE_HINT,
    Figure,
    ReportData,
    SummaryRows,
    figure_of,
    framework_cells,
    reference_sections,
    roofline_points,
)
from accelbench.report.stored import Gathered, gather
from accelbench.report.tally import MAX_POWER_CHARTS, RowTally, tally
from accelbench.result import Result
from accelbench.store.base import display_url

__all__ = ["Figure", "ReportData", "ReportFiles", "build_report", "render_html",
           "render_markdown", "write_report"]

TEMPLATE = "report.html.j2"
_OWN_FIGURE = re.compile(
    r"(throughput|energy|speedup|frameworks|roofline|frontier|phases_time|phases_energy"
    r"|power_\d{3}|totarget_\d{3}_(?:time|energy))\.(png|svg)"
)


def build_report(
    results: Sequence[Result] | Gathered,
    *,
    title: str = "accelbench report",
    store: Any = None,
    store_url: str = "",
    filters: str = "",
    costs: CostConfig | None = None,
    include_reference: bool = True,
    result_filter: Any = None,
) -> ReportData:
    """Compute every table and chart of a report (nothing is written).

    Args:
        results: The results to report on, or what :func:`~accelbench.report.stored.
            gather_store` read of them from a store (a row per result and the few whole
            records the report needs).
        title: Page title.
        store: The store (for the roofline section), or None.
        store_url: Shown in the header (passwords masked).
        filters: Human description of the filters applied.
        costs: Price and carbon rates; None or empty for no cost columns.
        include_reference: Show the paper's published results next to the user's.
        result_filter: The report's ``ResultFilter`` (selects the runs to a target by
            workload, size and framework; see :mod:`~accelbench.report.totarget_section`).

    Raises:
        ConfigError: ``results`` is empty.
    """
    gathered = results if isinstance(results, Gathered) else gather(results)
    tt_groups, tt_charts, tt_note = _totarget(store, result_filter)
    if not gathered.rows and not tt_groups:
        raise ConfigError("no results match the filters: nothing to report")
    costs = costs or CostConfig()
    rows = gathered.rows
    by_id = gathered.by_id
    def cost_of(row: CaseRow) -> CaseCost | None:
        return case_cost(row, costs.rates_for(row.device, row.device_name))

    # One pass over the rows for what every section counts and picks; the summary table
    # and the pairs read the rows again (streamed: a row per result is never held).
    folded = tally(rows.entries(), cost_of)
    currency = next(iter(folded.currencies)) if len(folded.currencies) == 1 else ""
    summary = SummaryRows(rows, cost_of, currency)
    latest = folded.latest.rows()
    left_out = folded.left_out
    missing: dict[str, str] = {}
    charts = _case_charts(rows, latest, by_id, left_out, missing)
    phase_cases = _phase_charts(folded.phased.rows(), by_id, charts, missing)
    data_rows = folded.data.rows()
    fw_base = base_of(folded.frameworks)
    framework_bars, framework_rows = framework_ratios(rows, by_id, fw_base, latest)
    fw_others = list(dict.fromkeys(f["other"] for f in framework_rows))
    base_label = framework_label(fw_base)
    other_labels = [framework_label(fw) for fw in fw_others]
    charts["frameworks"] = plots.framework_chart(framework_bars, left_out, base=base_label,
                                                 others=other_labels)
    if charts["frameworks"] is None:
        missing["frameworks"] = (
            "no case was measured with two frameworks on the same device, workload, "
            "size, batch size and precision: run `accelbench suite frameworks --size tiny`"
        )
    from accelbench.report import frontier, scaling, sharding_view

    scaling_series = scaling.scaling_series(gathered.scaling)
    mode_rows = sharding_view.mode_rows(gathered.sharding)
    charts["scaling"] = scaling.scaling_chart(scaling_series)
    if charts["scaling"] is None:
        missing["scaling"] = (
            "no case was measured at two or more rank counts: run `accelbench suite scaling "
            "--workload W` (1, 2, 4, ... devices)"
        )
    swept = frontier.sweeps(gathered.swept)
    charts["frontier"] = frontier.frontier_chart(swept)
    if charts["frontier"] is None:
        missing["frontier"] = (
            "no sweep with an energy figure: run `accelbench sweep WORKLOAD --power-limits "
            "auto` on a machine with a power sensor" if swept else
            "no device-setting sweep here: run `accelbench sweep WORKLOAD --power-limits auto`"
        )
    points, roof_note = roofline_points(store, folded.devices)
    charts["roofline"] = plots.roofline_chart(points) if points else None
    if charts["roofline"] is None:
        missing["roofline"] = roof_note or ROOFLINE_HINT
    power, power_note = _power_charts(folded.timelines, folded.n_timelines, by_id)
    if include_reference:
        matches, ref_note, ref_table = reference_sections(
            (), newest=folded.newest.rows(), workloads=folded.workloads)
    else:
        matches, ref_table = [], []
        ref_note = "published reference results left out (--no-reference)"
    all_charts = [c for c in charts.values() if c is not None] + power + tt_charts
    return ReportData(
        title=title,
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        store_url=display_url(store_url) if store_url else "",
        filters=filters or "none",
        n_results=folded.n,
        status_counts=dict(folded.status_counts),
        summary=summary,
        cost_enabled=costs.any,
        currency=currency,
        cost_note=_cost_note(costs),
        mfu_known=folded.mfu_known,
        charts={k: figure_of(v) if v is not None else None for k, v in charts.items()},
        missing=missing,
        power=[figure_of(c) for c in power],
        power_note=power_note,
        reference_matches=matches,
        reference_note=ref_note,
        reference_table=ref_table,
        machines=gathered.machines,
        frameworks=[framework_cells(f) for f in framework_rows],
        framework_base=fw_base,
        framework_others=fw_others,
        framework_heading=f"{', '.join(other_labels) or 'other frameworks'} relative to "
                          f"{base_label}",
        scaling=scaling.table_rows(scaling_series),
        sharding=mode_rows,
        sharding_explained=sharding_view.EXPLAINED if mode_rows else "",
        sweeps=frontier.table_rows(swept),
        notes=_notes(folded, latest),
        phases=phase_view.report_rows(phase_cases),
        phase_notes=phase_view.report_notes(phase_cases),
        phases_explained=phase_view.EXPLAINED if phase_cases else "",
        data_view=data_rows,
        data_explained=data_view.EXPLAINED if data_rows else "",
        totarget=tt_groups,
        totarget_note=tt_note,
        totarget_explained=totarget_section.EXPLAINED if tt_groups else "",
        chart_files=all_charts,
        summary_fast_paths=folded.fast_paths,
    )


def _totarget(store: Any, flt: Any) -> tuple[list[dict[str, Any]], list[plots.Chart], str]:
    """The to-target section's groups, each with its figures, and its charts."""
    if store is None:
        return [], [], ""
    groups, charts, note = totarget_section.totarget_section(store, flt)
    figures = {c.name: figure_of(c) for c in charts}
    for g in groups:
        g["figures"] = [figures[name] for name in g.pop("charts")]
    return groups, charts, note


def _case_charts(rows: Iterable[CaseRow], latest: Sequence[CaseRow],
                 by_id: Mapping[str, Result], left_out: int, missing: dict[str, str]
                 ) -> dict[str, plots.Chart | None]:
    """Throughput, energy and mixed-precision charts (why one is empty goes in ``missing``)."""
    charts: dict[str, plots.Chart | None] = {}
    colours = plots.series_colours(latest)
    charts["throughput"] = plots.throughput_chart(latest, colours)
    if charts["throughput"] is None:
        missing["throughput"] = (
            "no successful result to chart: every case here failed (see the status column)"
        )
    charts["energy"] = plots.energy_chart(latest, colours)
    if charts["energy"] is None:
        missing["energy"] = (
            "no energy measurements in these results: energy per sample is unavailable for "
            "every case (no power sensor was readable where they ran). Runs on a machine with "
            "a readable sensor (NVIDIA NVML, AMD SMI; see `accelbench devices`) record it."
        )
    charts["speedup"] = plots.speedup_chart(precision_speedups(rows, by_id, latest), left_out)
    if charts["speedup"] is None:
        missing["speedup"] = (
            "no case has both an fp32 and a mixed-precision result on the same device, "
            "workload, size and batch size: run e.g. `accelbench run WORKLOAD --precision "
            "amp_bf16` next to the fp32 run"
        )
    return charts


def _phase_charts(latest: Sequence[CaseRow], by_id: Mapping[str, Result],
                  charts: dict[str, plots.Chart | None], missing: dict[str, str]
                  ) -> list[tuple[CaseRow, Result]]:
    """The phase figures (``--phases``): the newest ``ok`` run with phases of each case
    (``latest``: those runs' rows); no chart and no section where no result has phases."""
    # phase_rows reads only the latest rows' results: hand it just those.
    cases = phase_plots.phase_rows(latest, {row.result_id: by_id[row.result_id]
                                            for row in latest})
    if cases:
        charts["phases_time"] = phase_plots.time_chart(cases)
        charts["phases_energy"] = phase_plots.energy_chart(cases)
        if charts["phases_energy"] is None:
            missing["phases_energy"] = (
                "no phase energy was measured in these runs (no readable power sensor, or "
                "every difference indistinguishable from zero): the table below says why")
    return cases


def _power_charts(first: Sequence[CaseRow], n_timelines: int, by_id: Mapping[str, Result]
                  ) -> tuple[list[plots.Chart], str]:
    """The power timelines of the rows ``first`` (the first :data:`MAX_POWER_CHARTS` of
    the ``n_timelines`` rows whose results have one) and a note on what is left out."""
    power: list[plots.Chart] = []
    for i, row in enumerate(first[:MAX_POWER_CHARTS]):
        chart = plots.power_timeline_chart(row, by_id[row.result_id].power_timeline, i)
        if chart is not None:
            power.append(chart)
    if not power:
        return power, (
            "no power timelines stored: they are recorded when a sampled power sensor "
            "(e.g. NVML on NVIDIA GPUs) was readable during the run"
        )
    if n_timelines > MAX_POWER_CHARTS:
        return power, (
            f"showing the first {MAX_POWER_CHARTS} of {n_timelines} power timelines; "
            "narrow the report with filters to see the others"
        )
    return power, ""


def _cost_note(costs: CostConfig) -> str:
    if costs.any:
        return (
            "Cost and carbon per million samples. kWh and gCO2 follow the energy's "
            "provenance (see the energy column: measured or estimated); machine cost = "
            "price per hour / throughput."
            + (f" Rates from {costs.source} and the command line." if costs.source else "")
        )
    return (
        "Cost and carbon not shown: give --price-per-hour, --electricity-price (per kWh) "
        "and --carbon-intensity (g/kWh), or store them in the [cost] table of the config "
        "file (--config)."
    )


def ci_legend(rows: Iterable[CaseRow]) -> list[str]:
    """The legend of the summary table's CI column (marked ``*``): its scope, and what
    ``unreliable`` means where a row shows it."""
    rows = list(rows)
    return _ci_legend(any(r.ci_scope for r in rows), any(r.ci_unreliable for r in rows))


def _ci_legend(scoped: bool, unreliable: bool) -> list[str]:
    out = []
    if scoped:
        out.append("* 95% CI: over one run's iterations only (scope: iterations of 1 run), "
                   "not the variation between runs, which is often larger; measure with "
                   "--repeats 3 and compare groups for a CI across runs.")
    if unreliable:
        out.append("unreliable (n iterations): the CI is wider than the estimate itself "
                   "(too few or too scattered iterations); the number says little.")
    return out


def _notes(folded: RowTally, latest: Sequence[CaseRow]) -> list[str]:
    notes = []
    if len(latest) < folded.ok:
        notes.append(
            "Some cases were run more than once: the table lists every run, the charts use "
            "the newest successful run of each case (a quiet one where the case has one); "
            "under each chart, 'where each bar comes from' names its run, suite and time."
        )
    n_noisy = folded.noisy
    if n_noisy:
        notes.append(
            f"{n_noisy} run(s) are flagged (badge in the status column): 'busy machine' when "
            "other processes competed with the case (CPU time, the GPU, throttling), 'step "
            "times vary' when its times spread more than a quiet run of its kind. Charts fade "
            "or grey them out; rerun them on a quiet machine before trusting their numbers."
        )
    left_out = folded.left_out
    if left_out:
        notes.append(
            f"{left_out} run(s) are diverged or insufficient: shown in the table with their "
            "status, kept out of every chart and ratio."
        )
    if not folded.energy_known:
        notes.append("Energy per sample is unavailable for every case (shown as such, not 0).")
    notes += _ci_legend(folded.ci_scope, folded.ci_unreliable)
    return notes


def render_html(data: ReportData) -> str:
    """The HTML page (autoescaped template from the package data)."""
    return "".join(html_chunks(data))


def html_chunks(data: ReportData) -> Iterator[str]:
    """:func:`render_html` piece by piece, as the template produces it (the page of a large
    store is never held whole)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("accelbench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["code"] = code_spans
    return env.get_template(TEMPLATE).generate(r=data)


def code_spans(text: str) -> Any:
    """Escape ``text``, then show its `backquoted` parts as ``<code>``."""
    from markupsafe import Markup, escape

    escaped = str(escape(text))
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: Path
    markdown: Path
    figures: tuple[Path, ...]


REPORT_FILES = ("index.html", "summary.md", f"{FIGURES_DIR}/")
"""What :func:`write_report` writes in its directory (``figures/``: a folder of its own)."""


def write_report(data: ReportData, out_dir: Path) -> ReportFiles:
    """Write ``index.html``, ``summary.md`` and ``figures/*.png|svg`` into ``out_dir``, each
    through a temporary file renamed into place (the caller checks ``out_dir`` first with
    :func:`~accelbench.report.outputs.check_out_dir` and :data:`REPORT_FILES`).

    Raises:
        ConfigError: ``out_dir`` is a file or cannot be written.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir} exists and is not a directory")
    try:
        fig_dir = out_dir / FIGURES_DIR
        fig_dir.mkdir(parents=True, exist_ok=True)
        # Figures of an earlier report in the same directory would be stale: remove
        # those (by our own file names only), never anything else.
        for old in fig_dir.iterdir():
            if _OWN_FIGURE.fullmatch(old.name) and old.is_file():
                old.unlink()
        figures = []
        for chart in data.chart_files:
            for ext, blob in (("png", chart.png), ("svg", chart.svg)):
                path = fig_dir / f"{chart.name}.{ext}"
                atomic_write_bytes(path, blob)
                figures.append(path)
        html = out_dir / "index.html"
        with atomic_paths([html]) as (tmp,), \
                tmp.open("w", encoding="utf-8", newline="") as fh:
            for chunk in html_chunks(data):
                fh.write(chunk)
        md = out_dir / "summary.md"
        with atomic_paths([md]) as (tmp,), \
                tmp.open("w", encoding="utf-8", newline="") as fh:
            for chunk in markdown_chunks(data):
                fh.write(chunk)
    except OSError as exc:
        raise ConfigError(f"cannot write the report to {out_dir}: {exc}") from None
    return ReportFiles(html=html, markdown=md, figures=tuple(figures))
