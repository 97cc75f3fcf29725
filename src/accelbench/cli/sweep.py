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
from accelbench.options import MAX_INT32, option
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
    from accelbench.cli.args import spelled_options

    spelled_options(ToTargetOptions, args)  # --target, --seeds ... need --to-target
    if args.to_target:
        return _cmd_totarget_sweep(args, err)
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


#: The case, measurement and energy options that mean something with ``--to-target``
#: (field names); any other given with it is refused in one line.
TOTARGET_APPLIES = frozenset({"size", "framework", "device", "threads", "max_time_s",
                              "idle_s", "cpu_tdp_w", "node_meter", "node_meter_cmd"})


@dataclass(frozen=True, kw_only=True, slots=True)
class ToTargetOptions:
    """``sweep --to-target``: the runs to a target made at each setting
    (docs/totarget.md)."""

    to_target: bool = option(
        False, flag="--to-target", help="at each setting, train WORKLOAD to a quality target "
        "(as accelbench train) instead of measuring throughput: time- and energy-to-target, "
        "their frontier and Zeus's cost; --size defaults to tiny, --max-time caps each run "
        "(default 300), --threads (default 1), --idle-s, --cpu-tdp-w and --node-meter "
        "apply")
    target: str | None = option(None, flag="--target", nonempty=True, metavar="VALUE|auto",
                                requires=("to_target",), default_text="default: auto",
                                help="the held-out metric each run trains to (as train's)")
    seeds: int | None = option(None, flag="--seeds", lo=1, hi=100, metavar="N",
                               requires=("to_target",), default_text="default 1",
                               help="runs per setting, seeds 0..N-1")
    eval_every: int | None = option(None, flag="--eval-every", lo=1, hi=MAX_INT32,
                                    metavar="SAMPLES", requires=("to_target",),
                                    default_text="default 512",
                                    help="training samples between evaluations")
    eta: float | None = option(None, flag="--eta", lo=0.0, hi=1.0, requires=("to_target",),
                               default_text="default 0.5",
                               help="Zeus's weight of energy against time: cost = eta x "
                               "energy + (1 - eta) x max power x time")


def _refuse_what_does_not_apply(args: argparse.Namespace) -> None:
    """One line for the first case, measurement or energy option given with
    ``--to-target`` that means nothing there."""
    from accelbench.options import field_options
    from accelbench.spec import MeasurementPolicy

    for cls, filled in ((RunChoices, True), (MeasurementPolicy, False),
                        (MeterOptions, False), (FrontierPick, True)):
        default = cls()
        for fo in field_options(cls):
            if fo.opt.flag is None or fo.name in TOTARGET_APPLIES or not hasattr(args, fo.name):
                continue
            value = getattr(args, fo.name)
            typed = (value != getattr(default, fo.name)) if filled else value is not None
            if typed or getattr(args, f"{fo.name}_off", None):
                raise ConfigError(f"{fo.opt.name} does not apply with --to-target (each "
                                  "setting trains the workload's recipe to its target)")
    if args.device not in ("cpu", "auto"):
        raise ConfigError(f"sweep --to-target trains on the CPU so far; --device {args.device} "
                          "is not built yet")


def _cmd_totarget_sweep(args: argparse.Namespace, err: Console) -> int:
    from accelbench.sweeping import ToTargetSweep, run_totarget_sweep
    from accelbench.totarget.energy import Metering
    from accelbench.totarget.frontier import DEFAULT_ETA, frontier_lines
    from accelbench.totarget.outcome import Limits
    from accelbench.totarget.recipes import recipe_for
    from accelbench.totarget.run import describe, parse_target, trainer

    _refuse_what_does_not_apply(args)
    threads = args.threads or 1  # train's default: one thread
    trainer(args.framework, threads=threads)
    # The recipes' size is tiny; sweep's --size default (a throughput case's) does not say.
    size = "tiny" if args.size == RunChoices().size else args.size
    recipe = recipe_for(args.workload, size)
    limits = Limits(target=parse_target(args.target or "auto", recipe),
                    eval_every=args.eval_every or 512,
                    max_time_s=args.max_time_s if args.max_time_s is not None else 300.0,
                    max_samples=10_000_000)
    metering = Metering(cpu_tdp_w=args.cpu_tdp_w,
                        idle_s=args.idle_s if args.idle_s is not None else 3.0,
                        node_meter=args.node_meter, node_meter_cmd=args.node_meter_cmd)
    node = metering.node()  # refused here, before any setting changes
    if node is not None:
        node.close()
    plan = ToTargetSweep(recipe=recipe, limits=limits, seeds=args.seeds or 1,
                         metering=metering, framework=args.framework, threads=threads,
                         eta=DEFAULT_ETA if args.eta is None else args.eta)

    def show(recs: list[Any]) -> None:
        knobs = ", ".join(f"{k}={v:g}" for k, v in recs[0].settings.items())
        for rec in recs:
            err.print(f"{knobs}: {describe(rec)}", highlight=False, markup=False,
                      soft_wrap=True)

    sid, fr = run_totarget_sweep(plan, knobs_of(args), gpu=args.gpu, suite_id=args.suite_id,
                                 db=args.db, on_group=show)
    if args.json:
        print(jsonout.dumps({"suite_id": sid, **fr.to_dict()}, indent=2))
    else:
        print(f"# sweep {sid}: {recipe.workload} {recipe.size} to held-out {recipe.metric} "
              f"{limits.target:.4g}; energy-to-target vs time-to-target (* = on the "
              "frontier)")
        for line in frontier_lines(fr):
            print(line)
    return 0 if any(p.reached for p in fr.points) else 1


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
    add_options(p, ToTargetOptions, title="to a target", filled=False)
    p.set_defaults(handler=_cmd_sweep)

    p = sub.add_parser("sweep-report", help="the throughput-energy frontier of a stored sweep")
    add_options(p, FrontierOptions, only=("suite_id",), filled=True)
    add_options(p, FrontierPick, filled=True)
    add_options(p, FrontierOptions, skip=("suite_id",), filled=True)
    p.set_defaults(handler=_cmd_sweep_report)
