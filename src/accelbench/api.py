"""The public Python API: :func:`run` and :func:`suite`.

The CLI is a thin layer over these two functions.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from accelbench.errors import ConfigError
from accelbench.result import Result
from accelbench.runner.cases import Case, prepare_case
from accelbench.runner.process import Progress, ProgressCallback, new_result_id, run_case
from accelbench.runner.suites import SUITES, get_suite, suite_policy
from accelbench.spec import (
    DeviceSettings,
    FastPaths,
    MeasurementPolicy,
    MeterOptions,
    Topology,
)
from accelbench.store import Store, open_store
from accelbench.workloads.registry import load_plugin

ENV_PLUGINS = "ACCELBENCH_PLUGINS"


def load_plugins(plugins: Sequence[str] = ()) -> list[str]:
    """Import user plugins (modules or .py files) given directly or in ``ACCELBENCH_PLUGINS``."""
    env = [p for p in os.environ.get(ENV_PLUGINS, "").split(os.pathsep) if p]
    loaded = []
    for origin in [*env, *plugins]:
        load_plugin(origin)
        loaded.append(origin)
    return loaded


def _worker_plugins(case: Case) -> list[str]:
    from accelbench.workloads.registry import worker_plugins

    return worker_plugins(case.spec.workload, case.spec.framework)


def _known_facts(case: Case) -> dict[str, Any] | None:
    """The cached FLOP count of the case's model, passed to the worker (None: it counts)."""
    from accelbench.runner import facts

    s = case.spec
    known = facts.lookup(s.workload, s.size, s.framework)
    if not known or known.get("flop_per_sample") is None:
        return None
    return {k: known.get(k) for k in ("forward_flop_per_sample", "flop_per_sample",
                                       "flop_method")}


def _remember_facts(result: Result) -> None:
    from accelbench.runner import facts

    s = result.spec
    facts.remember(s.workload, s.size, s.framework, {
        "param_count": result.param_count,
        "forward_flop_per_sample": result.forward_flop_per_sample,
        "flop_per_sample": result.flop_per_sample,
        "flop_method": result.flop_method,
    })


def make_policy(
    base: MeasurementPolicy | None = None,
    *,
    iterations: int | None = None,
    target_ci: float | None = None,
    max_time: float | None = None,
    max_iterations: int | None = None,
    min_iterations: int | None = None,
    strict_max_time: bool | None = None,
    timeout: float | None = None,
    repeats: int | None = None,
) -> MeasurementPolicy:
    """A measurement policy from the options users type (None keeps the base value)."""
    return suite_policy(
        base or MeasurementPolicy(),
        repeats=repeats,
        iterations=iterations,
        target_ci=target_ci,
        max_time_s=max_time,
        max_iterations=max_iterations,
        min_iterations=min_iterations,
        strict_max_time=strict_max_time,
        timeout_s=timeout,
    )


def make_meter_options(
    *,
    energy: bool = True,
    cpu_tdp_w: float | None = None,
    meter_interval_ms: float | None = None,
    counter_poll_ms: float | None = None,
    idle_s: float | None = None,
    default_idle_s: float = 3.0,
    energy_trials: int | None = None,
    settle_s: float | None = None,
    boundary: str | None = None,
    node_meter: str | None = None,
    node_meter_cmd: str | None = None,
) -> MeterOptions:
    """Energy options from the values users type (None keeps the default).

    Args:
        energy: Measure at all (False: every reading ``unavailable``, with why).
        cpu_tdp_w: CPU TDP for a labelled estimate where the CPU has no sensor.
        meter_interval_ms: Power sampling interval.
        counter_poll_ms: Longest poll interval of CPU energy counters (RAPL polls faster
            where a counter could wrap between two polls).
        idle_s: Idle baseline before the case (0 skips it).
        default_idle_s: The idle baseline when ``idle_s`` is None (a suite's own).
        energy_trials: Measurement windows after random delays; energy per sample is
            their median.
        settle_s: Longest thermal settle before measuring (0: none).
        boundary: ``device``, ``device+host`` or ``node``.
        node_meter: A registered node meter (``ipmi``, ``cmd``, a plugin's).
        node_meter_cmd: Command printing the node's watts (the ``cmd`` node meter).
    """
    defaults = MeterOptions()
    return MeterOptions(
        enabled=energy,
        interval_s=(meter_interval_ms / 1e3) if meter_interval_ms is not None
        else defaults.interval_s,
        counter_poll_s=(counter_poll_ms / 1e3) if counter_poll_ms is not None
        else defaults.counter_poll_s,
        idle_s=default_idle_s if idle_s is None else idle_s,
        cpu_tdp_w=cpu_tdp_w,
        energy_trials=defaults.energy_trials if energy_trials is None else energy_trials,
        settle_max_s=defaults.settle_max_s if settle_s is None else settle_s,
        boundary=defaults.boundary if boundary is None else boundary,  # type: ignore[arg-type]
        node_meter=node_meter,
        node_meter_cmd=node_meter_cmd,
    )


