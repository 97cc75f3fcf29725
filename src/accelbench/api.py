"""The public Python API: :func:`run`, :func:`suite`, :func:`sweep`, :func:`report` and
:func:`export` (the CLI's commands call the same functions).

The CLI is a thin layer over these functions. Each takes the option objects of
:mod:`accelbench.spec` (the same dataclasses the CLI's flags are generated from), plans its
case(s) once, loads plugins once and opens the store once.

A notebook session::

    import accelbench
    from accelbench import MeasurementPolicy, MeterOptions, RunChoices

    # One case: ResNet-50 at the tiny size, exactly 20 measured iterations, no idle
    # baseline, stored in a store of its own.
    result = accelbench.run(
        "resnet50",
        RunChoices(size="tiny", batch_size=8),
        policy=MeasurementPolicy(iterations=20),
        meters=MeterOptions(idle_s=0),
        store="results.db",
    )
    print(result.status, result.samples_per_s, result.energy_j_per_sample)

    # The flags' names work as keywords too (``max_time`` is ``--max-time``):
    quick = accelbench.run("lstm", size="tiny", max_time=2.0, store=False)

    # A named suite, resumable by its id; each case is stored the moment it finishes.
    suite_id, results = accelbench.suite("quick", workloads=["lstm"],
                                         policy=MeasurementPolicy(max_time_s=5.0))

    # The stored results out: a CSV file, an HTML report (the filters are keywords).
    accelbench.export("csv", "results.csv", db="results.db", workload="resnet50")
    accelbench.report("report", db="results.db", size="tiny")

    # Training to a target over seeds (accelbench train): every run stored, the score.
    trained = accelbench.train("transformer", seeds=3, max_time=120, db="results.db")
    print(trained.summary.time_score, [r.outcome.status for r in trained.records])

    # A device-settings sweep and its throughput-energy frontier (needs the right to
    # set the knobs; each setting is restored after its case).
    swept = accelbench.sweep("lstm", size="tiny", cpu_max_freqs="auto", db="results.db")
    print(swept.frontier.to_dict())

Every keyword is an option under one name (its flag's: :mod:`accelbench.keywords`); a
misspelt one is refused at the call: ``TypeError: run() got an unknown option
'precison' (did you mean 'precision'?)``.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from accelbench.errors import AccelbenchWarning, ConfigError
from accelbench.execution.orchestrate import (
    SuiteCallback,
    SuiteEvent,
    attach_peak,
    measure_case,
    new_suite_id,
    run_cases,
)
from accelbench.execution.process import ProgressCallback
from accelbench.keywords import (
    OBJECTS,
    allowed_for,
    apply_keywords,
    check_keywords,
    keywords_of,
    plan_case,
    resolve,
)
from accelbench.planning.cases import Case
from accelbench.planning.plan import SuitePlan, check_suite_id
from accelbench.planning.suites import get_suite, plan_suite
from accelbench.readouts import export, report
from accelbench.result import Result
from accelbench.sinks import SinkOptions, open_sinks, store_label
from accelbench.spec import (
    FastPaths,
    MeasurementPolicy,
    MeterOptions,
    RunChoices,
    Topology,
)
from accelbench.store import Store, open_store
from accelbench.store.plans import peek_plan
from accelbench.sweeping import SWEEP_KEYWORDS, SweepOutcome, run_sweep
from accelbench.workloads.registry import load_plugin

__all__ = [
    "SuiteCallback", "SuiteEvent", "attach_peak", "load_plugins", "make_fast_paths",
    "make_meter_options", "make_policy", "make_topology", "measure_case", "new_suite_id",
    "plan_run", "plan_suite", "run", "run_cases", "run_planned", "run_repeats", "suite",
    "get_suite", "SuitePlan", "suite_plan", "stored_plan", "resume_suite", "run_suite",
    "plan_cases", "sweep", "report", "export", "SweepOutcome", "train", "Trained",
    "sweep_to_target",
]

ENV_PLUGINS = "ACCELBENCH_PLUGINS"

#: Where ``store=`` points: True (the default store: ``ACCELBENCH_DB`` or the user data
#: dir), False (store nothing), a URL or path, or an open :class:`Store`.
StoreArg = Store | str | bool | None


def load_plugins(plugins: Sequence[str] = ()) -> list[str]:
    """Import user plugins (modules or .py files) given directly or in ``ACCELBENCH_PLUGINS``."""
    env = [p for p in os.environ.get(ENV_PLUGINS, "").split(os.pathsep) if p]
    loaded = []
    for origin in [*env, *plugins]:
        load_plugin(origin)
        loaded.append(origin)
    return loaded


# --------------------------------------------------------------------------- option objects

#: The keywords of :func:`plan_run` (every case option, by its one API name, and the
#: option objects), of :func:`run` (also the sinks and ``db``), and of :func:`suite`.
PLAN_KEYWORDS = allowed_for(("choices", "policy", "meters", "topology", "fast_paths",
                             "settings"))
RUN_KEYWORDS = allowed_for(OBJECTS, extra=("db",))
#: What a suite takes of the case choices (its precisions and batch sizes are its own).
SUITE_CHOICES = ("device", "framework", "size", "threads", "tag", "max_ranks", "data",
                 "loader_workers")
SUITE_PLAN_KEYWORDS = allowed_for(("policy", "meters", "topology", "fast_paths"),
                                  extra=SUITE_CHOICES)
SUITE_KEYWORDS = SUITE_PLAN_KEYWORDS | allowed_for(("sinks",), extra=("db",))


def _made(cls: type, where: str, base: Any, options: dict[str, Any]) -> Any:
    check_keywords(where, options, set(keywords_of(cls)))
    return apply_keywords(cls, base, options)


def make_policy(base: MeasurementPolicy | None = None, **options: Any) -> MeasurementPolicy:
    """``base`` (default :class:`MeasurementPolicy`) with options given by their API name
    (``max_time=2``, :mod:`accelbench.keywords`); None keeps the base value."""
    return _made(MeasurementPolicy, "make_policy", base, options)


def make_meter_options(*, default_idle_s: float = 3.0, **options: Any) -> MeterOptions:
    """Energy options by API name (``meter_interval_ms=5``, ``settle_s=30``,
    ``energy=False``); ``default_idle_s``: a suite's own idle baseline."""
    return _made(MeterOptions, "make_meter_options",
                 MeterOptions(idle_s=default_idle_s), options)


