"""``accelbench suite NAME --to-target``: each workload of a suite that has a to-target
recipe trained to its target over seeds (as ``accelbench train`` does), one group per
workload and framework, the groups tagged with the suite's id so that a rerun under the
same ``--suite-id`` skips what is stored (docs/totarget.md)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from accelbench.errors import ConfigError

#: What ``suite --to-target`` takes beside the suite's name: the suite plan keys of the
#: typed options (``cli.suite.given_options``) that mean something for runs to a target.
APPLIES = frozenset({"workloads", "size", "framework", "threads", "meters.cpu_tdp_w",
                     "meters.idle_s", "meters.node_meter", "meters.node_meter_cmd"})
#: Suite flags with no meaning here (beside the case options :data:`APPLIES` filters).
REFUSED = (("launcher", "local", "--launcher"), ("target", None, "a suite id argument"),
           ("json", False, "--json"), ("wide", False, "--wide"),
           ("max_ranks", None, "--max-ranks"))


def _refuse_what_does_not_apply(args: argparse.Namespace,
                                given: dict[str, tuple[str, Any]]) -> None:
    for key, (flag, _value) in given.items():
        if key not in APPLIES:
            raise ConfigError(f"{flag} does not apply to suite --to-target (each workload "
                              "trains its recipe to its target, as accelbench train does)")
    for name, default, flag in REFUSED:
        if getattr(args, name, default) != default:
            raise ConfigError(f"{flag} does not apply to suite --to-target")
    if args.name in ("status", "resume"):
        raise ConfigError(f"suite {args.name} --to-target: rerun the suite with --suite-id ID "
                          "to resume it; accelbench results to-target shows its groups")


def _pairs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(workload, framework) of the suite's cases, in its order, each once."""
    from accelbench.frameworks import DEFAULT_FRAMEWORK
    from accelbench.planning.suites import plan_suite

    cases = plan_suite(args.name, framework=args.framework or DEFAULT_FRAMEWORK,
                       workloads=tuple(args.workload))
    out: list[tuple[str, str]] = []
    for c in cases:
        pair = (c.spec.workload, c.spec.framework)
        if pair not in out:
            out.append(pair)
    return out


def cmd_suite_to_target(args: argparse.Namespace, out: Console, err: Console,
                        given: dict[str, tuple[str, Any]]) -> int:
    """Train each workload of suite ``args.name`` that has a recipe; print and store.
    ``given``: the case options typed (:func:`accelbench.cli.suite.given_options`)."""
    from accelbench.execution.orchestrate import new_suite_id
    from accelbench.planning.plan import check_suite_id
    from accelbench.store import open_store
    from accelbench.totarget.options import TrainOptions, plan
    from accelbench.totarget.recipes import RECIPES
    from accelbench.totarget.run import describe, run_seeds, summarise, summary_line

    _refuse_what_does_not_apply(args, given)
    size = args.size or "tiny"
    sid = args.suite_id or new_suite_id(args.name)
    check_suite_id(sid)
    planned, skipped = [], []

    def say(folder: Any) -> None:
        err.print(f"writing a to-target dataset once: {folder}", highlight=False, markup=False)

    for workload, framework in _pairs(args):
        if (workload, size) not in RECIPES:
            skipped.append(f"{workload} ({framework}): no to-target recipe at size {size}")
            continue
        opts = TrainOptions(workload=workload, size=size, framework=framework,
                            seeds=args.seeds or 1, threads=args.threads or 1,
                            cpu_tdp_w=args.cpu_tdp_w,
                            idle_s=3.0 if args.idle_s is None else args.idle_s,
                            node_meter=args.node_meter, node_meter_cmd=args.node_meter_cmd)
        try:
            planned.append((opts, *plan(opts, say, write=not args.dry_run)))
        except ConfigError as exc:  # a pair its framework does not train, or a refused recipe
            skipped.append(f"{workload} ({framework}): {exc}")
    if not planned:
        raise ConfigError(f"suite {args.name} --to-target: no workload of it has a to-target "
                          f"recipe at size {size} ({'; '.join(skipped)})")
    for line in skipped:
        err.print(f"skipped: {line}", highlight=False, markup=False)
    if args.dry_run:
        for opts, recipe, limits, _m in planned:
            out.print(f"{recipe.workload} {recipe.size} ({opts.framework}): {opts.seeds} "
                      f"seed(s) to held-out {recipe.metric} {limits.target:.4g}",
                      highlight=False, markup=False)
        return 0
    reached_all = True
    with open_store(args.db) as st:
        st.check_writable()
        done = {(r.recipe.workload, r.framework) for r in st.totarget_runs()
                if r.sweep_id == sid}
        for opts, recipe, limits, metering in planned:
            if (recipe.workload, opts.framework) in done and not args.force:
                err.print(f"{recipe.workload} ({opts.framework}): stored under {sid}, "
                          "skipped (--force trains it again)", highlight=False, markup=False)
                continue
            records = run_seeds(recipe, limits, framework=opts.framework, seeds=opts.seeds,
                                metering=metering, threads=opts.threads,
                                on_run=lambda rec: out.print(
                                    f"{rec.recipe.workload} ({rec.framework}) {describe(rec)}",
                                    highlight=False, markup=False, soft_wrap=True))
            records = [_tagged(r, sid) for r in records]
            st.save_totarget(records)
            s = summarise(records)
            reached_all = reached_all and s.reached > 0
            out.print(f"{recipe.workload} ({opts.framework}): {summary_line(s)}; group "
                      f"{records[0].group_id}", highlight=False, markup=False, soft_wrap=True)
    out.print(f"suite {sid} (to target): stored; rerun with --suite-id {sid} to resume, "
              "accelbench results to-target to read the groups", highlight=False,
              markup=False, soft_wrap=True)
    return 0 if reached_all else 1


def _tagged(rec: Any, sid: str) -> Any:
    import dataclasses

    return dataclasses.replace(rec, sweep_id=sid)
