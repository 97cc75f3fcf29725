"""The report's data and its sections, formatted for the renderers (HTML and Markdown).

:class:`ReportData` is what :func:`accelbench.report.html.build_report` computes and both
renderers show; the functions here format one section each.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any, overload

from accelbench import jsonout
from accelbench.backends.registry import backend_fact, framework_names
from accelbench.report import plots
from accelbench.report.cost import CaseCost
from accelbench.report.reference import (
    BOUNDARY_TEXT,
    CITATION,
    LABEL,
    ReferenceRow,
    load_reference,
    match_reference,
    reference_workloads,
)
from accelbench.report.rows import CaseRow, newest_per_case
from accelbench.result import Result
from accelbench.result_text import bound_text
from accelbench.verdicts import KIND_LABELS
from accelbench.version import __version__

ROOFLINE_HINT = "no roofline data: run `accelbench roofline`"
FIGURES_DIR = "figures"


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
    summary: Sequence[dict[str, Any]]
    """:class:`SummaryRows`: a row per result, formatted as the tables go through them."""
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
    """Rows of the framework comparison (each other framework over the base), formatted."""
    framework_base: str = ""
    """The framework the others are compared to (:func:`accelbench.report.pairs.base_framework`)."""
    framework_others: list[str] = field(default_factory=list)
    """The other frameworks of the comparison, each with its table."""
    framework_heading: str = ""
    """The comparison's heading, in the frameworks' own names (``JAX relative to PyTorch``)."""
    scaling: list[dict[str, Any]] = field(default_factory=list)
    """Rows of the scaling table (:func:`accelbench.report.scaling.table_rows`)."""
    sharding: list[dict[str, Any]] = field(default_factory=list)
    """Rows of the by-mode table (:func:`accelbench.report.sharding_view.mode_rows`;
    empty: no sharded record, no section)."""
    sharding_explained: str = ""
    sweeps: list[dict[str, Any]] = field(default_factory=list)
    """Rows of the device-setting frontier table (:func:`accelbench.report.frontier.table_rows`)."""
    notes: list[str] = field(default_factory=list)
    phases: list[dict[str, str]] = field(default_factory=list)
    """Rows of the phase table (``--phases``; empty: no result has phases, no section)."""
    phase_notes: list[str] = field(default_factory=list)
    phases_explained: str = ""
    data_view: list[dict[str, str]] = field(default_factory=list)
    """Rows of the data view (``--data``; empty: no case read data, no section)."""
    data_explained: str = ""
    totarget: list[dict[str, Any]] = field(default_factory=list)
    """Groups of runs to a target (:func:`accelbench.report.totarget_section.totarget_section`):
    title, rows, score, notes, figures; empty: none stored, no section."""
    totarget_note: str = ""
    totarget_explained: str = ""
    accelbench_version: str = __version__
    reference_label: str = LABEL
    reference_citation: str = CITATION
    reference_boundary: str = BOUNDARY_TEXT
    chart_files: list[plots.Chart] = field(default_factory=list)
    summary_fast_paths: bool = False
    """Some row of the summary ran with fast paths (the table then shows the column)."""
    """Every chart, to write as PNG and SVG files."""


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


def _bytes_text(value: int | None) -> str:
    from accelbench.render import fmt_bytes

    return fmt_bytes(value)


def _energy_cell(row: CaseRow) -> str:
    if row.energy_j_per_sample is None:
        return "unavailable"
    boundary = f" ({row.energy_boundary})" if row.energy_boundary != "device" else ""
    bound = bound_text(row.energy_rel_u95)
    return (f"{row.energy_j_per_sample:.4g} J/{row.sample_unit}{boundary} "
            + (f"{bound} (95% bound)" if row.energy_rel_u95 is not None else f"({bound})"))


class SummaryRows(Sequence[dict[str, Any]]):
    """:func:`summary_row` of each of ``rows``, made as it is read (never a list of them
    all: the summary table of a large store is written row by row; ``rows`` is read
    again on each iteration)."""

    def __init__(self, rows: Iterable[CaseRow],
                 cost_of: Callable[[CaseRow], CaseCost | None], currency: str) -> None:
        self._rows, self._cost_of, self._currency = rows, cost_of, currency

    def __len__(self) -> int:
        rows = self._rows
        return len(rows) if isinstance(rows, Sized) else sum(1 for _ in rows)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        rows = self._rows if isinstance(self._rows, Sequence) else list(self._rows)
        if isinstance(i, slice):
            return [self._row(r) for r in rows[i]]
        return self._row(rows[i])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self._row(r) for r in self._rows)

    def _row(self, row: CaseRow) -> dict[str, Any]:
        return summary_row(row, self._cost_of(row), self._currency)


def summary_row(row: CaseRow, cost: CaseCost | None, currency: str) -> dict[str, Any]:
    unit = row.sample_unit
    if row.ci_unreliable:
        ci = f"unreliable ({row.iterations} iterations)"
    elif row.ci95_low_samples_per_s is not None:
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
        # Every axis two rows may differ on: a JAX and a torch row never read the same.
        "framework": row.framework,
        "fast_paths": "+".join(row.fast_paths),
        "ranks": f"{row.nnodes}x{row.nproc_per_node}" if row.world_size > 1 else "",
        "status": row.status,
        "noisy": row.noisy,
        "noise": "; ".join(row.noise_verdicts) or ("flagged noisy" if row.noisy else ""),
        "noise_label": " and ".join(KIND_LABELS[k] for k in row.noise_kinds if k in KIND_LABELS)
        or ("noisy" if row.noisy else ""),
        "error": (row.error or "")[:300],
        "throughput": f"{_rate(row.samples_per_s)} {unit}s/s" if row.samples_per_s else "-",
        "ci": ci,
        "iterations": row.iterations or "-",
        "step_ms": f"{row.step_time_s * 1e3:.3g}" if row.step_time_s is not None else "-",
        "memory": _bytes_text(row.peak_memory_bytes),
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


def figure_of(chart: plots.Chart) -> Figure:
    uri = "data:image/png;base64," + base64.b64encode(chart.png).decode("ascii")
    return Figure(
        name=chart.name, title=chart.title, alt=chart.alt, data_uri=uri,
        png_path=f"{FIGURES_DIR}/{chart.name}.png", svg_path=f"{FIGURES_DIR}/{chart.name}.svg",
        caption=chart.caption, sources=chart.sources,
    )


def roofline_points(store: Any, devices: set[str]) -> tuple[list[dict[str, Any]], str]:
    if store is None:
        return [], ROOFLINE_HINT
    try:
        from accelbench.roofline.data import roofline_points
    except ImportError:
        return [], ROOFLINE_HINT
    try:
        points = list(roofline_points(store))
    except Exception as exc:  # another module's failure must not sink the whole report
        return [], f"roofline data could not be read ({type(exc).__name__}: {exc})"
    if devices:
        points = [p for p in points if p.get("device") in devices] or points
    return points, "" if points else ROOFLINE_HINT


def reference_sections(
    rows: Iterable[CaseRow], *, newest: Sequence[CaseRow] | None = None,
    workloads: Iterable[str] | None = None,
) -> tuple[list[dict[str, Any]], str, list[dict[str, Any]]]:
    """The reference section's matches, note and table for ``rows`` (``newest``:
    :func:`newest_per_case` of them, and ``workloads``: their workloads, where the caller
    has folded them already; then ``rows`` is not read)."""
    if newest is None:
        rows = list(rows)
        newest = newest_per_case(rows)
    if workloads is None:
        workloads = {r.workload for r in rows}
    matches = []
    for m in match_reference(newest):
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
    workloads = sorted(set(workloads) & set(reference_workloads()))
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


def framework_versions(software: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(label, version)`` of each version of a framework's stack that ``software`` (a
    record's ``machine["software"]``) may hold, for every registered framework in order
    (its backend's ``version_facts``: PyTorch, CUDA, ...; JAX, jaxlib, Flax, Optax, ...)."""
    out: list[tuple[str, Any]] = []
    for fw in framework_names():
        facts: tuple[tuple[str, str], ...] = backend_fact(fw, "version_facts", ())
        out += [(label, software.get(key)) for key, label in facts]
    return out


