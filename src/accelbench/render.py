"""Terminal rendering of results: rich tables for people, JSON and CSV for scripts."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelbench import jsonout
from accelbench.csvsafe import csv_row
from accelbench.data.analysis import summary_lines
from accelbench.data.stall import cpu_line, stall_line
from accelbench.durations import fmt_ms, fmt_time
from accelbench.fit_table import KEEP, Col, FitTable
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
    from accelbench.verdicts import KIND_LABELS, KINDS

    kinds = {k for r in results for k in r.noise_kinds}
    if not any(r.noisy for r in results):
        return None
    seen = " or ".join(KIND_LABELS[k] for k in KINDS if k in kinds) or "flagged"
    return f"!: {seen}\n   (see why with `accelbench results show ID`)"


def noise_text(r: Result) -> str:
    """The verdicts in words, one per kind, then what was described but not flagged."""
    from accelbench.verdicts import verdict_lines

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
    from accelbench.result_text import ci_unreliable

    st = r.stats
    return bool(st and st.samples_per_s_ci95 is not None
                and ci_unreliable(st.ci_rel_halfwidth))


def _ci_rel(r: Result) -> str:
    from accelbench.result_text import ci_text

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
        lines.append("unrel.: CI wider than the estimate itself (see `accelbench results show ID`)")
    return lines


def _energy(r: Result, sep: str = "\n") -> str:
    """Energy per sample with its provenance and its 95% error bound (``1.23 J +- 2.1%``;
    ``error bound unavailable`` for a record without one); ``-`` without energy."""
    from accelbench.result_text import bound_text, energy_kind, energy_text

    e = r.energy_j_per_sample
    text = energy_text(e, energy_kind(r), r.energy_boundary)
    if e is None:
        return text
    return f"{text}{sep}{bound_text(r.energy_rel_u95).replace(' bound ', ' bound' + sep)}"


def _bound_legend(results: Sequence[Result]) -> list[str]:
    """The legend lines of the J/sample column's bound: what a bound is, and why a row
    has none, each where a row shows one."""
    shown = [r for r in results if r.energy_j_per_sample is not None]
    lines = []
    if any(r.energy_rel_u95 is not None for r in shown):
        lines.append("J/sample +- y%: the energy's 95% error bound (docs/energy.md)")
    if any(r.energy_rel_u95 is None for r in shown):
        lines.append("error bound unavailable: recorded before bounds, or sensor unknown")
    return lines


def results_table(
    results: Sequence[Result], *, wide: bool = False, title: str | None = None
) -> FitTable:
    """A table of results, one row per case, that keeps within the terminal's width
    (:class:`~accelbench.fit_table.FitTable`: columns are left out by priority, never
    squeezed; each one left out is named under the table).

    Narrow by default: the id, workload (with its fast paths), every axis (size, batch,
    precision, device, framework, device settings), status with a ``noisy`` mark,
    throughput, CI half-width and energy per sample labelled measured or estimated; an
    axis holding one value in every row is the first left out (named under the table),
    one on which rows differ never is. ``wide`` adds CI bounds, step time, iterations,
    peak memory, energy source, suite and noise reasons. Under the table: the legends,
    and why energy is missing where a row shows ``-`` (:func:`rows.energy_missing_line`).
    """
    from accelbench.backends.registry import DEFAULT_FRAMEWORK
    from accelbench.result_text import energy_missing_line, settings_text

    runs = _runs(results)
    axis = 900  # an axis outranks every measurement column but the headline ones
    settings = any(settings_text(r) for r in results)
    framework = any(r.spec.framework != DEFAULT_FRAMEWORK for r in results)
    data = any(r.spec.data != "synthetic" for r in results)  # a column only then
    if not wide:
        ft = FitTable(title=title, columns=[
            Col(header="id", priority=45),
            Col(header="workload", priority=KEEP,
                fold_min=14 if any(len(r.spec.workload) > 14 for r in results) else None),
            Col(header="size", priority=axis, axis=True, same_label="size"),
            Col(header="bs", priority=axis, axis=True, justify="right", same_label="batch"),
            Col(header="prec", priority=axis, axis=True, same_label="precision"),
            Col(header="device", priority=axis + 1, axis=True),
            *([Col(header="fw", priority=axis, axis=True, same_label="framework")]
              if framework else []),
            *([Col(header="settings", priority=axis, axis=True, fold_min=10)]
              if settings else []),
            *([Col(header="data", priority=axis, axis=True, same_label="data")]
              if data else []),
            Col(header="status", priority=KEEP),
            Col(header="samples/s", priority=KEEP, justify="right"),
            Col(header=f"\u00b1CI{CI_MARK}", priority=40, justify="right"),
            Col(header="J/sample", priority=60, justify="right", fold_min=7),
        ], left_out_hint="`accelbench results show ID` shows one result in full")
        for r in results:
            st = r.stats
            ft.add_row(
                r.id[:8],
                escape(r.spec.workload) + "".join(f"\n+{_FAST_SHORT.get(n, n)}"
                                                  for n in r.spec.fast_paths.enabled()),
                r.spec.size, str(r.spec.batch_size),
                r.spec.precision + ("\n(emul.)" if r.precision_note else ""),
                escape(r.spec.device) + _topology(r, lead="\n"),
                *([r.spec.framework] if framework else []),
                *([settings_text(r) or "-"] if settings else []),
                *([_data_cell(r, "\n")] if data else []),
                _status_cell(r, badge=False) + _run_badge(runs, r),
                (fmt_rate(st.samples_per_s) if st else "-")
                + ("[bold yellow]![/bold yellow]" if r.noisy else ""),
                _ci_rel(r), _energy(r, "\n"),
            )
        caption = noise_caption(results)
        ft.legend = [caption] if caption else []
        if any(r.energy_j_per_sample is not None and "estimate" in r.energy_source
               for r in results):
            ft.legend.append("est.: energy estimated, not measured")
        if any(r.precision_note for r in results):
            ft.legend.append("(emul.): no bf16/fp16 instructions on this CPU: emulated, slow")
        if any(r.stats and r.stats.samples_per_s_ci95 is not None for r in results):
            ft.legend += ci_legend(results, wide=False)
        ft.legend += _bound_legend(results)
        ft.legend += energy_missing_line(results)
        return ft

    from accelbench.phase_text import shares_cell

    phases = any(r.phases is not None for r in results)
    ft = FitTable(title=title, wide=True, columns=[
        Col(header="id", priority=950),
        Col(header="workload", priority=KEEP),
        Col(header="size", priority=axis, axis=True),
        Col(header="batch", priority=axis, axis=True, justify="right"),
        Col(header="precision", priority=axis, axis=True),
        Col(header="device", priority=axis + 1, axis=True),
        Col(header="framework", priority=axis, axis=True),
        *([Col(header="settings", priority=axis, axis=True, fold_min=10)] if settings else []),
        *([Col(header="data", priority=axis, axis=True)] if data else []),
        Col(header="status", priority=KEEP),
        Col(header="throughput /s", priority=KEEP, justify="right"),
        Col(header=f"95% CI{CI_MARK}", priority=80, justify="right"),
        Col(header="step ms", priority=50, justify="right"),
        Col(header="iters", priority=20, justify="right"),
        Col(header="run/R", priority=25, justify="right"),
        Col(header="peak mem", priority=30, justify="right"),
        Col(header="J/sample", priority=70, justify="right", fold_min=7),
        Col(header="energy source", priority=35, fold_min=8),
        Col(header="suite", priority=15, fold_min=12),
        Col(header="noise", priority=60, fold_min=16),
        *([Col(header="phases", priority=40)] if phases else []),
    ], left_out_hint="a wider terminal, or `accelbench results show ID`")
    for r in results:
        st = r.stats
        ft.add_row(
            r.id[:8],
            # Fast paths under the workload, one a line; the workload cell is never cut.
            escape(r.spec.workload) + "".join(f"\n+{n}" for n in r.spec.fast_paths.enabled()),
            r.spec.size,
            str(r.spec.batch_size),
            r.precision_label,  # "amp_bf16 (emulated)" on a CPU without bf16
            escape(r.spec.device) + _topology(r, lead=" "),
            r.spec.framework,
            *([settings_text(r) or "-"] if settings else []),
            *([_data_cell(r, " ")] if data else []),
            _status_cell(r, badge=False),  # the noise column says why
            f"{fmt_rate(st.samples_per_s)} {r.sample_unit}s" if st else "-",
            _ci_range(r),
            fmt_ms(st.median_s if st else None),  # never 0.00 for a sub-µs step
            str(st.n) if st else "-",
            "{}/{}".format(*runs[r.id]),
            fmt_bytes(r.peak_memory_bytes),
            _energy(r, "\n"),
            r.energy_source,
            r.suite_id or "-",
            escape(noise_text(r)) or "-",
            *((shares_cell(r),) if phases else ()),
        )
    if any(r.stats and r.stats.samples_per_s_ci95 is not None for r in results):
        ft.legend = ci_legend(results, wide=True)
    ft.legend += _bound_legend(results)
    ft.legend += energy_missing_line(results)
    return ft


def _data_cell(r: Result, sep: str) -> str:
    """``generated`` / ``path`` / ``synthetic`` and the stall share where measured
    (``--data``; the column is shown only when a row reads a dataset)."""
    from accelbench.data.layouts import source_of

    cell = source_of(r.spec.data)
    frac = r.input.stall_fraction if r.input is not None else None
    return cell + (f"{sep}stall {100 * frac:.1f}%" if isinstance(frac, float) else "")


def _topology(r: Result, lead: str = "") -> str:
    """``1x2`` (nodes x ranks per node) for a data-parallel case, empty for one device."""
    from accelbench.result_text import topology_text

    return topology_text(r.spec.topology.nnodes, r.spec.topology.nproc_per_node, lead=lead)


def _runs(results: Sequence[Result]) -> dict[str, tuple[int, int]]:
    from accelbench.result_text import repeat_positions

    return repeat_positions(results)


def _run_badge(runs: dict[str, tuple[int, int]], r: Result) -> str:
    """`` r2/3`` for the second of three runs of a case (``--repeats``); empty for R = 1."""
    i, total = runs.get(r.id, (1, 1))
    return f" r{i}/{total}" if total > 1 else ""


def print_group(console: Console, results: Sequence[Result]) -> None:
    """The headline of each case measured in several runs (``--repeats``): throughput from
    the runs' median step times, with the two-level CI that covers between-run variation."""
    from accelbench.result_text import repeat_groups
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
        from accelbench.result_text import ci_unreliable

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
    _print_status(console, r)
    _print_timing(console, r, earlier)
    _print_setup(console, r)
    _print_compute(console, r)
    _print_energy(console, r)
    from accelbench.phase_text import print_phases

    print_phases(console, r)  # --phases: where the step's time and energy go