def _meters_or(
    meters: MeterOptions | None, *, default_idle_s: float = 3.0, **typed: Any
) -> MeterOptions:
    """``meters`` when given (then no individual energy option may be), else options
    built from the individual ones."""
    if meters is None:
        return make_meter_options(default_idle_s=default_idle_s, **typed)
    given = [k for k, v in typed.items() if v is not None and not (k == "energy" and v is True)]
    if given:
        raise ConfigError(f"pass either meters= or {given[0]}=, not both")
    return meters


def make_topology(
    *,
    nproc_per_node: int | None = None,
    nnodes: int | None = None,
    node_rank: int | None = None,
    rdzv_endpoint: str | None = None,
    dist_backend: str | None = None,
) -> Topology:
    """A data-parallel topology from the values users type (None keeps the default: one
    rank on one node)."""
    d = Topology()
    return Topology(
        nproc_per_node=d.nproc_per_node if nproc_per_node is None else nproc_per_node,
        nnodes=d.nnodes if nnodes is None else nnodes,
        node_rank=d.node_rank if node_rank is None else node_rank,
        rdzv_endpoint=rdzv_endpoint,
        dist_backend=d.dist_backend if dist_backend is None else dist_backend,  # type: ignore[arg-type]
    )


def make_fast_paths(*, compile: bool = False, channels_last: bool = False,
                    fused_optimizer: bool = False) -> FastPaths:
    """Fast paths from the flags users type (all off by default)."""
    return FastPaths(compile=compile, channels_last=channels_last,
                     fused_optimizer=fused_optimizer)


def plan_run(
    workload: str,
    *,
    size: str = "paper",
    batch_size: int | None = None,
    precision: str = "fp32",
    device: str = "cpu",
    framework: str = "torch",
    threads: int | None = None,
    iterations: int | None = None,
    target_ci: float | None = None,
    max_time: float | None = None,
    min_iterations: int | None = None,
    max_iterations: int | None = None,
    strict_max_time: bool | None = None,
    timeout: float | None = None,
    repeats: int | None = None,
    tag: str = "",
    meters: MeterOptions | None = None,
    topology: Topology | None = None,
    fast_paths: FastPaths | None = None,
    settings: DeviceSettings | None = None,
) -> Case:
    """The validated case :func:`run` would measure (nothing runs; plugins already loaded).

    Raises:
        ConfigError, UnsupportedError: as :func:`run` would, before anything runs.
    """
    policy = make_policy(
        iterations=iterations, target_ci=target_ci, max_time=max_time,
        min_iterations=min_iterations, max_iterations=max_iterations,
        strict_max_time=strict_max_time, timeout=timeout, repeats=repeats,
    )
    return prepare_case(workload, size=size, batch_size=batch_size, precision=precision,
                        device=device, framework=framework, threads=threads, tag=tag,
                        policy=policy, meters=meters, topology=topology,
                        fast_paths=fast_paths, settings=settings)


def attach_peak(result: Result, st: Store) -> Result:
    """Record the peak MFU is computed against for the result's device and precision.

    The robust peak (:func:`accelbench.roofline.peaks.robust_peak`: best of the quiet
    measured peaks, else the cited theoretical one, else the best measured), never the
    latest, so a later measurement on a loaded machine does not move MFU. Which peak it
    is goes in ``machine["mfu_peak"]`` (``value``, ``kind``, ``source``, ``peak_id``,
    ``measured_at``). Without any, MFU stays None and says nothing it does not know.
    """
    if result.flop_per_sample is None:
        return result
    from accelbench.report.rows import device_name
    from accelbench.roofline.peaks import robust_peak

    peak = robust_peak(st, result.spec.device, result.spec.precision,
                       device_name=device_name(result) or None)
    if peak is None:
        return result
    return dataclasses.replace(result, peak_flop_per_s=peak.value,
                              machine={**result.machine, "mfu_peak": peak.to_dict()})


