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
from accelbench.errors import ConfigError
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
    across_recipes: bool = option(False, flag="--across-recipes",
                                  help="to-target groups: compare groups whose recipes or "
                                  "targets differ (refused without it: their figures measure "
                                  "different work)")


def _cmd_compare(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.compare import compare, table, to_csv
    from accelbench.report.compare.render import footer_lines, phase_tables

    with open_results_store(args) as st:
        groups = _target_groups(st, args)
        if groups is not None:
            return _compare_targets(args, out, *groups)
        if args.across_recipes:
            raise ConfigError("compare: --across-recipes applies to two to-target groups "
                              "(accelbench results to-target lists them)")
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


def _target_groups(st: Any, args: argparse.Namespace) -> tuple[Any, Any] | None:
    """The runs of groups A and B where both selectors are to-target group id prefixes;
    None where neither is; a one-line refusal where one is, or options that do not apply."""
    from accelbench.report.totarget import find_group

    plain = [":" not in s and "=" not in s for s in (args.a, args.b)]
    hits = [bool(p and st.totarget_group_ids(s)) for p, s in zip(plain, (args.a, args.b),
                                                                  strict=True)]
    if not any(hits):
        return None
    both = [s for s, hit in zip((args.a, args.b), hits, strict=True)
            if hit and st.ids_with_prefix(s)]
    if both:
        raise ConfigError(f"compare: {both[0]!r} starts both a result id and a to-target "
                          "group id; type more characters (id:PREFIX names the result)")
    if not all(hits):
        one, other = (args.a, args.b) if hits[0] else (args.b, args.a)
        raise ConfigError(f"compare: {one!r} is a to-target group and {other!r} is not; "
                          "compare two groups (accelbench results to-target lists them)")
    given = [name for name in ("workload", "device", "precision", "size", "framework",
                               "suite_id", "tag") if getattr(args, name, None) is not None]
    given += ["exclude_noisy"] * bool(args.exclude_noisy) + ["wide"] * bool(args.wide)
    if given:
        raise ConfigError(f"compare: --{given[0].replace('_', '-')} applies to results, not "
                          "to to-target groups (give the two group ids alone)")
    return find_group(st, args.a), find_group(st, args.b)


def _compare_targets(args: argparse.Namespace, out: Console, ra: Any, rb: Any) -> int:
    from accelbench.report.totarget import compare_groups, comparison_csv, comparison_lines

    c = compare_groups(ra, rb, across_recipes=args.across_recipes)
    if args.json:
        print(jsonout.dumps(c.to_dict(), indent=2))
    elif args.csv:
        sys.stdout.write(comparison_csv(c))
    else:
        for line in comparison_lines(c):
            out.print(line, highlight=False, markup=False, soft_wrap=True)
    return 0 if c.time.value is not None else 1


def register(sub: Any) -> None:
    """Add ``compare`` to ``sub``."""
    p = sub.add_parser(
        "compare", help="ratios of two runs, devices, precisions or suites, with CIs",
        description="Compare selection B against selection A case by case. " + SELECTOR_HELP
        + " Two to-target group ids (prefixes; accelbench results to-target lists them) give "
        "the ratios B/A of time-, energy- and samples-to-target over the runs that reached "
        "the target, seeds as samples (95% bootstrap CI of the ratio of means, 3 reached "
        "runs a side at least); groups of different recipes or targets are refused unless "
        "--across-recipes. Exit status 1 when no case matches (no time ratio for groups).",
        epilog="examples: accelbench compare device=cpu device=cuda:0 --workload resnet50; "
        "accelbench compare precision=fp32 precision=amp_bf16,device=cuda:0; "
        "accelbench compare quick-20260101T000000-abc123 quick-20260102T000000-def456; "
        "accelbench compare 3f2a 9c1b; accelbench compare 179bd2 5e0c11 (two to-target "
        "groups: time-, energy- and samples-to-target ratios)",
    )
    add_options(p, CompareOptions, only=("a", "b"), filled=True)
    add_filter_args(p, status=False, limit=False)  # every matching result is paired
    add_options(p, CompareOptions, skip=("a", "b"), filled=True)
    p.set_defaults(handler=_cmd_compare)

