"""``accelbench run``: measure one case in an isolated worker and store it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import (
    add_measurement_args,
    add_options,
    options_from_args,
)
from accelbench.cli.flags import WorkloadArg
from accelbench.options import option


def case_label(r: Any) -> str:
    """``resnet50 fp32 (1a2b3c4d)``: a case in a warning line."""
    return f"{r.spec.workload} {r.spec.precision} ({r.id[:8]})"


def warn_noisy(err: Console, results: Sequence[Any]) -> None:
    """Per case, one warning line per verdict ("measured on a busy machine: ...", "step
    times vary: ...") and the measurement's own notes (a minimum reached past
    --max-time), so a number from a busy machine never goes out unlabelled."""
    from accelbench.verdicts import KIND_PHRASES, verdict_lines

    for r in results:
        label = case_label(r)
        for line in verdict_lines(r.noise, KIND_PHRASES):
            err.print(f"accelbench: warning: {label} {line}", highlight=False, markup=False,
                      soft_wrap=True)
        for note in (*(r.noise.get("measure_notes") or ()), *backend_notes(r.backend_extra)):
            err.print(f"accelbench: note: {label}: {note}", highlight=False, markup=False,
                      soft_wrap=True)


def backend_notes(extra: dict[str, Any] | None) -> list[str]:
    """What the backend says a fast path did not do as asked (``--compile`` that compiled
    nothing, or recompiled while measuring), for the user's terminal."""
    note = ((extra or {}).get("compile") or {}).get("note")
    return [note] if isinstance(note, str) and note else []


def say_estimate(err: Console, spec: Any, st: Any, *, always: bool) -> None:
    """Print how long the case will take (a paper-size case on a CPU takes minutes);
    ``st``: the open store whose history the estimate uses (None: the FLOP cache only)."""
    from accelbench.durations import fmt_time
    from accelbench.planning.estimate import estimate_case, fmt_duration

    est = estimate_case(spec, st)
    if est is None:
        if always:
            err.print(f"{spec.workload} {spec.size} on {spec.device}: no basis for a time "
                      "estimate yet (no earlier run, no cached FLOP count)", highlight=False,
                      markup=False)
        return
    if always or est.seconds > 60:
        err.print(f"{spec.workload} {spec.size} bs={spec.batch_size} {spec.precision} on "
                  f"{spec.device}: about {fmt_duration(est.seconds)} (step ~"
                  f"{fmt_time(est.step_s, 2)}; estimate from {est.basis})", highlight=False,
                  markup=False)


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Plan the case once (bad input fails here, before any output), open the store once,
    measure ``--repeats`` times, print."""
    from accelbench import api
    from accelbench.progress import ProgressDisplay
    from accelbench.render import print_group, print_result
    from accelbench.sinks import SinkOptions, open_sinks, store_label
    from accelbench.spec import FastPaths, MeasurementPolicy, MeterOptions, RunChoices, Topology

    choices = options_from_args(RunChoices, args)
    case = api.plan_run(
        args.workload, choices, policy=options_from_args(MeasurementPolicy, args),
        meters=options_from_args(MeterOptions, args),
        topology=options_from_args(Topology, args),
        fast_paths=options_from_args(FastPaths, args), check_hardware=False)
    if args.dry_run:
        return dry_run(case.spec, err if args.json else out, as_json=args.json)
    sinks = options_from_args(SinkOptions, args)
    # The worker checks the device and precision (a refusal: exit 2, nothing opened);
    # sinks before the store: a missing extra is refused before anything is written.
    with api.prechecked(case), \
            open_sinks(sinks, store_label=store_label(not args.no_store, args.db)) as sent, \
            api.opened_store(not args.no_store, args.db) as st:
        if not args.quiet:
            say_estimate(err, case.spec, st,
                         always=case.spec.size == "paper" and case.spec.device == "cpu")
            warn_unfit(err, case.spec)
        if case.spec.data == "generated":  # written here once, with progress, not in the worker
            generate_data(case.spec, err, quiet=args.quiet)
        with ProgressDisplay(err, enabled=not args.quiet) as display:
            display.begin(f"{args.workload} {choices.size}")
            results = api.run_planned(case, store=st, on_progress=display.case_progress,
                                      on_result=sent.emit)
        # The between-run spread this host has seen for the case (R = 1 only: a
        # group's own CI covers its runs).
        earlier = (st.case_rates(case.spec.case_key(),
                                 (results[0].machine or {}).get("hostname"),
                                 exclude=[r.id for r in results])
                   if st is not None and len(results) == 1 and not args.json else [])
    if args.json:
        # One object: the run's summary, or with --repeats the group's and each run's.
        print(jsonout.dumps(results[0].summary() if len(results) == 1
                            else group_summary(results), indent=2))
    else:
        for result in results:
            print_result(out, result, earlier)
        if len(results) > 1:
            print_group(out, results)
    if not args.quiet:
        warn_noisy(err, results)
    return 0 if all(r.status == "ok" for r in results) else 1


def _param_count(spec: Any) -> int:
    """The model's parameters: the cache or the shipped table, else counted on the meta
    device (nothing allocated)."""
    from accelbench.backends import get_backend
    from accelbench.planning import facts, shipped
    from accelbench.workloads.registry import get_implementation

    for found in (facts.lookup(spec.workload, spec.size, spec.framework),
                  shipped.lookup(spec.workload, spec.size, spec.framework)):
        if found and found.get("param_count"):
            return int(found["param_count"])
    impl = get_implementation(spec.workload, spec.framework)
    return int(get_backend(spec.framework).param_count(impl, spec.size))


def _device_memory(spec: Any) -> tuple[int | None, str]:
    """Bytes of memory one rank's device has, and what it is (a CPU's ranks share the
    host's)."""
    if spec.device == "cpu":
        import psutil

        return int(psutil.virtual_memory().total), "the host's memory"
    from accelbench.backends import get_backend

    for d in get_backend(spec.framework).devices():
        if d.device == spec.device and (d.details or {}).get("memory_bytes"):
            return int(d.details["memory_bytes"]), spec.device
    return None, spec.device


