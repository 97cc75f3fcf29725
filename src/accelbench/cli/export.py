"""``accelbench export``: stored results as CSV, JSON or Parquet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench.cli.args import add_filter_args, nonempty, refuse_unless, result_filter
from accelbench.cli.store_args import open_results_store


def _cmd_export(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.export import write_export

    # Streamed: results are read from the store in batches while they are written, so
    # an export of any size runs in bounded memory (the store stays open until done).
    with open_results_store(args) as st:
        flt = result_filter(args, st)
        store_file = st.local_file()
        count, paths = write_export(
            st.iter_query(flt), args.format, Path(args.out) if args.out else None,
            stream=sys.stdout, protected=[store_file] if store_file else [],
            force=args.force)
    if paths:
        err.print(f"exported {count} result(s) to {', '.join(map(str, paths))}",
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
    p.add_argument("--format", required=True, choices=["csv", "json", "parquet"])
    p.add_argument("--out", metavar="PATH", type=nonempty,
                   help="file for csv/json (default: stdout); for parquet (required) the "
                   "cases file, with the samples in PATH-stem.samples.parquet beside it")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --out file (never the results store itself)")
    add_filter_args(p)
    p.set_defaults(handler=_cmd_export)
    refuse_unless(p, ["--force"], "--out", "needs --out (standard output is never replaced)")

