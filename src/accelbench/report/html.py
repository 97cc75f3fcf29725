"""The ``accelbench report`` output: a self-contained HTML page, its figures, a Markdown summary.

``index.html`` embeds every figure as a ``data:`` URI and loads nothing from
the network (no scripts, fonts or style sheets from elsewhere); the same
figures are written as PNG and SVG under ``figures/``, and ``summary.md``
holds the tables in Markdown. The HTML template autoescapes everything, so
user-typed labels (tags, custom workload names) are shown, never interpreted.
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from accelbench import __version__, jsonout
from accelbench.errors import ConfigError
from accelbench.report import plots
from accelbench.report.compare import cannot_tell, group_ratios, ratios, repeat_group
from accelbench.report.cost import CaseCost, CostConfig, case_cost
from accelbench.report.reference import (
    BOUNDARY_TEXT,
    CITATION,
    LABEL,
    ReferenceRow,
    load_reference,
    match_reference,
    reference_workloads,
)
from accelbench.report.rows import (
    CaseRow,
    case_rows,
    newest_per_case,
    parse_time,
    short_time,
)
from accelbench.result import Result
from accelbench.store.base import masked_url

TEMPLATE = "report.html.j2"
MAX_POWER_CHARTS = 60
ROOFLINE_HINT = "no roofline data: run `accelbench roofline`"
FIGURES_DIR = "figures"
_OWN_FIGURE = re.compile(
    r"(throughput|energy|speedup|frameworks|roofline|frontier|power_\d{3})\.(png|svg)"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Figure:
    """A chart as the template shows it."""

    name: str
    title: str
    alt: str
    data_uri: str
    png_path: str
    svg_path: str
    caption: str = ""
    sources: tuple[dict[str, str], ...] = ()
    """Where each bar comes from (result, suite, time), shown under the figure."""


@dataclass(kw_only=True, slots=True)
class ReportData:
    """Everything the HTML and Markdown renderers show, already formatted."""

    title: str
    generated_at: str
    store_url: str
    filters: str
    n_results: int
    status_counts: dict[str, int]
    summary: list[dict[str, Any]]
    cost_enabled: bool
    currency: str
    """The one currency of every cost shown (then cells omit it), else empty."""
    cost_note: str
    mfu_known: bool
    charts: dict[str, Figure | None]
    missing: dict[str, str]
    """Why a chart or section is empty, by name."""
    power: list[Figure]
    power_note: str
    reference_matches: list[dict[str, Any]]
    reference_note: str
    reference_table: list[dict[str, Any]]
    machines: list[dict[str, Any]]
    frameworks: list[dict[str, Any]] = field(default_factory=list)
    """JAX/torch rows of the framework comparison, formatted."""
    scaling: list[dict[str, Any]] = field(default_factory=list)
    """Rows of the scaling table (:func:`accelbench.report.scaling.table_rows`)."""
    sweeps: list[dict[str, Any]] = field(default_factory=list)
    """Rows of the device-setting frontier table (:func:`accelbench.report.frontier.table_rows`)."""
    notes: list[str] = field(default_factory=list)
    accelbench_version: str = __version__
    reference_label: str = LABEL
    reference_citation: str = CITATION
    reference_boundary: str = BOUNDARY_TEXT
    _charts: list[plots.Chart] = field(default_factory=list)


# -- formatting -------------------------------------------------------------------------


def _rate(value: float | None) -> str:
    from accelbench.render import fmt_rate

    return fmt_rate(value)


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _money(value: float | None, currency: str) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" + (f" {currency}" if currency else "")


def _bytes(value: int | None) -> str:
    from accelbench.render import fmt_bytes

    return fmt_bytes(value)


def _energy_cell(row: CaseRow) -> str:
    if row.energy_j_per_sample is None:
        return "unavailable"
    boundary = f" ({row.energy_boundary})" if row.energy_boundary != "device" else ""
    return f"{row.energy_j_per_sample:.4g} J/{row.sample_unit}{boundary}"


def _summary_row(row: CaseRow, cost: CaseCost | None, currency: str) -> dict[str, Any]:
    unit = row.sample_unit
    if row.ci95_low_samples_per_s is not None:
        ci = f"{_rate(row.ci95_low_samples_per_s)} \u2013 {_rate(row.ci95_high_samples_per_s)}"
    elif row.samples_per_s is not None:
        ci = f"no CI (n={row.iterations})"
    else:
        ci = "-"
    out = {
        "id": row.result_id[:8],
        "full_id": row.result_id,
        "device": row.device,
        "device_name": row.device_name if row.device_name != row.device else "",
        "workload": row.workload,
        "size": row.size,
        "precision": row.precision,
        "batch_size": row.batch_size,
        "status": row.status,
        "noisy": row.noisy,
        "noise": "; ".join(row.noise_reasons) or ("flagged noisy" if row.noisy else ""),
        "error": (row.error or "")[:300],
        "throughput": f"{_rate(row.samples_per_s)} {unit}s/s" if row.samples_per_s else "-",
        "ci": ci,
        "iterations": row.iterations or "-",
        "step_ms": f"{row.step_time_s * 1e3:.3g}" if row.step_time_s is not None else "-",
        "memory": _bytes(row.peak_memory_bytes),
        "memory_source": row.peak_memory_source,
        "power_w": _num(row.avg_power_w),
        "energy": _energy_cell(row),
        "energy_kind": row.energy_kind,
        "energy_source": row.energy_source,
        "energy_note": row.energy_note,
        "mfu": f"{row.mfu:.1%}" if row.mfu is not None else "-",
        "tag": row.tag,
        "suite_id": row.suite_id or "",
        "cost": "-",
        "kwh": "-",
        "gco2": "-",
        "carbon_kind": "",
    }
    if cost is not None:
        out["cost"] = _money(cost.cost_per_msample, "" if currency else cost.currency)
        out["kwh"] = _num(cost.kwh_per_msample)
        out["gco2"] = _num(cost.gco2_per_msample)
        if cost.energy_kind != "measured" and cost.kwh_per_msample is not None:
            out["carbon_kind"] = cost.energy_kind
    return out


def _figure(chart: plots.Chart) -> Figure:
    uri = "data:image/png;base64," + base64.b64encode(chart.png).decode("ascii")
    return Figure(
        name=chart.name, title=chart.title, alt=chart.alt, data_uri=uri,
        png_path=f"{FIGURES_DIR}/{chart.name}.png", svg_path=f"{FIGURES_DIR}/{chart.name}.svg",
        caption=chart.caption, sources=chart.sources,
    )


# -- sections ---------------------------------------------------------------------------


_CASE_FIELDS = ("device", "device_name", "workload", "size", "batch_size", "precision",
                "framework", "nnodes", "nproc_per_node")  # ranks: never pair 1x8 with 1x1


def _pairs(rows: Sequence[CaseRow], axis: str, base_value: str
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
            when = _when(r)

            def rank(c: CaseRow, r: CaseRow = r, when: Any = when) -> tuple[Any, ...]:
                same = r.suite_id is not None and c.suite_id == r.suite_id
                cw = _when(c)
                apart = abs((cw - when).total_seconds()) if cw and when else float("inf")
                return (not same, apart, c.noisy, _neg(c.finished_at))

            out.append((min(candidates, key=rank), r))
    return out


def _when(row: CaseRow) -> Any:
    return parse_time(row.started_at) or parse_time(row.finished_at)


def _neg(stamp: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in stamp)


def _pair_source(base: CaseRow, r: CaseRow) -> str:
    """Which runs a ratio pairs, for the chart's label."""
    if r.suite_id is not None and base.suite_id == r.suite_id:
        return f"suite {r.suite_id} ({short_time(r.started_at or r.finished_at)})"
    return (f"{base.result_id[:8]} {short_time(base.started_at or base.finished_at)} vs "
            f"{r.result_id[:8]} {short_time(r.started_at or r.finished_at)} (closest in time)")


