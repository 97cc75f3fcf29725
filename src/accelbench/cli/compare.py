"""``accelbench compare``: ratios of two selections of stored results, with CIs.
"""


from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import add_filter_args, add_options, result_filter
from accelbench.cli.store_args import SELECTOR_HELP, open_results_store
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class CompareOptions:
    """``accelbench compare A B`` (beside the result filters)."""

    a: str = option(flag="a", nonempty=True, help="selector A (the baseline)")
    b: str = option(flag="b", nonempty=True, help="selector B")
    exclude_noisy: bool = option(False, flag="--exclude-noisy",
                                 help="leave results flagged noisy out before pairing")
    json: bool = option(False, flag="--json", exclusive="format", help="")
    csv: bool = option(False, flag="--csv", exclusive="format", help="")
    wide: bool = option(False, flag="--wide", exclusive="format",
                        help="every column (ids, suites and times of each pair, energy notes)")


def _cmd_compare(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.compare import compare, table, to_csv
    from accelbench.report.compare.render import footer_lines, phase_tables

    with open_results_store(args) as st:
        flt = result_filter(args, st, status=None, limit=None)
        result = compare(st, args.a, args.b, base=flt, exclude_noisy=args.exclude_noisy)
    if args.json:
        print(jsonout.dumps(result.to_dict(), indent=2))
    elif args.csv:
        sys.stdout.write(to_csv(result))
    else:
        out.print(table(result, wide=args.wide))
        phases, phase_lines = phase_tables(result)
        for t in phases:
            out.print(t)
        for line in phase_lines:
            out.print(line, highlight=False, markup=False)
        for line in footer_lines(result):
            out.print(line, highlight=False, markup=False, soft_wrap=True)
        for note in result.notes:
            out.print(f"note: {note}", highlight=False, markup=False)
    return 0 if result.cases else 1



def register(sub: Any) -> None:
    """Add ``compare`` to ``sub``."""
    p = sub.add_parser(
        "compare", help="ratios of two runs, devices, precisions or suites, with CIs",
        description="Compare selection B against selection A case by case. " + SELECTOR_HELP
        + " Exit status 1 when no case matches.",
        epilog="examples: accelbench compare device=cpu device=cuda:0 --workload resnet50; "
        "accelbench compare precision=fp32 precision=amp_bf16,device=cuda:0; "
        "accelbench compare quick-20260101T000000-abc123 quick-20260102T000000-def456; "
        "accelbench compare 3f2a 9c1b",
    )
    add_options(p, CompareOptions, only=("a", "b"), filled=True)
    add_filter_args(p, status=False, limit=False)  # every matching result is paired
    add_options(p, CompareOptions, skip=("a", "b"), filled=True)
    p.set_defaults(handler=_cmd_compare)

