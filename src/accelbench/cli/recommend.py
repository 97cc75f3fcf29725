"""``accelbench recommend``: rank devices, precisions and batch sizes for a workload.
"""


from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import add_options
from accelbench.cli.flags import WorkloadArg
from accelbench.cli.store_args import add_cost_args, cost_rates, open_results_store
from accelbench.errors import ConfigError
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class RecommendOptions:
    """``accelbench recommend WORKLOAD`` (beside the cost rates)."""

    size: str | None = option(None, flag="--size", nonempty=True, fold=True,
                              help="model size (default: the largest the store has)")
    precision: str | None = option(None, flag="--precision", nonempty=True, fold=True,
                                   help="only this precision")
    min_throughput: float | None = option(
        None, flag="--min-throughput", lo=0.0, hi=1e12, metavar="SAMPLES_PER_S",
        help="drop options slower than this (samples/s)")
    max_cost_per_msample: float | None = option(
        None, flag="--max-cost-per-msample", lo=0.0, hi=1e12, metavar="COST",
        help="drop options costing more than this per million samples (needs cost rates)")
    reference: bool = option(False, flag="--reference", help="also rank the paper's "
                             "published figures (labelled published)")
    exclude_noisy: bool = option(
        False, flag="--exclude-noisy",
        help="leave runs flagged noisy out (by default a noisy run is used only where an "
        "option has no quiet one, with a warning)")
    top: int = option(5, flag="--top", lo=1, hi=1000, help="options shown per ranking")
    json: bool = option(False, flag="--json", help="")


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
    from accelbench.report.rows import DEFAULT_FRAMEWORK, fast_paths_text

    # The framework is named on every measured option where the options span more than
    # one, so a JAX and a torch option never read the same.
    frameworks = {o.framework for o in options if o.framework}
    for i, o in enumerate(options, 1):
        device = o.device_name if o.device_name == o.device else f"{o.device} ({o.device_name})"
        fw = f" {o.framework}" if o.framework and (len(frameworks) > 1 or
                                                   o.framework != DEFAULT_FRAMEWORK) else ""
        t.add_row(
            str(i), f"{device} {o.precision} bs={o.batch_size}{fw}"
            f"{fast_paths_text(o.fast_paths, lead=' ')}", o.size,
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
    from accelbench.report.recommend import Wanted, recommend
    from accelbench.report.reference import reference_workloads
    from accelbench.report.rows import did_you_mean, known_workloads
    from accelbench.store import ResultFilter
    from accelbench.store.briefs import iter_briefs, load

    costs = cost_rates(args)
    with open_results_store(args) as st:
        # Briefs (a few hundred bytes a result); only the chosen results are decoded.
        results = list(iter_briefs(st, ResultFilter(workload=args.workload)))
        label = f"the store {st.where}"
        if not results:
            known = known_workloads(st, reference_workloads() if args.reference else ())
            if args.workload not in known:
                hint = did_you_mean(args.workload, known) or (
                    f"; known: {', '.join(sorted(known))}")
                raise ConfigError(f"unknown workload {args.workload!r}{hint}")
        wanted = Wanted(
            size=args.size, precision=args.precision, min_samples_per_s=args.min_throughput,
            max_cost_per_msample=args.max_cost_per_msample, include_reference=args.reference,
            exclude_noisy=args.exclude_noisy, top=args.top,
        )
        rec = recommend(results, args.workload, wanted, costs=costs, store_label=label,
                        load=lambda briefs: load(st, briefs))
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



def register(sub: Any) -> None:
    """Add ``recommend`` to ``sub``."""
    p = sub.add_parser(
        "recommend", help="rank devices, precisions and batch sizes for a workload",
        description="Rank the stored device x precision x batch-size options of WORKLOAD by "
        "energy per sample, throughput and cost per million samples, after the constraints. "
        "Says so plainly (exit status 1) when the store holds too little to answer.",
    )
    add_options(p, WorkloadArg, filled=True)
    add_options(p, RecommendOptions, filled=True)
    add_cost_args(p)
    p.set_defaults(handler=_cmd_recommend)

