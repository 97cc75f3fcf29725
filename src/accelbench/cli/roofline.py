"""``accelbench roofline``: the roofline chart and data from the store, optionally
measuring model step breakdowns first.
"""


from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import add_framework_arg, add_options
from accelbench.cli.ops_common import check_op_device, fmt_ms, fmt_pct, open_store_of
from accelbench.cli.store_args import store_files
from accelbench.errors import ConfigError
from accelbench.options import option
from accelbench.spec import MAX_SECONDS, RunChoices

#: Default wall-clock limit of one ``roofline --model`` breakdown worker (s).
ROOFLINE_TIMEOUT_S = 900.0



#: The options that only act with ``--model`` (dest -> default), given None by the parser
#: so that one typed without ``--model`` is refused rather than ignored.
MODEL_OPTIONS: dict[str, Any] = {"size": "tiny", "batch_size": None, "precision": "fp32",
                                 "threads": None, "repeats": 3, "timeout": ROOFLINE_TIMEOUT_S,
                                 "tag": ""}


def check_model_options(args: argparse.Namespace) -> None:
    """Refuse an option that acts only with ``--model`` when no ``--model`` is given, and an
    unknown ``--framework``; then fill in the defaults of the model options."""
    from accelbench.backends.registry import DEFAULT_FRAMEWORK

    if args.framework is None:
        args.framework = DEFAULT_FRAMEWORK
    else:  # canonical, an unknown one refused as it was parsed (the option's declaration)
        if not args.model and not args.device:
            raise ConfigError("--framework acts only on a model breakdown (--model) or a "
                              "device check (--device): add one, or drop it")
    if not args.model:
        given = [f"--{dest.replace('_', '-')}" for dest in MODEL_OPTIONS
                 if getattr(args, dest) is not None]
        if given:
            raise ConfigError(f"{given[0]} acts only on a model breakdown: add --model "
                              "WORKLOAD, or drop it")
    for dest, default in MODEL_OPTIONS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)


