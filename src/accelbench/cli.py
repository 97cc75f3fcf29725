"""The ``accelbench`` command: parse, build the call, print. Logic lives in the API."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rich.console import Console

from accelbench import __version__, jsonout
from accelbench.cliargs import (
    add_fast_path_args,
    add_filter_args,
    add_framework_arg,
    add_policy_args,
    add_topology_args,
    fast_path_kwargs,
    finite,
    integer,
    nonempty,
    policy_kwargs,
    result_filter,
    topology_kwargs,
)
from accelbench.errors import AccelbenchError, AccelbenchWarning, ConfigError
from accelbench.spec import BOUNDARIES, MAX_ENERGY_TRIALS

EXIT_BAD_INPUT = 2
EXIT_SIGTERM = 128 + 15


class OneLineParser(argparse.ArgumentParser):
    """argparse with errors as ONE line and exit 2 (no multi-line usage dump): scripts
    and people both read the first line only. ``--help`` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        first = message.splitlines()[0] if message else "invalid arguments"
        self.exit(EXIT_BAD_INPUT, f"accelbench: error: {first} (see {self.prog} --help)\n")


class _Terminated(BaseException):
    """SIGTERM, turned into an exception so that a suite ends as on Ctrl-C."""


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise _Terminated


#: Options of the top-level parser that may also follow the subcommand
#: (``accelbench results --db x.db``); given twice, the later one wins.
def _add_global_args(p: argparse.ArgumentParser, *, sub: bool) -> None:
    suffix = "_sub" if sub else ""
    # After the subcommand the defaults are suppressed, so that an option given only
    # before it is not reset by the subparser (argparse copies its namespace over).
    db_default: Any = argparse.SUPPRESS if sub else None
    plugin_default: Any = argparse.SUPPRESS if sub else []
    flag_default: Any = argparse.SUPPRESS if sub else False
    p.add_argument("--db", dest=f"db{suffix}", type=nonempty, default=db_default,
                   help="results store: SQLAlchemy URL or SQLite path "
                   "(default: $ACCELBENCH_DB or the user data directory)")
    p.add_argument("--plugin", dest=f"plugin{suffix}", action="append", type=nonempty,
                   default=plugin_default,
                   help="module or .py file that registers workloads (repeatable; also "
                   "$ACCELBENCH_PLUGINS, separated by ':')")
    p.add_argument("--debug", dest=f"debug{suffix}", action="store_true",
                   default=flag_default, help="show tracebacks")
    p.add_argument("-q", "--quiet", dest=f"quiet{suffix}", action="store_true",
                   default=flag_default, help="no progress output")


def _merge_globals(args: argparse.Namespace) -> None:
    if hasattr(args, "db_sub"):
        args.db = args.db_sub
    args.plugin = [*args.plugin, *getattr(args, "plugin_sub", [])]
    args.debug = args.debug or getattr(args, "debug_sub", False)
    args.quiet = args.quiet or getattr(args, "quiet_sub", False)

Handler = Callable[[argparse.Namespace, Console, Console], int]

#: Modules that add subcommands; each has ``register(subparsers)`` and sets ``handler``.
COMMAND_MODULES: tuple[str, ...] = (
    "accelbench.commands.report", "accelbench.commands.ops", "accelbench.commands.energy",
    "accelbench.commands.sweep",
)


def _tdp_arg(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--cpu-tdp-w", type=finite(0.0, 5000.0, lo_open=True),
                   help="CPU TDP in W: estimate CPU power where no sensor exists (labelled)")