def run(
    workload: str,
    *,
    size: str = "paper",
    batch_size: int | None = None,
    precision: str = "fp32",
    device: str = "cpu",
    framework: str = "torch",
    threads: int | None = None,
    iterations: int | None = None,
    target_ci: float | None = None,
    max_time: float | None = None,
    min_iterations: int | None = None,
    max_iterations: int | None = None,
    strict_max_time: bool | None = None,
    timeout: float | None = None,
    repeats: int | None = None,
    tag: str = "",
    energy: bool = True,
    cpu_tdp_w: float | None = None,
    meter_interval_ms: float | None = None,
    counter_poll_ms: float | None = None,
    idle_s: float | None = None,
    meters: MeterOptions | None = None,
    topology: Topology | None = None,
    fast_paths: FastPaths | None = None,
    settings: DeviceSettings | None = None,
    db: str | None = None,
    store: bool = True,
    plugins: Sequence[str] = (),
    on_progress: ProgressCallback | None = None,
) -> Result:
    """Measure one case in an isolated worker and (by default) store it.

    Args:
        workload: Registered workload name (see ``accelbench list``).
        size: ``tiny``, ``small`` or ``paper``.
        batch_size: Samples per step; None for the workload's default at ``size``.
        precision: ``fp32``, ``tf32``, ``amp_fp16`` or ``amp_bf16``.
        device: ``cpu``, ``cuda:N``, ``mps`` (torch) or ``tpu:N`` (jax).
        framework: ``torch`` (default) or ``jax``.
        threads: CPU threads for the framework.
        iterations: Exact measured iterations (disables adaptive stopping).
        target_ci: Adaptive stop at this relative CI95 half-width.
        max_time: Seconds of measurement after which the adaptive stop ends it (the
            minimum iterations are still reached unless ``strict_max_time``).
        min_iterations: Fewest measured iterations for an ``ok`` case (default 10).
        max_iterations: Most measured iterations (default 1000).
        strict_max_time: ``max_time`` is a hard cap; a case cut below the minimum is
            stored as ``insufficient`` without a CI.
        timeout: Wall-clock limit of the worker.
        repeats: Runs of the case, each in a fresh worker (default 1). With more than
            one, the results share a group id (a ``run-...`` suite id; see
            :func:`run_repeats`) and the group's CI covers the variation between runs.
        tag: Free text stored with the result.
        energy: Measure power and energy (where sensors exist; else "unavailable").
        cpu_tdp_w: CPU TDP for an estimate where the CPU has no power sensor.
        meter_interval_ms: Power sampling interval (default 10 ms).
        counter_poll_ms: Poll interval of CPU energy counters (RAPL; default 100 ms).
        idle_s: Idle baseline before the case (default 3 s; 0 skips it).
        meters: All energy options at once (:func:`make_meter_options`: trials, thermal
            settle, boundary, node meter); replaces the individual ones above.
        topology: Ranks and nodes of a data-parallel case (:func:`make_topology`);
            ``batch_size`` is then per rank.
        fast_paths: Compile, channels-last, fused optimizer (:func:`make_fast_paths`).
        settings: Device operating point (power limit, clocks) to record with the case;
            applying it is the caller's (``accelbench sweep``) job.
        db: Store URL or path (default: ``ACCELBENCH_DB`` or the user data dir).
        store: Whether to save the result.
        plugins: Modules or files registering extra workloads.
        on_progress: Called with :class:`~accelbench.runner.process.Progress` reports.

    Returns:
        The :class:`~accelbench.result.Result` (of the last run with ``repeats``);
        failures (oom, error, timeout, diverged, insufficient) are results too, not
        exceptions.

    Raises:
        ConfigError, UnsupportedError: bad input, refused before anything runs.
        StoreError: the store cannot be opened or written (checked before measuring).
    """
    return _run_all(dict(locals()))[-1]