def _print_status(console: Console, r: Result) -> None:
    """The status, its notes and the noise verdicts."""
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
    from accelbench.verdicts import verdict_lines

    for line in verdict_lines(r.noise):
        console.print("  [bold yellow]flagged[/bold yellow]       " + escape(line),
                      highlight=False)
    for line in r.noise_described:
        console.print("  timing        " + escape(line), highlight=False)


def _print_timing(console: Console, r: Result, earlier: Sequence[float] | None) -> None:
    """Throughput with its CI, the spread of earlier runs, step times and the run's group."""
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


def _mode_text(topo: Any) -> str:
    """``DDP``, or the sharded mode with its mesh (``fsdp+tp, mesh dp 2 x tp 2``)."""
    if not topo.sharded:
        return "DDP"
    mode = "DDP" if topo.parallel == "ddp" else topo.parallel
    ckpt = ", act-ckpt" if topo.act_ckpt else ""
    return f"{mode}, mesh dp {topo.dp_degree} x tp {topo.tp_degree}{ckpt}"


def _print_setup(console: Console, r: Result) -> None:
    """Parameters, peak memory, fast paths, the input's wait, ranks and compile time."""
    console.print(f"  parameters    {fmt_count(r.param_count)}")
    if r.peak_memory_bytes is not None or r.peak_memory_source:
        console.print(f"  memory        {fmt_bytes(r.peak_memory_bytes)} peak "
                      f"({r.peak_memory_source})", highlight=False, markup=False)
    if r.spec.fast_paths.enabled():
        console.print(f"  fast paths    {', '.join(r.spec.fast_paths.enabled())}",
                      highlight=False)
    stall = stall_line(r.input)
    if stall is not None:
        console.print(f"  input         {stall}", highlight=False, markup=False)
        cpu = cpu_line(r.input)
        if cpu is not None:
            console.print(f"                {cpu}", highlight=False, markup=False)
    for line in summary_lines(r.input):  # --input-analysis (data/analysis.py)
        console.print(f"  {line}", highlight=False, markup=False)
    verdict = r.input_verdict
    if verdict is not None:
        console.print("  [bold yellow]input-bound[/bold yellow]   " + escape(
            f"{verdict.evidence}; {verdict.advice}"), highlight=False)
    if r.spec.topology.sharded and not r.spec.topology.distributed:
        topo = r.spec.topology
        where = (f"one process, {topo.devices} devices; global batch "
                 f"{r.spec.batch_size * topo.dp_degree}" if topo.devices else "one rank")
        console.print(f"  parallel      {_mode_text(topo)} ({where})", highlight=False)
    if r.spec.topology.distributed:
        topo = r.spec.topology
        console.print(f"  ranks         {topo.nnodes} node(s) x {topo.nproc_per_node} = "
                      f"{r.world_size} ranks ({r.ranks.get('backend') or topo.dist_backend}, "
                      f"{_mode_text(topo)}); global batch "
                      f"{r.spec.batch_size * (r.world_size // topo.tp_degree)}; step time = "
                      "max over ranks", highlight=False)
        per_rank = r.ranks.get("per_rank") or []
        if topo.sharded and per_rank:  # the point of sharding: each rank's own memory
            console.print("  memory/rank   " + ", ".join(
                f"{x.get('rank')}: {fmt_bytes(x.get('peak_memory_bytes'))}" for x in per_rank),
                highlight=False, markup=False)
    if r.compile_s is not None:
        from accelbench.backends import compile_label

        how = compile_label(r.spec.framework)  # torch.compile, XLA compile ...
        none = ((r.backend_extra or {}).get("compile") or {}).get("graphs_at_build") == 0
        what = "first step; no graph compiled, it ran eagerly" if none else \
            f"trace + {how}, not in the throughput"
        console.print(f"  compile       {r.compile_s:.2f} s ({what})", highlight=False)