def _energy_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("energy")
    _tdp_arg(g)
    g.add_argument("--meter-interval-ms", type=finite(0.5, 10_000.0),
                   help="power sampling interval (default 10)")
    g.add_argument("--counter-poll-ms", type=finite(0.5, 60_000.0),
                   help="poll interval of CPU energy counters, RAPL (default 100)")
    g.add_argument("--idle-s", type=finite(0.0, 3600.0),
                   help="idle baseline before each case (default 3)")
    g.add_argument("--no-idle", action="store_true", help="skip the idle baseline")
    g.add_argument("--no-energy", action="store_true",
                   help="do not measure power at all (recorded as unavailable, with why)")
    g.add_argument("--energy-trials", type=integer(1, MAX_ENERGY_TRIALS), metavar="K",
                   help="measure energy over K windows after random delays; energy per sample "
                        "is their median, with the spread (default 1)")
    g.add_argument("--settle-s", type=finite(0.0, 3600.0), metavar="S",
                   help="thermal settle: train until power and temperature stop drifting, at "
                        "most S seconds, before measuring (default 0: none)")
    g.add_argument("--boundary", choices=BOUNDARIES,
                   help="what the energy figure covers: device (default; the paper's), "
                        "device+host (adds CPU packages and DRAM), node (an external meter)")
    g.add_argument("--node-meter", type=nonempty, metavar="NAME",
                   help="read a node meter beside the devices: ipmi (ipmitool dcmi), cmd, or "
                        "one a plugin registers")
    g.add_argument("--node-meter-cmd", type=nonempty, metavar="CMD",
                   help="node meter: a shell command printing the node's power in watts "
                        "(sampled at 1 Hz)")