def run_repeats(workload: str, **options: Any) -> list[Result]:
    """Like :func:`run` (the same options), but every run's result: with ``repeats`` R,
    R results in run order, sharing a ``suite_id`` (the group: ``accelbench results
    --suite-id ID``).

    Raises:
        TypeError: an option :func:`run` does not take.
        ConfigError, UnsupportedError, StoreError: as :func:`run`.
    """
    bound = inspect.signature(run).bind(workload, **options)
    bound.apply_defaults()
    return _run_all(dict(bound.arguments))


def _measure(case: Case, suite_id: str | None, on_progress: ProgressCallback | None
             ) -> Result:
    """One run of ``case`` in its worker, with the model's FLOPs from the cache (or
    counted by the worker and cached for the next case of this model)."""
    known = _known_facts(case)
    result = run_case(
        case.spec,
        samples_per_step=case.samples_per_step,
        sample_unit=case.sample_unit,
        plugins=_worker_plugins(case),
        suite_id=suite_id,
        on_progress=on_progress,
        known_flops=known,
    )
    if known is None:
        _remember_facts(result)
    return result


def _run_all(a: dict[str, Any]) -> list[Result]:
    """:func:`run`'s work, from its arguments by name."""
    load_plugins(a["plugins"])
    meters = _meters_or(
        a["meters"], energy=a["energy"], cpu_tdp_w=a["cpu_tdp_w"],
        meter_interval_ms=a["meter_interval_ms"], counter_poll_ms=a["counter_poll_ms"],
        idle_s=a["idle_s"],
    )
    case = plan_run(
        a["workload"], meters=meters,
        **{k: a[k] for k in ("size", "batch_size", "precision", "device", "framework",
                             "threads", "iterations", "target_ci", "max_time",
                             "min_iterations", "max_iterations", "strict_max_time",
                             "timeout", "repeats", "tag", "topology", "fast_paths",
                             "settings")},
    )
    on_progress, db, store = a["on_progress"], a["db"], a["store"]
    count = case.spec.policy.repeats
    # The runs of one case share a group id: the suite id (a suite's case key + suite id
    # is a group; a lone run's repeats get a suite id of their own).
    group = new_suite_id("run") if count > 1 else None
    st = open_store(db) if store else None
    try:
        if st is not None:
            st.check_writable()  # before the measurement, not after it is lost
    except BaseException:
        if st is not None:
            st.close()
        raise
    results: list[Result] = []
    try:
        for _ in range(count):
            result = _measure(case, group, on_progress)
            # A node that does not hold rank 0 stores nothing: that node stores the case.
            if st is not None and result.stored_here:
                result = attach_peak(result, st)
                st.save(result)
            results.append(result)
    finally:
        if st is not None:
            st.close()
    return results


@dataclass(frozen=True, slots=True)
class SuiteEvent:
    """What :func:`suite` reports to its caller as it goes."""

    kind: str
    """``plan``, ``skip``, ``start``, ``progress`` or ``done``."""
    index: int
    total: int
    case: Case | None = None
    result: Result | None = None
    progress: Progress | None = None


SuiteCallback = Callable[[SuiteEvent], None]