def _ratio_bar(base: CaseRow, r: CaseRow, label: str, tput: Any) -> plots.Speedup:
    return plots.Speedup(
        label=label, precision=r.precision, value=tput.value, ci95=tput.ci95,
        significant=tput.significant, noisy=base.noisy or r.noisy,
        source=_pair_source(base, r),
        sources=(plots.row_source(base, f"{label} (base)"), plots.row_source(r, label)),
    )


def _left_out(rows: Sequence[CaseRow]) -> int:
    """Runs kept out of every chart because they hold no valid measurement."""
    return sum(1 for r in rows if r.status in ("insufficient", "diverged"))


def _speedups(rows: Sequence[CaseRow], by_id: dict[str, Result]) -> list[plots.Speedup]:
    """Each non-fp32 case's newest run over an fp32 run of the same case (same framework)."""
    out = []
    for base, r in _pairs(rows, "precision", "fp32"):
        tput, _ = _pair_ratios(by_id[base.result_id], by_id[r.result_id], by_id)
        if tput.value is None:
            continue
        framework = "" if r.framework == "torch" else f" ({r.framework})"
        out.append(_ratio_bar(
            base, r, f"{r.device} {r.workload} {r.size} bs={r.batch_size}: {r.precision}"
            f"{framework}", tput))
    return out


