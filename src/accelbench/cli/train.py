"""``accelbench train WORKLOAD``: train to a quality target over seeds and store every
evaluation point (docs/totarget.md)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench.cli.args import add_options
from accelbench.frameworks import DEFAULT_FRAMEWORK, normalize_framework
from accelbench.options import MAX_INT32, option
from accelbench.spec import MAX_LOADER_WORKERS


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainOptions:
    """``accelbench train``."""

    workload: str = option(flag="workload", nonempty=True, fold=True,
                           help="the workload to train (one with a to-target recipe: "
                           "docs/totarget.md)")
    size: str = option("tiny", flag="--size", nonempty=True, fold=True,
                       help="the workload's size (recipes: every family at tiny; llm, "
                       "transformer and vit at small; docs/totarget.md)")
    framework: str = option(DEFAULT_FRAMEWORK, flag="--framework", nonempty=True, fold=True,
                            canonical=normalize_framework,
                            help="framework backend (train runs on torch so far; another is "
                            "refused in one line)")
    target: str = option("auto", flag="--target", nonempty=True, metavar="VALUE|auto",
                         help="the held-out metric to reach: a loss in nats (language "
                         "models), an accuracy (classifiers) or a character error rate "
                         "(speech); auto: the recipe's documented "
                         "target")
    data: str = option("generated", flag="--data", nonempty=True,
                       metavar="generated|digits|PATH",
                       help="generated: the recipe's learnable data with a known floor, "
                       "written once to the data folder and read through the input "
                       "pipeline; digits: scikit-learn's handwritten digits (image "
                       "classifiers; pip install 'accelbench[digits]'); PATH: your folder "
                       "with train/ and val/ in the layout of docs/data.md (needs --target "
                       "VALUE)")
    loader_workers: int = option(0, flag="--loader-workers", lo=0, hi=MAX_LOADER_WORKERS,
                                 metavar="N", help="data loader worker processes preparing "
                                 "batches (0: in the training process)")
    seeds: int = option(1, flag="--seeds", lo=1, hi=100, metavar="N",
                        help="runs with seeds 0..N-1; with 3 or more, MLPerf's score (the "
                        "fastest and slowest dropped) and its CI are printed")
    eval_every: int = option(512, flag="--eval-every", lo=1, hi=MAX_INT32, metavar="SAMPLES",
                             help="training samples between evaluations on the held-out split "
                             "(rounded up to whole batches)")
    max_time_s: float = option(300.0, flag="--max-time", lo=0, lo_open=True, hi=86400.0,
                               metavar="S", help="cap on each run's training clock "
                               "(evaluations included): a run that hits it ends not_reached")
    max_samples: int = option(10_000_000, flag="--max-samples", lo=1, hi=MAX_INT32,
                              help="cap on each run's training samples (ends not_reached)")
    lr: float | None = option(None, flag="--lr", lo=0, lo_open=True, hi=1e6,
                              default_text="default: the recipe's",
                              help="override the recipe's learning rate")
    batch_size: int | None = option(None, flag="--batch-size", lo=1, hi=65536,
                                    default_text="default: the recipe's",
                                    help="override the recipe's batch size")
    threads: int = option(1, flag="--threads", lo=1, hi=1024, metavar="N",
                          help="CPU threads the training uses (torch intra-op threads)")
    cpu_tdp_w: float | None = option(None, flag="--cpu-tdp-w", lo=0, lo_open=True, hi=10000.0,
                                     metavar="W", default_text="default: unavailable where no "
                                     "sensor is readable",
                                     help="where no CPU energy counter (RAPL) is readable, "
                                     "estimate energy as W x training time (labelled an "
                                     "estimate)")


def _prepare(args: argparse.Namespace, err: Console | None = None) -> tuple[Any, Any]:
    """The recipe and limits, every input checked before anything is stored; the dataset
    on disk written first where it is missing (said on ``err``)."""
    from accelbench.totarget.outcome import Limits
    from accelbench.totarget.recipes import recipe_for
    from accelbench.totarget.run import TRAINERS, parse_target, trainer

    if args.framework not in TRAINERS:
        trainer(args.framework)  # its one-line refusal (the backend is imported later)
    recipe = recipe_for(args.workload, args.size).with_overrides(
        lr=args.lr, batch_size=args.batch_size, data=args.data,
        loader_workers=args.loader_workers)
    limits = Limits(target=parse_target(args.target, recipe), eval_every=args.eval_every,
                    max_time_s=args.max_time_s, max_samples=args.max_samples)
    if recipe.feed == "files":  # checked, or written once, before anything is stored
        from accelbench.totarget.ondisk import ensure_dataset, totarget_layout
        from accelbench.workloads.registry import get_workload

        def say(folder: Path) -> None:
            if err is not None:
                err.print(f"writing the {recipe.data} dataset of {recipe.workload} "
                          f"{recipe.size} once: {folder}", highlight=False, markup=False)

        ensure_dataset(recipe, totarget_layout(get_workload(recipe.workload), recipe),
                       on_write=say)
    return recipe, limits


def cmd_train(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Train each seed, print one line per run, store them, print the score."""
    from accelbench.store import open_store
    from accelbench.totarget.run import describe, run_seeds, summarise

    recipe, limits = _prepare(args, err)
    store = open_store(args.db)
    try:
        store.check_sound()
        sense = "<=" if recipe.lower_is_better else ">="
        err.print(f"{recipe.workload} {recipe.size}: training to held-out {recipe.metric} "
                  f"{sense} {limits.target:.4g} ({args.seeds} seed(s))", highlight=False,
                  markup=False)

        def show(rec: Any) -> None:
            out.print(describe(rec), highlight=False, markup=False, soft_wrap=True)

        records = run_seeds(recipe, limits, framework=args.framework, seeds=args.seeds,
                            cpu_tdp_w=args.cpu_tdp_w, threads=args.threads, on_run=show)
        store.save_totarget(records)
    finally:
        store.close()
    s = summarise(records)
    line = f"{s.reached}/{s.runs} reached the target ({s.diverged} diverged)"
    if s.time_score is not None:
        sc = s.time_score
        line += (f"; time-to-target score {sc.mean:.3g} s (MLPerf: fastest and slowest "
                 f"dropped, {sc.kept} kept; {sc.confidence:.0%} CI {sc.ci_low:.3g}-"
                 f"{sc.ci_high:.3g} s)")
    else:
        line += f"; no MLPerf score ({s.why_no_score})"
    if s.samples_cv is not None:
        line += f"; samples-to-target CV {s.samples_cv:.1%}"
    if s.convergence is not None:
        c = s.convergence
        verdict = ("FASTER than the references allow (MLPerf would reject it)" if c.too_fast
                   else "within what the references allow")
        line += (f"; convergence: mean samples-to-target {c.mean:.0f} (olympic) vs minimum "
                 f"{c.limit.min_mean:.0f} of the reference runs, {verdict}")
    else:
        line += f"; no convergence check ({s.why_no_check})"
    out.print(line + f"; stored as group {records[0].group_id}", highlight=False,
              markup=False, soft_wrap=True)
    return 0 if s.reached else 1


def register(sub: Any) -> None:
    """Add ``train`` to ``sub``."""
    p = sub.add_parser(
        "train", help="train to a quality target over seeds (time, samples, energy)",
        description="train WORKLOAD: train on learnable data (written to disk once and "
        "read through the input pipeline) until the held-out "
        "metric reaches the target (or a cap is hit, or the loss is not finite), "
        "evaluation time counted and start-up reported apart; each seed's run and every "
        "evaluation point are stored (docs/totarget.md).")
    add_options(p, TrainOptions, filled=True)
    p.set_defaults(handler=cmd_train)
