"""The options of a run to a target (``accelbench train`` and :func:`accelbench.api.train`),
declared once: the CLI's flags and the API's keywords are generated from them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.frameworks import DEFAULT_FRAMEWORK, normalize_framework
from accelbench.options import MAX_INT32, option, same_option, validate_fields
from accelbench.spec import MAX_LOADER_WORKERS, MeterOptions, RunChoices


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
                            help="framework backend: torch or jax (the same recipes, data "
                            "and rules)")
    device: str = same_option(
        RunChoices, "device",
        help="the device to train on, named as run names it: cpu, cuda, cuda:N (NVIDIA, or AMD "
        "through ROCm's torch), mps (torch), tpu:N (jax); a device not present here is "
        "refused before anything runs")
    target: str = option("auto", flag="--target", nonempty=True, metavar="VALUE|auto",
                         help="the held-out metric to reach: a loss in nats (language "
                         "models), an accuracy (classifiers) or a character error rate "
                         "(speech); auto: the recipe's documented target")
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
                          help="CPU threads the training uses (torch: intra-op threads; "
                          "jax: XLA's CPU thread pool, on the first N allowed CPUs, sized once "
                          "per process)")
    cpu_tdp_w: float | None = option(None, flag="--cpu-tdp-w", lo=0, lo_open=True, hi=10000.0,
                                     metavar="W", default_text="default: unavailable where no "
                                     "sensor is readable",
                                     help="where no CPU energy counter (RAPL) is readable, "
                                     "estimate energy as W x training time (labelled an "
                                     "estimate)")
    # The energy options of run (spec.MeterOptions), composed: one declaration each.
    idle_s: float = same_option(
        MeterOptions, "idle_s", off_flag=None, metavar="S",
        help="idle baseline before the first seed, where a sensor reads: each sensor's energy "
        "is split into idle (its idle power x the training clock) and dynamic (0: no split)")
    node_meter: str | None = same_option(MeterOptions, "node_meter")
    node_meter_cmd: str | None = same_option(MeterOptions, "node_meter_cmd")

    def __post_init__(self) -> None:
        validate_fields(self)


def plan(opts: TrainOptions, on_write: Callable[[Path], None] | None = None, *,
         write: bool = True) -> tuple[Any, Any, Any]:
    """The recipe, limits and metering of ``opts``, every input checked before anything is
    stored (a one-line ``ConfigError`` otherwise); the dataset on disk written first where
    it is missing (``on_write`` is told its folder; ``write=False``: not, for a dry run)."""
    from accelbench.totarget.energy import Metering
    from accelbench.totarget.outcome import Limits
    from accelbench.totarget.recipes import recipe_for
    from accelbench.totarget.run import checked_device, fitted, parse_target, trainer

    trainer(opts.framework, threads=opts.threads)
    device = checked_device(opts.framework, opts.device)
    recipe = recipe_for(opts.workload, opts.size).with_overrides(
        lr=opts.lr, batch_size=opts.batch_size, data=opts.data,
        loader_workers=opts.loader_workers)
    recipe = fitted(opts.framework, recipe)
    limits = Limits(target=parse_target(opts.target, recipe), eval_every=opts.eval_every,
                    max_time_s=opts.max_time_s, max_samples=opts.max_samples)
    metering = Metering(cpu_tdp_w=opts.cpu_tdp_w, idle_s=opts.idle_s, node_meter=opts.node_meter,
                        node_meter_cmd=opts.node_meter_cmd, device=device)
    node = metering.node()  # a bad node meter is refused here, before anything runs
    if node is not None:
        node.close()
    if write and recipe.feed == "files":  # checked, or written once, before anything is stored
        from accelbench.totarget.ondisk import ensure_dataset, totarget_layout
        from accelbench.workloads.registry import get_workload

        ensure_dataset(recipe, totarget_layout(get_workload(recipe.workload), recipe),
                       on_write=on_write)
    return recipe, limits, metering