def _pair_ratios(ra: Result, rb: Result, by_id: dict[str, Result]) -> tuple[Any, Any]:
    """B/A throughput and energy ratios of two cases: over their ``--repeats`` groups when
    both have at least two runs (the CI covers between-run variation), else from the two
    runs with no significance claim (one run's CI cannot support one)."""
    everything = list(by_id.values())
    group_a, group_b = repeat_group(ra, everything), repeat_group(rb, everything)
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


def _framework_ratios(rows: Sequence[CaseRow], by_id: dict[str, Result]
                      ) -> tuple[list[plots.Speedup], list[dict[str, Any]]]:
    """JAX over torch, for every case measured in both (the same suite's pair preferred).

    Returns the chart's bars and the table rows (throughput and energy-per-sample
    ratios with their bootstrap CIs).
    """
    bars, table = [], []
    for base, r in _pairs(rows, "framework", "torch"):
        if r.framework != "jax":
            continue
        ra, rb = by_id[base.result_id], by_id[r.result_id]
        tput, energy = _pair_ratios(ra, rb, by_id)
        if tput.value is None:
            continue
        bars.append(_ratio_bar(
            base, r, f"{r.device} {r.workload} {r.size} bs={r.batch_size} {r.precision}", tput))
        table.append({
            "device": r.device, "workload": r.workload, "size": r.size,
            "batch_size": r.batch_size, "precision": r.precision,
            "torch_samples_per_s": base.samples_per_s, "jax_samples_per_s": r.samples_per_s,
            "throughput_ratio": tput.value, "throughput_ci95": tput.ci95,
            "throughput_significant": tput.significant,
            "energy_ratio": energy.value, "energy_ci95": energy.ci95,
            "energy_note": energy.note, "jax_compile_s": rb.compile_s,
            "same_suite": r.suite_id is not None and base.suite_id == r.suite_id,
            "noisy": base.noisy or r.noisy, "source": _pair_source(base, r),
        })
    return bars, table


def _roofline_points(store: Any, devices: set[str]) -> tuple[list[dict[str, Any]], str]:
    if store is None:
        return [], ROOFLINE_HINT
    try:
        from accelbench.roofline.report import roofline_points
    except ImportError:
        return [], ROOFLINE_HINT
    try:
        points = list(roofline_points(store))
    except Exception as exc:  # another module's failure must not sink the whole report
        return [], f"roofline data could not be read ({type(exc).__name__}: {exc})"
    if devices:
        points = [p for p in points if p.get("device") in devices] or points
    return points, "" if points else ROOFLINE_HINT


