"""``accelbench results``: what the store holds, newest first (table, JSON or CSV)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console

from accelbench.cli.args import (
    add_filter_args,
    result_filter,
)


def cmd_results(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.render import results_table, to_csv, to_json
    from accelbench.store import open_store

    with open_store(args.db, create=args.db is None) as st:
        results = st.query(result_filter(args, st))
        url = st.where
    if args.json:
        print(to_json(results))
    elif args.csv:
        sys.stdout.write(to_csv(results))
    elif results:
        out.print(results_table(results, wide=args.wide))
        out.print(f"{len(results)} result(s) in {url}", highlight=False, soft_wrap=True)
    else:
        out.print(f"no results match (store: {url})", highlight=False, soft_wrap=True)
    return 0


def register(sub: Any) -> None:
    """Add ``results`` to ``sub``."""
    p = sub.add_parser("results", help="what the store holds, newest first")
    add_filter_args(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    fmt.add_argument("--wide", action="store_true", help="every column in the table")
    p.set_defaults(handler=cmd_results)