def make_topology(**options: Any) -> Topology:
    """A data-parallel topology (``nproc_per_node=2``...); None keeps the default."""
    return _made(Topology, "make_topology", None, options)


def make_fast_paths(**options: Any) -> FastPaths:
    """Fast paths by API name (``compile=True``...); all off by default."""
    return _made(FastPaths, "make_fast_paths", None, options)


# --------------------------------------------------------------------------- one case


def plan_run(workload: str, choices: RunChoices | None = None, *,
             check_hardware: bool = True, **options: Any) -> Case:
    """The validated case :func:`run` would measure (nothing runs; plugins already loaded).
    Takes :func:`run`'s choices, option objects and keywords but the sinks.
    ``check_hardware=False`` leaves the device and precision to the case's worker
    (:func:`accelbench.execution.process.prechecked`), which :func:`run` does: no probe.

    Raises:
        TypeError: a keyword that is no option (with the closest names).
        ConfigError, UnsupportedError: as :func:`run` would, before anything runs.
    """
    check_keywords("plan_run", options, PLAN_KEYWORDS)
    return plan_case(workload, resolve({**options, "choices": choices}),
                    check_hardware=check_hardware)


def prechecked(case: Case) -> AbstractContextManager[None]:
    """The worker of ``case`` started and its device and precision checked (its refusal
    raised) before the caller opens a store; the case's first run takes it."""
    from accelbench.execution.process import prechecked as start
    from accelbench.workloads.registry import worker_plugins

    return start(case.spec, worker_plugins(case.spec.workload, case.spec.framework))


