"""Store-reading subcommands: ``report``, ``compare``, ``recommend``, ``export``, ``reference``.

Each handler is ``fn(args, out, err) -> int``; bad input raises
:class:`~accelbench.errors.ConfigError` (one line, exit 2). Heavy modules
(matplotlib, jinja2, numpy) are imported inside the handlers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cliargs import add_filter_args, finite, integer, nonempty, result_filter
from accelbench.errors import ConfigError

#: Kept here, not in accelbench.report.compare, so that building the parser stays light.
SELECTOR_HELP = (
    "A and B are selectors: KEY=VALUE[,KEY=VALUE...] with keys device, precision, workload, "
    "size, suite, tag, id (e.g. device=cuda:0, precision=amp_bf16,device=cuda:0); "
    "suite:SUITE_ID; id:PREFIX; or a bare suite id or result-id prefix. Cases match on "
    "workload, size, batch size and whichever of device/precision is not being compared; "
    "where a side has several runs of a case, the pair comes from one suite when both "
    "sides have results from one (the newest), else the two runs closest in time, and "
    "the 'paired' column says which. Noisy inputs (marked !) raise a warning; "
    "--exclude-noisy leaves them out. Diverged and insufficient runs get no ratio. "
    "Ratios are B/A: throughput >1 means B is faster, energy <1 means B uses less energy "
    "per sample. CIs: 95% percentile bootstrap from the raw iteration times (2000 "
    "resamples of each side, fixed seed). Runs of one case in one suite (--repeats) form "
    "a group: when both sides have R >= 2 runs the CI is a two-level bootstrap (runs, "
    "then iterations) and 'significant' means it excludes 1; with R = 1 on a side the CI "
    "covers within-run noise only, so significance is '?' (cannot tell). The energy "
    "CI holds each side's average power fixed and resamples its step times, so it covers "
    "timing variability only; without energy on both sides there is no energy ratio."
)

_COST_HELP = (
    "Cost and carbon: --price-per-hour (machine), --electricity-price (per kWh) and "
    "--carbon-intensity (gCO2/kWh) apply to every device and override the [cost] table of "
    "the config file (default: config.toml in the user config directory, e.g. "
    "~/.config/accelbench/config.toml; per device: [cost.devices.\"cuda:0\"] or "
    "[cost.devices.\"DEVICE NAME\"])."
)


def _cost_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cost and carbon", _COST_HELP)
    g.add_argument("--config", type=nonempty, help="TOML config file with [cost] rates")
    g.add_argument("--price-per-hour", type=finite(0.0, 1e9), metavar="PRICE",
                   help="price of the machine per hour")
    g.add_argument("--electricity-price", type=finite(0.0, 1e6), metavar="PRICE",
                   help="price of electricity per kWh")
    g.add_argument("--carbon-intensity", type=finite(0.0, 1e5), metavar="G_PER_KWH",
                   help="grid carbon intensity in gCO2 per kWh")
    g.add_argument("--currency", type=nonempty,
                   help="label for prices, e.g. USD (no conversion)")


def _describe_filter(flt: Any) -> str:
    parts = [
        f"{name}={getattr(flt, name)}"
        for name in ("workload", "device", "precision", "size", "status", "suite_id", "tag",
                     "limit")
        if getattr(flt, name) is not None
    ]
    return ", ".join(parts)


def _open(args: argparse.Namespace) -> Any:
    from accelbench.store import open_store

    return open_store(args.db, create=False) if args.db else open_store(None)


def _costs(args: argparse.Namespace) -> Any:
    from accelbench.report.cost import CostRates, load_cost_config

    overrides = CostRates(
        price_per_hour=args.price_per_hour,
        electricity_price_per_kwh=args.electricity_price,
        carbon_intensity_g_per_kwh=args.carbon_intensity,
        currency=args.currency or "",
    )
    return load_cost_config(args.config, overrides=overrides)


# -- report -----------------------------------------------------------------------------


def _cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.html import build_report, write_report

    flt = result_filter(args)
    costs = _costs(args)
    with _open(args) as st:
        results = st.query(flt)
        if not results and args.workload:
            _check_store_workload(st, args.workload)
        data = build_report(
            results, title=args.title, store=st, store_url=st.url,
            filters=_describe_filter(flt), costs=costs, include_reference=not args.no_reference,
        )
    files = write_report(data, Path(args.out))
    out.print(f"wrote {files.html} ({data.n_results} results), {files.markdown} and "
              f"{len(files.figures)} figure files in {files.html.parent / 'figures'}",
              highlight=False, markup=False)
    return 0


def _check_store_workload(st: Any, workload: str) -> None:
    """A one-line ConfigError when the store holds no results of ``workload``, with the
    close matches (a typo) or the workloads it does hold."""
    from accelbench.report.rows import did_you_mean, known_workloads

    held = st.workloads()
    if workload in held:
        return
    known = known_workloads(extra=held)
    hint = "" if workload in known else did_you_mean(workload, known)
    if not hint:
        hint = f"; it holds: {', '.join(sorted(held))}" if held else "; it is empty"
    raise ConfigError(f"no results for workload {workload!r} in {st.url}{hint}")


# -- compare ----------------------------------------------------------------------------


def _cmd_compare(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.compare import compare, table, to_csv

    flt = result_filter(args, status=None, limit=None)
    with _open(args) as st:
        result = compare(st, args.a, args.b, base=flt, exclude_noisy=args.exclude_noisy)
    if args.json:
        print(jsonout.dumps(result.to_dict(), indent=2))
    elif args.csv:
        sys.stdout.write(to_csv(result))
    else:
        out.print(table(result, wide=args.wide))
        out.print(f"matched on {', '.join(result.match_on)}; compared: "
                  f"{', '.join(result.axes) or 'the two selections'}", highlight=False)
        if result.only_a or result.only_b:
            out.print(f"unmatched: {len(result.only_a)} case(s) only in A, "
                      f"{len(result.only_b)} only in B", highlight=False)
        for note in result.notes:
            out.print(f"note: {note}", highlight=False, markup=False)
    return 0 if result.cases else 1


# -- recommend --------------------------------------------------------------------------


def _option_table(title: str, options: Any, currency: str) -> Any:
    from rich import box
    from rich.table import Table

    from accelbench.render import fmt_rate
    from accelbench.report.rows import ci_text, energy_text

    t = Table(title=title, header_style="bold", title_justify="left", box=box.SIMPLE_HEAD,
              padding=(0, 0), show_edge=False)
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("option", overflow="fold")
    t.add_column("size", no_wrap=True)
    t.add_column("samples/s", justify="right", no_wrap=True)
    t.add_column("\u00b1CI", justify="right", no_wrap=True)
    t.add_column("J/sample", justify="right", overflow="fold")
    t.add_column("cost/Msample", justify="right", overflow="fold")
    t.add_column("origin", overflow="fold")
    t.add_column("id", no_wrap=True)
    for i, o in enumerate(options, 1):
        device = o.device_name if o.device_name == o.device else f"{o.device} ({o.device_name})"
        t.add_row(
            str(i), f"{device} {o.precision} bs={o.batch_size}", o.size,
            fmt_rate(o.samples_per_s) + ("[bold yellow]![/bold yellow]" if o.noisy else ""),
            "-" if o.origin == "published"
            else "no CI" if o.ci_rel_halfwidth is None else ci_text(o.ci_rel_halfwidth),
            energy_text(o.energy_j_per_sample, o.energy_kind),
            f"{o.cost_per_msample:.4g}{(' ' + currency) if currency else ''}"
            if o.cost_per_msample is not None else "-",
            o.origin, (o.result_id or "")[:8],
        )
    if any(o.noisy for o in options):
        t.caption = "! noisy measurement (see the warning)"
        t.caption_justify = "left"
    return t


def _cmd_recommend(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.recommend import recommend
    from accelbench.report.reference import reference_workloads
    from accelbench.report.rows import did_you_mean, known_workloads
    from accelbench.store import ResultFilter

    costs = _costs(args)
    with _open(args) as st:
        results = st.query(ResultFilter(workload=args.workload))
        label = f"the store {st.url}"
        if not results:
            known = known_workloads(st, reference_workloads() if args.reference else ())
            if args.workload not in known:
                hint = did_you_mean(args.workload, known) or (
                    f"; known: {', '.join(sorted(known))}")
                raise ConfigError(f"unknown workload {args.workload!r}{hint}")
    rec = recommend(
        results, args.workload, size=args.size, precision=args.precision,
        min_samples_per_s=args.min_throughput, max_cost_per_msample=args.max_cost_per_msample,
        costs=costs, include_reference=args.reference, top=args.top, store_label=label,
        exclude_noisy=args.exclude_noisy,
    )
    if args.json:
        print(jsonout.dumps(rec.to_dict(), indent=2))
        return 0 if rec.answerable else 1
    out.print(rec.message, highlight=False, markup=False)
    currency = costs.overrides.currency or costs.default.currency
    if rec.answerable:
        # An empty ranking is not printed as an empty table: its note says why.
        if rec.by_energy:
            out.print(_option_table("by energy per sample (lowest first)", rec.by_energy,
                                    currency))
        out.print(_option_table("by throughput (highest first)", rec.by_throughput, currency))
        if rec.by_cost:
            out.print(_option_table("by cost per million samples (lowest first)", rec.by_cost,
                                    currency))
    for opt, why in rec.excluded:
        out.print(f"excluded: {opt.label}: {why}", highlight=False, markup=False)
    for note in rec.notes:
        out.print(f"note: {note}", highlight=False, markup=False)
    return 0 if rec.answerable else 1


# -- export -----------------------------------------------------------------------------


def _cmd_export(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.export import export

    flt = result_filter(args)
    with _open(args) as st:
        results = st.query(flt)
    text, paths = export(results, args.format, Path(args.out) if args.out else None)
    if text is not None:
        sys.stdout.write(text)
    else:
        err.print(f"exported {len(results)} result(s) to {', '.join(map(str, paths))}",
                  highlight=False, markup=False)
    return 0


# -- reference --------------------------------------------------------------------------


def _cmd_reference(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.reference import (
        BOUNDARY_TEXT,
        LABEL,
        load_reference,
        match_reference,
        reference_workloads,
    )
    from accelbench.report.rows import case_rows, did_you_mean, newest_per_case

    if args.workload is not None and args.workload not in reference_workloads():
        published = reference_workloads()
        hint = did_you_mean(args.workload, published)
        raise ConfigError(
            f"no published results for workload {args.workload!r}{hint} "
            f"(published: {', '.join(published)})"
        )
    refs = load_reference(workload=args.workload, precision=args.precision,
                          batch_size=args.batch_size, device=args.device)
    matches = []
    if args.match:
        with _open(args) as st:
            flt = _result_filter_for_reference(args)
            rows = newest_per_case(case_rows(st.query(flt)))
        rows = [r for r in rows if args.batch_size is None or r.batch_size == args.batch_size]
        matches = match_reference(rows)
    if args.json:
        doc: dict[str, Any] = {"label": LABEL, "rows": [r.to_dict() for r in refs]}
        if args.match:
            doc["matches"] = [
                {"result": m.row.to_dict(), "comparable": m.comparable, "note": m.note,
                 "reference": [r.to_dict() for r in m.reference]}
                for m in matches
            ]
        print(jsonout.dumps(doc, indent=2))
        return 0
    if args.csv:
        import csv

        fields = ["device", "precision", "paper_precision", "workload", "batch_size",
                  "sample_unit", "status", "samples_per_s", "avg_power_w", "energy_j_per_sample"]
        w = csv.DictWriter(sys.stdout, fieldnames=fields)
        w.writeheader()
        for r in refs:
            w.writerow({k: ("" if v is None else v) for k, v in r.to_dict().items()})
        return 0
    from rich.table import Table

    from accelbench.render import fmt_rate

    out.print(f"{LABEL} The {BOUNDARY_TEXT}.", highlight=False, markup=False)
    t = Table(header_style="bold")
    for col in ("device (published)", "workload", "batch", "precision", "status",
                "throughput /s", "avg W", "J/sample"):
        t.add_column(col)
    for r in refs:
        t.add_row(r.device, r.workload, str(r.batch_size), r.precision, r.status,
                  fmt_rate(r.samples_per_s), fmt_rate(r.avg_power_w),
                  f"{r.energy_j_per_sample:.3g}" if r.energy_j_per_sample is not None else "-")
    out.print(t)
    if args.match:
        if not matches:
            out.print("none of your stored results has the workload, batch size and precision "
                      "of these published rows", highlight=False)
        for m in matches:
            row = m.row
            out.print(
                f"your {row.workload} bs={row.batch_size} {row.precision} on {row.device_name} "
                f"(size {row.size}, id {row.result_id[:8]}): {fmt_rate(row.samples_per_s)} "
                f"{row.sample_unit}s/s vs published "
                + ", ".join(f"{r.device} {fmt_rate(r.samples_per_s)}" for r in m.reference)
                + (f"  [{m.note}]" if m.note else ""),
                highlight=False, markup=False,
            )
    return 0


def _result_filter_for_reference(args: argparse.Namespace) -> Any:
    from accelbench.spec import normalize_precision
    from accelbench.store import ResultFilter

    return ResultFilter(
        workload=args.workload, status="ok",
        precision=normalize_precision(args.precision) if args.precision else None,
    )


# -- registration -----------------------------------------------------------------------


def register(sub: Any) -> None:
    """Add ``report``, ``compare``, ``recommend``, ``export`` and ``reference`` to ``sub``."""
    p = sub.add_parser(
        "report", help="HTML report with figures and a Markdown summary",
        description="Write DIR/index.html (self-contained: opens from disk, no network), "
        "DIR/summary.md and DIR/figures/*.png|svg from the stored results that match the "
        "filters. Includes the paper's published results for the same workload, batch size "
        "and precision, clearly labelled.",
    )
    p.add_argument("--out", required=True, type=nonempty, metavar="DIR",
                   help="output directory")
    p.add_argument("--title", default="accelbench report", type=nonempty, help="page title")
    p.add_argument("--no-reference", action="store_true",
                   help="leave out the paper's published results")
    add_filter_args(p)
    _cost_args(p)
    p.set_defaults(handler=_cmd_report)

    p = sub.add_parser(
        "compare", help="ratios of two runs, devices, precisions or suites, with CIs",
        description="Compare selection B against selection A case by case. " + SELECTOR_HELP
        + " Exit status 1 when no case matches.",
        epilog="examples: accelbench compare device=cpu device=cuda:0 --workload resnet50; "
        "accelbench compare precision=fp32 precision=amp_bf16,device=cuda:0; "
        "accelbench compare quick-20260101T000000-abc123 quick-20260102T000000-def456; "
        "accelbench compare 3f2a 9c1b",
    )
    p.add_argument("a", type=nonempty, help="selector A (the baseline)")
    p.add_argument("b", type=nonempty, help="selector B")
    add_filter_args(p, status=False)
    p.add_argument("--exclude-noisy", action="store_true",
                   help="leave results flagged noisy out before pairing")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    fmt.add_argument("--wide", action="store_true",
                     help="every column (ids, suites and times of each pair, energy notes)")
    p.set_defaults(handler=_cmd_compare)

    p = sub.add_parser(
        "recommend", help="rank devices, precisions and batch sizes for a workload",
        description="Rank the stored device x precision x batch-size options of WORKLOAD by "
        "energy per sample, throughput and cost per million samples, after the constraints. "
        "Says so plainly (exit status 1) when the store holds too little to answer.",
    )
    p.add_argument("workload", type=nonempty)
    p.add_argument("--size", type=nonempty,
                   help="model size (default: the largest the store has)")
    p.add_argument("--precision", type=nonempty, help="only this precision")
    p.add_argument("--min-throughput", type=finite(0.0, 1e12), metavar="SAMPLES_PER_S",
                   help="drop options slower than this (samples/s)")
    p.add_argument("--max-cost-per-msample", type=finite(0.0, 1e12), metavar="COST",
                   help="drop options costing more than this per million samples "
                   "(needs cost rates)")
    p.add_argument("--reference", action="store_true",
                   help="also rank the paper's published figures (labelled published)")
    p.add_argument("--exclude-noisy", action="store_true",
                   help="leave runs flagged noisy out (by default a noisy run is used only "
                   "where an option has no quiet one, with a warning)")
    p.add_argument("--top", type=integer(1, 1000), default=5,
                   help="options shown per ranking (default 5)")
    p.add_argument("--json", action="store_true")
    _cost_args(p)
    p.set_defaults(handler=_cmd_recommend)

    p = sub.add_parser(
        "export", help="results as CSV, JSON or Parquet",
        description="One row per case; json and parquet add a table of raw samples (one row "
        "per iteration). Parquet needs pyarrow: pip install 'accelbench[parquet]'. "
        "Parquet writes exactly --out (e.g. x.parquet: the cases) and the raw samples "
        "beside it as x.samples.parquet; an existing directory as --out gets "
        "cases.parquet and samples.parquet.",
    )
    p.add_argument("--format", required=True, choices=["csv", "json", "parquet"])
    p.add_argument("--out", metavar="PATH", type=nonempty,
                   help="file for csv/json (default: stdout); for parquet (required) the "
                   "cases file, with the samples in PATH-stem.samples.parquet beside it")
    add_filter_args(p)
    p.set_defaults(handler=_cmd_export)

    p = sub.add_parser(
        "reference", help="the paper's published results (Wang et al. 2020, Table 10)",
        description="Published figures measured by the paper's authors on other hardware. "
        "--match puts your stored results with the same workload, batch size and precision "
        "next to them.",
    )
    p.add_argument("--workload", type=nonempty,
                   help="a workload with published rows (resnet50, inception_v3, vgg16, lstm, "
                   "deepspeech2, transformer)")
    p.add_argument("--precision", type=nonempty)
    p.add_argument("--batch-size", type=integer(1))
    p.add_argument("--device", type=nonempty,
                   help="substring of the published device name, e.g. V100")
    p.add_argument("--match", action="store_true", help="show your matching stored results")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    p.set_defaults(handler=_cmd_reference)