def warn_unfit(err: Console, spec: Any) -> None:
    """Before a sharded or multi-rank CPU case starts: one warning line when the ranks'
    estimated memory exceeds the host's (from the model's known parameter count only; a
    GPU's memory is read by ``--dry-run``, which imports the framework)."""
    if spec.device != "cpu" or not (spec.topology.sharded or spec.topology.distributed):
        return
    from accelbench.planning import facts, shipped
    from accelbench.planning.memory import estimate_rank_memory, fits
    from accelbench.render import fmt_bytes

    known = (facts.lookup(spec.workload, spec.size, spec.framework)
             or shipped.lookup(spec.workload, spec.size, spec.framework) or {})
    if not known.get("param_count"):
        return
    est = estimate_rank_memory(spec, int(known["param_count"]))
    host, _ = _device_memory(spec)
    ranks = spec.topology.nproc_per_node * (spec.topology.devices or 1)
    if fits(est, host, ranks) is False:
        err.print(f"accelbench: warning: {spec.workload} {spec.size} --parallel "
                  f"{spec.topology.parallel}: {ranks} rank(s) x about {fmt_bytes(est.total)} "
                  f"exceed the host's {fmt_bytes(host)}; it may run out of memory "
                  "(--dry-run shows the parts)", highlight=False, markup=False, soft_wrap=True)


def dry_run(spec: Any, out: Console, *, as_json: bool) -> int:
    """``run --dry-run``: each rank's memory estimated for its ``--parallel`` mode, whether
    the ranks fit their device, and nothing run or stored (exit 0; 1 when it cannot fit)."""
    from accelbench.planning.memory import estimate_rank_memory, fits
    from accelbench.render import fmt_bytes

    topo = spec.topology
    est = estimate_rank_memory(spec, _param_count(spec))
    device_bytes, where = _device_memory(spec)
    # A CPU holds all of its node's ranks (and a JAX process's host devices).
    sharing = topo.nproc_per_node * (topo.devices or 1) if spec.device == "cpu" else 1
    ok = fits(est, device_bytes, sharing)
    verdict = ("fit unknown: the memory of " + where + " is not known here" if ok is None
               else f"{'fits' if ok else 'does not fit'}: {sharing} rank(s) x "
               f"{fmt_bytes(est.total)} in {fmt_bytes(device_bytes)} ({where})")
    if as_json:
        print(jsonout.dumps({
            "parallel": topo.parallel, "mesh": {"dp": topo.dp_degree, "tp": topo.tp_degree},
            "act_ckpt": topo.act_ckpt, "per_rank_bytes": {
                "params": est.params, "grads": est.grads, "optimizer": est.optimizer,
                "activations": est.activations, "total": est.total},
            "device_bytes": device_bytes, "fits": ok, "note": est.note}, indent=2))
    else:
        act = fmt_bytes(est.activations) if est.activations is not None else "unavailable"
        out.print(f"{spec.workload} {spec.size} batch={spec.batch_size} {spec.precision} "
                  f"--parallel {topo.parallel}: mesh dp {topo.dp_degree} x tp "
                  f"{topo.tp_degree}{', act-ckpt' if topo.act_ckpt else ''}", highlight=False,
                  markup=False)
        out.print(f"  per rank      params {fmt_bytes(est.params)}, grads "
                  f"{fmt_bytes(est.grads)}, optimizer {fmt_bytes(est.optimizer)}, activations "
                  f"{act}: {fmt_bytes(est.total)}", highlight=False, markup=False)
        out.print(f"  {verdict}", highlight=False, markup=False)
        out.print(f"  {est.note}", highlight=False, markup=False, soft_wrap=True)
    return 1 if ok is False else 0