@contextmanager
def opened_store(store: StoreArg, db: str | None = None) -> Iterator[Store | None]:
    """The store ``store=`` names, checked writable before anything is measured (and
    closed after, unless the caller passed it open); None where nothing is stored."""
    if store is False or store is None:
        yield None
        return
    if isinstance(store, Store):
        store.check_writable()
        yield store
        return
    st = open_store(store if isinstance(store, str) else db)
    try:
        st.check_writable()  # before the measurement, not after it is lost
        yield st
    finally:
        st.close()


def run_planned(case: Case, *, store: Store | None,
                on_progress: ProgressCallback | None = None,
                on_result: Callable[[Result], None] | None = None) -> list[Result]:
    """Measure a planned case ``repeats`` times, storing each result in ``store`` (open,
    checked writable) when given; the runs of one case share a group (suite) id.
    ``on_result`` (the sinks) gets each result after it is stored."""
    count = case.spec.policy.repeats
    group = new_suite_id("run") if count > 1 else None
    results: list[Result] = []
    for _ in range(count):
        result = measure_case(case, group, on_progress)
        # A node that does not hold rank 0 stores nothing: that node stores the case.
        if store is not None and result.stored_here:
            result = attach_peak(result, store)
            store.save(result)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results


def run_repeats(workload: str, choices: RunChoices | None = None, *, store: StoreArg = True,
                plugins: Sequence[str] = (), on_progress: ProgressCallback | None = None,
                **options: Any) -> list[Result]:
    """Like :func:`run`, but every run's result: with ``repeats`` R, R results in run
    order, sharing a ``suite_id`` (the group: ``accelbench results --suite-id ID``)."""
    check_keywords("run_repeats", options, RUN_KEYWORDS)
    db = options.pop("db", None)
    opts = resolve({**options, "choices": choices})  # bad values: before plugins load
    load_plugins(plugins)
    case = plan_case(workload, opts, check_hardware=False)
    # The worker checks the device and precision first (a refusal: exit 2, nothing
    # opened); then the sinks, refused before the store is opened (bad input writes
    # nothing).
    with prechecked(case), \
            open_sinks(opts.sinks, store_label=store_label(store, db)) as out, \
            opened_store(store, db) as st:
        return run_planned(case, store=st, on_progress=on_progress, on_result=out.emit)


def run(workload: str, choices: RunChoices | None = None, *, store: StoreArg = True,
        plugins: Sequence[str] = (), on_progress: ProgressCallback | None = None,
        **options: Any) -> Result:
    """Measure one case in an isolated worker and (by default) store it.

    Args:
        workload: Registered workload name (see ``accelbench list``).
        choices: Size, batch size, precision, device, framework, threads, tag
            (:class:`~accelbench.spec.RunChoices`; default: paper size, fp32, CPU, torch).
        store: True (default store: ``ACCELBENCH_DB`` or the user data dir), False,
            a store URL or path, or an open :class:`~accelbench.store.Store`.
        plugins: Modules or files registering extra workloads.
        on_progress: Called with :class:`~accelbench.execution.process.Progress` reports.
        **options: Every option under one name, its flag's (:mod:`accelbench.keywords`:
            ``size="tiny"``, ``iterations=20``, ``max_time=2``, ``idle_s=0``,
            ``energy=False``, ``mllog="run.log"``, ``wandb=True``), applied on top of
            the option objects, which are keywords too: ``policy``
            (:class:`~accelbench.spec.MeasurementPolicy`), ``meters``
            (:class:`~accelbench.spec.MeterOptions`), ``topology`` (ranks and nodes;
            ``batch_size`` is per rank), ``fast_paths``, ``settings`` (the device
            operating point to record; applying it is :func:`sweep`'s job) and
            ``sinks`` (:class:`~accelbench.sinks.SinkOptions`); ``db=`` names the store.

    Returns:
        The :class:`~accelbench.result.Result` (of the last run with ``repeats``);
        failures (oom, error, timeout, diverged, insufficient) are results too.

    Raises:
        TypeError: a keyword that is no option, refused at the call with the closest
            names (``unknown option 'precison' (did you mean 'precision'?)``).
        ConfigError, UnsupportedError: bad input, refused before anything runs.
        StoreError: the store cannot be opened or written (checked before measuring).
    """
    check_keywords("run", options, RUN_KEYWORDS)
    return run_repeats(workload, choices, store=store, plugins=plugins,
                       on_progress=on_progress, **options)[-1]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Trained:
    """What :func:`train` ran: each seed's stored record, and the set's score."""

    records: list[Any]
    """The :class:`~accelbench.totarget.record.ToTargetRecord` of each seed, in seed order."""
    summary: Any
    """The :class:`~accelbench.totarget.run.Summary`: reached runs, MLPerf's score with its
    CI, the spread of samples-to-target, the convergence check."""
    group_id: str
    """The seeds' group (``accelbench results to-target GROUP``, ``compare``)."""