def _cmd_roofline(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.outputs import check_out_dir
    from accelbench.report.roofline_files import ROOFLINE_FILES, write_roofline
    from accelbench.roofline.data import roofline_data

    check_model_options(args)

    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():  # refused before anything is measured
        raise ConfigError(f"--out {out_dir} is a file, not a directory: choose a directory "
                          "(it is created if missing)")
    device = check_op_device(args) if args.device else None
    if args.model:  # every choice checked before anything is printed, opened or measured
        from accelbench.planning.cases import prepare_case

        for workload in args.model:
            prepare_case(workload, RunChoices(
                size=args.size, batch_size=args.batch_size, precision=args.precision,
                device=device or "cpu", framework=args.framework, threads=args.threads))
    check_out_dir(out_dir, ROOFLINE_FILES, protected=store_files(args), force=args.force)
    with open_store_of(args, write=bool(args.model)) as store:
        if args.model:
            from accelbench.execution.breakdown import breakdown_isolated
            from accelbench.roofline.breakdown import save_breakdown

            for workload in args.model:
                if not args.quiet:
                    err.print(f"breaking down a {workload} {args.size} training step on "
                              f"{device or 'cpu'}", highlight=False)
                bd = breakdown_isolated(workload, RunChoices(
                    size=args.size, batch_size=args.batch_size, precision=args.precision,
                    device=device or "cpu", framework=args.framework, threads=args.threads),
                    repeats=args.repeats, timeout_s=args.timeout)
                save_breakdown(store, bd, tag=args.tag)
        files = write_roofline(store, out_dir, device)
        data = roofline_data(store, device)
    if args.json:
        print(jsonout.dumps({"files": {k: str(v) for k, v in files.items()}, **data},
                            indent=2, default=str))
        return 0
    points = data["points"]
    if not points:
        err.print("no operator results or model breakdowns stored yet: run accelbench ops, or "
                  "accelbench roofline --model WORKLOAD", highlight=False)
    if not data["roofs"]:
        err.print("no measured peaks: run accelbench peaks to draw the roofs", highlight=False)
    _print_model_kinds(out, data["breakdowns"], [p for p in points if p["kind"] == "model"])
    _print_above_roof(out, points)
    for kind, path in files.items():
        out.print(f"wrote {kind:10s} {path}", highlight=False)
    return 0



def _print_model_kinds(out: Console, breakdowns: list[dict[str, Any]],
                       points: list[dict[str, Any]]) -> None:
    """Each breakdown's op kinds as shares of its step (they sum to the step time)."""
    if not breakdowns:
        return
    from rich.table import Table

    from accelbench.roofline.plot import fmt_si

    by_key = {(p.get("case"), p.get("device"), p.get("hostname"), p["group"]): p
              for p in points}
    table = Table(title="model step by op kind (latest breakdowns; kinds sum to the step)",
                  header_style="bold")
    for col in ("case", "kind", "time ms", "% of step", "FLOP/B", "achieved", "bound",
                "% of roof"):
        table.add_column(col)
    for bd in breakdowns:
        rows = [*bd["kinds"], {"kind": "total", "time_s": bd["step_time_s"],
                               "share_of_step": 1.0}]
        for i, k in enumerate(rows):
            p = by_key.get((bd["case"], bd["device"], bd["hostname"], k["kind"]), {})
            flag = " [red]above roof[/red]" if p.get("above_roof") else ""
            table.add_row(
                bd["case"] if i == 0 else "",
                k["kind"] + (" (est. FLOPs)" if p.get("flops_estimated") else ""),
                fmt_ms(k["time_s"]), fmt_pct(100 * k["share_of_step"]),
                f"{p['intensity_flop_per_byte']:.3g}" if p.get("intensity_flop_per_byte")
                else "-",
                fmt_si(p.get("achieved_flop_per_s"), "FLOP/s"), p.get("bound") or "-",
                fmt_pct(p.get("pct_of_roof")) + flag,
            )
    out.print(table)
    methods = sorted({bd["step_time_method"] for bd in breakdowns})
    out.print("step time: " + "; ".join(methods), highlight=False)



def _print_above_roof(out: Console, points: list[dict[str, Any]]) -> None:
    """Points that beat their measured roof, and why that is likely."""
    above = [p for p in points if p.get("above_roof")]
    if not above:
        return
    from rich.table import Table

    from accelbench.roofline.data import ABOVE_ROOF_REASON
    from accelbench.roofline.plot import fmt_si

    table = Table(title=f"{len(above)} point(s) ABOVE their measured roof", header_style="bold")
    for col in ("point", "device", "achieved", "roof", "% of roof"):
        table.add_column(col)
    for p in above:
        table.add_row(p.get("case", "") + (" " if p.get("case") else "") + p["label"],
                      p["device"], fmt_si(p["achieved_flop_per_s"], "FLOP/s"),
                      fmt_si(p.get("roof_flop_per_s"), "FLOP/s"), fmt_pct(p["pct_of_roof"]))
    out.print(table)
    out.print(f"above roof: {ABOVE_ROOF_REASON}", highlight=False)



@dataclass(frozen=True, kw_only=True, slots=True)
class RooflineOptions:
    """``accelbench roofline``; with ``--model``, the case options are :class:`RunChoices`'
    own (their defaults here: :data:`MODEL_OPTIONS`)."""

    device: str | None = option(None, flag="--device", nonempty=True, fold=True,
                                help="only this device (default: every device in the store)")
    out: str = option("roofline", flag="--out", nonempty=True, default_text="",
                      help="output directory (default ./roofline; new, or empty unless "
                      "--force)")
    force: bool = option(False, flag="--force",
                         help="write into a directory that is not empty (files of the same "
                         "names are replaced; never the results store)")
    model: tuple[str, ...] = option(
        (), flag="--model", many=True, metavar="WORKLOAD", nonempty=True, fold=True,
        help="first break down a training step of this workload (repeatable)")
    repeats: int | None = option(None, flag="--repeats", lo=1, hi=1000,
                                 help="with --model: profiled steps (default 3; not run's "
                                 "--repeats: one worker profiles them all)")
    timeout: float | None = option(
        None, flag="--timeout", lo=0.0, lo_open=True, hi=MAX_SECONDS,
        help=f"with --model: wall-clock limit of each breakdown's worker (s, default "
        f"{ROOFLINE_TIMEOUT_S:g})")
    json: bool = option(False, flag="--json", help="also print the data as JSON")


def register(sub: Any) -> None:
    """Add ``roofline`` to ``sub``."""
    p = sub.add_parser("roofline", help="roofline chart and data (PNG, SVG, JSON, CSV)")
    add_options(p, RooflineOptions, only=("device",), filled=True)
    add_framework_arg(p, filled=False)  # None when not typed: refused without a use
    add_options(p, RooflineOptions, only=("out", "force", "model"), filled=True)
    # run's own case options, None unless typed (refused without --model)
    add_options(p, RunChoices, only=("size", "batch_size", "precision", "threads"),
                prefix="with --model: ", shown=MODEL_OPTIONS)
    add_options(p, RooflineOptions, only=("repeats", "timeout"), filled=True)
    add_options(p, RunChoices, only=("tag",), prefix="with --model: ", shown=MODEL_OPTIONS)
    add_options(p, RooflineOptions, only=("json",), filled=True)
    p.set_defaults(handler=_cmd_roofline)
