"""``accelbench suite``: a named matrix of cases (resumable), its dry run, its Slurm
submission, and ``suite status SUITE_ID``."""

from __future__ import annotations

import argparse
import os
import shlex
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import (
    add_framework_arg,
    add_measurement_args,
    add_options,
    check_plan_applies,
    options_from_args,
    options_of,
    refuse_unless,
    spelled_options,
)
from accelbench.cli.run import add_case_options, warn_noisy
from accelbench.cli.signals import Terminated
from accelbench.cli.suite_left import noise_summary, nothing_ran, terminal_width, with_planned
from accelbench.errors import AccelbenchError, ConfigError
from accelbench.options import option
from accelbench.spec import RunChoices


def given_options(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """The options that shape a suite's cases which the user typed: plan key (as
    :meth:`SuitePlan.flat` names it) -> (the flag, the value in field units)."""
    from accelbench.planning.plan import OPTION_OBJECTS

    out: dict[str, tuple[str, Any]] = {}
    if args.workload:
        out["workloads"] = ("--workload", tuple(args.workload))
    if args.precision:
        out["precisions"] = ("--precision", tuple(args.precision))
    for key in ("size", "device", "framework", "threads", "tag", "max_ranks", "data",
                "loader_workers"):
        value = getattr(args, key)
        if value is not None:
            out[key] = ("--" + key.replace("_", "-"), value)
    for obj, cls in OPTION_OBJECTS.items():
        for name, (flag, value) in spelled_options(cls, args).items():
            out[f"{obj}.{name}"] = (flag, value)
    return out


def shown_db(args: argparse.Namespace) -> tuple[list[str], bool]:
    """``--db STORE`` for a printed command (nothing for the default store), the store as
    messages name it (a SQLite file by its absolute path, a URL without its password);
    and whether a password was hidden."""
    from accelbench.store.base import ENV_DB, display_url, resolve_db_url

    given = args.db or os.environ.get(ENV_DB)
    if not given:
        return [], False
    url = resolve_db_url(given)
    shown = display_url(url)
    return ["--db", shown], "://" in shown and "***" in shown and "***" not in url


def printed_command(args: argparse.Namespace, *words: str) -> str:
    """``accelbench [--db DB] [--plugin P ...] WORDS`` shell-quoted (``shlex.join``),
    complete: the store by the name messages use, the plugins by absolute path; a hidden
    password is said before the command."""
    from pathlib import Path

    db, hidden = shown_db(args)
    plugins: list[str] = []
    for p in args.plugin:
        path = Path(p).expanduser()
        plugins += ["--plugin", str(path.resolve()) if path.suffix == ".py" and path.is_file()
                    else p]
    cmd = shlex.join(["accelbench", *db, *plugins, *words])
    return f"(the --db password is hidden: put it back) {cmd}" if hidden else cmd


def resume_words(sid: str) -> list[str]:
    """``suite resume ID``; an id that argparse would read as an option as
    ``--suite-id=ID``."""
    return ["suite", "resume", f"--suite-id={sid}" if sid.startswith("-") else sid]


def print_plan(args: argparse.Namespace, out: Console, plan: Any, cases: list[Any],
               sid: str | None, db: str | None) -> None:
    """``--dry-run``: each case with its estimate; with a suite id, the runs its store
    holds already are marked skipped and only the rest is estimated."""
    from accelbench.planning.estimate import estimate_case, fmt_duration
    from accelbench.store import UnusableStoreError, open_store

    try:
        st: Any = open_store(db, create=False)
    except UnusableStoreError:
        raise  # a damaged store is said, never taken for one that holds nothing
    except AccelbenchError:
        st = None
    total = 0.0
    unknown = 0
    rows = []
    try:
        counts = st.case_key_counts(sid) if st is not None and sid and not args.force else {}
        for c in cases:
            repeats = c.spec.policy.repeats
            stored = min(counts.get(c.spec.case_key(), 0), repeats)
            left = repeats - stored
            est = estimate_case(c.spec, st) if left else None
            seconds = est.seconds * left / repeats if est is not None else None
            if left and seconds is None:
                unknown += 1
            elif seconds is not None:
                total += seconds
            rows.append((c.spec, est, seconds, stored, left))
    finally:
        if st is not None:
            st.close()
    skipped = sum(1 for *_x, left in rows if left == 0)
    if args.json:
        print(jsonout.dumps({"suite": plan.name, "suite_id": sid, "plan": plan.to_dict(),
                             "cases": [
            {**{k: getattr(s, k) for k in ("workload", "size", "batch_size", "precision",
                                           "device", "framework")},
             "repeats": s.policy.repeats, "ranks": s.topology.world_size,
             "fast_paths": list(s.fast_paths.enabled()),
             **({"data": s.data, "loader_workers": s.loader_workers}
                if s.data != "synthetic" else {}),
             "skipped": left == 0, "stored_runs": stored,
             "estimate_s": sec, "estimate_basis": e.basis if e else None}
            for s, e, sec, stored, left in rows], "estimate_total_s": total,
            "cases_without_estimate": unknown, "cases_skipped": skipped}, indent=2))
        return
    print("workload\tsize\tbatch\tprecision\tdevice\tframework\testimate\tbasis\tstate")
    for s, e, sec, stored, left in rows:
        ranks = f" x{s.topology.world_size}" if s.topology.world_size > 1 else ""
        if s.topology.sharded:  # the sharding suite's modes, told apart
            ranks += f" {s.topology.parallel}" + (f" tp{s.topology.tp}" if s.topology.tp else "")
        state = ("skipped (stored)" if left == 0 else
                 f"to run ({stored} of {s.policy.repeats} runs stored)" if stored else "to run")
        print(f"{s.workload}\t{s.size}\t{s.batch_size}\t{s.precision}\t{s.device}{ranks}"
              f"\t{s.framework}{''.join(f' +{n}' for n in s.fast_paths.enabled())}"
              f"{_data_mark(s)}"
              f"\t{fmt_duration(sec) if sec is not None else ('-' if left == 0 else '?')}"
              f"\t{e.basis if e else ('stored' if left == 0 else 'no basis yet')}\t{state}")
    more = f" (+ {unknown} case(s) without an estimate)" if unknown else ""
    runs = sum(left for *_x, left in rows)
    each = f" in {runs} run(s) (--repeats)" if runs != len(rows) - skipped else ""
    if skipped == len(rows):
        print(f"# {len(rows)} case(s), all stored already (skipped): nothing to run")
        return
    done = f", {skipped} stored already (skipped); the other {len(rows) - skipped}" \
        if skipped else ""
    print(f"# {len(rows)} case(s){done}{each}, about {fmt_duration(total)} in all{more}")


def _data_mark(spec: Any) -> str:
    """`` +data generated``: a case reading a dataset, as the plan's framework column marks
    a fast path (nothing for synthetic data)."""
    return "" if spec.data == "synthetic" else f" +data {spec.data}"


def resolve_plan(args: argparse.Namespace, sid: str | None, db: str | None) -> Any:
    """The suite's plan: the stored one of ``sid`` (the options given must agree with
    it) or, for a new suite (or one an older accelbench started), the options given.

    Raises:
        ConfigError: ``suite resume`` of a suite without a plan, another suite's name,
            or a given option that contradicts the stored plan.
    """
    from accelbench import api
    from accelbench.planning.plan import SuitePlan

    given = given_options(args)
    stored = api.stored_plan(db, sid) if sid else None
    if args.name == "resume":
        if stored is None:
            raise ConfigError(api.no_plan_message(str(sid)))
        return stored.resumed_with(given, str(sid))
    if stored is None:
        return SuitePlan.fresh(args.name, given)
    if stored.name != args.name:
        raise ConfigError(f"suite {sid!r} is a {stored.name!r} suite, not {args.name!r}; "
                          f"resume it with: {printed_command(args, *resume_words(str(sid)))}")
    return stored.resumed_with(given, str(sid))


def cmd_suite(args: argparse.Namespace, out: Console, err: Console) -> int:  # noqa: C901, PLR0915
    from accelbench import api
    from accelbench.planning.plan import check_suite_id
    from accelbench.progress import ProgressDisplay
    from accelbench.render import print_group, results_table
    from accelbench.sinks import SinkOptions
    from accelbench.store import ResultFilter, open_store

    if args.to_target:
        from accelbench.cli.suite_totarget import cmd_suite_to_target

        return cmd_suite_to_target(args, out, err, given_options(args))
    if args.seeds is not None:
        raise ConfigError("--seeds applies with --to-target only")
    if args.name == "status":
        return cmd_suite_status(args, out, err)
    if args.name == "resume":
        if args.target is None and args.suite_id is None:
            raise ConfigError("usage: accelbench suite resume SUITE_ID (the id a suite "
                              "printed)")
        if args.target is not None and args.suite_id not in (None, args.target):
            raise ConfigError(f"suite resume {args.target}: --suite-id {args.suite_id} "
                              "names another suite")
        sid: str | None = args.target or args.suite_id
    elif args.target is not None:
        raise ConfigError(f"suite {args.name}: unexpected argument {args.target!r} "
                          "(only 'suite status SUITE_ID' and 'suite resume SUITE_ID' take "
                          "a second one)")
    else:
        sid = args.suite_id
    if sid is not None:
        check_suite_id(sid)
    if args.launcher != "slurm":
        given = [flag for flag, value in (
            ("--partition", args.partition), ("--gres", args.gres),
            ("--cpus-per-task", args.cpus_per_task), ("--exclusive", args.exclusive or None),
        ) if value is not None]
        if given:
            raise ConfigError(f"{given[0]} applies to --launcher slurm only")
        db = args.db
    else:
        from accelbench.launchers.slurm import check_fleet_db

        db = check_fleet_db(args.db)  # a dry run too: the jobs could not reach the store
    plan = resolve_plan(args, sid, db)
    check_plan_applies(plan, given_options(args))  # e.g. --dist-backend on one rank
    cases = api.plan_cases(plan)  # bad input refused here, before the store is opened
    sinks = options_from_args(SinkOptions, args)
    if args.launcher == "slurm" and sinks.active():
        raise ConfigError(f"--{sinks.active()[0]} is not available with --launcher slurm "
                          "(the jobs store the cases): export the stored results after")
    if args.dry_run:
        print_plan(args, out, plan, cases, sid, db)
        return 0
    sid = sid or api.new_suite_id(plan.name)
    if args.launcher == "slurm":
        return submit_suite(args, err, sid, plan, db)
    generate_datasets(cases, err, quiet=args.quiet)
    resume = printed_command(args, *resume_words(sid))
    started = [False]
    ran = [0]

    def on_event(ev: Any) -> None:
        if ev.kind == "plan" and not args.quiet:
            started[0] = True
            err.print(f"suite {sid}: {ev.total} case(s); resume with: {resume}",
                      highlight=False, markup=False, soft_wrap=True)
        ran[0] += ev.kind == "start"
        display.suite_event(ev)

    try:
        with ProgressDisplay(err, enabled=not args.quiet) as display:
            _sid, measured = api.run_suite(plan, suite_id=sid, force=args.force, db=args.db,
                                           on_event=on_event, sinks=sinks)
    except (KeyboardInterrupt, Terminated):
        if started[0]:
            err.print(f"suite {sid} stopped; finished cases are stored. Resume with: "
                      f"{resume}", highlight=False, markup=False, soft_wrap=True)
        raise
    with open_store(args.db) as st:
        stored = st.query(ResultFilter(suite_id=sid))
        idle = nothing_ran(st, sid, cases) if not ran[0] and cases else None
    if idle:
        err.print(idle, highlight=False, markup=False, soft_wrap=True)
    if args.json:
        print(jsonout.dumps({"suite_id": sid, "results": [r.summary() for r in stored]},
                            indent=2))
    else:
        out.print(results_table(list(reversed(stored)), title=f"suite {sid}", wide=args.wide))
        print_group(out, list(reversed(stored)))  # cases run more than once (--repeats)
        if not args.quiet:
            if args.verbose:
                warn_noisy(err, measured)
            else:
                first = next((r.id for r in measured if r.noisy), "ID")
                details = printed_command(args, "results", "show", first)
                for line in noise_summary(measured, details, width=terminal_width(err)):
                    err.print(line, highlight=False, markup=False, soft_wrap=True)
            err.print(f"resume or extend (--repeats) with: {resume}", highlight=False,
                      markup=False, soft_wrap=True)
    return 0


def generate_datasets(cases: list[Any], err: Console, *, quiet: bool) -> None:
    """The generated datasets the suite's cases read, written here once each (with
    progress, as ``run`` does) rather than in a case's worker."""
    from accelbench.cli.run import generate_data
    from accelbench.data.layouts import layout_of
    from accelbench.workloads.registry import get_workload

    seen: set[tuple[str, str]] = set()
    for case in cases:
        spec = case.spec
        if spec.data != "generated":
            continue
        wl = get_workload(spec.workload)
        if callable(getattr(wl, "make_dataset", None)):
            continue  # a plugin's own dataset: nothing on disk
        key = (layout_of(wl, spec.size).key(), spec.size)
        if key not in seen:
            seen.add(key)
            generate_data(spec, err, quiet=quiet)


def submit_suite(args: argparse.Namespace, err: Console, sid: str, plan: Any,
                 db_url: str) -> int:
    """``suite NAME --launcher slurm``: submit the cases through submitit, print the jobs."""
    from accelbench import api
    from accelbench.launchers.slurm import SlurmLauncher, SlurmOptions

    launcher = SlurmLauncher(SlurmOptions(
        partition=args.partition, gres=args.gres, time_min=args.time_min,
        folder=args.slurm_folder, cases_per_job=args.cases_per_job,
        cpus_per_task=args.cpus_per_task, exclusive=args.exclusive), db_url)
    launcher.check_available()  # before the store is created: Slurm and submitit here
    api.run_suite(plan, suite_id=sid, force=args.force, store=db_url, launcher=launcher)
    jobs = launcher.submitted
    status = printed_command(args, "suite", "status", sid)
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
    status, unplanned = with_planned(args, status)
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
    if unplanned:
        err.print(f"accelbench: note: {unplanned}", highlight=False, markup=False,
                  soft_wrap=True)
    return 0


def slurm_time(value: str) -> int:
    """``--time``: minutes or HH:MM:SS, as whole minutes (an argparse type)."""
    from accelbench.launchers.slurm import parse_time_min

    try:
        return parse_time_min(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


FLEET = "fleet (--launcher slurm: submitit, one store for every job)"


@dataclass(frozen=True, kw_only=True, slots=True)
class SuiteOptions:
    """``accelbench suite NAME`` beside the case, measurement, energy, data-parallel,
    fast-path and sink options (``--device`` is :class:`RunChoices`')."""

    name: str = option(flag="name", nonempty=True, fold=True,
                       help="quick, small, paper, frameworks, scaling, modern, data ...; or "
                       "status, resume")
    target: str | None = option(
        None, flag="target", nargs="?", metavar="SUITE_ID",
        help="with 'status': the suite to show; with 'resume': the suite to resume")
    size: str | None = option(None, flag="--size", nonempty=True, fold=True,
                              help="size of a suite that takes one (frameworks: default tiny)")
    precision: tuple[str, ...] = option((), flag="--precision", many=True, nonempty=True,
                                        fold=True,
                                        help="replace the suite's precisions (repeatable)")
    workload: tuple[str, ...] = option((), flag="--workload", many=True, nonempty=True,
                                       fold=True, help="only these workloads (repeatable)")
    suite_id: str | None = option(
        None, flag="--suite-id", nonempty=True,
        help="resume this suite: its stored plan is taken (options given must agree with "
        "it) and cases already stored are skipped")
    force: bool = option(False, flag="--force", help="rerun cases already stored")
    dry_run: bool = option(
        False, flag="--dry-run",
        help="list the cases with a time estimate each, run nothing (with a suite id: cases "
        "already stored are marked skipped, not estimated)")
    launcher: str = option(
        "local", flag="--launcher", choices=("local", "slurm"), group=FLEET, default_text="",
        help="local (default): run here; slurm: submit the cases as Slurm jobs (submitit) "
        "writing to --db, a PostgreSQL URL, or an absolute SQLite path only when every node "
        "sees the same file")
    partition: str | None = option(None, flag="--partition", metavar="P", group=FLEET,
                                   help="Slurm partition (--launcher slurm)")
    gres: str | None = option(None, flag="--gres", metavar="G", group=FLEET,
                              help="Slurm generic resources per job, e.g. gpu:8")
    time_min: int = option(
        60, flag="--time", parse=slurm_time, metavar="MIN|HH:MM:SS", group=FLEET,
        help="time limit per Slurm job, as Slurm takes it: minutes, MM:SS, HH:MM:SS, D-HH, "
        "D-HH:MM or D-HH:MM:SS")
    slurm_folder: str = option(
        "accelbench-slurm/%j", flag="--slurm-folder", metavar="DIR", group=FLEET,
        help="submitit's job scripts and logs, on a shared file system")
    cases_per_job: int = option(1, flag="--cases-per-job", lo=1, metavar="K", group=FLEET,
                                help="cases each Slurm job runs")
    cpus_per_task: int | None = option(
        None, flag="--cpus-per-task", lo=1, hi=65536, metavar="N", group=FLEET,
        help="CPUs per Slurm job (default: the partition's, often 1)")
    exclusive: bool = option(
        False, flag="--exclusive", group=FLEET,
        help="a whole node per Slurm job: no other job beside a measurement")
    max_ranks: int | None = option(
        None, flag="--max-ranks", lo=1, hi=65536,
        help="scaling and sharding suites only: the most ranks (default: the GPUs present; "
        "2 on a CPU)")
    json: bool = option(False, flag="--json", exclusive="format", help="")
    wide: bool = option(False, flag="--wide", exclusive="format",
                        help="every column in the results table")
    to_target: bool = option(
        False, flag="--to-target",
        help="train each workload of the suite that has a to-target recipe to its target "
        "(as accelbench train; at --size, default tiny), one group per workload and "
        "framework tagged with the suite id; --suite-id ID resumes (stored groups skipped, "
        "--force trains them again); --seeds, --threads, --cpu-tdp-w, --idle-s and the node "
        "meter apply, other case options are refused")
    seeds: int | None = option(None, flag="--seeds", lo=1, hi=100, metavar="N",
                               default_text="default 1",
                               help="with --to-target: runs per workload, seeds 0..N-1")
    verbose: bool = option(
        False, flag="--verbose", aliases=("-v",),
        help="after the suite, every flagged case's reasons and measurement notes, one line "
        "each on stderr (default: one summary line)")


def register(sub: Any) -> None:
    """Add ``suite`` (and ``suite status``, ``suite resume``) to ``sub``."""
    p = sub.add_parser("suite", help="run a named matrix of cases (resumable); "
                       "'suite resume SUITE_ID' runs the rest of one as planned; "
                       "'suite status SUITE_ID' shows where a suite stands")
    add_options(p, SuiteOptions, only=("name", "target"), filled=True)
    add_options(p, RunChoices, only=("device",))
    add_framework_arg(p)
    add_options(p, SuiteOptions, only=("size", "precision", "workload"), filled=True)
    add_options(p, RunChoices, only=("data", "loader_workers"))  # None where not typed
    add_measurement_args(p)
    add_case_options(p)
    add_options(p, SuiteOptions, skip=("name", "target", "size", "precision", "workload"),
                filled=True)
    # None where not typed: a resumed suite takes these from its stored plan.
    p.set_defaults(handler=cmd_suite, device=None, framework=None, threads=None, tag=None)
    # Options that would do nothing are refused (args.refuse_unless), not ignored.
    refuse_unless(p, options_of(p, but=("--json",)), lambda a: a.name != "status",
                  "is not used by 'suite status' (it shows a stored suite's state)")
    refuse_unless(p, ["--time", "--slurm-folder", "--cases-per-job"],
                  lambda a: a.launcher == "slurm", "applies to --launcher slurm only")
    refuse_unless(p, ["--wide", "--verbose"], lambda a: not a.dry_run,
                  "shapes the suite's results table; --dry-run runs nothing")
