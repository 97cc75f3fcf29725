"""``accelbench sweep``: one workload over device settings (power limits, locked clocks,
CPU frequency, RAPL limits), each a case of a resumable suite, and the throughput-energy
frontier; ``accelbench sweep-report SUITE_ID`` prints a stored sweep's frontier."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import (
    add_measurement_args,
    add_options,
    finite,
    integer,
    name_arg,
    nonempty,
    options_from_args,
    parse_float,
)
from accelbench.errors import ConfigError

#: option -> (DeviceSettings field, grain of ``auto`` values in the knob's unit)
KNOB_OPTIONS: dict[str, tuple[str, float]] = {
    "power_limits": ("power_limit_w", 1.0),
    "sm_clocks": ("sm_clock_mhz", 1.0),
    "mem_clocks": ("mem_clock_mhz", 1.0),
    "cpu_max_freqs": ("cpu_max_freq_khz", 100_000.0),
    "cpu_power_limits": ("cpu_power_limit_w", 1.0),
}
_INT_KNOBS = ("sm_clock_mhz", "mem_clock_mhz", "cpu_max_freq_khz")


def value_list(text: str) -> list[float] | str:
    """``auto`` or comma-separated positive numbers, in the order given."""
    if text.strip().lower() == "auto":
        return "auto"
    values = []
    for part in text.split(","):
        try:
            v = parse_float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{part.strip()!r} is not a number (give e.g. 200,250,300 or auto)") from None
        if not v > 0 or v != v or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{part.strip()!r} must be a positive number")
        values.append(v)
    return values


def _gpu_target(args: argparse.Namespace) -> str:
    """The vendor device string of the GPU whose knobs the sweep sets."""
    from accelbench.tuning.base import gpu_device

    index = args.gpu
    if index is None:
        kind, _, idx = args.device.partition(":")
        if kind not in ("cuda", "rocm", "hip"):
            raise ConfigError("GPU knobs need a GPU: pass --device cuda:N, or --gpu N for the "
                              "GPU to tune")
        index = int(idx) if idx.isdigit() else 0
    return gpu_device(index)


def plan_settings(args: argparse.Namespace) -> tuple[list[Any], Any, list[Any]]:
    """(settings in sweep order, the knobs' target, the knobs) from the options; ``auto``
    resolved against each knob's allowed range. Changes nothing."""
    from accelbench.spec import DeviceSettings
    from accelbench.tuning.base import GPU_KNOBS, UNITS, knob_for, pick, spread
    from accelbench.tuning.guard import Target

    given = {opt: getattr(args, opt) for opt in KNOB_OPTIONS if getattr(args, opt) is not None}
    if not given:
        raise ConfigError("nothing to sweep: give --power-limits, --sm-clocks, --mem-clocks, "
                          "--cpu-max-freqs or --cpu-power-limits")
    tunes_gpu = any(KNOB_OPTIONS[o][0] in GPU_KNOBS for o in given)
    if args.gpu is not None and not tunes_gpu:
        raise ConfigError("--gpu names the GPU whose knobs are set; it needs a GPU knob "
                          "(--power-limits, --sm-clocks or --mem-clocks)")
    gpu = _gpu_target(args) if tunes_gpu else None
    target = Target(gpu=gpu)
    axes: list[list[tuple[str, float | int]]] = []
    knobs = []
    for opt, values in given.items():
        name, grain = KNOB_OPTIONS[opt]
        knob = knob_for(target.device_of(name), name)
        knobs.append(knob)
        allowed = list(knob.allowed())
        if values == "auto":
            values = (pick(allowed) if name in ("sm_clock_mhz", "mem_clock_mhz")
                      else spread(min(allowed), max(allowed), grain=grain))
        # Out-of-range values are refused here, before the first setting changes anything.
        for v in values:
            if not min(allowed) <= v <= max(allowed):
                raise ConfigError(
                    f"--{opt.replace('_', '-')} {v:g} is outside {knob.device}'s range "
                    f"{min(allowed):g}-{max(allowed):g} {UNITS[name]}")
        axes.append([(name, int(v) if name in _INT_KNOBS else v) for v in values])
    settings = [DeviceSettings(**dict(combo))  # type: ignore[arg-type]
                for combo in itertools.product(*axes)]
    return settings, target, knobs


def _cmd_sweep(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench import api
    from accelbench.execution.orchestrate import run_cases
    from accelbench.progress import ProgressDisplay
    from accelbench.spec import MeasurementPolicy, MeterOptions, RunChoices
    from accelbench.store import ResultFilter, open_store
    from accelbench.tuning import guard

    choices = options_from_args(RunChoices, args)
    meters = options_from_args(MeterOptions, args)
    policy = options_from_args(MeasurementPolicy, args)
    settings, target, knobs = plan_settings(args)
    # Before anything changes: a knob this process may not set is one line, exit 2.
    guard.check_privileges(knobs)
    cases = [api.plan_run(args.workload, choices, policy=policy, meters=meters, settings=s)
             for s in settings]
    sid = args.suite_id or api.new_suite_id("sweep")
    from accelbench.store.base import display_url

    db = f" --db {display_url(args.db)}" if args.db else ""  # never a password in clear
    resume = f"accelbench{db} sweep {args.workload} ... --suite-id {sid}"
    with open_store(args.db) as st:
        st.check_writable()
        with ProgressDisplay(err, enabled=not args.quiet) as display:
            def on_event(ev: Any) -> None:
                if ev.kind == "plan" and not args.quiet:
                    err.print(f"sweep {sid}: {ev.total} setting(s); resume with: {resume}",
                              highlight=False, markup=False)
                display.suite_event(ev)

            try:
                run_cases(st, sid, cases, False, on_event,
                          case_context=lambda c: guard.applied(st, c.spec.settings, target))
            except BaseException:
                if not args.quiet:
                    err.print(f"sweep {sid} stopped; settings restored, finished cases are "
                              f"stored. Resume with: {resume}", highlight=False, markup=False)
                raise
        stored = st.query(ResultFilter(suite_id=sid))
    return _print_frontier(args, sid, stored)


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


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-slowdown", type=finite(0.0, 0.999), default=0.1, metavar="F",
                   help="pick the least energy per sample among settings within this fraction "
                        "of the fastest's throughput (default 0.1)")
    p.add_argument("--json", action="store_true", help="print JSON")


def register(sub: Any) -> None:
    """Add ``sweep`` and ``sweep-report`` to ``sub``."""
    from accelbench.spec import MeterOptions, RunChoices

    p = sub.add_parser(
        "sweep", help="one workload over power limits / clocks: the throughput-energy frontier",
        description="Run WORKLOAD once per device setting, in the order given (a resumable "
        "suite), setting each before its case and restoring the original after it (also on "
        "errors, Ctrl-C and SIGTERM; after a SIGKILL the next accelbench command on this host "
        "restores it). Values: comma-separated, or auto (about 8 steps over the allowed "
        "range). Several knobs: every combination. Needs root (or the file's owner) to change "
        "settings.",
    )
    p.add_argument("workload", type=name_arg)
    p.add_argument("--power-limits", type=value_list, metavar="W,...|auto",
                   help="GPU power limits in W (NVML power limit, AMD power cap)")
    p.add_argument("--sm-clocks", type=value_list, metavar="MHZ,...|auto",
                   help="locked GPU core clocks in MHz (NVIDIA)")
    p.add_argument("--mem-clocks", type=value_list, metavar="MHZ,...|auto",
                   help="locked GPU memory clocks in MHz (NVIDIA)")
    p.add_argument("--cpu-max-freqs", type=value_list, metavar="KHZ,...|auto",
                   help="cpufreq scaling_max_freq in kHz (every policy)")
    p.add_argument("--cpu-power-limits", type=value_list, metavar="W,...|auto",
                   help="RAPL package long-term power limits in W")
    p.add_argument("--gpu", type=integer(0, 1023), metavar="N",
                   help="the GPU whose knobs are set (default: --device's index)")
    add_options(p, RunChoices, title="case", skip=("threads", "tag"), filled=True)
    add_measurement_args(p, repeats=False)
    add_options(p, MeterOptions, title="energy")
    p.add_argument("--suite-id", type=nonempty,
                   help="resume this sweep: settings already measured are skipped")
    _report_args(p)
    p.set_defaults(handler=_cmd_sweep)

    p = sub.add_parser("sweep-report", help="the throughput-energy frontier of a stored sweep")
    p.add_argument("suite_id", type=nonempty, metavar="SUITE_ID")
    _report_args(p)
    p.set_defaults(handler=_cmd_sweep_report)

