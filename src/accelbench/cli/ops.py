"""``accelbench ops``: operator benchmarks (matmul, conv2d, LSTM layer, attention),
measured in isolated workers and stored; ``--list`` shows the stored ones.
"""


from __future__ import annotations

import argparse
import builtins
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.backends.registry import DEFAULT_FRAMEWORK, normalize_framework
from accelbench.cli.args import (
    add_measurement_args,
    add_options,
    options_of,
    refuse_unless,
)
from accelbench.cli.ops_common import (
    OP_DEVICE,
    OP_PRECISIONS,
    OPS,
    PASSES,
    check_op_device,
    fmt_flops,
    fmt_ms,
    fmt_pct,
    int_list,
    mnk,
    op_precisions,
    open_store_of,
    policy_from_args,
)
from accelbench.options import option

_AFTER_MEASUREMENT = ("measure_peaks", "no_store", "list", "limit", "json")


def _ops_table(results: list[Any], title: str | None = None) -> Any:
    from rich.table import Table

    table = Table(title=title, header_style="bold")
    for col, justify in (
        ("op", "left"), ("shape", "left"), ("prec", "left"), ("pass", "left"),
        ("status", "left"), ("median ms", "right"), ("95% CI ms", "right"),
        ("achieved", "right"), ("% meas. peak", "right"), ("% theor. peak", "right"),
        ("FLOP/B", "right"), ("iters", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in results:
        c = r.case
        colour = {"ok": "green", "oom": "yellow"}.get(r.status, "red")
        table.add_row(
            c.op, c.shape_text, c.precision,
            {"forward": "fwd", "forward_backward": "fwd+bwd"}[c.pass_],
            f"[{colour}]{r.status}[/{colour}]",
            fmt_ms(r.median_s),
            f"{fmt_ms(r.ci_low_s)}-{fmt_ms(r.ci_high_s)}" if r.median_s else "-",
            fmt_flops(r.achieved_flop_per_s),
            fmt_pct(r.pct_measured_peak),
            fmt_pct(r.pct_theoretical_peak),
            f"{c.intensity_flop_per_byte:.3g}",
            str(len(r.times_s)) if r.times_s else "-",
        )
    return table




def _cmd_ops(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.list:
        return _list_ops(args, out)
    from accelbench.devices import cpu_info, software_info
    from accelbench.errors import ConfigError
    from accelbench.execution.opbench import OpRun, run_cases_isolated
    from accelbench.execution.peaks import PeakSweep, device_name_of, ensure_peaks
    from accelbench.opbench.cases import default_cases
    from accelbench.roofline.theoretical import theoretical_flop_per_s
    from accelbench.spec import check_size

    device = check_op_device(args)
    size = check_size(args.size)
    precisions = op_precisions(device, args.precision, args.framework)
    policy = policy_from_args(args)
    chosen = args.op or OPS
    if (args.mnk or args.matmul_sizes) and "matmul" not in chosen:
        raise ConfigError(f"{'--mnk' if args.mnk else '--matmul-sizes'} shapes matmul cases; "
                          f"--op {' --op '.join(chosen)} measures none")
    cases = default_cases(
        size, precisions, ops=chosen, passes=args.passes or PASSES,
        extra_mnk=args.mnk, matmul_sides=args.matmul_sizes,
    )
    if not cases:
        raise ConfigError(f"no operator case has --op {' --op '.join(chosen)} with --pass "
                          f"{' --pass '.join(args.passes)} (matmul is forward only)")
    name = device_name_of(device, args.framework)
    store = None if args.no_store else open_store_of(args, write=True)
    measured: dict[str, float] = {}
    try:
        if store is not None:
            notice = None if args.quiet else (
                lambda m: err.print(m, highlight=False, markup=False))
            peaks = ensure_peaks(store, device, precisions, measure_missing=args.measure_peaks,
                                 bandwidth=args.measure_peaks, on_measure=notice,
                                 sweep=PeakSweep(threads=args.threads,
                                                 framework=args.framework))
            measured = {k: p.value for k, p in peaks.items()}
            missing = [p for p in precisions if p not in measured]
            if missing and not args.quiet:
                err.print(f"no measured peak for {', '.join(missing)} on {device}: % of measured "
                          "peak left empty (accelbench peaks, or ops --measure-peaks)",
                          highlight=False, markup=False)
        theoretical = {p: theoretical_flop_per_s(device, name, p) for p in precisions}
        machine = {"cpu": cpu_info(), "software": software_info(args.framework)}

        def on_start(case: Any) -> None:
            if not args.quiet:
                err.print(f"running {case.label}", highlight=False, markup=False)

        def on_result(res: Any) -> None:
            if store is not None:
                store.save_op_result(res)

        run = OpRun(device=device, policy=policy, framework=args.framework,
                    threads=args.threads, device_name=name, tag=args.tag, machine=machine,
                    measured_peaks=measured, theoretical_peaks=theoretical)
        results = run_cases_isolated(cases, run, on_result=on_result, on_start=on_start)
    finally:
        if store is not None:
            store.close()
    if args.json:
        print(jsonout.dumps([r.summary() for r in results], indent=2))
    else:
        out.print(_ops_table(results, title=f"operators on {device} ({name}) with "
                                             f"{args.framework}, size {size}"))
    return 0 if all(r.status == "ok" for r in results) else 1



def _list_ops(args: argparse.Namespace, out: Console) -> int:
    from accelbench.opbench.precision import op_precision

    device = args.device if args.device_given else None
    precision = op_precision(args.precision[0]) if len(args.precision) == 1 else None
    with open_store_of(args) as store:
        results = store.query_op_results(
            device=device, op=args.op[0] if len(args.op) == 1 else None,
            precision=precision, limit=args.limit,
            framework=args.framework if args.framework_given else None,
        )
    if args.json:
        print(jsonout.dumps([r.summary() for r in results], indent=2))
    elif results:
        out.print(_ops_table(results, title="stored operator results, newest first"))
    else:
        out.print("no operator results stored")
    return 0



@dataclass(frozen=True, kw_only=True, slots=True)
class OpsOptions:
    """``accelbench ops`` (beside the measurement options)."""

    size: str = option("paper", flag="--size", nonempty=True, fold=True, default_text="",
                       help="tiny, small or paper (default; the paper's shapes)")
    op: tuple[str, ...] = option((), flag="--op", many=True, choices=OPS,
                                 help="only these operators (repeatable)")
    precision: tuple[str, ...] = option(**OP_PRECISIONS)
    passes: tuple[str, ...] = option(
        (), flag="--pass", many=True, choices=PASSES,
        help="forward and/or forward_backward (default both; matmul is forward only)")
    mnk: tuple[tuple[int, int, int], ...] = option(
        (), flag="--mnk", many=True, parse=mnk, metavar="M,N,K",
        help="an extra M x K @ K x N matmul (repeatable)")
    matmul_sizes: builtins.list[int] | None = option(
        None, flag="--matmul-sizes", parse=int_list, metavar="N,N,...",
        help="square matmul sides instead of the size's defaults")
    device: str = option(**OP_DEVICE)
    framework: str = option(
        DEFAULT_FRAMEWORK, flag="--framework", nonempty=True, track=True, default_text="",
        canonical=normalize_framework,
        help="framework whose operators are measured: torch (default) or jax")
    measure_peaks: bool = option(
        False, flag="--measure-peaks",
        help="measure missing device peaks first (for the % of measured peak)")
    no_store: bool = option(False, flag="--no-store", help="measure without saving")
    list: bool = option(False, flag="--list",
                        help="list stored operator results instead of measuring")
    limit: int | None = option(None, flag="--limit", lo=1,
                               help="with --list: at most this many")
    json: bool = option(False, flag="--json", help="")


def register(sub: Any) -> None:
    """Add ``ops`` to ``sub``."""
    p = sub.add_parser("ops", help="operator benchmarks: matmul, conv2d, LSTM layer, attention")
    add_options(p, OpsOptions, skip=_AFTER_MEASUREMENT, filled=True)
    add_measurement_args(p, repeats=False)
    add_options(p, OpsOptions, only=_AFTER_MEASUREMENT, filled=True)
    p.set_defaults(handler=_cmd_ops)
    refuse_unless(p, ["--limit"], "--list")
    refuse_unless(p, ["--measure-peaks"], lambda a: not a.no_store, "conflicts with "
                  "--no-store (the peaks it measures are kept in the store, and read there)")
    refuse_unless(p, options_of(p, but=("--list", "--limit", "--json", "--device",
                                        "--framework", "--op", "--precision")),
                  lambda a: not a.list, "shapes a measurement; --list measures nothing "
                  "(it lists stored results, filtered by --device, --framework, one --op "
                  "and one --precision)")
    refuse_unless(p, ["--op", "--precision"],
                  lambda a: not a.list or (len(a.op) < 2 and len(a.precision) < 2),
                  "given twice: --list filters on one value")