def train(workload: str, *, store: StoreArg = True,
          on_run: Callable[[Any], None] | None = None, **options: Any) -> Trained:
    """Train ``workload`` to its target over seeds and (by default) store every run, as
    ``accelbench train`` does (docs/totarget.md).

    Args:
        workload: A workload with a to-target recipe (``transformer``, ``lstm``,
            ``resnet50`` at ``size="tiny"``).
        store: As :func:`run`'s (True: the default store; False: store nothing; a URL or
            path; an open store); ``db=`` names the store too.
        on_run: Called with each seed's record as it finishes.
        **options: ``accelbench train``'s options by their flags' names: ``size``,
            ``framework``, ``device`` (``"cuda"``: refused before anything runs where
            not present), ``target`` (a number or ``"auto"``), ``data``, ``seeds``,
            ``eval_every``, ``max_time`` (s), ``max_samples``, ``lr``, ``batch_size``,
            ``threads``, ``cpu_tdp_w``, ``idle_s``, ``node_meter``, ``node_meter_cmd``.

    Raises:
        TypeError: a keyword that is no option (with the closest names), at the call.
        ConfigError: bad input (an unknown recipe, a target the metric cannot take),
            refused before anything runs or is written.
    """
    from accelbench.totarget.options import TrainOptions, plan
    from accelbench.totarget.run import run_seeds, summarise

    check_keywords("train", options, (set(keywords_of(TrainOptions)) - {"workload"})
                   | {"db"})
    db = options.pop("db", None)
    opts = apply_keywords(TrainOptions, TrainOptions(workload=workload), _target_text(options))
    recipe, limits, metering = plan(opts)
    with opened_store(store, db) as st:
        records = run_seeds(recipe, limits, framework=opts.framework, seeds=opts.seeds,
                            metering=metering, threads=opts.threads, on_run=on_run)
        if st is not None:
            st.save_totarget(records)
    return Trained(records=records, summary=summarise(records), group_id=records[0].group_id)


def sweep(workload: str, choices: RunChoices | None = None, *, plugins: Sequence[str] = (),
          **options: Any) -> SweepOutcome:
    """Run ``workload`` once per device setting and return the stored sweep with its
    throughput-energy frontier, as ``accelbench sweep`` does
    (:func:`accelbench.sweeping.run_sweep`). Knobs by their flags' names, each a list
    of values, ``"200,250"`` or ``"auto"``: ``power_limits``, ``sm_clocks``,
    ``mem_clocks``, ``cpu_max_freqs``, ``cpu_power_limits``; also ``gpu``, ``suite_id``
    (resume), ``max_slowdown``, ``on_event``, ``db`` and :func:`run`'s case options.

    Raises:
        TypeError: a keyword that is no option, at the call (with the closest names).
    """
    check_keywords("sweep", options, SWEEP_KEYWORDS | {"gpu", "suite_id", "max_slowdown",
                                                       "on_event"})
    load_plugins(plugins)
    return run_sweep(workload, choices, **options)


