"""``accelbench list``: the registered workloads, their sizes, parameters and FLOPs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console


def cmd_list(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.planning.facts import describe_workloads, list_items, uncached
    from accelbench.workloads.registry import (
        implementation_frameworks,
        list_workloads,
        worker_plugins,
    )

    names = [w.name for w in list_workloads()]
    plugins = sorted({p for n in names for fw in implementation_frameworks(n)
                      for p in worker_plugins(n, fw)})
    todo = uncached(list_items(names))
    if todo and err.is_terminal and not args.quiet:
        err.print(f"counting parameters and FLOPs of {len(todo)} model(s) once (up to a minute "
                  "on a small CPU); later lists read the cache", highlight=False)
    infos = describe_workloads(names, plugins=plugins)
    if args.json:
        print(json.dumps(infos, indent=2))
        return 0
    from rich.table import Table

    from accelbench.render import fmt_count

    table = Table(header_style="bold")
    for col in ("workload", "family", "sample", "frameworks", "size", "params",
                "GFLOP/sample (fwd+bwd)", "batch sizes", "configuration"):
        table.add_column(col)
    for info in infos:
        for i, (size, s) in enumerate(info["sizes"].items()):
            table.add_row(
                info["name"] if i == 0 else "",
                info["family"] if i == 0 else "",
                info["sample_unit"] if i == 0 else "",
                ", ".join(info["frameworks"]) if i == 0 else "",
                size,
                fmt_count(s["param_count"]),
                f"{s['train_flop_per_sample'] / 1e9:.4g}" if s["train_flop_per_sample"] else "-",
                ", ".join(map(str, s["default_batch_sizes"])),
                s["notes"],
            )
    out.print(table)
    return 0


def register(sub: Any) -> None:
    """Add ``list`` to ``sub``."""
    p = sub.add_parser("list", help="registered workloads")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_list)