def _reference_sections(
    rows: Sequence[CaseRow],
) -> tuple[list[dict[str, Any]], str, list[dict[str, Any]]]:
    matches = []
    for m in match_reference(newest_per_case(rows)):
        r = m.row
        published = []
        for ref in m.reference:
            ratio = (
                r.samples_per_s / ref.samples_per_s
                if ref.samples_per_s and r.samples_per_s else None
            )
            published.append({
                **_ref_cells(ref),
                "ratio": _ratio_text(ratio),
            })
        matches.append({
            "workload": r.workload, "batch_size": r.batch_size, "precision": r.precision,
            "size": r.size, "device": r.device, "device_name": r.device_name,
            "id": r.result_id[:8],
            "throughput": f"{_rate(r.samples_per_s)} {r.sample_unit}s/s",
            "energy": _energy_cell(r), "energy_kind": r.energy_kind,
            "power_w": _num(r.avg_power_w), "comparable": m.comparable, "note": m.note,
            "published": published,
        })
    workloads = sorted({r.workload for r in rows} & set(reference_workloads()))
    note = ""
    if not matches:
        covered = ", ".join(
            f"{w} (batch {', '.join(str(b) for b in sorted({x.batch_size for x in load_reference(workload=w)}))})"  # noqa: E501
            for w in reference_workloads()
        )
        note = (
            "None of these results has the workload, batch size and precision of a published "
            f"row. Published rows cover {covered}, in fp32 (amp_fp16 on the V100, bf16 on "
            "TPUs). For example: `accelbench run lstm --size paper --batch-size 64`."
        )
    table = [_ref_cells(ref) | {"workload": ref.workload, "batch_size": ref.batch_size}
             for ref in load_reference() if not workloads or ref.workload in workloads]
    return matches, note, table


