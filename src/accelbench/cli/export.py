"""``accelbench export``: stored results as CSV, JSON or Parquet."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console

from accelbench.cli.args import add_filter_args, add_options, refuse_unless
from accelbench.keywords import keywords_of
from accelbench.readouts import ExportOptions, ResultFilters, export


def _cmd_export(args: argparse.Namespace, out: Console, err: Console) -> int:
    filters = {name: getattr(args, fo.name) for name, fo in keywords_of(ResultFilters).items()
               if getattr(args, fo.name) is not None}
    count, paths = export(args.format, args.out, force=args.force, db=args.db,
                          stream=sys.stdout, to_target=args.to_target, **filters)
    if paths:
        what = "run(s) to a target" if args.to_target else "result(s)"
        err.print(f"exported {count} {what} to {', '.join(map(str, paths))}",
                  highlight=False, markup=False)
    return 0


def register(sub: Any) -> None:
    """Add ``export`` to ``sub``."""
    p = sub.add_parser(
        "export", help="results as CSV, JSON or Parquet",
        description="One row per case; json and parquet add a table of raw samples (one row "
        "per iteration). Parquet needs pyarrow: pip install 'accelbench[parquet]'. "
        "Parquet writes exactly --out (e.g. x.parquet: the cases) and the raw samples "
        "beside it as x.samples.parquet; an existing directory as --out gets "
        "cases.parquet and samples.parquet.",
    )
    add_options(p, ExportOptions, filled=True)
    add_filter_args(p)
    p.set_defaults(handler=_cmd_export)
    refuse_unless(p, ["--force"], "--out", "needs --out (standard output is never replaced)")

