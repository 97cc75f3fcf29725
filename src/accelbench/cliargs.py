"""Argument groups shared by the core CLI and the subcommand modules."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from accelbench.errors import ConfigError
from accelbench.result import STATUSES

if TYPE_CHECKING:
    from accelbench.store import ResultFilter


def add_framework_arg(p: argparse.ArgumentParser) -> None:
    """``--framework``: which backend builds and trains the model."""
    from accelbench.spec import FRAMEWORKS

    p.add_argument("--framework", default="torch",
                   help=f"framework backend: {', '.join(FRAMEWORKS)} (default torch)")


def add_policy_args(
    p: argparse.ArgumentParser, *, timeout: bool = True, tag: bool = True
) -> None:
    """The measurement options every measuring command takes."""
    g = p.add_argument_group("measurement")
    g.add_argument("--iterations", type=int, help="exact measured iterations (no adaptive stop)")
    g.add_argument("--target-ci", type=float,
                   help="stop when the CI95 half-width is within this fraction of the median")
    g.add_argument("--max-time", type=float, help="most seconds of measurement per case")
    if timeout:
        g.add_argument("--timeout", type=float, help="wall-clock limit of each case's worker (s)")
    g.add_argument("--threads", type=int, help="CPU threads for the framework")
    if tag:
        g.add_argument("--tag", default="", help="free text stored with the result(s)")


def add_filter_args(p: argparse.ArgumentParser, *, status: bool = True) -> None:
    """The result filters of ``results``, ``report``, ``compare`` and ``export``."""
    g = p.add_argument_group("filters (all must match)")
    g.add_argument("--workload")
    g.add_argument("--device", help="device id as run: cpu, cuda:0, mps")
    g.add_argument("--precision", help="fp32, tf32, amp_fp16, amp_bf16")
    g.add_argument("--size", help="tiny, small or paper")
    g.add_argument("--framework", help="torch or jax")
    if status:
        g.add_argument("--status", choices=STATUSES)
    g.add_argument("--suite-id")
    g.add_argument("--tag")
    g.add_argument("--limit", type=int, help="only the newest N results")


def result_filter(args: argparse.Namespace, **fixed: Any) -> ResultFilter:
    """A :class:`ResultFilter` from :func:`add_filter_args` options; ``fixed`` overrides them."""
    from accelbench.spec import normalize_framework, normalize_precision
    from accelbench.store import ResultFilter

    limit = getattr(args, "limit", None)
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {limit}")
    values: dict[str, Any] = {
        "workload": getattr(args, "workload", None),
        "device": getattr(args, "device", None),
        "precision": normalize_precision(args.precision) if getattr(args, "precision", None)
        else None,
        "size": getattr(args, "size", None),
        "framework": normalize_framework(args.framework) if getattr(args, "framework", None)
        else None,
        "status": getattr(args, "status", None),
        "suite_id": getattr(args, "suite_id", None),
        "tag": getattr(args, "tag", None),
        "limit": limit,
    }
    values.update(fixed)
    return ResultFilter(**values)
