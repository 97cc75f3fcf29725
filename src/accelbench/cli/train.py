"""``accelbench train WORKLOAD``: train to a quality target over seeds and store every
evaluation point (docs/totarget.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench.cli.args import add_options
from accelbench.totarget.options import TrainOptions


def cmd_train(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Train each seed, print one line per run, store them, print the score."""
    from accelbench.store import open_store
    from accelbench.totarget.options import plan
    from accelbench.totarget.run import describe, run_seeds, summarise, summary_line

    opts = TrainOptions(**{f: getattr(args, f) for f in TrainOptions.__slots__})

    def say(folder: Path) -> None:
        err.print(f"writing the {opts.data} dataset of {opts.workload} {opts.size} once: "
                  f"{folder}", highlight=False, markup=False)

    recipe, limits, metering = plan(opts, on_write=say)
    store = open_store(args.db)
    try:
        store.check_sound()
        sense = "<=" if recipe.lower_is_better else ">="
        err.print(f"{recipe.workload} {recipe.size}: training to held-out {recipe.metric} "
                  f"{sense} {limits.target:.4g} on {metering.device} ({args.seeds} seed(s))",
                  highlight=False, markup=False)

        def show(rec: Any) -> None:
            out.print(describe(rec), highlight=False, markup=False, soft_wrap=True)

        records = run_seeds(recipe, limits, framework=args.framework, seeds=args.seeds,
                            metering=metering, threads=args.threads, on_run=show)
        store.save_totarget(records)
    finally:
        store.close()
    s = summarise(records)
    line = summary_line(s)
    out.print(line + f"; stored as group {records[0].group_id}", highlight=False,
              markup=False, soft_wrap=True)
    return 0 if s.reached else 1


def register(sub: Any) -> None:
    """Add ``train`` to ``sub``."""
    p = sub.add_parser(
        "train", help="train to a quality target over seeds (time, samples, energy)",
        description="train WORKLOAD: train on learnable generated data until the held-out "
        "metric reaches the target (or a cap is hit, or the loss is not finite), "
        "evaluation time counted and start-up reported apart; each seed's run and every "
        "evaluation point are stored (docs/totarget.md).")
    add_options(p, TrainOptions, filled=True)
    p.set_defaults(handler=cmd_train)
