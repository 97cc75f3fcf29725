"""``accelbench suite``: a named matrix of cases (resumable), its dry run, its Slurm
submission, and ``suite status SUITE_ID``."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import (
    add_framework_arg,
    add_measurement_args,
    integer,
    name_arg,
    nonempty,
    options_from_args,
)
from accelbench.cli.run import add_case_options, warn_noisy
from accelbench.cli.signals import Terminated
from accelbench.errors import AccelbenchError, ConfigError


def print_plan(args: argparse.Namespace, out: Console, cases: list[Any]) -> None:
    from accelbench.planning.estimate import estimate_case, fmt_duration
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


def cmd_suite(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench import api
    from accelbench.progress import ProgressDisplay
    from accelbench.render import print_group, results_table
    from accelbench.spec import FastPaths, MeasurementPolicy, MeterOptions, Topology
    from accelbench.store import ResultFilter, open_store

    if args.name == "status":
        return cmd_suite_status(args, out, err)
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
    chosen = dict(
        workloads=args.workload, precisions=args.precision,
        policy=options_from_args(MeasurementPolicy, args, definition.policy),
        meters=options_from_args(MeterOptions, args, MeterOptions(idle_s=definition.idle_s)),
        topology=options_from_args(Topology, args), fast_paths=options_from_args(FastPaths, args),
        device=args.device, framework=args.framework, size=args.size, threads=args.threads,
        tag=args.tag, max_ranks=args.max_ranks)
    if args.dry_run:
        print_plan(args, out, api.plan_suite(args.name, **chosen))
        return 0
    sid = args.suite_id or api.new_suite_id(args.name)
    if args.launcher == "slurm":
        return submit_suite(args, err, sid, chosen)
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
            # api.suite plans before it opens the store: bad input writes nothing.
            _sid, measured = api.suite(args.name, suite_id=sid, force=args.force,
                                       store=args.db, on_event=on_event, **chosen)
    except (KeyboardInterrupt, Terminated):
        if started[0]:
            err.print(f"suite {sid} stopped; finished cases are stored. Resume with: "
                      f"{resume}", highlight=False, markup=False)
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
            warn_noisy(err, measured)
            err.print(f"resume or extend with: {resume}", highlight=False, markup=False)
    return 0


def submit_suite(args: argparse.Namespace, err: Console, sid: str,
                 chosen: dict[str, Any]) -> int:
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
    api.suite(args.name, suite_id=sid, force=args.force, store=db_url, launcher=launcher,
              **chosen)
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


def cmd_suite_status(args: argparse.Namespace, out: Console, err: Console) -> int:
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


def slurm_time(value: str) -> int:
    """``--time``: minutes or HH:MM:SS, as whole minutes (an argparse type)."""
    from accelbench.launchers.slurm import parse_time_min

    try:
        return parse_time_min(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: Any) -> None:
    """Add ``suite`` (and ``suite status``) to ``sub``."""
    p = sub.add_parser("suite", help="run a named matrix of cases (resumable); "
                       "'suite status SUITE_ID' shows where a suite stands")
    p.add_argument("name", type=name_arg,
                   help="quick, small, paper, frameworks, scaling ...; or status")
    p.add_argument("target", nargs="?", metavar="SUITE_ID",
                   help="with 'status': the suite to show")
    p.add_argument("--device", default="cpu", type=name_arg)
    add_framework_arg(p)
    p.add_argument("--size", type=name_arg,
                   help="size of a suite that takes one (frameworks: default tiny)")
    p.add_argument("--precision", action="append", default=[], type=name_arg,
                   help="replace the suite's precisions (repeatable)")
    p.add_argument("--workload", action="append", default=[], type=name_arg,
                   help="only these workloads (repeatable)")
    add_measurement_args(p)
    add_case_options(p)
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
    sl.add_argument("--time", dest="time_min", type=slurm_time, default=60, metavar="MIN|HH:MM:SS",
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
    p.set_defaults(handler=cmd_suite)
