"""Terminal rendering of results: rich tables for people, JSON and CSV for scripts."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from accelbench import jsonout
from accelbench.durations import fmt_ms, fmt_time
from accelbench.phase_summary import PHASE_EXPORT_COLUMNS, export_values
from accelbench.result import Result

CSV_FIELDS = (
    "id", "suite_id", "status", "workload", "size", "batch_size", "precision", "device",
    "framework", "threads", "tag", "fast_paths", "nnodes", "nproc_per_node", "world_size",
    "dist_backend", "sample_unit", "samples_per_s",
    "samples_per_s_ci95", "ci_scope", "ci_unreliable",
    "iterations", "stop_reason", "step_time_s", "step_time_trimmed_mean_s", "param_count",
    "compile_s", "energy_j_per_sample", "avg_power_w", "energy_source", "noisy",
    "noise_kinds", "noise_reasons", "error", "started_at", "finished_at",
    *PHASE_EXPORT_COLUMNS,
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


def fmt_bytes(n: int | None) -> str:
    """``1.23 GiB``, ``456 MiB``; ``-`` when unknown."""
    if n is None:
        return "-"
    for scale, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


#: Fast paths as the narrow results table shows them (under the workload, 12 columns).
_FAST_SHORT = {"channels_last": "ch-last", "fused_optimizer": "fused-opt"}

_STATUS_COLOUR = {"ok": "green", "oom": "yellow", "timeout": "magenta", "insufficient": "yellow",
                  "diverged": "red"}

def _status_cell(r: Result, *, badge: bool = True) -> str:
    colour = _STATUS_COLOUR.get(r.status, "red")
    cell = f"[{colour}]{r.status}[/{colour}]"
    if badge and r.noisy:
        cell += " [bold yellow]" + noise_badge(r) + "[/bold yellow]"
    return cell


#: The status badge of each noise verdict (``execution.noise.KINDS``).
_NOISE_BADGE = {"contention": "busy", "unstable": "varies"}


def noise_badge(r: Result) -> str:
    """``busy`` (a busy machine), ``varies`` (step times vary) or ``busy+varies``."""
    return "+".join(_NOISE_BADGE.get(k, k) for k in r.noise_kinds) or "flagged"


def noise_caption(results: Sequence[Result]) -> str | None:
    """The narrow table's legend of ``!``, in words: which verdicts, and where the reasons
    are (None when no case is flagged). Short: a caption line wider than the table
    widens it."""
    from accelbench.execution.verdicts import KIND_LABELS, KINDS

    kinds = {k for r in results for k in r.noise_kinds}
    if not any(r.noisy for r in results):
        return None
    seen = " or ".join(KIND_LABELS[k] for k in KINDS if k in kinds) or "flagged"
    return f"!: {seen}\n   (see why with `accelbench results --wide`)"


def noise_text(r: Result) -> str:
    """The verdicts in words, one per kind, then what was described but not flagged."""
    from accelbench.execution.verdicts import verdict_lines

    return "; ".join([*verdict_lines(r.noise), *(f"seen: {d}" for d in r.noise_described)])


def _ci_range(r: Result) -> str:
    st = r.stats
    if st is None:
        return "-"
    if st.samples_per_s_ci95 is None:
        return f"no CI (n={st.n})"
    if _unreliable(r):
        return f"unreliable ({st.n} iterations)"
    low, high = st.samples_per_s_ci95
    return f"{fmt_rate(low)}-{fmt_rate(high)}"


def _unreliable(r: Result) -> bool:
    """Whether ``r`` has a CI wider than its throughput (relative half-width > 100%)."""
    from accelbench.report.rows import ci_unreliable

    st = r.stats
    return bool(st and st.samples_per_s_ci95 is not None
                and ci_unreliable(st.ci_rel_halfwidth))


def _ci_rel(r: Result) -> str:
    from accelbench.report.rows import ci_text

    st = r.stats
    if st is None:
        return "-"
    if st.samples_per_s_ci95 is None or st.ci_rel_halfwidth is None:
        return "no CI"
    if _unreliable(r):
        return "unrel."  # the narrow column's 5 characters; caption and --wide say more
    return ci_text(st.ci_rel_halfwidth)


#: The mark on a results table's CI column and the legend line that explains it.
CI_MARK = "*"


def ci_legend(results: Sequence[Result], *, wide: bool) -> list[str]:
    """Legend lines of a results table's CI column: its scope (one run's iterations,
    never between runs) and, where a row shows one, what ``unrel.`` means."""
    repeated = any(r.spec.policy.repeats > 1 for r in results)
    lines = [f"{CI_MARK}CI: each run's own iterations (rN/R: run N of R, --repeats)"
             if repeated else f"{CI_MARK}CI: this run's iterations only, not between runs"]
    if not wide and any(_unreliable(r) for r in results):
        lines.append("unrel.: CI wider than the estimate itself (see --wide)")
    return lines


def _energy(r: Result) -> str:
    from accelbench.report.rows import energy_kind, energy_text

    return energy_text(r.energy_j_per_sample, energy_kind(r), r.energy_boundary)


def results_table(
    results: Sequence[Result], *, wide: bool = False, title: str | None = None
) -> Table:
    """A table of results, one row per case.

    Narrow by default (fits 80 columns: workload, size, batch, precision, device, status
    with a ``noisy`` badge, throughput, CI half-width, energy per sample labelled
    measured or estimated); ``wide`` adds the id, framework, CI bounds, step time,
    iterations, energy source, suite and noise reasons.
    """
    from rich import box

    if not wide:
        # One space between columns (SIMPLE_HEAD, no padding, no edges): 9 columns cost 8
        # characters, leaving 72 for content that needs at most 71 (workload 12, size 5,
        # bs 4, prec 8, device 7, status 12, samples/s 9, CI 5, energy 9). Key columns
        # never wrap (so never end in an ellipsis); free text folds onto a second line.
        # A noisy case is marked "!" after its throughput (legend in the caption).
        table = Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, padding=(0, 0),
                      show_edge=False, title_justify="left")
        # (No min_width: rich's re-measure after collapsing widths honours it and then
        # overshoots the console width.) Built-in names fit in 12; a longer plugin name folds.
        long_names = any(len(r.spec.workload) > 14 for r in results)
        table.add_column("workload", overflow="fold", no_wrap=not long_names)
        table.add_column("size", no_wrap=True)
        table.add_column("bs", justify="right", no_wrap=True)
        table.add_column("prec", no_wrap=True)
        table.add_column("device", overflow="fold")
        table.add_column("status", no_wrap=True)
        table.add_column("samples/s", justify="right", no_wrap=True)
        table.add_column(f"\u00b1CI{CI_MARK}", justify="right", no_wrap=True)
        table.add_column("J/sample", justify="right", overflow="fold")
        noisy = False
        runs = _runs(results)
        for r in results:
            st = r.stats
            noisy = noisy or r.noisy
            table.add_row(
                r.spec.workload + "".join(f"\n+{_FAST_SHORT.get(n, n)}"
                                          for n in r.spec.fast_paths.enabled()),
                r.spec.size, str(r.spec.batch_size),
                r.spec.precision + ("\n(emul.)" if r.precision_note else ""),
                r.spec.device + _topology(r, lead="\n"),
                _status_cell(r, badge=False) + _run_badge(runs, r),
                (fmt_rate(st.samples_per_s) if st else "-")
                + ("[bold yellow]![/bold yellow]" if r.noisy else ""),
                _ci_rel(r), _energy(r),
            )
        # Kept short, one a line: a caption line wider than the table would widen it
        # past 80 columns.
        caption = noise_caption(results) if noisy else None
        captions = [caption] if caption else []
        if any(r.energy_j_per_sample is not None and "estimate" in r.energy_source
               for r in results):
            captions.append("est.: energy estimated, not measured")
        if any(r.precision_note for r in results):
            captions.append("(emul.): no bf16/fp16 instructions on this CPU: emulated, slow")
        if any(r.stats and r.stats.samples_per_s_ci95 is not None for r in results):
            captions += ci_legend(results, wide=False)
        if captions:
            table.caption = "\n".join(captions)
            table.caption_justify = "left"
        return table

    from accelbench.report.phase_view import shares_cell

    table = Table(title=title, header_style="bold", expand=False)
    # Fast paths under the workload, one a line: no column (and no width) for the paper's
    # cases, which have none; the workload cell is never cut.
    workloads = {r.id: r.spec.workload + "".join(f"\n+{n}" for n in r.spec.fast_paths.enabled())
                 for r in results}
    workload_w = max((len(x) for w in workloads.values() for x in w.splitlines()), default=8)
    for col, justify in (
        ("id", "left"), ("workload", "left"), ("size", "left"), ("batch", "right"),
        ("precision", "left"), ("device", "left"), ("framework", "left"), ("status", "left"),
        ("throughput /s", "right"), (f"95% CI{CI_MARK}", "right"), ("step ms", "right"),
        ("iters", "right"), ("run/R", "right"), ("peak mem", "right"), ("J/sample", "right"),
        ("energy source", "left"), ("suite", "left"), ("noise", "left"),
    ):
        table.add_column(col, justify=justify,  # type: ignore[arg-type]
                         min_width=workload_w if col == "workload" else None,
                         no_wrap=col.startswith("95% CI"))
    phases = any(r.phases is not None for r in results)
    if phases:  # --phases: each in-step phase's share of the step, one a line
        table.add_column("phases", no_wrap=True)
    runs = _runs(results)
    for r in results:
        st = r.stats
        table.add_row(
            r.id[:8],
            workloads[r.id],
            r.spec.size,
            str(r.spec.batch_size),
            r.precision_label,  # "amp_bf16 (emulated)" on a CPU without bf16
            r.spec.device + _topology(r, lead=" "),
            r.spec.framework,
            _status_cell(r, badge=False),  # the noise column says why
            f"{fmt_rate(st.samples_per_s)} {r.sample_unit}s" if st else "-",
            _ci_range(r),
            fmt_ms(st.median_s if st else None),  # never 0.00 for a sub-µs step
            str(st.n) if st else "-",
            "{}/{}".format(*runs[r.id]),
            fmt_bytes(r.peak_memory_bytes),
            _energy(r),
            r.energy_source,
            r.suite_id or "-",
            escape(noise_text(r)) or "-",
            *((shares_cell(r),) if phases else ()),
        )
    if any(r.stats and r.stats.samples_per_s_ci95 is not None for r in results):
        table.caption = "\n".join(ci_legend(results, wide=True))
        table.caption_justify = "left"
    return table


def _topology(r: Result, lead: str = "") -> str:
    """``1x2`` (nodes x ranks per node) for a data-parallel case, empty for one device."""
    from accelbench.report.rows import topology_text

    return topology_text(r.spec.topology.nnodes, r.spec.topology.nproc_per_node, lead=lead)


def _runs(results: Sequence[Result]) -> dict[str, tuple[int, int]]:
    from accelbench.report.rows import repeat_positions

    return repeat_positions(results)


def _run_badge(runs: dict[str, tuple[int, int]], r: Result) -> str:
    """`` r2/3`` for the second of three runs of a case (``--repeats``); empty for R = 1."""
    i, total = runs.get(r.id, (1, 1))
    return f" r{i}/{total}" if total > 1 else ""


def print_group(console: Console, results: Sequence[Result]) -> None:
    """The headline of each case measured in several runs (``--repeats``): throughput from
    the runs' median step times, with the two-level CI that covers between-run variation."""
    from accelbench.report.rows import repeat_groups
    from accelbench.stats import group_stats

    for group in repeat_groups(results).values():
        ok = [r for r in group if r.status == "ok" and r.iteration_times_s]
        if len(group) < 2:
            continue
        head = group[0]
        if len(ok) < 2:
            console.print(f"  runs          {len(ok)} of {len(group)} ok: no between-run CI",
                          highlight=False)
            continue
        g = group_stats([r.iteration_times_s for r in ok], head.samples_per_step)
        from accelbench.report.rows import ci_unreliable

        low, high = g.ci95 or (float("nan"), float("nan"))
        per_run = ", ".join(fmt_rate(v) for v in g.run_samples_per_s)
        ci = (f"95% CI unreliable ({g.runs} runs: wider than the estimate)"
              if ci_unreliable(g.ci_rel_halfwidth) else
              f"95% CI {fmt_rate(low)}-{fmt_rate(high)} across the {g.runs} runs")
        console.print(
            f"[bold]{head.spec.workload}[/bold] {head.spec.size} bs={head.spec.batch_size} "
            f"{head.spec.precision} {head.spec.device}: {fmt_rate(g.samples_per_s)} "
            f"{head.sample_unit}s/s over {g.runs} runs ({ci}: runs, then iterations; "
            f"per run: {per_run}; suite {head.suite_id})",
            highlight=False,
        )


