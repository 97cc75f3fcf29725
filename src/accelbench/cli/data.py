"""``accelbench data generate WORKLOAD --size S [--out DIR]``: write the dataset that
``run --data generated`` reads, with progress, and say where it is and its size on disk."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench.cli.args import add_options
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class DataOptions:
    """``accelbench data generate``."""

    action: str = option(flag="action", choices=("generate",),
                         help="what to do (generate: write a workload's generated dataset)")
    workload: str = option(flag="workload", nonempty=True, fold=True,
                           help="the workload whose dataset is written (its layout and "
                           "resolution or vocabulary at --size)")
    size: str = option("paper", flag="--size", nonempty=True, fold=True,
                       help="tiny, small, paper, or a size of the workload's own")
    out: str | None = option(None, flag="--out", nonempty=True, metavar="DIR",
                             default_text="default: the data folder run --data generated "
                             "reads ($ACCELBENCH_DATA_DIR, else data/ in the cache directory)",
                             help="write the dataset here instead (a new or empty folder)")


def cmd_data(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Write the dataset (or find it written) and print one line: where, how many
    samples, its size on disk."""
    from accelbench.data.generate import MARKER, ensure_generated
    from accelbench.data.layouts import ImageLayout, TokenLayout, layout_of, samples_for
    from accelbench.data.store import disk_bytes
    from accelbench.render import fmt_bytes
    from accelbench.spec import check_size
    from accelbench.workloads.registry import get_workload

    wl = get_workload(args.workload)
    size = wl.check_size(check_size(args.size))
    layout = layout_of(wl, size)
    unit = "images" if isinstance(layout, ImageLayout) else \
        "tokens" if isinstance(layout, TokenLayout) else "utterances"
    target = Path(args.out).expanduser() if args.out else None

    def progress(done: int, total: int) -> None:
        if not args.quiet:
            err.print(f"writing {wl.name} {size}: {done}/{total} {unit}", highlight=False,
                      markup=False)

    path, made = ensure_generated(layout, size, out=target, progress=progress)
    count = samples_for(layout, size)
    what = "written" if made else "already there"
    out.print(f"{path}: {count} {unit} ({layout.name}), {fmt_bytes(disk_bytes(path))} on "
              f"disk, {what} ({MARKER} says how it was made)", highlight=False, markup=False,
              soft_wrap=True)
    return 0


def register(sub: Any) -> None:
    """Add ``data`` to ``sub``."""
    p = sub.add_parser(
        "data", help="write the dataset run --data generated reads",
        description="data generate WORKLOAD --size S: write the dataset `run --data "
        "generated` reads for WORKLOAD at size S (JPEG images in class folders at the "
        "workload's resolution, uint16 token shards with meta.json, or 16-bit WAV files with "
        "transcripts; docs/data.md), once: "
        "a dataset already written is reused. Prints its folder and size on disk.")
    add_options(p, DataOptions, filled=True)
    p.set_defaults(handler=cmd_data)
