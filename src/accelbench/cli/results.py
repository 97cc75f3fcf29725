"""``accelbench results``: what the store holds, newest first (table, JSON or CSV),
``accelbench results show ID``: one result in full, and ``accelbench results to-target
[GROUP]``: the groups of runs to a target (``accelbench train``), or one in full.

At scale the table (and ``--json``/``--csv``) holds the newest :data:`DEFAULT_LIMIT`
results, with one line counting the rest; ``--limit N`` or ``--all`` for more. JSON and
CSV of many results are written as they are read, in bounded memory.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench.cli.args import (
    add_filter_args,
    add_options,
    result_filter,
)
from accelbench.errors import ConfigError
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class ResultsOptions:
    """``accelbench results`` (beside the result filters)."""

    words: tuple[str, ...] = option((), flag="words", nargs="*", metavar="show ID",
                                    help="show one result in full (an id prefix); "
                                    "to-target [GROUP]: the groups of runs to a target "
                                    "(accelbench train), or one in full")
    all: bool = option(False, flag="--all", help="every matching result (no limit)")
    json: bool = option(False, flag="--json", exclusive="format", help="")
    csv: bool = option(False, flag="--csv", exclusive="format", help="")
    wide: bool = option(False, flag="--wide", exclusive="format",
                        help="more columns (within the terminal's width)")

#: Results listed unless ``--limit`` or ``--all`` says otherwise.
DEFAULT_LIMIT = 50

#: Filters and formats ``results show ID`` refuses (it shows the one result it names).
_LIST_ONLY = ("workload", "device", "precision", "size", "framework", "status", "suite_id",
              "tag", "limit")


def cmd_results(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.words and args.words[0] == "to-target":
        return _to_target(args, out)
    if args.words:
        if args.words[0] != "show" or len(args.words) != 2:
            raise ConfigError(
                f"results: unexpected argument {' '.join(args.words)!r}; "
                "use `accelbench results show ID` for one result, `accelbench results "
                "to-target [GROUP]` for runs to a target, filters for a list")
        return _show(args, args.words[1], out)
    if args.all and args.limit is not None:
        raise ConfigError("results: --all and --limit contradict each other; give one")
    from accelbench.cli.store_args import open_results_store

    with open_results_store(args) as st:
        flt = result_filter(args, st)
        if not args.all and args.limit is None:
            flt = _with_limit(flt, DEFAULT_LIMIT)
        url = st.where
        if args.json or args.csv:
            shown = _stream(st.iter_query(flt), json=args.json)
            rest = _rest(st, flt, shown)
            if rest:
                err.print(f"{_more_line(shown, rest)}", highlight=False, soft_wrap=True)
            return 0
        results = st.query(flt)
        rest = _rest(st, flt, len(results))
    from accelbench.render import results_table

    if results:
        out.print(results_table(results, wide=args.wide))
        if rest:
            out.print(f"{_more_line(len(results), rest)} (store: {url})", highlight=False,
                      soft_wrap=True, markup=False)
        else:
            out.print(f"{len(results)} result(s) in {url}", highlight=False, soft_wrap=True,
                      markup=False)
    else:
        out.print(f"no results match (store: {url})", highlight=False, soft_wrap=True,
                  markup=False)
    return 0


def _with_limit(flt: Any, limit: int | None) -> Any:
    import dataclasses

    return dataclasses.replace(flt, limit=limit)


def _rest(st: Any, flt: Any, shown: int) -> int:
    """How many matching results were not listed (one COUNT, only when the limit was
    reached)."""
    if flt.limit is None or shown < flt.limit:
        return 0
    return max(0, int(st.count(_with_limit(flt, None))) - shown)


def _more_line(shown: int, rest: int) -> str:
    return (f"the newest {shown:,} of {shown + rest:,} result(s); {rest:,} more not shown "
            "(--limit N or --all)")


def _stream(results: Any, *, json: bool) -> int:
    """Write ``results`` as a JSON array (as ``to_json`` formats it) or CSV, one at a
    time; returns how many."""
    from accelbench import jsonout
    from accelbench.render import to_csv

    n = 0
    if json:
        sys.stdout.write("[")
        for r in results:
            item = textwrap.indent(jsonout.dumps(r.summary(), indent=2), "  ")
            sys.stdout.write(("," if n else "") + "\n" + item)
            n += 1
        sys.stdout.write("\n]\n" if n else "]\n")
        return n
    batch: list[Any] = []
    for r in results:
        batch.append(r)
        if len(batch) == 500:
            text = to_csv(batch)
            sys.stdout.write(text if n == 0 else text.split("\n", 1)[1])
            n += len(batch)
            batch = []
    text = to_csv(batch)
    sys.stdout.write(text if n == 0 else text.split("\n", 1)[1])
    return n + len(batch)


def _refuse_list_options(args: argparse.Namespace, what: str, fix: str,
                         allowed: tuple[str, ...] = ()) -> None:
    given = [name for name in _LIST_ONLY
             if name not in allowed and getattr(args, name, None) is not None]
    for flag in ("all", "csv", "wide"):
        if getattr(args, flag):
            given.append(flag)
    if given:
        raise ConfigError(f"{what}: --{given[0].replace('_', '-')} applies to the "
                          f"list of results, not to {fix}")


def _to_target(args: argparse.Namespace, out: Console) -> int:
    """``results to-target``: the groups of runs to a target, newest first;
    ``results to-target GROUP``: one group in full (a group id prefix)."""
    if len(args.words) > 2:
        raise ConfigError(f"results to-target: unexpected argument {args.words[2]!r}; "
                          "give one group id (prefix) or none")
    one = len(args.words) == 2
    _refuse_list_options(args, "results to-target", "runs to a target (the list takes "
                         "--workload, --size, --framework and --json)" if not one else
                         "one group (give its id alone, or with --json)",
                         allowed=() if one else ("workload", "size", "framework"))
    from accelbench import jsonout
    from accelbench.cli.store_args import open_results_store
    from accelbench.report.totarget import find_group, group_lines, seed_rows

    with open_results_store(args) as st:
        if len(args.words) == 2:
            records = find_group(st, args.words[1])
            if args.json:
                print(jsonout.dumps({"group_id": records[0].group_id,
                                     "runs": [r.to_dict() for r in records],
                                     "seeds": [row.to_dict() for row in seed_rows(records)]},
                                    indent=2))
                return 0
            for line in group_lines(records):
                out.print(line, highlight=False, markup=False, soft_wrap=True)
            return 0
        from accelbench.names import fold

        groups = [g for g in st.totarget_groups()
                  if all(getattr(args, k, None) is None
                         or fold(getattr(args, k)) == fold(getattr(g, k))
                         for k in ("workload", "size", "framework"))]
        url = st.where
    if args.json:
        import dataclasses

        print(jsonout.dumps([dataclasses.asdict(g) for g in groups], indent=2))
        return 0
    if not groups:
        out.print(f"no runs to a target in {url} (accelbench train stores them)",
                  highlight=False, markup=False, soft_wrap=True)
        return 0
    for g in groups:
        out.print(f"{g.group_id}  {g.workload} {g.size} {g.framework}: {g.reached}/{g.runs} "
                  f"reached the target, from {g.created_at}", highlight=False, markup=False,
                  soft_wrap=True)
    out.print(f"{len(groups)} group(s) in {url}; accelbench results to-target GROUP shows one",
              highlight=False, markup=False, soft_wrap=True)
    return 0


def _show(args: argparse.Namespace, rid: str, out: Console) -> int:
    _refuse_list_options(args, "results show", "one result; give the id alone")
    from accelbench.cli.store_args import open_results_store

    with open_results_store(args) as st:
        ids = st.ids_with_prefix(rid)
        if not ids:
            raise ConfigError(f"results show: no result id starts with {rid!r} in {st.where}")
        if len(ids) > 1:
            raise ConfigError(f"results show: id prefix {rid!r} is ambiguous "
                              f"({', '.join(ids[:2])}, ...); type more characters")
        result = st.get(ids[0])
    if result is None:
        raise ConfigError(f"results show: result {ids[0]} could not be read")
    if args.json:
        from accelbench.render import to_json

        print(to_json(result))
        return 0
    from accelbench.report.record_view import print_record

    print_record(out, result)
    return 0


def register(sub: Any) -> None:
    """Add ``results`` to ``sub``."""
    p = sub.add_parser(
        "results", help="what the store holds, newest first; `results show ID`: one in full",
        description="List the store's results, newest first (the newest "
        f"{DEFAULT_LIMIT} unless --limit or --all), or show one: accelbench results show ID "
        "(an id prefix; spec, status, throughput with CI, energy with provenance, "
        "verdicts with reasons, machine).",
        epilog="examples: accelbench results; accelbench results --framework jax --all; "
        "accelbench results show 3f2a9c; accelbench results to-target; accelbench results "
        "to-target 179bd2",
    )
    add_options(p, ResultsOptions, only=("words",), filled=True)
    add_filter_args(p)
    add_options(p, ResultsOptions, skip=("words",), filled=True)
    p.set_defaults(handler=cmd_results)
