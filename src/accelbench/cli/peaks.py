"""``accelbench peaks``: a device's measured (cached) and theoretical compute and
bandwidth peaks.
"""


from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import (
    add_framework_arg,
    add_measurement_args,
    add_options,
)
from accelbench.cli.ops_common import (
    MAX_COPY_MIB,
    OP_DEVICE,
    OP_PRECISIONS,
    check_op_device,
    fmt_pct,
    int_list,
    op_precisions,
    open_store_of,
    policy_from_args,
)
from accelbench.errors import ConfigError
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class PeaksOptions:
    """``accelbench peaks`` (beside ``--framework`` and the measurement options)."""

    device: str = option(**OP_DEVICE)
    precision: tuple[str, ...] = option(**OP_PRECISIONS)
    measure: bool = option(False, flag="--measure", exclusive="when",
                           help="measure again even if cached")
    no_measure: bool = option(False, flag="--no-measure", exclusive="when",
                              help="only show cached values; measure nothing")
    gemm_sizes: list[int] | None = option(None, flag="--gemm-sizes", parse=int_list,
                                          metavar="N,N,...",
                                          help="square GEMM sides of the compute sweep")
    copy_mib: int | None = option(None, flag="--copy-mib", lo=1, hi=MAX_COPY_MIB,
                                  help="MiB per buffer of the bandwidth copy")
    json: bool = option(False, flag="--json", help="")


def _cmd_peaks(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.execution.peaks import (
        PEAK_POLICY,
        PeakSweep,
        device_name_of,
        ensure_peaks,
    )
    from accelbench.roofline.theoretical import (
        cpu_peak_estimate,
        lookup_device,
        theoretical_bytes_per_s,
        theoretical_flop_per_s,
    )
    from accelbench.store.opbench import BANDWIDTH

    if args.no_measure:  # what only shapes a measurement is refused, never ignored
        from accelbench.cli.args import spelled_options
        from accelbench.spec import MeasurementPolicy

        typed = [flag for flag, given in (("--gemm-sizes", args.gemm_sizes is not None),
                                          ("--copy-mib", args.copy_mib is not None),
                                          ("--threads", args.threads is not None)) if given]
        typed += [flag for flag, _v in spelled_options(MeasurementPolicy, args).values()]
        if typed:
            raise ConfigError(f"{typed[0]} shapes a measurement; it conflicts with "
                              "--no-measure")
    device = check_op_device(args)
    precisions = op_precisions(device, args.precision, args.framework)
    policy = policy_from_args(args, PEAK_POLICY)
    name = device_name_of(device, args.framework)
    notice = None if args.quiet else (
        lambda m: err.print(m, highlight=False, markup=False))
    with open_store_of(args, write=not args.no_measure) as store:
        sweep = PeakSweep(
            sides=args.gemm_sizes, copy_bytes=args.copy_mib * 2**20 if args.copy_mib else None,
            policy=policy, threads=args.threads, framework=args.framework,
            timeout_s=policy.timeout_s,
        )
        peaks = ensure_peaks(store, device, precisions, remeasure=args.measure,
                             measure_missing=not args.no_measure, sweep=sweep,
                             on_measure=notice)
    rows: list[dict[str, Any]] = []
    for key in [*precisions, BANDWIDTH]:
        p = peaks.get(key)
        if key == BANDWIDTH:
            theo = theoretical_bytes_per_s(device, name)
            theo_note = "CPU memory bandwidth is not estimated" if device == "cpu" else ""
        else:
            theo = theoretical_flop_per_s(device, name, key)
            entry = lookup_device(name)
            theo_note = (
                "; ".join(cpu_peak_estimate(key).assumptions) if device == "cpu"
                else (entry.source if entry else "not in the table of known devices")
            )
        rows.append({
            "device": device, "device_name": name, "precision": key,
            "measured": p.value if p else None, "unit": "B/s" if key == BANDWIDTH else "FLOP/s",
            "method": p.method if p else None, "measured_at": p.created_at if p else None,
            "theoretical": theo, "theoretical_source": theo_note,
            "pct_of_theoretical": 100 * p.value / theo if p and theo else None,
            "details": p.details if p else None,
        })
    if args.json:
        print(jsonout.dumps(rows, indent=2))
        return 0
    from rich.table import Table

    from accelbench.roofline.plot import fmt_si

    table = Table(title=f"peaks of {device} ({name})", header_style="bold")
    for col in ("precision", "measured", "% of theor.", "theoretical", "how", "measured at"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["precision"], fmt_si(r["measured"], r["unit"]), fmt_pct(r["pct_of_theoretical"]),
            fmt_si(r["theoretical"], r["unit"]),
            (r["method"] or "not measured (run with --measure)")
            + (f"\ntheoretical: {r['theoretical_source']}" if r["theoretical_source"] else ""),
            (r["measured_at"] or "-")[:19],
        )
    out.print(table)
    return 0



def register(sub: Any) -> None:
    """Add ``peaks`` to ``sub``."""
    p = sub.add_parser("peaks", help="measured (cached) and theoretical peaks of a device")
    add_options(p, PeaksOptions, only=("device",), filled=True)
    add_framework_arg(p)
    add_options(p, PeaksOptions, skip=("device", "json"), filled=True)
    add_measurement_args(p, repeats=False, tag=False)
    add_options(p, PeaksOptions, only=("json",), filled=True)
    p.set_defaults(handler=_cmd_peaks)