def print_result(console: Console, r: Result,
                 earlier: Sequence[float] | None = None) -> None:
    """Readable summary of one case; ``earlier``: the throughputs of the store's other
    ``ok`` runs of the case on this host (the between-run spread its CI does not cover)."""
    s = r.spec
    head = (
        f"[bold]{s.workload}[/bold] size={s.size} batch={s.batch_size} "
        f"precision={s.precision} device={s.device} framework={s.framework}"
    )
    console.print(head)
    if not r.stored_here:
        console.print(f"  this node ran its ranks ({r.status}); the node holding rank 0 of the "
                      "case stores its record", highlight=False)
        return
    console.print(f"  status        {_status_cell(r)}  (id {r.id})")
    if r.precision_note:
        console.print(f"  precision     {r.precision_note}", markup=False, highlight=False)
    if r.error:
        console.print(f"  error         {r.error}", markup=False, highlight=False)
    if r.status == "diverged":
        console.print("  note          the loss became NaN/Inf: the case is kept out of every "
                      "comparison, ranking and chart", highlight=False)
    elif r.status == "insufficient":
        console.print("  note          fewer measured iterations than the minimum (hard time "
                      "cap): no CI, kept out of comparisons", highlight=False)
    from accelbench.execution.verdicts import verdict_lines

    for line in verdict_lines(r.noise):
        console.print("  [bold yellow]flagged[/bold yellow]       " + escape(line),
                      highlight=False)
    for line in r.noise_described:
        console.print("  timing        " + escape(line), highlight=False)
    st = r.stats
    if st:
        ci = (
            f"95% CI unreliable ({st.n} iterations: wider than the estimate itself)"
            if _unreliable(r) else
            f"95% CI {fmt_rate(st.samples_per_s_ci95[0])}-{fmt_rate(st.samples_per_s_ci95[1])}"
            " over this run's iterations only"
            if st.samples_per_s_ci95 is not None else "no CI from fewer than 3 iterations"
            if st.n < 3 else "no CI"
        )
        console.print(
            f"  throughput    {fmt_rate(st.samples_per_s)} {r.sample_unit}s/s "
            f"({ci}, median of {st.n} iterations, stopped by {st.stop_reason})",
            highlight=False,
        )
        if earlier:
            console.print(f"  between runs  {earlier_text(earlier)}", highlight=False)
        console.print(  # significant digits: a sub-microsecond step never reads 0.000 ms
            f"  step time     median {fmt_time(st.median_s)}, "
            f"trimmed mean {fmt_time(st.trimmed_mean_s)}, min {fmt_time(st.min_s)}"
        )
    if r.spec.policy.repeats > 1:
        console.print(
            f"  runs          one of {r.spec.policy.repeats} (--repeats; group: suite "
            f"{r.suite_id}, see accelbench results --suite-id {r.suite_id})", highlight=False)
    console.print(f"  parameters    {fmt_count(r.param_count)}")
    if r.peak_memory_bytes is not None or r.peak_memory_source:
        console.print(f"  memory        {fmt_bytes(r.peak_memory_bytes)} peak "
                      f"({r.peak_memory_source})", highlight=False, markup=False)
    if r.spec.fast_paths.enabled():
        console.print(f"  fast paths    {', '.join(r.spec.fast_paths.enabled())}",
                      highlight=False)
    if r.spec.topology.distributed:
        topo = r.spec.topology
        console.print(f"  ranks         {topo.nnodes} node(s) x {topo.nproc_per_node} = "
                      f"{r.world_size} ranks ({r.ranks.get('backend') or topo.dist_backend}, "
                      f"DDP); global batch {r.spec.batch_size * r.world_size}; step time = "
                      "max over ranks", highlight=False)
    if r.compile_s is not None:
        from accelbench.backends import compile_label

        how = compile_label(r.spec.framework)  # torch.compile, XLA compile ...
        none = ((r.backend_extra or {}).get("compile") or {}).get("graphs_at_build") == 0
        what = "first step; no graph compiled, it ran eagerly" if none else \
            f"trace + {how}, not in the throughput"
        console.print(f"  compile       {r.compile_s:.2f} s ({what})", highlight=False)
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
    from accelbench.report.rows import peak_source

    if r.mfu is not None and peak_source(r):
        console.print(f"                MFU against the {peak_source(r)}", highlight=False,
                      markup=False)
    xla_note = r.backend_extra.get("note")
    if xla_note:
        console.print(f"                {xla_note}", highlight=False, markup=False)
    e = r.energy_j_per_sample
    power = r.avg_power_w
    from accelbench.report.rows import energy_kind

    kind = energy_kind(r)
    console.print(
        f"  energy        {f'{e:.4g} J/{r.sample_unit}' if e is not None else 'unavailable'}"
        + (f" {kind.upper()}" if kind in ("estimated", "partly estimated") else "")
        + f" (source: {r.energy_source}; boundary: {r.energy_boundary})"
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
    from accelbench.report.phase_view import print_phases

    print_phases(console, r)  # --phases: where the step's time and energy go


def earlier_text(rates: Sequence[float]) -> str:
    """``3 earlier runs here: 3,005-3,151 (spread 4.8%)``: the spread (max - min over
    the mean) of the store's earlier runs of a case on this host."""
    low, high = min(rates), max(rates)
    mean = sum(rates) / len(rates)
    runs = f"{len(rates)} earlier run{'s' if len(rates) > 1 else ''} here"
    if len(rates) == 1:
        return f"{runs}: {fmt_rate(low)}"
    return f"{runs}: {fmt_rate(low)}-{fmt_rate(high)} (spread {(high - low) / mean:.1%})"


def to_json(results: Sequence[Result] | Result) -> str:
    """The summaries as strict JSON (no NaN/Infinity: they become null)."""
    if isinstance(results, Result):
        return jsonout.dumps(results.summary(), indent=2)
    return jsonout.dumps([r.summary() for r in results], indent=2)


def to_csv(results: Sequence[Result]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_FIELDS), extrasaction="ignore")
    writer.writeheader()
    for r in results:
        row: dict[str, Any] = jsonout.jsonable(r.summary())
        ci = row["samples_per_s_ci95"]
        row["samples_per_s_ci95"] = f"{ci[0]:.6g};{ci[1]:.6g}" if ci else ""
        row["noise_reasons"] = "; ".join(row["noise_reasons"])
        row["noise_kinds"] = "+".join(row["noise_kinds"])
        row["fast_paths"] = "+".join(row["fast_paths"])
        row.update(export_values(r.phases))
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()
