"""Argument groups shared by the core CLI and the subcommand modules."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelbench.errors import ConfigError
from accelbench.result import STATUSES

if TYPE_CHECKING:
    from accelbench.store import ResultFilter


# --------------------------------------------------------------------------- value types
# Argument types that refuse what the spec dataclasses would refuse, at parse time, with
# argparse's "argument --x: ..." prefix (one line: see cli.OneLineParser).


def finite(
    lo: float | None = None, hi: float | None = None, *, lo_open: bool = False
) -> Callable[[str], float]:
    """A float argument type: finite (no NaN, no Inf) and within the bounds."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if lo is not None and (value <= lo if lo_open else value < lo):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if lo_open else '>='} {lo:g}, got {text!r}")
        if hi is not None and value > hi:
            raise argparse.ArgumentTypeError(f"must be <= {hi:g}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def integer(lo: int = 1, hi: int | None = None) -> Callable[[str], int]:
    """An int argument type within ``[lo, hi]`` (``hi`` defaults to what a store column holds)."""
    from accelbench.spec import MAX_INT32

    top = MAX_INT32 if hi is None else hi

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= value <= top:
            raise argparse.ArgumentTypeError(f"must be between {lo} and {top}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def threads_arg(text: str) -> int:
    """``--threads``: at least 1, at most the CPUs this process may use."""
    from accelbench.spec import max_threads

    return integer(1, max_threads())(text)


def nonempty(text: str) -> str:
    """A string argument that must not be empty or blank (ids, paths, names)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def add_framework_arg(p: argparse.ArgumentParser) -> None:
    """``--framework``: which backend builds and trains the model."""
    from accelbench.spec import FRAMEWORKS

    p.add_argument("--framework", default="torch",
                   help=f"framework backend: {', '.join(FRAMEWORKS)} (default torch)")


def add_policy_args(
    p: argparse.ArgumentParser, *, timeout: bool = True, tag: bool = True,
    repeats: bool = True,
) -> None:
    """The measurement options every measuring command takes (read back with
    :func:`policy_kwargs`); ``repeats`` adds ``--repeats`` (model cases: run, suite)."""
    from accelbench.spec import MAX_ITERATIONS, MAX_REPEATS, MAX_SECONDS

    g = p.add_argument_group("measurement")
    g.add_argument("--iterations", type=integer(1, MAX_ITERATIONS),
                   help="exact measured iterations (no adaptive stop, no minimum)")
    g.add_argument("--target-ci", type=finite(0.0, 0.999, lo_open=True),
                   help="stop when the CI95 half-width is within this fraction of the median")
    g.add_argument("--max-time", type=finite(0.0, MAX_SECONDS, lo_open=True),
                   help="seconds of measurement per case after which the adaptive stop ends "
                   "it (a target: the minimum iterations are still reached)")
    g.add_argument("--min-iterations", type=integer(2, MAX_ITERATIONS),
                   help="fewest measured iterations for an ok case (default 10)")
    g.add_argument("--max-iterations", type=integer(1, MAX_ITERATIONS),
                   help="most measured iterations (default 1000)")
    g.add_argument("--strict-max-time", action="store_true",
                   help="--max-time is a hard cap: a case cut below the minimum is stored "
                   "as insufficient, without a CI")
    if repeats:
        g.add_argument("--repeats", type=integer(1, MAX_REPEATS),
                       help="runs of each case, each in a fresh worker (a suite interleaves "
                       "them); the headline CI then covers the variation between runs "
                       "(default 1; 3 for the paper and frameworks suites)")
    if timeout:
        g.add_argument("--timeout", type=finite(0.0, MAX_SECONDS, lo_open=True),
                       help="wall-clock limit of each case's worker (s)")
    g.add_argument("--threads", type=threads_arg, help="CPU threads for the framework")
    if tag:
        g.add_argument("--tag", default="", help="free text stored with the result(s)")


def policy_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The :func:`accelbench.api.make_policy` keywords of :func:`add_policy_args` options."""
    if args.iterations is not None:
        for flag, value in (("--min-iterations", args.min_iterations),
                            ("--max-iterations", args.max_iterations),
                            ("--target-ci", args.target_ci)):
            if value is not None:
                raise ConfigError(f"{flag} conflicts with --iterations (an exact count)")
    if args.strict_max_time and args.max_time is None:
        raise ConfigError("--strict-max-time needs --max-time")
    out: dict[str, Any] = {
        "iterations": args.iterations,
        "target_ci": args.target_ci,
        "max_time": args.max_time,
        "min_iterations": args.min_iterations,
        "max_iterations": args.max_iterations,
        "strict_max_time": args.strict_max_time or None,
        "timeout": getattr(args, "timeout", None),
    }
    if getattr(args, "repeats", None) is not None:
        out["repeats"] = args.repeats
    return out


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
    g.add_argument("--suite-id", type=nonempty)
    g.add_argument("--tag")
    g.add_argument("--limit", type=integer(1), help="only the newest N results")


def result_filter(args: argparse.Namespace, **fixed: Any) -> ResultFilter:
    """A :class:`ResultFilter` from :func:`add_filter_args` options; ``fixed`` overrides them."""
    from accelbench.spec import normalize_framework, normalize_precision
    from accelbench.store import ResultFilter

    limit = getattr(args, "limit", None)
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


def add_topology_args(p: argparse.ArgumentParser) -> None:
    """``--nproc-per-node``, ``--nnodes``, ``--node-rank``, ``--rdzv-endpoint`` (torchrun's
    meanings) and ``--dist-backend`` (read back with :func:`topology_kwargs`)."""
    from accelbench.spec import DIST_BACKENDS, MAX_NODES, MAX_RANKS_PER_NODE

    g = p.add_argument_group("data parallel (torch.distributed; batch size is per rank)")
    g.add_argument("--nproc-per-node", type=integer(1, MAX_RANKS_PER_NODE), metavar="N",
                   help="ranks (one device each) on this node (default 1)")
    g.add_argument("--nnodes", type=integer(1, MAX_NODES), metavar="M",
                   help="nodes taking part (default 1; more need --rdzv-endpoint)")
    g.add_argument("--node-rank", type=integer(0, MAX_NODES), metavar="R",
                   help="this node's rank among --nnodes (default 0)")
    g.add_argument("--rdzv-endpoint", type=nonempty, metavar="HOST:PORT",
                   help="rendezvous every node joins (a host all nodes reach)")
    g.add_argument("--dist-backend", choices=DIST_BACKENDS,
                   help="torch.distributed backend (default auto: nccl on GPUs, gloo on CPUs)")


def topology_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The :func:`accelbench.api.make_topology` keywords of :func:`add_topology_args`."""
    return {k: getattr(args, k, None) for k in (
        "nproc_per_node", "nnodes", "node_rank", "rdzv_endpoint", "dist_backend")}


def add_fast_path_args(p: argparse.ArgumentParser) -> None:
    """``--compile``, ``--channels-last``, ``--fused-optimizer`` (case options, in the key)."""
    g = p.add_argument_group("fast paths (off by default; part of the case)")
    g.add_argument("--compile", action="store_true",
                   help="torch.compile the model (compile time stored apart, never in "
                   "throughput)")
    g.add_argument("--channels-last", action="store_true",
                   help="NHWC memory format for convolutional models")
    g.add_argument("--fused-optimizer", action="store_true",
                   help="the optimizer's fused implementation")


def fast_path_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The :func:`accelbench.api.make_fast_paths` keywords of :func:`add_fast_path_args`."""
    return {k: bool(getattr(args, k, False))
            for k in ("compile", "channels_last", "fused_optimizer")}
