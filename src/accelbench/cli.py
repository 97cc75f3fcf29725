"""The ``accelbench`` command: parse, build the call, print. Logic lives in the API."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console

from accelbench import __version__
from accelbench.cliargs import add_filter_args, add_framework_arg, add_policy_args, result_filter
from accelbench.errors import AccelbenchError, ConfigError

EXIT_BAD_INPUT = 2

Handler = Callable[[argparse.Namespace, Console, Console], int]

#: Modules that add subcommands; each has ``register(subparsers)`` and sets ``handler``.
COMMAND_MODULES: tuple[str, ...] = ("accelbench.commands.report", "accelbench.commands.ops")


def _energy_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("energy")
    g.add_argument("--cpu-tdp-w", type=float,
                   help="CPU TDP in W: estimate CPU power where no sensor exists (labelled)")
    g.add_argument("--meter-interval-ms", type=float, help="power sampling interval (default 10)")
    g.add_argument("--counter-poll-ms", type=float,
                   help="poll interval of CPU energy counters, RAPL (default 100)")
    g.add_argument("--idle-s", type=float, help="idle baseline before each case (default 3)")
    g.add_argument("--no-idle", action="store_true", help="skip the idle baseline")
    g.add_argument("--no-energy", action="store_true", help="do not measure power at all")


def _energy_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "energy": not args.no_energy,
        "cpu_tdp_w": args.cpu_tdp_w,
        "meter_interval_ms": args.meter_interval_ms,
        "counter_poll_ms": args.counter_poll_ms,
        "idle_s": 0.0 if args.no_idle else args.idle_s,
    }


def _cmd_list(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.runner.facts import describe_workloads, list_items, uncached
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


def _cmd_devices(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.devices.report import devices_report

    report = devices_report()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    cpu = report["cpu"]
    out.print(f"[bold]CPU[/bold]  {cpu['model']} ({cpu['arch']})")
    out.print(
        f"     {cpu['physical_cores']} physical / {cpu['logical_cores']} logical cores, "
        f"{cpu['usable_cores']} usable; {cpu['memory_bytes'] / 2**30:.1f} GiB memory; "
        f"ISA: {', '.join(cpu['isa']) or '-'}"
    )
    out.print(f"[bold]Python[/bold]  {report['software']['python']}")
    for fw, info in report["frameworks"].items():
        if info["error"]:
            out.print(f"[bold]{fw}[/bold]  unavailable: {info['error']}", highlight=False)
            continue
        v = info["versions"]
        libs = ", ".join(f"{k} {v[k]}" for k in ("cuda", "hip", "cudnn", "jaxlib")
                         if v.get(k))
        out.print(f"[bold]{fw}[/bold]  {v.get(fw, '?')}" + (f" ({libs})" if libs else ""),
                  highlight=False)
        for d in info["devices"]:
            mem = f", {d['memory_bytes'] / 2**30:.1f} GiB" if d.get("memory_bytes") else ""
            runtime = f", {d['runtime']}" if d.get("runtime") else ""
            driver = f", driver {d['driver_version']}" if d.get("driver_version") else ""
            out.print(f"     {d['device']}  {d['name']}{mem}{runtime}{driver}; "
                      f"precisions: {', '.join(d['precisions'])}", highlight=False)
    for s in report.get("sensors", []):
        state = "readable" if s["readable"] else f"unavailable ({s['reason']})"
        out.print(f"[bold]sensor[/bold] {s['name']}: {state}", highlight=False)
    return 0


def _cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench import api
    from accelbench.progress import ProgressDisplay
    from accelbench.render import print_result

    with ProgressDisplay(err, enabled=not args.quiet) as display:
        display.begin(f"{args.workload} {args.size}")
        result = api.run(
            args.workload, size=args.size, batch_size=args.batch_size,
            precision=args.precision, device=args.device, framework=args.framework,
            threads=args.threads, iterations=args.iterations, target_ci=args.target_ci,
            max_time=args.max_time, timeout=args.timeout, tag=args.tag, db=args.db,
            store=not args.no_store, plugins=args.plugin, on_progress=display.case_progress,
            **_energy_kwargs(args),
        )
    if args.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print_result(out, result)
    return 0 if result.status == "ok" else 1


def _cmd_suite(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench import api
    from accelbench.progress import ProgressDisplay
    from accelbench.render import results_table
    from accelbench.store import ResultFilter, open_store

    if args.dry_run:
        api.load_plugins(args.plugin)
        cases = api.plan_suite(args.name, device=args.device, framework=args.framework,
                               size=args.size, precisions=args.precision,
                               workloads=args.workload, threads=args.threads, tag=args.tag)
        for c in cases:
            s = c.spec
            print(f"{s.workload}\t{s.size}\t{s.batch_size}\t{s.precision}\t{s.device}"
                  f"\t{s.framework}")
        return 0
    with ProgressDisplay(err, enabled=not args.quiet) as display:
        sid, _measured = api.suite(
            args.name, device=args.device, framework=args.framework, size=args.size,
            precisions=args.precision, workloads=args.workload, threads=args.threads,
            iterations=args.iterations, target_ci=args.target_ci, max_time=args.max_time,
            timeout=args.timeout, tag=args.tag,
            suite_id=args.suite_id, force=args.force, db=args.db, plugins=args.plugin,
            on_event=display.suite_event, **_energy_kwargs(args),
        )
    with open_store(args.db) as st:
        stored = st.query(ResultFilter(suite_id=sid))
    if args.json:
        print(json.dumps({"suite_id": sid, "results": [r.summary() for r in stored]}, indent=2))
    else:
        out.print(results_table(list(reversed(stored)), title=f"suite {sid}"))
        if not args.quiet:
            err.print(f"resume or extend with: accelbench suite {args.name} --suite-id {sid}",
                      highlight=False)
    return 0


def _cmd_power(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.meters import watch_power

    if args.interval_ms < 1:
        raise ConfigError(f"--interval-ms must be >= 1, got {args.interval_ms}")
    if args.duration is not None and args.duration <= 0:
        raise ConfigError(f"--duration must be > 0, got {args.duration}")
    watch_power(args.interval_ms, args.duration, out)
    return 0


def _cmd_results(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.render import results_table, to_csv, to_json
    from accelbench.store import open_store

    flt = result_filter(args)
    with open_store(args.db, create=False) if args.db else open_store(None) as st:
        results = st.query(flt)
    if args.json:
        print(to_json(results))
    elif args.csv:
        sys.stdout.write(to_csv(results))
    elif results:
        out.print(results_table(results))
    else:
        out.print("no results match")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelbench",
        description="Benchmark deep-learning training: throughput and energy, stored and compared.",
    )
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    parser.add_argument("--db", help="results store: SQLAlchemy URL or SQLite path "
                        "(default: $ACCELBENCH_DB or the user data directory)")
    parser.add_argument("--plugin", action="append", default=[],
                        help="module or .py file that registers workloads (repeatable)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="registered workloads")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_cmd_list)

    p = sub.add_parser("devices", help="CPU, GPUs and the precisions each supports")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_cmd_devices)

    p = sub.add_parser("run", help="measure one case and store it")
    p.add_argument("workload")
    p.add_argument("--size", default="paper", help="tiny, small or paper (default)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--precision", default="fp32", help="fp32, tf32, amp_fp16, amp_bf16")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps (torch), tpu:N (jax)")
    add_framework_arg(p)
    add_policy_args(p)
    _energy_args(p)
    p.add_argument("--no-store", action="store_true", help="measure without saving")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=_cmd_run)

    p = sub.add_parser("suite", help="run a named matrix of cases (resumable)")
    p.add_argument("name", help="quick, small, paper or frameworks")
    p.add_argument("--device", default="cpu")
    add_framework_arg(p)
    p.add_argument("--size", help="size of a suite that takes one (frameworks: default tiny)")
    p.add_argument("--precision", action="append", default=[],
                   help="replace the suite's precisions (repeatable)")
    p.add_argument("--workload", action="append", default=[],
                   help="only these workloads (repeatable)")
    add_policy_args(p)
    _energy_args(p)
    p.add_argument("--suite-id", help="resume this suite: cases already stored are skipped")
    p.add_argument("--force", action="store_true", help="rerun cases already stored")
    p.add_argument("--dry-run", action="store_true", help="list the cases, run nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_cmd_suite)

    p = sub.add_parser("power", help="live power of every sensor on this machine")
    p.add_argument("--interval-ms", type=int, default=500, help="refresh interval (default 500)")
    p.add_argument("--duration", type=float, help="seconds to watch (default: until Ctrl-C)")
    p.set_defaults(handler=_cmd_power)

    p = sub.add_parser("results", help="what the store holds, newest first")
    add_filter_args(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    p.set_defaults(handler=_cmd_results)
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def _console(*, stderr: bool) -> Console:
    probe = Console(stderr=stderr)
    # Scripts and pipes get full-width tables, not rich's 80-column default.
    return probe if probe.is_terminal else Console(stderr=stderr, width=200)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    out = _console(stderr=False)
    err = _console(stderr=True)
    try:
        if args.plugin:
            from accelbench.api import load_plugins

            load_plugins(args.plugin)
        handler: Handler = args.handler
        return handler(args, out, err)
    except AccelbenchError as exc:
        if args.debug:
            raise
        print(f"accelbench: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("accelbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`accelbench results --json | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
