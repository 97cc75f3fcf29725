"""Argument groups shared by the core CLI and the subcommand modules."""

from __future__ import annotations

import argparse


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