def generate_data(spec: Any, err: Console, *, quiet: bool) -> None:
    """The generated dataset ``spec`` reads, written first where missing (progress on
    ``err``)."""
    from accelbench.data.generate import ensure_for
    from accelbench.data.store import disk_bytes
    from accelbench.render import fmt_bytes
    from accelbench.workloads.registry import get_workload

    def progress(done: int, total: int) -> None:
        if not quiet:
            err.print(f"generating {spec.workload} {spec.size} data: {done}/{total}",
                      highlight=False, markup=False)

    made = ensure_for(get_workload(spec.workload), spec.size, progress)
    if made is not None and made[1] and not quiet:
        err.print(f"generated {made[0]} ({fmt_bytes(disk_bytes(made[0]))} on disk)",
                  highlight=False, markup=False)


def group_summary(results: Sequence[Any]) -> dict[str, Any]:
    """``run --repeats R --json``: the group's headline (two-level CI) and every run."""
    from accelbench.stats import group_stats

    ok = [r for r in results if r.status == "ok" and r.iteration_times_s]
    group = (group_stats([r.iteration_times_s for r in ok], ok[0].samples_per_step).to_dict()
             if ok else None)
    if group is not None:  # what the group's CI covers (its runs; one run: its iterations)
        from accelbench.report.rows import ci_scope, ci_unreliable

        group["ci_scope"] = ci_scope(group["runs"]) if group.get("ci95") else None
        group["ci_unreliable"] = ci_unreliable(group.get("ci_rel_halfwidth"))
    return {"suite_id": results[0].suite_id, "runs": len(results), "ok_runs": len(ok),
            "group": group, "results": [r.summary() for r in results]}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutput:
    """Where ``run`` puts the result beside the store's default."""

    no_store: bool = option(False, flag="--no-store", help="measure without saving")
    json: bool = option(False, flag="--json", help="print one JSON object")
    dry_run: bool = option(False, flag="--dry-run",
                           help="run nothing: estimate each rank's memory for --parallel "
                           "(parameters, gradients, optimizer state, activations) and say "
                           "whether the ranks fit their device (exit 1 when not)")


def add_case_options(p: argparse.ArgumentParser) -> None:
    """The energy, data-parallel, fast-path and sink groups of ``run`` and ``suite``."""
    from accelbench.sinks import SinkOptions
    from accelbench.spec import FastPaths, MeterOptions, Topology

    add_options(p, MeterOptions, title="energy")
    add_options(p, Topology, title="data parallel (torch.distributed; batch size is per rank)")
    add_options(p, FastPaths, title="fast paths (off by default; part of the case)")
    add_options(p, SinkOptions, title="results elsewhere (each case once stored; see "
                "docs/integrations.md)")


def register(sub: Any) -> None:
    """Add ``run`` to ``sub``."""
    from accelbench.spec import RunChoices

    p = sub.add_parser("run", help="measure one case and store it")
    add_options(p, WorkloadArg, filled=True)
    add_options(p, RunChoices, title="case", skip=("threads", "tag"), filled=True)
    add_measurement_args(p)
    add_case_options(p)
    add_options(p, RunOutput, filled=True)
    p.set_defaults(handler=cmd_run)
