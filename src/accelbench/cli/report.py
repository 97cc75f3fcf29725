"""``accelbench report``: an HTML report with figures and a Markdown summary.
"""


from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from accelbench.cli.args import add_filter_args, add_options
from accelbench.cli.store_args import add_cost_args
from accelbench.keywords import keywords_of
from accelbench.readouts import CostOptions, ReportOptions, ResultFilters, report


def _cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    given = {name: getattr(args, fo.name) for kind in (ResultFilters, CostOptions)
             for name, fo in keywords_of(kind).items() if getattr(args, fo.name) is not None}
    written = report(args.out, title=args.title, force=args.force,
                     no_reference=args.no_reference, db=args.db, **given)
    files = written.files
    out.print(f"wrote {files.html} ({written.results} results), {files.markdown} and "
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
    add_options(p, ReportOptions, filled=True)
    add_filter_args(p)
    add_cost_args(p)
    p.set_defaults(handler=_cmd_report)

