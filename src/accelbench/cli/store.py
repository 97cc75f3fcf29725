"""``accelbench store check``: is the results store sound (integrity, schema, tables)?"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import add_options
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreOptions:
    """``accelbench store check``."""

    action: str = option(flag="action", choices=("check",), help="what to do (check)")
    json: bool = option(False, flag="--json", help="print JSON")

FIX = "restore it from a backup, or pass another --db"


def cmd_store(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Exit 0 with one line when the store is sound; 2 with every problem (one line
    each) when it is damaged, of a newer schema or no accelbench store; a store that is
    missing or unreachable is a StoreError (exit 2)."""
    from accelbench.store import check_store
    from accelbench.store.health import MAX_LISTED

    found = check_store(args.db)
    problems = found.pop("problems")
    if args.json:
        print(jsonout.dumps({"ok": not problems, **found, "problems": problems}, indent=2))
        return 2 if problems else 0
    if len(problems) == 1:  # one line, as every refusal of a damaged store
        err.print(f"accelbench: error: results store {found['store']} is damaged "
                  f"({problems[0]}): {FIX}", highlight=False, markup=False, soft_wrap=True)
        return 2
    if problems:
        shown = problems[:MAX_LISTED]
        more = len(problems) - len(shown)
        err.print(f"accelbench: error: results store {found['store']} is damaged, "
                  f"{len(problems)} problems ({FIX}):", highlight=False, markup=False,
                  soft_wrap=True)
        for line in shown + ([f"... and {more} more"] if more else []):
            err.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
        return 2
    out.print(f"results store {found['store']}: ok (integrity check passed, schema "
              f"v{found['schema_version']}, {len(found['tables'])} tables with every "
              f"column, {found['results']} result(s), every record readable)",
              highlight=False, markup=False, soft_wrap=True)
    return 0


def register(sub: Any) -> None:
    """Add ``store`` to ``sub``."""
    p = sub.add_parser(
        "store", help="check the results store (integrity, schema, tables)",
        description="store check: read the results store without writing it and say whether "
        "it is sound: SQLite's integrity check (PRAGMA quick_check), a schema version this "
        "accelbench knows, every table and column that version needs, and every result "
        "record's JSON with the fields readers need. Exit 0 when sound, 2 when it is "
        "missing, unreadable or damaged (every problem, one line each). A damaged store "
        "is never written to by any command, and every read refuses it (exit 2): restore "
        "it from a backup.",
    )
    add_options(p, StoreOptions, filled=True)
    p.set_defaults(handler=cmd_store)