def _ratio_text(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    if ratio >= 100:
        return f"{ratio:,.0f}\u00d7"
    return f"{ratio:.3g}\u00d7"


def _ref_cells(ref: ReferenceRow) -> dict[str, Any]:
    return {
        "device": ref.device,
        "precision": ref.precision,
        "status": ref.status,
        "throughput": f"{_rate(ref.samples_per_s)} {ref.sample_unit}s/s"
        if ref.samples_per_s is not None else ("out of memory" if ref.status == "oom" else "-"),
        "power_w": _num(ref.avg_power_w),
        "energy": f"{ref.energy_j_per_sample:.3g} J/{ref.sample_unit}"
        if ref.energy_j_per_sample is not None else "not reported",
    }


def _cores(cpu: dict[str, Any]) -> str | None:
    parts = [
        f"{cpu[key]} {label}"
        for key, label in (("physical_cores", "physical"), ("logical_cores", "logical"),
                           ("usable_cores", "usable"))
        if cpu.get(key) is not None
    ]
    return ", ".join(parts) or None


def _machines(results: Sequence[Result]) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for r in results:
        m = r.machine or {}
        key = jsonout.dumps(m, sort_keys=True, default=str)
        g = groups.get(key)
        if g is None:
            cpu = m.get("cpu") or {}
            sw = m.get("software") or {}
            mem = cpu.get("memory_bytes")
            gpus = [
                f"{g_.get('device', '?')}: {g_.get('name', '?')}"
                + (f", {g_['memory_bytes'] / 2**30:.1f} GiB" if g_.get("memory_bytes") else "")
                + (f", {g_['runtime']}" if g_.get("runtime") else "")
                + (f", driver {g_['driver_version']}" if g_.get("driver_version") else "")
                for g_ in m.get("gpus") or [] if isinstance(g_, dict)
            ]
            facts = [
                ("hostname", m.get("hostname")),
                ("OS", m.get("os")),
                ("CPU", cpu.get("model")),
                ("cores", _cores(cpu)),
                ("memory", f"{mem / 2**30:.1f} GiB" if isinstance(mem, (int, float)) else None),
                ("ISA", ", ".join(cpu.get("isa") or []) or None),
                ("GPUs", "; ".join(gpus) or "none"),
                ("accelbench", sw.get("accelbench")),
                ("git commit", sw.get("git_commit")),
                ("Python", sw.get("python")),
                ("PyTorch", sw.get("torch")),
                ("CUDA", sw.get("cuda")),
                ("ROCm", sw.get("hip")),
                ("cuDNN", sw.get("cudnn")),
                ("torch threads", sw.get("torch_threads")),
                ("note", m.get("error")),
            ]
            g = {
                "facts": [(k, str(v)) for k, v in facts if v not in (None, "")],
                "runs": [],
                "raw": jsonout.dumps(m, indent=2, sort_keys=True, default=str),
                "empty": not m,
            }
            groups[key] = g
        g["runs"].append(r.id[:8])
    return list(groups.values())


def build_report(
    results: Sequence[Result],
    *,
    title: str = "accelbench report",
    store: Any = None,
    store_url: str = "",
    filters: str = "",
    costs: CostConfig | None = None,
    include_reference: bool = True,
) -> ReportData:
    """Compute every table and chart of a report (nothing is written).

    Args:
        results: The results to report on.
        title: Page title.
        store: The store (for the roofline section), or None.
        store_url: Shown in the header (passwords masked).
        filters: Human description of the filters applied.
        costs: Price and carbon rates; None or empty for no cost columns.
        include_reference: Show the paper's published results next to the user's.

    Raises:
        ConfigError: ``results`` is empty.
    """
    if not results:
        raise ConfigError("no results match the filters: nothing to report")
    costs = costs or CostConfig()
    rows = case_rows(results)
    by_id = {r.id: r for r in results}
    row_costs = [case_cost(row, costs.rates_for(row.device, row.device_name)) for row in rows]
    currencies = {c.currency for c in row_costs if c is not None}
    currency = currencies.pop() if len(currencies) == 1 else ""
    summary = [_summary_row(row, cost, currency) for row, cost in zip(rows, row_costs, strict=True)]
    latest = newest_per_case(rows, prefer_quiet=True)
    left_out = _left_out(rows)
    missing: dict[str, str] = {}
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
    speedups = _speedups(rows, by_id)
    charts["speedup"] = plots.speedup_chart(speedups, left_out)
    if charts["speedup"] is None:
        missing["speedup"] = (
            "no case has both an fp32 and a mixed-precision result on the same device, "
            "workload, size and batch size: run e.g. `accelbench run WORKLOAD --precision "
            "amp_bf16` next to the fp32 run"
        )
    framework_bars, framework_rows = _framework_ratios(rows, by_id)
    charts["frameworks"] = plots.framework_chart(framework_bars, left_out)
    if charts["frameworks"] is None:
        missing["frameworks"] = (
            "no case was measured with both PyTorch and JAX on the same device, workload, "
            "size, batch size and precision: run `accelbench suite frameworks --size tiny`"
        )
    from accelbench.report import scaling

    scaling_series = scaling.scaling_series(results)
    charts["scaling"] = scaling.scaling_chart(scaling_series)
    if charts["scaling"] is None:
        missing["scaling"] = (
            "no case was measured at two or more rank counts: run `accelbench suite scaling "
            "--workload W` (1, 2, 4, ... devices)"
        )
    from accelbench.report import frontier

    swept = frontier.sweeps(results)
    charts["frontier"] = frontier.frontier_chart(swept)
    if charts["frontier"] is None:
        missing["frontier"] = (
            "no sweep with an energy figure: run `accelbench sweep WORKLOAD --power-limits "
            "auto` on a machine with a power sensor" if swept else
            "no device-setting sweep here: run `accelbench sweep WORKLOAD --power-limits auto`"
        )
    points, roof_note = _roofline_points(store, {r.device for r in rows})
    charts["roofline"] = plots.roofline_chart(points) if points else None
    if charts["roofline"] is None:
        missing["roofline"] = roof_note or ROOFLINE_HINT

    power: list[plots.Chart] = []
    with_timeline = [row for row in rows if by_id[row.result_id].power_timeline]
    for i, row in enumerate(with_timeline[:MAX_POWER_CHARTS]):
        chart = plots.power_timeline_chart(row, by_id[row.result_id].power_timeline, i)
        if chart is not None:
            power.append(chart)
    power_note = ""
    if not power:
        power_note = (
            "no power timelines stored: they are recorded when a sampled power sensor "
            "(e.g. NVML on NVIDIA GPUs) was readable during the run"
        )
    elif len(with_timeline) > MAX_POWER_CHARTS:
        power_note = (
            f"showing the first {MAX_POWER_CHARTS} of {len(with_timeline)} power timelines; "
            "narrow the report with filters to see the others"
        )

    if include_reference:
        matches, ref_note, ref_table = _reference_sections(rows)
    else:
        matches, ref_table = [], []
        ref_note = "published reference results left out (--no-reference)"

    cost_note = ""
    if costs.any:
        cost_note = (
            "Cost and carbon per million samples. kWh and gCO2 follow the energy's "
            "provenance (see the energy column: measured or estimated); machine cost = "
            "price per hour / throughput."
            + (f" Rates from {costs.source} and the command line." if costs.source else "")
        )
    else:
        cost_note = (
            "Cost and carbon not shown: give --price-per-hour, --electricity-price (per kWh) "
            "and --carbon-intensity (g/kWh), or store them in the [cost] table of the config "
            "file (--config)."
        )
    notes = []
    if len(latest) < sum(1 for r in rows if r.status == "ok"):
        notes.append(
            "Some cases were run more than once: the table lists every run, the charts use "
            "the newest successful run of each case (a quiet one where the case has one); "
            "under each chart, 'where each bar comes from' names its run, suite and time."
        )
    n_noisy = sum(1 for r in rows if r.noisy)
    if n_noisy:
        notes.append(
            f"{n_noisy} run(s) are flagged noisy (badge in the status column): something "
            "competed with the case or its step times look multi-modal. Charts fade or grey "
            "them out; rerun them on a quiet machine before trusting their numbers."
        )
    if left_out:
        notes.append(
            f"{left_out} run(s) are diverged or insufficient: shown in the table with their "
            "status, kept out of every chart and ratio."
        )
    if all(row.energy_j_per_sample is None for row in rows):
        notes.append("Energy per sample is unavailable for every case (shown as such, not 0).")
    all_charts = [c for c in charts.values() if c is not None] + power
    return ReportData(
        title=title,
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        store_url=masked_url(store_url),
        filters=filters or "none",
        n_results=len(rows),
        status_counts=dict(Counter(r.status for r in rows)),
        summary=summary,
        cost_enabled=costs.any,
        currency=currency,
        cost_note=cost_note,
        mfu_known=any(r.mfu is not None for r in rows),
        charts={k: _figure(v) if v is not None else None for k, v in charts.items()},
        missing=missing,
        power=[_figure(c) for c in power],
        power_note=power_note,
        reference_matches=matches,
        reference_note=ref_note,
        reference_table=ref_table,
        machines=_machines(results),
        frameworks=[_framework_cells(f) for f in framework_rows],
        scaling=scaling.table_rows(scaling_series),
        sweeps=frontier.table_rows(swept),
        notes=notes,
        _charts=all_charts,
    )


def _ratio_cell(value: float | None, ci: tuple[float, float] | None, note: str | None = None
                ) -> str:
    if value is None:
        return note or "-"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _framework_cells(f: dict[str, Any]) -> dict[str, Any]:
    return {
        "case": f"{f['device']} {f['workload']} {f['size']} bs={f['batch_size']}",
        "precision": f["precision"],
        "torch": _rate(f["torch_samples_per_s"]),
        "jax": _rate(f["jax_samples_per_s"]),
        "throughput": _ratio_cell(f["throughput_ratio"], f["throughput_ci95"]),
        "significant": ("cannot tell (1 run; use --repeats 3)" if f["throughput_ci95"]
                        else "-") if f["throughput_significant"] is None
        else ("yes" if f["throughput_significant"] else "no"),
        "energy": _ratio_cell(f["energy_ratio"], f["energy_ci95"], f["energy_note"]),
        "compile_s": _num(f["jax_compile_s"]),
        "same_suite": "yes" if f["same_suite"] else "no (different runs)",
        "noisy": "noisy" if f["noisy"] else "",
        "source": f["source"],
    }


# -- rendering --------------------------------------------------------------------------


def render_html(data: ReportData) -> str:
    """The HTML page (autoescaped template from the package data)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("accelbench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["code"] = _code_spans
    return env.get_template(TEMPLATE).render(r=data)


def _code_spans(text: str) -> Any:
    """Escape ``text``, then show its `backquoted` parts as ``<code>``."""
    from markupsafe import Markup, escape

    escaped = str(escape(text))
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))


def _md(text: Any) -> str:
    """A Markdown table cell: no markup, no raw HTML, no column breaks."""
    s = str(text)
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("\n", " "),
                 ("`", "\\`"), ("*", "\\*"), ("_", "\\_"), ("[", "\\["), ("]", "\\]")):
        s = s.replace(a, b)
    return s


def _md_note(text: str) -> str:
    """One of our own messages: markup-free, but its `code` spans kept."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(data: ReportData) -> str:
    """The Markdown summary."""
    out = [f"# {_md(data.title)}", "",
           f"Generated {data.generated_at} by accelbench {data.accelbench_version} from "
           f"`{data.store_url}`; filters: {_md(data.filters)}; {data.n_results} result(s) "
           f"({', '.join(f'{k}: {v}' for k, v in sorted(data.status_counts.items()))}).", ""]
    out += ["## Summary", ""]
    header = ["device", "workload", "size", "precision", "batch", "status", "throughput",
              "95% CI", "step ms", "avg W", "energy/sample", "energy source"]
    header += ["MFU"] if data.mfu_known else []
    header += ["tag", "id"]
    if data.cost_enabled:
        header += [f"cost/Msample{' ' + data.currency if data.currency else ''}", "kWh/Msample",
                   "gCO2/Msample"]
    rows = []
    for s in data.summary:
        row = [s["device"] + (f" ({s['device_name']})" if s["device_name"] else ""),
               s["workload"], s["size"], s["precision"], s["batch_size"],
               s["status"] + (" (noisy)" if s["noisy"] else ""),
               s["throughput"], s["ci"], s["step_ms"], s["power_w"], s["energy"],
               s["energy_kind"]]
        row += [s["mfu"]] if data.mfu_known else []
        row += [s["tag"], s["id"]]
        if data.cost_enabled:
            kind = f" ({s['carbon_kind']})" if s["carbon_kind"] else ""
            row += [s["cost"], s["kwh"] + kind if s["kwh"] != "-" else "-",
                    s["gco2"] + kind if s["gco2"] != "-" else "-"]
        rows.append(row)
    out += _md_table(header, rows) + ["", _md_note(data.cost_note), ""]
    for note in data.notes:
        out += [f"- {_md_note(note)}"]
    out += ["", "## Figures", ""]
    for name, fig in data.charts.items():
        if fig is None:
            out += [f"- {name}: {_md_note(data.missing.get(name, 'not available'))}"]
        else:
            out += [f"- [{_md(fig.title)}]({fig.png_path}) ([SVG]({fig.svg_path}))"
                    + (f": {_md(fig.caption)}" if fig.caption else "")]
    for fig in data.power:
        out += [f"- [{_md(fig.title)}]({fig.png_path})"]
    if data.scaling:
        out += ["", "## Scaling with device count", ""]
        out += _md_table(["case", "ranks", "throughput", "ideal", "efficiency",
                          "energy/sample", "id"],
                         [[_md(s["case"]), s["ranks"], s["throughput"], s["ideal"],
                           s["efficiency"], s["energy"], s["id"]] for s in data.scaling])
        out += [""]
    if data.power_note:
        out += [f"- power timelines: {_md_note(data.power_note)}"]
    out += ["", "## Published reference results (other hardware)", "", _md(data.reference_label),
            ""]
    if data.reference_matches:
        rows = []
        for m in data.reference_matches:
            for p in m["published"]:
                rows.append([m["workload"], m["batch_size"], m["precision"],
                             f"{m['device']} {m['size']} ({m['id']})"
                             + ("" if m["comparable"] else "; model size differs from the paper's"),
                             m["throughput"],
                             f"{p['device']} (published)", p["throughput"], p["energy"],
                             p["ratio"]])
        out += _md_table(["workload", "batch", "precision", "your run", "your throughput",
                          "published device", "published throughput", "published energy",
                          "yours / published"], rows)
    else:
        out += [_md_note(data.reference_note)]
    out += ["", f"Source: {_md(data.reference_citation)}", "", "## Machines", ""]
    for m in data.machines:
        out += [f"- runs {', '.join(m['runs'])}: "
                + "; ".join(f"{k} {_md(v)}" for k, v in m["facts"])]
    return "\n".join(out) + "\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: Path
    markdown: Path
    figures: tuple[Path, ...]


def write_report(data: ReportData, out_dir: Path) -> ReportFiles:
    """Write ``index.html``, ``summary.md`` and ``figures/*.png|svg`` into ``out_dir``.

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
        for chart in data._charts:
            for ext, blob in (("png", chart.png), ("svg", chart.svg)):
                path = fig_dir / f"{chart.name}.{ext}"
                path.write_bytes(blob)
                figures.append(path)
        html = out_dir / "index.html"
        html.write_text(render_html(data), encoding="utf-8")
        md = out_dir / "summary.md"
        md.write_text(render_markdown(data), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the report to {out_dir}: {exc}") from None
    return ReportFiles(html=html, markdown=md, figures=tuple(figures))