def _target_text(options: dict[str, Any]) -> dict[str, Any]:
    """``target=0.9`` as the flag's text (``--target 0.9``); ``"auto"`` and text as given."""
    target = options.get("target")
    if isinstance(target, int | float) and not isinstance(target, bool):
        options["target"] = repr(float(target))
    return options


def sweep_to_target(workload: str, *, plugins: Sequence[str] = (), gpu: int | None = None,
                    suite_id: str | None = None, eta: float | None = None,
                    on_group: Callable[[list[Any]], None] | None = None,
                    **options: Any) -> tuple[str, Any]:
    """Train ``workload`` to its target at each device setting, as ``accelbench sweep
    WORKLOAD --to-target`` does (:func:`accelbench.sweeping.run_totarget_sweep`): each
    setting's seeds stored as one group of the sweep, settings stored already under
    ``suite_id`` skipped. Returns the sweep id and its
    :class:`~accelbench.totarget.frontier.ToTargetFrontier` (the frontier of energy- against
    time-to-target, Zeus's cost at ``eta``, default 0.5).

    Options: the knobs of :func:`sweep` (``power_limits``, ``cpu_power_limits``, ...), and
    :func:`train`'s options (``size``, ``framework``, ``target``, ``seeds``, ``eval_every``,
    ``max_time``, ``max_samples``, ``lr``, ``batch_size``, ``threads``, ``cpu_tdp_w``,
    ``idle_s``, ``node_meter``, ``node_meter_cmd``), ``db``.

    Raises:
        TypeError: a keyword that is no option (with the closest names), at the call.
        ConfigError: bad input or a value outside a knob's range, before any change.
        PrivilegeError: a knob this process may not set, before any change.
    """
    from accelbench.sweeping import SweepKnobs, ToTargetSweep, run_totarget_sweep
    from accelbench.totarget.frontier import DEFAULT_ETA
    from accelbench.totarget.options import TrainOptions, plan

    knob_words = set(keywords_of(SweepKnobs))
    check_keywords("sweep_to_target", options,
                   (set(keywords_of(TrainOptions)) - {"workload"}) | knob_words | {"db"})
    load_plugins(plugins)
    db = options.pop("db", None)
    knobs = apply_keywords(SweepKnobs, None, {k: options.pop(k) for k in list(options)
                                              if k in knob_words})
    opts = apply_keywords(TrainOptions, TrainOptions(workload=workload), _target_text(options))
    if eta is not None and not 0.0 <= eta <= 1.0:
        raise ConfigError(f"eta={eta}: Zeus's weight is in [0, 1]")
    recipe, limits, metering = plan(opts)
    swept = ToTargetSweep(recipe=recipe, limits=limits, seeds=opts.seeds, metering=metering,
                          eta=DEFAULT_ETA if eta is None else eta, framework=opts.framework,
                          threads=opts.threads)
    return run_totarget_sweep(swept, knobs, gpu=gpu, suite_id=suite_id, db=db,
                              on_group=on_group)


# --------------------------------------------------------------------------- suites


def suite_plan(name: str, *, workloads: Sequence[str] = (), precisions: Sequence[str] = (),
               **options: Any) -> SuitePlan:
    """The plan :func:`suite` would store and run (nothing runs, no store is opened):
    the suite's own policy and idle baseline with the options given applied.

    Raises:
        ConfigError: unknown suite, names or option values.
        TypeError: a keyword that is no option (with the closest names).
    """
    check_keywords("suite_plan", options, SUITE_PLAN_KEYWORDS)
    definition = get_suite(name)
    where = {k: options.pop(k) for k in SUITE_CHOICES if k in options}
    opts = resolve(options, policy=definition.policy, default_idle_s=definition.idle_s)
    base = SuitePlan.fresh(name)
    values: dict[str, Any] = {"workloads": tuple(workloads), "precisions": tuple(precisions),
                              **{k: v for k, v in where.items() if v is not None}}
    plan = base.with_values(values)
    return dataclasses.replace(plan, policy=opts.policy, meters=opts.meters,
                               topology=opts.topology, fast_paths=opts.fast_paths)


