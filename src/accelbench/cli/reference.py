"""``accelbench reference``: the paper's published results (Wang et al. 2020).
"""


from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import add_options, refuse_unless
from accelbench.cli.store_args import open_results_store
from accelbench.errors import ConfigError
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class ReferenceOptions:
    """``accelbench reference``."""

    workload: str | None = option(
        None, flag="--workload", nonempty=True, fold=True,
        help="a workload with published rows (resnet50, inception_v3, vgg16, lstm, "
        "deepspeech2, transformer)")
    precision: str | None = option(None, flag="--precision", nonempty=True, fold=True, help="")
    batch_size: int | None = option(None, flag="--batch-size", lo=1, help="")
    device: str | None = option(None, flag="--device", nonempty=True,
                                help="substring of the published device name, e.g. V100")
    match: bool = option(False, flag="--match", help="show your matching stored results")
    json: bool = option(False, flag="--json", exclusive="format", help="")
    csv: bool = option(False, flag="--csv", exclusive="format", help="")


def _cmd_reference(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.report.reference import (
        BOUNDARY_TEXT,
        LABEL,
        load_reference,
        match_reference,
        reference_workloads,
    )
    from accelbench.report.rows import case_rows, did_you_mean, newest_per_case

    if args.workload is not None and args.workload not in reference_workloads():
        published = reference_workloads()
        hint = did_you_mean(args.workload, published)
        raise ConfigError(
            f"no published results for workload {args.workload!r}{hint} "
            f"(published: {', '.join(published)})"
        )
    refs = load_reference(workload=args.workload, precision=args.precision,
                          batch_size=args.batch_size, device=args.device)
    matches = []
    if args.match:
        with open_results_store(args) as st:
            flt = _result_filter_for_reference(args)
            rows = newest_per_case(case_rows(st.query(flt)))
        rows = [r for r in rows if args.batch_size is None or r.batch_size == args.batch_size]
        matches = match_reference(rows)
    if args.json:
        doc: dict[str, Any] = {"label": LABEL, "rows": [r.to_dict() for r in refs]}
        if args.match:
            doc["matches"] = [
                {"result": m.row.to_dict(), "comparable": m.comparable, "note": m.note,
                 "reference": [r.to_dict() for r in m.reference]}
                for m in matches
            ]
        print(jsonout.dumps(doc, indent=2))
        return 0
    if args.csv:
        import csv

        fields = ["device", "precision", "paper_precision", "workload", "batch_size",
                  "sample_unit", "status", "samples_per_s", "avg_power_w", "energy_j_per_sample"]
        w = csv.DictWriter(sys.stdout, fieldnames=fields)
        w.writeheader()
        for r in refs:
            w.writerow({k: ("" if v is None else v) for k, v in r.to_dict().items()})
        return 0
    from rich.table import Table

    from accelbench.render import fmt_rate

    out.print(f"{LABEL} The {BOUNDARY_TEXT}.", highlight=False, markup=False)
    t = Table(header_style="bold")
    for col in ("device (published)", "workload", "batch", "precision", "status",
                "throughput /s", "avg W", "J/sample"):
        t.add_column(col)
    for r in refs:
        t.add_row(r.device, r.workload, str(r.batch_size), r.precision, r.status,
                  fmt_rate(r.samples_per_s), fmt_rate(r.avg_power_w),
                  f"{r.energy_j_per_sample:.3g}" if r.energy_j_per_sample is not None else "-")
    out.print(t)
    if args.match:
        if not matches:
            out.print("none of your stored results has the workload, batch size and precision "
                      "of these published rows", highlight=False, markup=False)
        for m in matches:
            row = m.row
            out.print(
                f"your {row.workload} bs={row.batch_size} {row.precision} on {row.device_name} "
                f"(size {row.size}, id {row.result_id[:8]}): {fmt_rate(row.samples_per_s)} "
                f"{row.sample_unit}s/s vs published "
                + ", ".join(f"{r.device} {fmt_rate(r.samples_per_s)}" for r in m.reference)
                + (f"  [{m.note}]" if m.note else ""),
                highlight=False, markup=False,
            )
    return 0



def _result_filter_for_reference(args: argparse.Namespace) -> Any:
    from accelbench.spec import normalize_precision
    from accelbench.store import ResultFilter

    return ResultFilter(
        workload=args.workload, status="ok",
        precision=normalize_precision(args.precision) if args.precision else None,
    )



def register(sub: Any) -> None:
    """Add ``reference`` to ``sub``."""
    p = sub.add_parser(
        "reference", help="the paper's published results (Wang et al. 2020, Table 10)",
        description="Published figures measured by the paper's authors on other hardware. "
        "--match puts your stored results with the same workload, batch size and precision "
        "next to them.",
    )
    add_options(p, ReferenceOptions, filled=True)
    p.set_defaults(handler=_cmd_reference)
    refuse_unless(p, ["--match"], lambda a: not a.csv, "conflicts with --csv (the published "
                  "rows only; --json and the table show the matches)")

