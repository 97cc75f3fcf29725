"""``accelbench report``: an HTML report with figures and a Markdown summary.
"""


from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench.cli.args import add_filter_args, nonempty, result_filter
from accelbench.cli.store_args import (
    add_cost_args,
    check_store_workload,
    cost_rates,
    describe_filter,
    open_results_store,
    store_files,
)


def _cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.html import REPORT_FILES, build_report, write_report
    from accelbench.report.outputs import check_out_dir

    costs = cost_rates(args)
    out_dir = Path(args.out)
    check_out_dir(out_dir, REPORT_FILES, protected=store_files(args), force=args.force)
    with open_results_store(args) as st:
        flt = result_filter(args, st)
        results = st.query(flt)
        if not results and args.workload:
            check_store_workload(st, args.workload)
        data = build_report(
            results, title=args.title, store=st, store_url=st.where,
            filters=describe_filter(flt), costs=costs, include_reference=not args.no_reference,
        )
    files = write_report(data, out_dir)
    out.print(f"wrote {files.html} ({data.n_results} results), {files.markdown} and "
              f"{len(files.figures)} figure files in {files.html.parent / 'figures'}",
              highlight=False, markup=False)
    return 0



def register(sub: Any) -> None:
    """Add ``report`` to ``sub``."""
    p = sub.add_parser(
        "report", help="HTML report with figures and a Markdown summary",
        description="Write DIR/index.html (self-contained: opens from disk, no network), "
        "DIR/summary.md and DIR/figures/*.png|svg from the stored results that match the "
        "filters. Includes the paper's published results for the same workload, batch size "
        "and precision, clearly labelled.",
    )
    p.add_argument("--out", required=True, type=nonempty, metavar="DIR",
                   help="output directory (new, or empty unless --force)")
    p.add_argument("--force", action="store_true",
                   help="write into a directory that is not empty (files of the same names "
                   "are replaced; never the results store)")
    p.add_argument("--title", default="accelbench report", type=nonempty, help="page title")
    p.add_argument("--no-reference", action="store_true",
                   help="leave out the paper's published results")
    add_filter_args(p)
    add_cost_args(p)
    p.set_defaults(handler=_cmd_report)