def stored_plan(db: str | None, suite_id: str) -> SuitePlan | None:
    """The plan suite ``suite_id`` stored when it started in the store at ``db``, read
    without creating or migrating a store; None for a suite started by an older
    accelbench (or a store that holds none).

    Raises:
        ConfigError: the stored plan cannot be read.
    """
    row = peek_plan(db, suite_id)
    return None if row is None else SuitePlan.from_dict(row.plan)


def suite(name: str, *, workloads: Sequence[str] = (), precisions: Sequence[str] = (),  # noqa: PLR0913
          suite_id: str | None = None, force: bool = False, store: Store | str | None = None,
          plugins: Sequence[str] = (), on_event: SuiteCallback | None = None,
          launcher: Any = None, **options: Any) -> tuple[str, list[Result]]:
    """Run a named suite; each case is stored the moment it finishes.

    Options: ``device``, ``framework``, ``size`` (suites that take one), ``threads``,
    ``tag``, ``max_ranks`` (the ``scaling`` suite's cap), ``data`` (``generated`` or a PATH:
    every case reads it; the ``data`` suite's cases read it beside synthetic data) and
    ``loader_workers``, the option objects ``policy``,
    ``meters``, ``topology``, ``fast_paths`` and ``sinks``, and any of their options by
    its API name (:mod:`accelbench.keywords`), applied on top of the suite's own policy
    and idle baseline; ``db=`` names the store. Unknown keywords: :class:`TypeError` at
    the call.

    The suite's plan (its name and every option that shapes its cases) is stored when it
    starts; :func:`resume_suite` runs it again. Given a ``suite_id`` that has a stored
    plan, the options must agree with it (only more ``repeats`` extend it).

    With ``launcher`` (e.g. :class:`accelbench.launchers.slurm.SlurmLauncher`) the cases
    the store lacks are submitted instead (its ``submit(store, suite_id, cases, force)``)
    and recorded in ``suite_jobs``; nothing runs here and no results are returned.

    With ``repeats`` R (default: the suite's own, 3 for ``paper`` and ``frameworks``)
    every case runs R times, each in a fresh worker, interleaved round-robin with the
    other cases. Re-running with the same ``suite_id`` skips the cases already stored
    (resume); ``force=True`` measures them again. Two suites running at once with one
    ``suite_id`` split its cases (each case is claimed in the store before it runs).

    Returns:
        The suite id and the results measured by this call (not the skipped ones).

    Raises:
        ConfigError: bad input, or options that contradict ``suite_id``'s stored plan.
    """
    check_keywords("suite", options, SUITE_KEYWORDS)
    db = options.pop("db", None)
    sink_options = apply_keywords(SinkOptions, options.pop("sinks", None), options)
    load_plugins(plugins)
    plan = suite_plan(name, workloads=workloads, precisions=precisions, **options)
    return run_suite(plan, suite_id=suite_id, force=force, store=store, db=db,
                     on_event=on_event, launcher=launcher, sinks=sink_options)


def resume_suite(suite_id: str, *, force: bool = False, store: Store | str | None = None,
                 db: str | None = None, plugins: Sequence[str] = (),
                 on_event: SuiteCallback | None = None, launcher: Any = None,
                 sinks: SinkOptions | None = None) -> tuple[str, list[Result]]:
    """Run the cases of suite ``suite_id`` its store lacks, as its stored plan says.

    Raises:
        ConfigError: the suite has no stored plan (started by an older accelbench: run
            :func:`suite` again with its options and ``suite_id``).
    """
    load_plugins(plugins)
    check_suite_id(suite_id)
    if isinstance(store, Store):
        row = store.suite_plan(suite_id)
        plan = None if row is None else SuitePlan.from_dict(row.plan)
    else:
        plan = stored_plan(store if isinstance(store, str) else db, suite_id)
    if plan is None:
        raise ConfigError(no_plan_message(suite_id))
    return run_suite(plan, suite_id=suite_id, force=force, store=store, db=db,
                     on_event=on_event, launcher=launcher, sinks=sinks)