def _print_compute(console: Console, r: Result) -> None:
    """FLOPs, achieved FLOP/s and MFU with the peak it is against."""
    if r.flop_per_sample is not None:
        achieved = r.achieved_flop_per_s
        mfu = r.mfu
        console.print(
            f"  compute       {r.flop_per_sample / 1e9:.4g} GFLOP/{r.sample_unit} per step "
            f"({r.flop_method})"
            + (f", {achieved / 1e12:.4g} TFLOP/s" if achieved else "")
            + (f", MFU {mfu:.1%}" if mfu is not None else
               f", MFU unavailable: {r.mfu_refused}" if r.mfu_refused else
               ", MFU unknown (run accelbench peaks)"),
            highlight=False,
        )
    from accelbench.result_text import peak_source

    if r.mfu is not None and peak_source(r):
        console.print(f"                MFU against the {peak_source(r)}", highlight=False,
                      markup=False)
    xla_note = r.backend_extra.get("note")
    if xla_note:
        console.print(f"                {xla_note}", highlight=False, markup=False)


def _bound_text(rel: float | None) -> str:
    """`` +- 2.1% (95% bound)``, or `` (no error bound: ...)`` where the record has none."""
    if rel is None:
        return " (error bound unavailable: recorded before bounds, or sensor unknown)"
    pct = 100 * rel
    return f" +- {pct:.2g}% (95% bound)" if pct < 10 else f" +- {pct:.0f}% (95% bound)"


