"""The report's Markdown summary (``summary.md``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from accelbench.report.sections import ReportData


def _md_cell(text: Any) -> str:
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
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(data: ReportData) -> str:
    """The Markdown summary."""
    return "".join(markdown_chunks(data))


def markdown_chunks(data: ReportData) -> Iterator[str]:
    """:func:`render_markdown` line by line (each with its newline): the summary table of
    a large store is never held whole."""
    for line in _markdown_lines(data):
        yield line + "\n"


def _summary_lines(data: ReportData) -> Iterator[str]:
    """The summary table's lines, a row at a time."""
    fast = data.summary_fast_paths
    header = ["device", "workload", "size", "precision", "framework", "batch"]
    header += ["fast paths"] if fast else []
    header += ["status", "throughput", "95% CI*", "step ms", "avg W", "energy/sample",
               "energy source"]
    header += ["MFU"] if data.mfu_known else []
    header += ["tag", "id"]
    if data.cost_enabled:
        header += [f"cost/Msample{' ' + data.currency if data.currency else ''}", "kWh/Msample",
                   "gCO2/Msample"]
    yield from _md_table(header, [])
    for s in data.summary:
        row = [s["device"] + (f" {s['ranks']}" if s["ranks"] else "")
               + (f" ({s['device_name']})" if s["device_name"] else ""),
               s["workload"], s["size"], s["precision"], s["framework"], s["batch_size"]]
        row += [s["fast_paths"] or "-"] if fast else []
        row += [s["status"] + (f" ({s['noise_label']})" if s["noisy"] else ""),
               s["throughput"], s["ci"], s["step_ms"], s["power_w"], s["energy"],
               s["energy_kind"]]
        row += [s["mfu"]] if data.mfu_known else []
        row += [s["tag"], s["id"]]
        if data.cost_enabled:
            kind = f" ({s['carbon_kind']})" if s["carbon_kind"] else ""
            row += [s["cost"], s["kwh"] + kind if s["kwh"] != "-" else "-",
                    s["gco2"] + kind if s["gco2"] != "-" else "-"]
        yield "| " + " | ".join(_md_cell(c) for c in row) + " |"


def _markdown_lines(data: ReportData) -> Iterator[str]:
    yield from [f"# {_md_cell(data.title)}", "",
                f"Generated {data.generated_at} by accelbench {data.accelbench_version} from "
                f"`{data.store_url}`; filters: {_md_cell(data.filters)}; {data.n_results} "
                f"result(s) ({', '.join(f'{k}: {v}' for k, v in sorted(data.status_counts.items()))}).",  # noqa: E501
                ""]
    yield from ["## Summary", ""]
    yield from _summary_lines(data)
    yield from _figure_lines(data)
    yield from _phase_and_scaling_lines(data)
    yield from _totarget_lines(data)
    yield from _reference_lines(data)
    yield from ["", "## Machines", ""]
    for m in data.machines:
        yield (f"- runs {', '.join(m['runs'])}: "
               + "; ".join(f"{k} {_md_cell(v)}" for k, v in m["facts"]))


def _figure_lines(data: ReportData) -> list[str]:
    """The cost note, the report's notes and its figures (or why each is missing)."""
    out = ["", _md_note(data.cost_note), ""]
    for note in data.notes:
        out += [f"- {_md_note(note)}"]
    out += ["", "## Figures", ""]
    for name, fig in data.charts.items():
        if fig is None:
            out += [f"- {name}: {_md_note(data.missing.get(name, 'not available'))}"]
        else:
            out += [f"- [{_md_cell(fig.title)}]({fig.png_path}) ([SVG]({fig.svg_path}))"
                    + (f": {_md_cell(fig.caption)}" if fig.caption else "")]
    for fig in data.power:
        out += [f"- [{_md_cell(fig.title)}]({fig.png_path})"]
    return out


def _phase_and_scaling_lines(data: ReportData) -> list[str]:
    """The phase table and notes, the scaling table and the power timelines' note."""
    out: list[str] = []
    if data.phases:
        out += ["", "## Where the step's time and energy go (phases)", "",
                _md_note(data.phases_explained), ""]
        out += _md_table(["case", "phase", "ms/step (direct, 95% CI)", "share of step",
                          "ms/step (differential)", "energy J/sample (95% CI)", "id"],
                         [[p["case"], p["phase"], p["time"], p["share"], p["diff_time"],
                           f"{p['energy_status']}: {p['energy']}"
                           if not p["energy"].startswith(p["energy_status"]) else p["energy"],
                           p["id"]] for p in data.phases])
        out += [""] + [f"- {_md_note(n)}" for n in data.phase_notes]
    if data.data_view:
        out += ["", "## Data: synthetic and real input pipelines", "",
                _md_note(data.data_explained), ""]
        out += _md_table(["case", "data", "throughput", "vs synthetic", "stall share",
                          "energy/sample", "id"],
                         [[d["case"], d["data"], d["throughput"], d["vs_synthetic"],
                           d["stall"], d["energy"], d["id"]]
                          for d in data.data_view])
        out += [""]
    if data.scaling:
        out += ["", "## Scaling with device count", ""]
        out += _md_table(["case", "ranks", "throughput", "ideal", "efficiency",
                          "energy/sample", "id"],
                         [[_md_cell(s["case"]), s["ranks"], s["throughput"], s["ideal"],
                           s["efficiency"], s["energy"], s["id"]] for s in data.scaling])
        out += [""]
    if data.sharding:
        out += ["", "## Parallel modes: throughput, memory per rank, energy", "",
                _md_note(data.sharding_explained), ""]
        out += _md_table(["case", "mode", "ranks", "mesh", "throughput", "memory per rank",
                          "energy/sample", "collectives (slowest rank)", "exposed", "id"],
                         [[_md_cell(s["case"]), s["mode"], s["ranks"], s["mesh"],
                           s["throughput"], s["memory"], s["energy"], s["collectives"],
                           _md_cell(s["exposed"]), s["id"]] for s in data.sharding])
        out += [""]
    if data.power_note:
        out += [f"- power timelines: {_md_note(data.power_note)}"]
    return out


def _totarget_lines(data: ReportData) -> list[str]:
    """The groups of runs to a target: a table each, the score, notes and the curves."""
    if not data.totarget:
        return ["", _md_note(data.totarget_note)] if data.totarget_note else []
    out = ["", "## Training to a target", "", _md_note(data.totarget_explained)]
    for g in data.totarget:
        out += ["", f"### {_md_cell(g['title'])}", ""]
        out += _md_table(["seed", "status", "samples-to-target", "time-to-target",
                          "energy-to-target", "best metric", "evaluations"],
                         [[r["seed"], r["status"], r["samples"], r["time"], r["energy"],
                           r["best"], r["evaluations"]] for r in g["rows"]])
        out += ["", _md_note(g["score"])] + [f"- {_md_note(n)}" for n in g["notes"]]
        out += [f"- [{_md_cell(f.title)}]({f.png_path}) ([SVG]({f.svg_path}))"
                for f in g["figures"]]
    if data.totarget_note:
        out += ["", _md_note(data.totarget_note)]
    return out


def _reference_lines(data: ReportData) -> list[str]:
    """Published results of the same workloads on other hardware, and their source."""
    out = ["", "## Published reference results (other hardware)", "",
           _md_cell(data.reference_label), ""]
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
    return [*out, "", f"Source: {_md_cell(data.reference_citation)}"]