def new_suite_id(name: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{name}-{stamp}-{new_result_id()[:6]}"


def plan_suite(
    name: str,
    *,
    device: str = "cpu",
    framework: str = "torch",
    size: str | None = None,
    precisions: Sequence[str] = (),
    workloads: Sequence[str] = (),
    threads: int | None = None,
    tag: str = "",
    policy: MeasurementPolicy | None = None,
    meters: MeterOptions | None = None,
    topology: Topology | None = None,
    fast_paths: FastPaths | None = None,
    max_ranks: int | None = None,
) -> list[Case]:
    """The validated cases of suite ``name`` on ``device`` (nothing runs).

    ``max_ranks`` caps the rank counts of the ``scaling`` suite (default: the devices of
    the chosen kind, 2 on a CPU).

    Raises:
        ConfigError: unknown names, or ``size`` for a suite whose sizes are fixed.
        UnsupportedError: the framework or the device is not available.
    """
    from accelbench.backends import get_backend
    from accelbench.backends.probe import check_device, probe, supported_precisions
    from accelbench.errors import ConfigError, UnsupportedError
    from accelbench.runner.suites import SuiteContext
    from accelbench.spec import FRAMEWORKS, check_size, normalize_framework, normalize_precision
    from accelbench.workloads.registry import get_workload

    definition = get_suite(name)
    if size is not None and definition.default_size is None:
        takes = [n for n, d in SUITES.items() if d.default_size is not None]
        raise ConfigError(
            f"suite {name!r} fixes its sizes; --size applies to: {', '.join(takes)}"
        )
    size_name = check_size(size) if size is not None else definition.default_size
    if definition.all_frameworks:
        frameworks = tuple(fw for fw in FRAMEWORKS if probe(fw).error is None)
        if len(frameworks) < 2:
            missing = [probe(fw).error for fw in FRAMEWORKS if probe(fw).error]
            raise UnsupportedError(
                f"suite {name!r} compares frameworks but only {', '.join(frameworks) or 'none'} "
                f"can run here: {'; '.join(str(m) for m in missing)}"
            )
    else:
        frameworks = (normalize_framework(framework),)
    dev = get_backend(frameworks[0]).normalize_device(device)
    for fw in frameworks:
        check_device(fw, dev)
    if max_ranks is not None and (isinstance(max_ranks, bool) or not isinstance(max_ranks, int)
                                  or max_ranks < 1):
        raise ConfigError(f"--max-ranks must be a positive integer, got {max_ranks!r}")
    names = {get_workload(w).name for w in workloads}
    kind = dev.split(":")[0]
    ctx = SuiteContext(
        device=dev, frameworks=frameworks, size=size_name,
        supported={fw: supported_precisions(fw, dev) for fw in frameworks},
        workloads=tuple(sorted(names)), max_ranks=max_ranks,
        device_count=max(1, sum(d.device.split(":")[0] == kind
                                for d in probe(frameworks[0]).devices)),
    )
    wanted = [normalize_precision(p) for p in precisions]
    tuples = definition.cases(ctx)
    if wanted:
        # The user's precisions replace the suite's own, for every case shape it has.
        shapes = list(dict.fromkeys(t._replace(precision="") for t in tuples))
        tuples = [t._replace(precision=p) for t in shapes for p in wanted]
    if names:
        tuples = [t for t in tuples if t.workload in names]
    pol = policy or definition.policy
    met = meters or make_meter_options(default_idle_s=definition.idle_s)
    # The user's fast paths replace the suite's and a case's own (a JAX case then refuses
    # them, in one line, rather than dropping them silently).
    user_fast = fast_paths if fast_paths is not None and fast_paths.enabled() else None
    return [
        prepare_case(t.workload, size=t.size, batch_size=t.batch_size, precision=t.precision,
                     device=dev, framework=t.framework, threads=threads, tag=tag, policy=pol,
                     meters=met, topology=t.topology or topology,
                     fast_paths=user_fast or t.fast_paths or definition.fast_paths)
        for t in tuples
    ]


def suite(
    name: str,
    *,
    device: str = "cpu",
    framework: str = "torch",
    size: str | None = None,
    precisions: Sequence[str] = (),
    workloads: Sequence[str] = (),
    threads: int | None = None,
    iterations: int | None = None,
    target_ci: float | None = None,
    max_time: float | None = None,
    min_iterations: int | None = None,
    max_iterations: int | None = None,
    strict_max_time: bool | None = None,
    timeout: float | None = None,
    repeats: int | None = None,
    tag: str = "",
    energy: bool = True,
    cpu_tdp_w: float | None = None,
    meter_interval_ms: float | None = None,
    counter_poll_ms: float | None = None,
    idle_s: float | None = None,
    meters: MeterOptions | None = None,
    topology: Topology | None = None,
    fast_paths: FastPaths | None = None,
    suite_id: str | None = None,
    force: bool = False,
    db: str | None = None,
    plugins: Sequence[str] = (),
    on_event: SuiteCallback | None = None,
    launcher: Any = None,
    max_ranks: int | None = None,
) -> tuple[str, list[Result]]:
    """Run a named suite; each case is stored the moment it finishes.

    With ``launcher`` (e.g. :class:`accelbench.launchers.slurm.SlurmLauncher`) the cases
    the store lacks are submitted instead (its ``submit(store, suite_id, cases, force)``)
    and recorded in ``suite_jobs``; nothing runs here and no results are returned
    (``accelbench.store.jobs.list_jobs`` gives the jobs, ``suite_status`` their state).

    With ``repeats`` R (default: the suite's own, 3 for ``paper`` and ``frameworks``)
    every case runs R times, each in a fresh worker, interleaved round-robin with the
    other cases (all cases once, then all again), so a drift of the machine spreads over
    every case instead of landing on one. The runs of a case share the suite id and the
    case key (their group); a case is done when R results of it are stored.

    Re-running with the same ``suite_id`` skips the cases already stored
    (resume); ``force=True`` measures them again. Two suites running at once with one
    ``suite_id`` split its cases: each case is claimed in the store before it runs, so
    none is measured twice.

    Returns:
        The suite id and the results measured by this call (not the skipped ones).
    """
    load_plugins(plugins)
    if suite_id is not None and not suite_id.strip():
        raise ConfigError("--suite-id must not be empty")
    definition = get_suite(name)
    policy = make_policy(
        definition.policy, iterations=iterations, target_ci=target_ci, max_time=max_time,
        min_iterations=min_iterations, max_iterations=max_iterations,
        strict_max_time=strict_max_time, timeout=timeout, repeats=repeats,
    )
    meters = _meters_or(
        meters, energy=energy, cpu_tdp_w=cpu_tdp_w, meter_interval_ms=meter_interval_ms,
        counter_poll_ms=counter_poll_ms, idle_s=idle_s, default_idle_s=definition.idle_s,
    )
    cases = plan_suite(
        name, device=device, framework=framework, size=size, precisions=precisions,
        workloads=workloads, threads=threads, tag=tag, policy=policy, meters=meters,
        topology=topology, fast_paths=fast_paths, max_ranks=max_ranks,
    )
    sid = suite_id or new_suite_id(name)
    with open_store(db) as st:
        st.check_writable()
        if launcher is not None:
            launcher.submit(st, sid, cases, force)
            return sid, []
        return sid, _run_cases(st, sid, cases, force, on_event)


#: Slack added to a case's timeout for how long its claim holds (build, store, report).
_CLAIM_SLACK_S = 300.0


def _claim_key(case_key: str, repeat: int) -> str:
    """The claim of one run of a case: the case key for the first (as before repeats)."""
    return case_key if repeat == 0 else f"{case_key}#r{repeat + 1}"


def _run_cases(
    st: Store,
    sid: str,
    cases: list[Case],
    force: bool,
    on_event: SuiteCallback | None,
    case_context: Callable[[Case], AbstractContextManager[object]] | None = None,
) -> list[Result]:
    """Run ``cases`` of suite ``sid``; ``case_context(case)``, when given, wraps each
    measurement (``accelbench sweep``: set the case's device settings, restore after)."""
    emit = on_event or (lambda _e: None)
    results: list[Result] = []
    stored = {} if force else st.case_key_counts(sid)
    # Round-robin: run r of every case before run r + 1 of any.
    plan = [(r, i, case) for r in range(max((c.spec.policy.repeats for c in cases), default=1))
            for i, case in enumerate(cases) if r < case.spec.policy.repeats]
    total = len(plan)
    emit(SuiteEvent("plan", 0, total))
    for n, (repeat, _i, case) in enumerate(plan):
        key = case.spec.case_key()
        claim = _claim_key(key, repeat)
        if stored.get(key, 0) > repeat:
            emit(SuiteEvent("skip", n, total, case))
            continue
        # Another process running this suite id may hold or have finished the run.
        if not st.claim_case(sid, claim, ttl_s=case.spec.policy.timeout_s + _CLAIM_SLACK_S,
                             force=force):
            emit(SuiteEvent("skip", n, total, case))
            continue
        try:
            if not force and st.case_key_counts(sid).get(key, 0) > repeat:
                # Stored by another process between the count above and the claim.
                emit(SuiteEvent("skip", n, total, case))
                continue
            emit(SuiteEvent("start", n, total, case))

            def forward(p: Progress, n: int = n, case: Case = case) -> None:
                emit(SuiteEvent("progress", n, total, case, progress=p))

            with case_context(case) if case_context else nullcontext():
                result = _measure(case, sid, forward)
            if result.stored_here:  # a node without rank 0: that node stores the case
                result = attach_peak(result, st)
                st.save(result)
        finally:
            st.release_case(sid, claim)
        results.append(result)
        emit(SuiteEvent("done", n, total, case, result=result))
    return results
