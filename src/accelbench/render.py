"""Terminal rendering of results: rich tables for people, JSON and CSV for scripts."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from accelbench.result import Result

CSV_FIELDS = (
    "id", "suite_id", "status", "workload", "size", "batch_size", "precision", "device",
    "framework", "threads", "tag", "sample_unit", "samples_per_s", "samples_per_s_ci95",
    "iterations", "stop_reason", "step_time_s", "step_time_trimmed_mean_s", "param_count",
    "compile_s", "energy_j_per_sample", "avg_power_w", "energy_source", "error", "started_at",
    "finished_at",
)


def fmt_rate(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def fmt_count(n: int | None) -> str:
    if n is None:
        return "-"
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}k"
    return str(n)


def _status_cell(r: Result) -> str:
    colour = {"ok": "green", "oom": "yellow", "timeout": "magenta"}.get(r.status, "red")
    return f"[{colour}]{r.status}[/{colour}]"


def results_table(results: Sequence[Result], title: str | None = None) -> Table:
    """A table of results, one row per case."""
    table = Table(title=title, header_style="bold", expand=False)
    for col, justify in (
        ("id", "left"), ("workload", "left"), ("size", "left"), ("batch", "right"),
        ("precision", "left"), ("device", "left"), ("framework", "left"), ("status", "left"),
        ("throughput /s", "right"), ("95% CI", "right"), ("step ms", "right"),
        ("iters", "right"), ("J/sample", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in results:
        st = r.stats
        e = r.energy_j_per_sample
        table.add_row(
            r.id[:8],
            r.spec.workload,
            r.spec.size,
            str(r.spec.batch_size),
            r.spec.precision,
            r.spec.device,
            r.spec.framework,
            _status_cell(r),
            f"{fmt_rate(st.samples_per_s)} {r.sample_unit}s" if st else "-",
            f"{fmt_rate(st.samples_per_s_ci95[0])}-{fmt_rate(st.samples_per_s_ci95[1])}"
            if st else "-",
            f"{st.median_s * 1e3:.2f}" if st else "-",
            str(st.n) if st else "-",
            f"{e:.3g}" if e is not None else "unavailable",
        )
    return table


def print_result(console: Console, r: Result) -> None:
    """Readable summary of one case."""
    s = r.spec
    head = (
        f"[bold]{s.workload}[/bold] size={s.size} batch={s.batch_size} "
        f"precision={s.precision} device={s.device} framework={s.framework}"
    )
    console.print(head)
    console.print(f"  status        {_status_cell(r)}  (id {r.id})")
    if r.error:
        console.print(f"  error         {r.error}", markup=False, highlight=False)
    st = r.stats
    if st:
        low, high = st.samples_per_s_ci95
        console.print(
            f"  throughput    {fmt_rate(st.samples_per_s)} {r.sample_unit}s/s "
            f"(95% CI {fmt_rate(low)}-{fmt_rate(high)}, median of {st.n} iterations, "
            f"stopped by {st.stop_reason})"
        )
        console.print(
            f"  step time     median {st.median_s * 1e3:.3f} ms, "
            f"trimmed mean {st.trimmed_mean_s * 1e3:.3f} ms, min {st.min_s * 1e3:.3f} ms"
        )
    console.print(f"  parameters    {fmt_count(r.param_count)}")
    if r.compile_s is not None:
        console.print(f"  compile       {r.compile_s:.2f} s (trace + XLA compile, not in "
                      "the throughput)", highlight=False)
    if r.flop_per_sample is not None:
        achieved = r.achieved_flop_per_s
        mfu = r.mfu
        console.print(
            f"  compute       {r.flop_per_sample / 1e9:.4g} GFLOP/{r.sample_unit} per step "
            f"({r.flop_method})"
            + (f", {achieved / 1e12:.4g} TFLOP/s" if achieved else "")
            + (f", MFU {mfu:.1%}" if mfu is not None else ", MFU unknown (run accelbench peaks)"),
            highlight=False,
        )
    xla_note = r.backend_extra.get("note")
    if xla_note:
        console.print(f"                {xla_note}", highlight=False, markup=False)
    e = r.energy_j_per_sample
    power = r.avg_power_w
    console.print(
        f"  energy        {f'{e:.4g} J/{r.sample_unit}' if e is not None else 'unavailable'}"
        f" (source: {r.energy_source})"
        + (f", average power {power:.1f} W" if power is not None else ""),
        highlight=False,
    )
    for reading in r.energy:
        label = f"{reading.device} {reading.scope}"
        parts: list[str] = [reading.source]
        if reading.energy_j is not None:
            parts.append(f"{reading.energy_j:.4g} J over {reading.window_s or 0:.2f} s")
        if reading.peak_power_w is not None:
            parts.append(f"peak {reading.peak_power_w:.1f} W")
        if reading.idle_power_w is not None:
            parts.append(f"idle {reading.idle_power_w:.1f} W")
        if reading.cross_check_rel_diff is not None:
            parts.append(f"counter vs samples {reading.cross_check_rel_diff:.1%}")
        console.print(f"    {label}: {', '.join(parts)}", highlight=False, markup=False)
        if reading.note:
            console.print(f"      {reading.note}", highlight=False, markup=False)


def to_json(results: Sequence[Result] | Result) -> str:
    if isinstance(results, Result):
        return json.dumps(results.summary(), indent=2)
    return json.dumps([r.summary() for r in results], indent=2)


def to_csv(results: Sequence[Result]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_FIELDS), extrasaction="ignore")
    writer.writeheader()
    for r in results:
        row: dict[str, Any] = r.summary()
        ci = row["samples_per_s_ci95"]
        row["samples_per_s_ci95"] = f"{ci[0]:.6g};{ci[1]:.6g}" if ci else ""
        writer.writerow(row)
    return buf.getvalue()