def _energy_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The typed energy options as :func:`accelbench.api.make_meter_options` takes them."""
    if args.no_energy:
        given = [flag for flag, value in (
            ("--cpu-tdp-w", args.cpu_tdp_w), ("--meter-interval-ms", args.meter_interval_ms),
            ("--counter-poll-ms", args.counter_poll_ms), ("--idle-s", args.idle_s),
            ("--energy-trials", args.energy_trials), ("--settle-s", args.settle_s),
            ("--boundary", args.boundary), ("--node-meter", args.node_meter),
            ("--node-meter-cmd", args.node_meter_cmd),
        ) if value is not None] + (["--no-idle"] if args.no_idle else [])
        if given:
            raise ConfigError(f"{given[0]} conflicts with --no-energy (nothing is measured)")
    if args.no_idle and args.idle_s is not None:
        raise ConfigError("--idle-s conflicts with --no-idle")
    return {
        "energy": not args.no_energy,
        "cpu_tdp_w": args.cpu_tdp_w,
        "meter_interval_ms": args.meter_interval_ms,
        "counter_poll_ms": args.counter_poll_ms,
        "idle_s": 0.0 if args.no_idle else args.idle_s,
        "energy_trials": args.energy_trials,
        "settle_s": args.settle_s,
        "boundary": args.boundary,
        "node_meter": args.node_meter,
        "node_meter_cmd": args.node_meter_cmd,
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


def _warn_noisy(err: Console, results: Sequence[Any]) -> None:
    """One warning line per noisy case, and the measurement's own notes (a minimum reached
    past --max-time), so a number from a busy machine never goes out unlabelled."""
    for r in results:
        label = f"{r.spec.workload} {r.spec.precision} ({r.id[:8]})"
        if r.noisy:
            why = "; ".join(r.noise_reasons) or "competition on the device"
            err.print(f"accelbench: warning: {label} measured on a busy machine: {why}",
                      highlight=False, markup=False, soft_wrap=True)
        for note in r.noise.get("measure_notes") or ():
            err.print(f"accelbench: note: {label}: {note}", highlight=False, markup=False,
                      soft_wrap=True)


def _say_estimate(err: Console, spec: Any, db: str | None, *, always: bool) -> None:
    """Print how long the case will take (a paper-size case on a CPU takes minutes)."""
    from accelbench.runner.estimate import estimate_case, fmt_duration
    from accelbench.store import open_store

    try:
        with open_store(db) as st:
            est = estimate_case(spec, st)
    except AccelbenchError:
        est = estimate_case(spec, None)
    if est is None:
        if always:
            err.print(f"{spec.workload} {spec.size} on {spec.device}: no basis for a time "
                      "estimate yet (no earlier run, no cached FLOP count)", highlight=False)
        return
    if always or est.seconds > 60:
        err.print(f"{spec.workload} {spec.size} bs={spec.batch_size} {spec.precision} on "
                  f"{spec.device}: about {fmt_duration(est.seconds)} (step ~"
                  f"{est.step_s * 1e3:,.0f} ms; estimate from {est.basis})", highlight=False)


def _cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench import api
    from accelbench.progress import ProgressDisplay
    from accelbench.render import print_group, print_result

    meters = api.make_meter_options(**_energy_kwargs(args))
    policy = policy_kwargs(args)
    topology = api.make_topology(**topology_kwargs(args))
    fast_paths = api.make_fast_paths(**fast_path_kwargs(args))
    if not args.quiet:
        # Validates everything the run would (bad input fails here, before any output).
        api.load_plugins(args.plugin)
        case = api.plan_run(args.workload, size=args.size, batch_size=args.batch_size,
                            precision=args.precision, device=args.device,
                            framework=args.framework, threads=args.threads, meters=meters,
                            topology=topology, fast_paths=fast_paths, **policy)
        _say_estimate(err, case.spec, args.db,
                      always=case.spec.size == "paper" and case.spec.device == "cpu")
    with ProgressDisplay(err, enabled=not args.quiet) as display:
        display.begin(f"{args.workload} {args.size}")
        results = api.run_repeats(
            args.workload, size=args.size, batch_size=args.batch_size,
            precision=args.precision, device=args.device, framework=args.framework,
            threads=args.threads, tag=args.tag, db=args.db,
            store=not args.no_store, plugins=args.plugin, on_progress=display.case_progress,
            meters=meters, topology=topology, fast_paths=fast_paths, **policy,
        )
    if args.json:
        # One object: the run's summary, or with --repeats the group's and each run's.
        print(jsonout.dumps(results[0].summary() if len(results) == 1
                            else _group_summary(results), indent=2))
    else:
        for result in results:
            print_result(out, result)
        if len(results) > 1:
            print_group(out, results)
    if not args.quiet:
        _warn_noisy(err, results)
    return 0 if all(r.status == "ok" for r in results) else 1


def _group_summary(results: Sequence[Any]) -> dict[str, Any]:
    """``run --repeats R --json``: the group's headline (two-level CI) and every run."""
    from accelbench.stats import group_stats

    ok = [r for r in results if r.status == "ok" and r.iteration_times_s]
    group = (group_stats([r.iteration_times_s for r in ok], ok[0].samples_per_step).to_dict()
             if ok else None)
    return {"suite_id": results[0].suite_id, "runs": len(results), "ok_runs": len(ok),
            "group": group, "results": [r.summary() for r in results]}


def _print_plan(args: argparse.Namespace, out: Console, cases: list[Any]) -> None:
    from accelbench.runner.estimate import estimate_case, fmt_duration
    from accelbench.store import open_store

    try:
        st: Any = open_store(args.db)
    except AccelbenchError:
        st = None
    total = 0.0
    unknown = 0
    rows = []
    try:
        for c in cases:
            est = estimate_case(c.spec, st)
            if est is None:
                unknown += 1
            else:
                total += est.seconds
            rows.append((c.spec, est))
    finally:
        if st is not None:
            st.close()
    if args.json:
        print(jsonout.dumps({"suite": args.name, "cases": [
            {**{k: getattr(s, k) for k in ("workload", "size", "batch_size", "precision",
                                           "device", "framework")},
             "repeats": s.policy.repeats, "ranks": s.topology.world_size,
             "fast_paths": list(s.fast_paths.enabled()),
             "estimate_s": e.seconds if e else None, "estimate_basis": e.basis if e else None}
            for s, e in rows], "estimate_total_s": total, "cases_without_estimate": unknown},
            indent=2))
        return
    print("workload\tsize\tbatch\tprecision\tdevice\tframework\testimate\tbasis")
    for s, e in rows:
        ranks = f" x{s.topology.world_size}" if s.topology.world_size > 1 else ""
        print(f"{s.workload}\t{s.size}\t{s.batch_size}\t{s.precision}\t{s.device}{ranks}"
              f"\t{s.framework}{''.join(f' +{n}' for n in s.fast_paths.enabled())}"
              f"\t{fmt_duration(e.seconds) if e else '?'}"
              f"\t{e.basis if e else 'no basis yet'}")
    more = f" (+ {unknown} case(s) without an estimate)" if unknown else ""
    runs = sum(c.spec.policy.repeats for c in cases)
    each = f" in {runs} run(s) (--repeats)" if runs != len(cases) else ""
    print(f"# {len(cases)} case(s){each}, about {fmt_duration(total)} in all{more}")


