"""``accelbench sweep``: one workload over device settings (power limits, locked clocks,
CPU frequency, RAPL limits), each a case of a resumable suite, and the throughput-energy
frontier; ``accelbench sweep-report SUITE_ID`` prints a stored sweep's frontier."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench import jsonout, sweeping
from accelbench.cli.args import add_measurement_args, add_options, options_from_args
from accelbench.cli.flags import WorkloadArg
from accelbench.errors import ConfigError
from accelbench.keywords import keywords_of
from accelbench.options import option
from accelbench.spec import MeterOptions, RunChoices
from accelbench.sweeping import FrontierPick, SweepKnobs


def knobs_of(args: argparse.Namespace) -> SweepKnobs:
    """The knobs typed."""
    return options_from_args(SweepKnobs, args)


def plan_settings(args: argparse.Namespace) -> tuple[list[Any], Any, list[Any]]:
    """(settings in sweep order, the knobs' target, the knobs) from the options
    (:func:`accelbench.sweeping.plan_settings`). Changes nothing."""
    return sweeping.plan_settings(knobs_of(args), args.gpu, args.device)


def _cmd_sweep(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench import api
    from accelbench.progress import ProgressDisplay
    from accelbench.spec import MeasurementPolicy
    from accelbench.store.base import display_url

    knobs = knobs_of(args)
    sid = args.suite_id or api.new_suite_id("sweep")
    db = f" --db {display_url(args.db)}" if args.db else ""  # never a password in clear
    resume = f"accelbench{db} sweep {args.workload} ... --suite-id {sid}"
    started = [False]
    with ProgressDisplay(err, enabled=not args.quiet) as display:
        def on_event(ev: Any) -> None:
            if ev.kind == "plan":
                started[0] = True
                if not args.quiet:
                    err.print(f"sweep {sid}: {ev.total} setting(s); resume with: {resume}",
                              highlight=False, markup=False)
            display.suite_event(ev)

        try:
            swept = api.sweep(
                args.workload, options_from_args(RunChoices, args),
                policy=options_from_args(MeasurementPolicy, args),
                meters=options_from_args(MeterOptions, args), gpu=args.gpu, suite_id=sid,
                db=args.db, max_slowdown=args.max_slowdown, on_event=on_event,
                **{name: getattr(knobs, fo.name) for name, fo in
                   keywords_of(SweepKnobs).items()})
        except BaseException:
            if started[0] and not args.quiet:  # bad input stays one line
                err.print(f"sweep {sid} stopped; settings restored, finished cases are "
                          f"stored. Resume with: {resume}", highlight=False, markup=False)
            raise
    return _print_frontier(args, sid, swept.results)


def _print_frontier(args: argparse.Namespace, sid: str, results: list[Any]) -> int:
    from accelbench.report.frontier import frontier_from_results, frontier_lines

    fr = frontier_from_results(results, max_slowdown=args.max_slowdown)
    if args.json:
        print(jsonout.dumps({"suite_id": sid, **fr.to_dict()}, indent=2))
    else:
        print(f"# sweep {sid}: throughput vs energy per sample (95% CIs; * = on the frontier)")
        for line in frontier_lines(fr):
            print(line)
    return 0 if fr.points else 1


def _cmd_sweep_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.store import ResultFilter, open_store

    with open_store(args.db, create=False) as st:
        stored = st.query(ResultFilter(suite_id=args.suite_id))
    if not stored:
        raise ConfigError(f"no results with suite id {args.suite_id!r} in the store")
    if not any(r.spec.settings.given() for r in stored):
        raise ConfigError(f"suite {args.suite_id!r} is no sweep (none of its {len(stored)} "
                          "result(s) ran at a device setting): see accelbench results "
                          f"--suite-id {args.suite_id}")
    return _print_frontier(args, args.suite_id, stored)


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepOptions:
    """``accelbench sweep WORKLOAD`` beside the knobs, the case, measurement and energy
    options."""

    gpu: int | None = option(None, flag="--gpu", lo=0, hi=1023, metavar="N",
                             help="the GPU whose knobs are set (default: --device's index)")
    suite_id: str | None = option(
        None, flag="--suite-id", nonempty=True,
        help="resume this sweep: settings already measured are skipped")


@dataclass(frozen=True, kw_only=True, slots=True)
class FrontierOptions:
    """How ``sweep`` and ``sweep-report SUITE_ID`` print the frontier (beside
    :class:`~accelbench.sweeping.FrontierPick`)."""

    suite_id: str = option(flag="suite_id", nonempty=True, metavar="SUITE_ID", help="")
    json: bool = option(False, flag="--json", help="print JSON")


def register(sub: Any) -> None:
    """Add ``sweep`` and ``sweep-report`` to ``sub``."""
    p = sub.add_parser(
        "sweep", help="one workload over power limits / clocks: the throughput-energy frontier",
        description="Run WORKLOAD once per device setting, in the order given (a resumable "
        "suite), setting each before its case and restoring the original after it (also on "
        "errors, Ctrl-C and SIGTERM; after a SIGKILL the next accelbench command on this host "
        "restores it). Values: comma-separated, or auto (about 8 steps over the allowed "
        "range). Several knobs: every combination. Needs root (or the file's owner) to change "
        "settings.",
    )
    add_options(p, WorkloadArg, filled=True)
    add_options(p, SweepKnobs, filled=True)
    add_options(p, SweepOptions, only=("gpu",), filled=True)
    # --data: one case a time with `run` (a sweep's cases read synthetic data only, yet).
    add_options(p, RunChoices, title="case", skip=("threads", "tag", "data", "loader_workers",
                                                      "input_analysis"),
                filled=True)
    add_measurement_args(p, repeats=False)
    add_options(p, MeterOptions, title="energy")
    add_options(p, SweepOptions, only=("suite_id",), filled=True)
    add_options(p, FrontierPick, filled=True)
    add_options(p, FrontierOptions, skip=("suite_id",), filled=True)
    p.set_defaults(handler=_cmd_sweep)

    p = sub.add_parser("sweep-report", help="the throughput-energy frontier of a stored sweep")
    add_options(p, FrontierOptions, only=("suite_id",), filled=True)
    add_options(p, FrontierPick, filled=True)
    add_options(p, FrontierOptions, skip=("suite_id",), filled=True)
    p.set_defaults(handler=_cmd_sweep_report)