def no_plan_message(suite_id: str) -> str:
    """Why ``suite resume`` cannot resume ``suite_id``, and what to do instead."""
    return (f"suite {suite_id!r} has no stored plan in this store (started by an older "
            "accelbench, or check --db and the id); resume it with the command that "
            f"started it and --suite-id {suite_id}")


def plan_cases(plan: SuitePlan) -> list[Case]:
    """The validated cases of ``plan`` (nothing runs)."""
    return plan_suite(plan.name, **plan.keywords())


def run_suite(plan: SuitePlan, *, suite_id: str | None = None, force: bool = False,
              store: Store | str | None = None, db: str | None = None,
              on_event: SuiteCallback | None = None, launcher: Any = None,
              sinks: SinkOptions | None = None) -> tuple[str, list[Result]]:
    """Store ``plan`` as suite ``suite_id``'s (a new id when None) and run (or, with
    ``launcher``, submit) the cases the store lacks. Plans before it opens the store:
    bad input writes nothing. ``sinks``: where each case also goes once stored.

    Raises:
        ConfigError: bad input, or ``plan`` contradicts ``suite_id``'s stored plan.
    """
    if suite_id is not None:
        check_suite_id(suite_id)
    cases = plan_cases(plan)
    if launcher is not None and sinks is not None and sinks.active():
        raise ConfigError(f"--{sinks.active()[0]} is not available with a launcher (the "
                          "cases are stored by the jobs): send the stored results after")
    sid = suite_id or new_suite_id(plan.name)
    keys = [c.spec.case_key() for c in cases]
    target = store if store is not None else True
    with open_sinks(sinks, store_label=store_label(target, db)) as out, \
            opened_store(target, db) as st:
        if st is None:  # pragma: no cover - opened_store(True) always opens one
            raise ConfigError("suite needs a store")
        check_against_stored(st, sid, plan, keys, fresh=suite_id is None)
        st.save_plan(sid, plan.name, plan.to_dict(), keys)
        if launcher is not None:
            launcher.submit(st, sid, cases, force)
            return sid, []

        def forward(ev: SuiteEvent) -> None:
            if ev.kind == "done" and ev.result is not None:
                out.emit(ev.result)  # stored: run_cases saves before "done"
            if on_event is not None:
                on_event(ev)

        return sid, run_cases(st, sid, cases, force, forward)


def check_against_stored(st: Store, sid: str, plan: SuitePlan, keys: list[str], *,
                         fresh: bool) -> None:
    """Refuse ``plan`` where it contradicts ``sid``'s stored plan; warn where ``sid``
    ran before with no plan stored (an older accelbench), or where cases of the stored
    plan cannot be planned here (a plugin not loaded)."""
    if fresh:
        return
    row = st.suite_plan(sid)
    if row is None:
        if st.case_key_counts(sid):
            warnings.warn(
                f"suite {sid!r} has no stored plan (started by an older accelbench): its "
                "remaining cases run with the options given now, stored as its plan from "
                "here on", AccelbenchWarning, stacklevel=3)
        return
    had = SuitePlan.from_dict(row.plan)
    problems = had.conflicts(plan)
    if problems:
        raise ConfigError(
            f"suite {sid!r} was planned otherwise ({'; '.join(problems[:3])}); resume it "
            f"as planned (accelbench suite resume {sid}) or start a new suite")
    missing = set(row.case_keys) - set(keys)
    if missing:
        warnings.warn(
            f"suite {sid!r}: {len(missing)} case(s) of its stored plan cannot be planned "
            "here (a --plugin not loaded?); they are left out", AccelbenchWarning,
            stacklevel=3)