def machines(results: Sequence[Result]) -> list[dict[str, Any]]:
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
                *framework_versions(sw),
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


def _ratio_cell(value: float | None, ci: tuple[float, float] | None, note: str | None = None
                ) -> str:
    if value is None:
        return note or "-"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def framework_cells(f: dict[str, Any]) -> dict[str, Any]:
    """A row of the framework comparison, formatted."""
    return {
        "case": f"{f['device']} {f['workload']} {f['size']} bs={f['batch_size']}",
        "precision": f["precision"],
        "other": f["other"],
        "base_rate": _rate(f["base_samples_per_s"]),
        "other_rate": _rate(f["other_samples_per_s"]),
        "throughput": _ratio_cell(f["throughput_ratio"], f["throughput_ci95"]),
        "significant": ("cannot tell (1 run; use --repeats 3)" if f["throughput_ci95"]
                        else "-") if f["throughput_significant"] is None
        else ("yes" if f["throughput_significant"] else "no"),
        "energy": _ratio_cell(f["energy_ratio"], f["energy_ci95"], f["energy_note"]),
        "compile_s": _num(f["compile_s"]),
        "same_suite": "yes" if f["same_suite"] else "no (different runs)",
        "noisy": "noisy" if f["noisy"] else "",
        "source": f["source"],
    }