def _cmd_suite(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench import api
    from accelbench.progress import ProgressDisplay
    from accelbench.render import print_group, results_table
    from accelbench.store import ResultFilter, open_store

    if args.name == "status":
        return _cmd_suite_status(args, out, err)
    if args.target is not None:
        raise ConfigError(f"suite {args.name}: unexpected argument {args.target!r} "
                          "(only 'suite status SUITE_ID' takes a second one)")
    if args.launcher != "slurm":
        given = [flag for flag, value in (
            ("--partition", args.partition), ("--gres", args.gres),
            ("--cpus-per-task", args.cpus_per_task), ("--exclusive", args.exclusive or None),
        ) if value is not None]
        if given:
            raise ConfigError(f"{given[0]} applies to --launcher slurm only")
    definition = api.get_suite(args.name)
    meters = api.make_meter_options(**_energy_kwargs(args), default_idle_s=definition.idle_s)
    policy = policy_kwargs(args)
    topology = api.make_topology(**topology_kwargs(args))
    fast_paths = api.make_fast_paths(**fast_path_kwargs(args))
    if args.dry_run:
        api.load_plugins(args.plugin)
        cases = api.plan_suite(args.name, device=args.device, framework=args.framework,
                               size=args.size, precisions=args.precision,
                               workloads=args.workload, threads=args.threads, tag=args.tag,
                               policy=api.make_policy(definition.policy, **policy),
                               meters=meters, topology=topology, fast_paths=fast_paths,
                               max_ranks=args.max_ranks)
        _print_plan(args, out, cases)
        return 0
    sid = args.suite_id or api.new_suite_id(args.name)
    if args.launcher == "slurm":
        return _submit_suite(args, err, sid, meters=meters, policy=policy,
                             topology=topology, fast_paths=fast_paths)
    resume = f"accelbench suite {args.name} --suite-id {sid}"
    if args.db:
        resume = f"accelbench --db {args.db} suite {args.name} --suite-id {sid}"
    started = [False]

    def on_event(ev: Any) -> None:
        if ev.kind == "plan" and not args.quiet:
            started[0] = True
            err.print(f"suite {sid}: {ev.total} case(s); resume with: {resume}",
                      highlight=False, markup=False)
        display.suite_event(ev)

    try:
        with ProgressDisplay(err, enabled=not args.quiet) as display:
            _sid, measured = api.suite(
                args.name, device=args.device, framework=args.framework, size=args.size,
                precisions=args.precision, workloads=args.workload, threads=args.threads,
                tag=args.tag, suite_id=sid, force=args.force, db=args.db,
                plugins=args.plugin, on_event=on_event, meters=meters, topology=topology,
                fast_paths=fast_paths, max_ranks=args.max_ranks, **policy,
            )
    except (KeyboardInterrupt, _Terminated):
        if started[0]:
            err.print(f"suite {sid} stopped; finished cases are stored. Resume with: {resume}",
                      highlight=False, markup=False)
        raise
    with open_store(args.db) as st:
        stored = st.query(ResultFilter(suite_id=sid))
    if args.json:
        print(jsonout.dumps({"suite_id": sid, "results": [r.summary() for r in stored]},
                            indent=2))
    else:
        out.print(results_table(list(reversed(stored)), title=f"suite {sid}", wide=args.wide))
        print_group(out, list(reversed(stored)))  # cases run more than once (--repeats)
        if not args.quiet:
            _warn_noisy(err, measured)
            err.print(f"resume or extend with: {resume}", highlight=False, markup=False)
    return 0


def _submit_suite(args: argparse.Namespace, err: Console, sid: str, **kw: Any) -> int:
    """``suite NAME --launcher slurm``: submit the cases through submitit, print the jobs."""
    from accelbench import api
    from accelbench.launchers.slurm import SlurmLauncher, SlurmOptions, check_fleet_db
    from accelbench.store import open_store

    db_url = check_fleet_db(args.db)
    launcher = SlurmLauncher(SlurmOptions(
        partition=args.partition, gres=args.gres, time_min=args.time_min,
        folder=args.slurm_folder, cases_per_job=args.cases_per_job,
        cpus_per_task=args.cpus_per_task, exclusive=args.exclusive), db_url)
    with open_store(db_url) as st:
        before = {j.job_id for j in st.list_jobs(sid)}
    api.suite(args.name, device=args.device, framework=args.framework, size=args.size,
              precisions=args.precision, workloads=args.workload, threads=args.threads,
              tag=args.tag, suite_id=sid, force=args.force, db=db_url, plugins=args.plugin,
              meters=kw["meters"], topology=kw["topology"], fast_paths=kw["fast_paths"],
              launcher=launcher, max_ranks=args.max_ranks, **kw["policy"])
    with open_store(db_url) as st:
        jobs = [j for j in st.list_jobs(sid) if j.job_id not in before]
    status = f"accelbench --db {args.db} suite status {sid}"
    if args.json:
        print(jsonout.dumps({"suite_id": sid, "jobs": [j.to_dict() for j in jobs],
                             "status_command": status}, indent=2))
        return 0
    if not jobs:
        print(f"suite {sid}: every case is stored already; nothing submitted")
    for j in jobs:
        print(f"submitted job {j.job_id}: {len(j.case_keys)} case(s)")
    err.print(f"suite {sid}: {len(jobs)} job(s); follow with: {status}",
              highlight=False, markup=False, soft_wrap=True)
    return 0


def _cmd_suite_status(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``suite status SUITE_ID``: queued / running / done / failed per case and job."""
    from rich.table import Table

    from accelbench.launchers.slurm import refresh_states
    from accelbench.store import open_store

    if args.target is None:
        raise ConfigError("usage: accelbench suite status SUITE_ID (the id a suite printed)")
    with open_store(args.db, create=False) as st:
        refresh_states(st, st.list_jobs(args.target))
        status = st.suite_status(args.target)
    if not status.cases and not status.jobs:
        raise ConfigError(f"suite {args.target!r} has no cases, claims or jobs in this store "
                          "(check --db and the id)")
    if args.json:
        print(jsonout.dumps(status.to_dict(), indent=2))
        return 0
    table = Table(title=f"suite {status.suite_id}")
    for col in ("case", "state", "result", "runs", "job", "host", "detail"):
        table.add_column(col)
    for c in status.cases:
        table.add_row(c.label or c.case_key, c.state, c.result_status or "", str(c.runs),
                      c.job_id or "", c.host or "", c.detail)
    out.print(table)
    for j in status.jobs:
        out.print(f"job {j.job_id} ({j.launcher}): {j.state}, {len(j.case_keys)} case(s)"
                  + (f" on {j.hostname}" if j.hostname else ""), highlight=False)
    counts = status.counts()
    out.print(", ".join(f"{n} {k}" for k, n in counts.items()), highlight=False)
    return 0


def _cmd_power(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.meters import watch_power

    watch_power(args.interval_ms, args.duration, out, cpu_tdp_w=args.cpu_tdp_w)
    return 0


def _cmd_results(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.render import results_table, to_csv, to_json
    from accelbench.store import open_store

    flt = result_filter(args)
    with open_store(args.db, create=args.db is None) as st:
        results = st.query(flt)
        url = st.where
    if args.json:
        print(to_json(results))
    elif args.csv:
        sys.stdout.write(to_csv(results))
    elif results:
        out.print(results_table(results, wide=args.wide))
        out.print(f"{len(results)} result(s) in {url}", highlight=False, soft_wrap=True)
    else:
        out.print(f"no results match (store: {url})", highlight=False, soft_wrap=True)
    return 0


def _slurm_time(value: str) -> int:
    """``--time``: minutes or HH:MM:SS, as whole minutes (an argparse type)."""
    from accelbench.launchers.slurm import parse_time_min

    try:
        return parse_time_min(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="accelbench",
        description="Benchmark deep-learning training: throughput and energy, stored and compared.",
    )
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    _add_global_args(parser, sub=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="registered workloads")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_cmd_list)

    p = sub.add_parser("devices", help="CPU, GPUs and the precisions each supports")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_cmd_devices)

    p = sub.add_parser("run", help="measure one case and store it")
    p.add_argument("workload", type=nonempty)
    p.add_argument("--size", default="paper",
                   help="tiny, small, paper (default), or a size of the workload's own "
                   "(llm: gpt2; bert: seq512; see accelbench list)")
    p.add_argument("--batch-size", type=integer(1))
    p.add_argument("--precision", default="fp32", help="fp32, tf32, amp_fp16, amp_bf16")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps (torch), tpu:N (jax)")
    add_framework_arg(p)
    add_policy_args(p)
    _energy_args(p)
    add_topology_args(p)
    add_fast_path_args(p)
    p.add_argument("--no-store", action="store_true", help="measure without saving")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=_cmd_run)

    p = sub.add_parser("suite", help="run a named matrix of cases (resumable); "
                       "'suite status SUITE_ID' shows where a suite stands")
    p.add_argument("name", help="quick, small, paper, frameworks, scaling ...; or status")
    p.add_argument("target", nargs="?", metavar="SUITE_ID",
                   help="with 'status': the suite to show")
    p.add_argument("--device", default="cpu")
    add_framework_arg(p)
    p.add_argument("--size", help="size of a suite that takes one (frameworks: default tiny)")
    p.add_argument("--precision", action="append", default=[],
                   help="replace the suite's precisions (repeatable)")
    p.add_argument("--workload", action="append", default=[], type=nonempty,
                   help="only these workloads (repeatable)")
    add_policy_args(p)
    _energy_args(p)
    add_topology_args(p)
    add_fast_path_args(p)
    p.add_argument("--suite-id", type=nonempty,
                   help="resume this suite: cases already stored are skipped")
    p.add_argument("--force", action="store_true", help="rerun cases already stored")
    p.add_argument("--dry-run", action="store_true",
                   help="list the cases with a time estimate each, run nothing")
    sl = p.add_argument_group("fleet (--launcher slurm: submitit, one store for every job)")
    sl.add_argument("--launcher", choices=("local", "slurm"), default="local",
                    help="local (default): run here; slurm: submit the cases as Slurm jobs "
                    "(submitit) writing to --db, a PostgreSQL URL, or an absolute SQLite path "
                    "only when every node sees the same file")
    sl.add_argument("--partition", metavar="P", help="Slurm partition (--launcher slurm)")
    sl.add_argument("--gres", metavar="G", help="Slurm generic resources per job, e.g. gpu:8")
    sl.add_argument("--time", dest="time_min", type=_slurm_time, default=60, metavar="MIN|HH:MM:SS",
                    help="time limit per Slurm job: minutes or HH:MM:SS (default 60)")
    sl.add_argument("--slurm-folder", default="accelbench-slurm/%j", metavar="DIR",
                    help="submitit's job scripts and logs, on a shared file system "
                    "(default accelbench-slurm/%%j)")
    sl.add_argument("--cases-per-job", type=integer(1), default=1, metavar="K",
                    help="cases each Slurm job runs (default 1)")
    sl.add_argument("--cpus-per-task", type=integer(1, 65536), metavar="N",
                    help="CPUs per Slurm job (default: the partition's, often 1)")
    sl.add_argument("--exclusive", action="store_true",
                    help="a whole node per Slurm job: no other job beside a measurement")
    p.add_argument("--max-ranks", type=integer(1, 65536),
                   help="scaling: the most ranks (default: the GPUs present; 2 on a CPU)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--wide", action="store_true", help="every column in the results table")
    p.set_defaults(handler=_cmd_suite)

    p = sub.add_parser("power", help="live power of every sensor on this machine")
    p.add_argument("--interval-ms", type=integer(1, 3_600_000), default=500,
                   help="refresh interval (default 500)")
    p.add_argument("--duration", type=finite(0.0, 7 * 24 * 3600.0, lo_open=True),
                   help="seconds to watch (default: until Ctrl-C)")
    _tdp_arg(p)
    p.set_defaults(handler=_cmd_power)

    p = sub.add_parser("results", help="what the store holds, newest first")
    add_filter_args(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    fmt.add_argument("--wide", action="store_true", help="every column in the table")
    p.set_defaults(handler=_cmd_results)
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    for choice in sub.choices.values():
        _add_global_args(choice, sub=True)
    return parser


def _console(*, stderr: bool) -> Console:
    probe = Console(stderr=stderr)
    # Scripts and pipes get full-width tables, not rich's 80-column default.
    return probe if probe.is_terminal else Console(stderr=stderr, width=200)


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: Any = None, line: str | None = None) -> None:
    text = " ".join(str(message).split())
    if issubclass(category, AccelbenchWarning):
        print(f"accelbench: warning: {text}", file=sys.stderr)
    else:  # a library's warning: one line too, not a source excerpt
        print(f"accelbench: warning: {category.__name__}: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _merge_globals(args)
    out = _console(stderr=False)
    err = _console(stderr=True)
    previous_term = signal.getsignal(signal.SIGTERM)
    previous_show = warnings.showwarning
    warnings.showwarning = _show_warning
    with warnings.catch_warnings():
        warnings.simplefilter("always", AccelbenchWarning)
        try:
            signal.signal(signal.SIGTERM, _on_sigterm)
        except ValueError:  # not the main thread (an embedding caller): leave it
            previous_term = None
        try:
            from accelbench.api import load_plugins

            load_plugins(args.plugin)  # and $ACCELBENCH_PLUGINS, for every command
            _restore_left_settings(args.db)
            handler: Handler = args.handler
            return handler(args, out, err)
        except AccelbenchError as exc:
            if args.debug:
                raise
            print(f"accelbench: error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt:
            print("accelbench: interrupted", file=sys.stderr)
            return 130
        except _Terminated:
            print("accelbench: terminated (SIGTERM)", file=sys.stderr)
            return EXIT_SIGTERM
        except BrokenPipeError:
            # The reader went away (`accelbench results --json | head`): not an error of ours.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0
        finally:
            warnings.showwarning = previous_show
            if previous_term is not None:
                signal.signal(signal.SIGTERM, previous_term)


def _restore_left_settings(db: str | None) -> None:
    """Put back device settings a killed ``sweep`` on this host left changed (cheap when
    the store has none pending); a failure is a warning, never the command's end."""
    from accelbench.tuning.guard import restore_at_startup

    try:
        restore_at_startup(db)
    except AccelbenchError as exc:
        print(f"accelbench: warning: pending device-setting restores not done: "
              f"{_one_line(exc)}", file=sys.stderr)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
