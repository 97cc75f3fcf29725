"""``accelbench store check``: is the results store sound (integrity, schema, tables)?"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from accelbench import jsonout


def cmd_store(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Exit 0 with one line when the store is sound; a damaged one is a StoreError (exit 2)."""
    from accelbench.store import check_store

    found = check_store(args.db)
    if args.json:
        print(jsonout.dumps({"ok": True, **found}, indent=2))
        return 0
    out.print(f"results store {found['store']}: ok (integrity check passed, schema "
              f"v{found['schema_version']}, {len(found['tables'])} tables present, "
              f"{found['results']} result(s))", highlight=False, markup=False, soft_wrap=True)
    return 0


def register(sub: Any) -> None:
    """Add ``store`` to ``sub``."""
    p = sub.add_parser(
        "store", help="check the results store (integrity, schema, tables)",
        description="store check: read the results store without writing it and say whether "
        "it is sound: SQLite's integrity check (PRAGMA quick_check), the schema version and "
        "every table that version needs. Exit 0 when sound, 2 when it is missing, "
        "unreadable or damaged (one line saying what is wrong). A damaged store is never "
        "written to by any command: restore it from a backup.",
    )
    p.add_argument("action", choices=["check"], help="what to do (check)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_store)
