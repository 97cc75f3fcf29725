"""``accelbench list``: the registered workloads, their sizes, parameters and FLOPs."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelbench.cli.args import add_options
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class ListOptions:
    """``accelbench list``."""

    json: bool = option(False, flag="--json", help="")


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
    out.print(list_table(infos))
    return 0


def list_table(infos: list[dict[str, Any]]) -> Any:
    """The workloads of ``describe_workloads`` as a table within the terminal's width."""
    from accelbench.fit_table import KEEP, Col, FitTable
    from accelbench.render import fmt_count

    # Within the terminal's width: columns of least use are left out (and named) rather
    # than every column squeezed into a few characters a line (508 lines at 80 columns).
    table = FitTable(columns=[
        Col(header="workload", priority=KEEP),
        Col(header="family", priority=30, fold_min=10),
        Col(header="sample", priority=40),
        Col(header="frameworks", priority=60, fold_min=10),
        Col(header="size", priority=KEEP),
        Col(header="params", priority=90, justify="right"),
        Col(header="GFLOP/sample (fwd+bwd)", priority=70, justify="right"),
        Col(header="batch sizes", priority=50, fold_min=12),
        Col(header="configuration", priority=10, fold_min=24),
    ], wide=True, left_out_hint="`accelbench list --json` has every field")
    for info in infos:
        for i, (size, s) in enumerate(info["sizes"].items()):
            table.add_row(
                escape(info["name"]) if i == 0 else "",
                escape(info["family"]) if i == 0 else "",
                escape(info["sample_unit"]) if i == 0 else "",
                ", ".join(info["frameworks"]) if i == 0 else "",
                escape(size),
                fmt_count(s["param_count"]),
                f"{s['train_flop_per_sample'] / 1e9:.4g}" if s["train_flop_per_sample"] else "-",
                ", ".join(map(str, s["default_batch_sizes"])),
                escape(s["notes"]),
            )
    return table


def register(sub: Any) -> None:
    """Add ``list`` to ``sub``."""
    p = sub.add_parser("list", help="registered workloads")
    add_options(p, ListOptions, filled=True)
    p.set_defaults(handler=cmd_list)