def _window_text(r: Result) -> str:
    """The energy window's throughput beside the headline (median) one: J/sample times the
    window's samples/s is the average power; times the median's, it is not."""
    window, median = r.energy_window_samples_per_s, r.samples_per_s
    if window is None or median is None:
        return ""
    return (f" = J/{r.sample_unit} x the window's {window:.4g} {r.sample_unit}s/s (the "
            f"headline {median:.4g}/s is the median step's)")


def _print_energy(console: Console, r: Result) -> None:
    """Energy per sample with its provenance, then each reading."""
    e = r.energy_j_per_sample
    power = r.avg_power_w
    from accelbench.result_text import energy_kind

    kind = energy_kind(r)
    console.print(
        f"  energy        {f'{e:.4g} J/{r.sample_unit}' if e is not None else 'unavailable'}"
        + (_bound_text(r.energy_rel_u95) if e is not None else "")
        + (f" {kind.upper()}" if kind in ("estimated", "partly estimated") else "")
        + f" (source: {r.energy_source}; boundary: {r.energy_boundary})"
        + (f", average power {power:.1f} W" if power is not None else "")
        + _window_text(r),
        highlight=False,
    )
    for reading in r.energy:
        label = f"{reading.device} {reading.scope}"
        parts: list[str] = [reading.source]
        if reading.energy_j is not None:
            bound = (reading.details or {}).get("uncertainty") or {}
            terms = ", ".join(f"{k} {100 * v:.2g}%" for k, v in
                              sorted((bound.get("terms") or {}).items(), key=lambda kv: -kv[1]))
            parts.append(f"{reading.energy_j:.4g} J over {reading.window_s or 0:.2f} s"
                         + (f" +- {100 * bound['rel_95']:.2g}% ({terms})"
                            if isinstance(bound.get("rel_95"), (int, float)) else ""))
        if reading.peak_power_w is not None:
            parts.append(f"peak {reading.peak_power_w:.1f} W")
        if reading.idle_power_w is not None:
            parts.append(f"idle {reading.idle_power_w:.1f} W")
        if reading.cross_check_rel_diff is not None:
            parts.append(f"counter vs samples {reading.cross_check_rel_diff:.1%}")
        console.print(f"    {label}: {', '.join(parts)}", highlight=False, markup=False)
        if reading.note:
            console.print(f"      {reading.note}", highlight=False, markup=False)


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
        writer.writerow(csv_row(row))  # formula-like text quoted (CSV injection)
    return buf.getvalue()
