"""``accelbench ops``: operator benchmarks (matmul, conv2d, LSTM layer, attention),
measured in isolated workers and stored; ``--list`` shows the stored ones.
"""


from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cli.args import (
    add_measurement_args,
    integer,
    name_arg,
    nonempty,
    options_of,
    refuse_unless,
)
from accelbench.cli.ops_common import (
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
    from accelbench.opbench.cases import default_cases
    from accelbench.opbench.run import run_cases_isolated
    from accelbench.roofline.peaks import device_name_of, ensure_peaks
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
        size, precisions, ops=chosen, passes=getattr(args, "pass") or PASSES,
        extra_mnk=args.mnk, matmul_sides=args.matmul_sizes,
    )
    if not cases:
        raise ConfigError(f"no operator case has --op {' --op '.join(chosen)} with --pass "
                          f"{' --pass '.join(getattr(args, 'pass'))} (matmul is forward only)")
    name = device_name_of(device, args.framework)
    store = None if args.no_store else open_store_of(args, write=True)
    measured: dict[str, float] = {}
    try:
        if store is not None:
            notice = None if args.quiet else (
                lambda m: err.print(m, highlight=False, markup=False))
            peaks = ensure_peaks(store, device, precisions, measure_missing=args.measure_peaks,
                                 bandwidth=args.measure_peaks, threads=args.threads,
                                 on_measure=notice, framework=args.framework)
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

        results = run_cases_isolated(
            cases, device, policy, measured_peaks=measured, theoretical_peaks=theoretical,
            device_name=name, threads=args.threads, tag=args.tag, machine=machine,
            on_result=on_result, on_start=on_start, framework=args.framework,
        )
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
    from accelbench.opbench.run import op_precision

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



class _GivenAction(argparse.Action):
    """Store the option and remember it was given (``ops --list`` filters only then)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None
                 ) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)



def register(sub: Any) -> None:
    """Add ``ops`` to ``sub``."""
    p = sub.add_parser("ops", help="operator benchmarks: matmul, conv2d, LSTM layer, attention")
    p.add_argument("--size", default="paper", type=name_arg,
                   help="tiny, small or paper (default; the paper's shapes)")
    p.add_argument("--op", action="append", default=[], choices=OPS,
                   help="only these operators (repeatable)")
    p.add_argument("--precision", action="append", default=[], type=name_arg,
                   help="fp32, tf32, fp16, bf16 (repeatable; default: all the device supports)")
    p.add_argument("--pass", action="append", default=[], choices=PASSES,
                   help="forward and/or forward_backward (default both; matmul is forward only)")
    p.add_argument("--mnk", action="append", default=[], type=mnk, metavar="M,N,K",
                   help="an extra M x K @ K x N matmul (repeatable)")
    p.add_argument("--matmul-sizes", type=int_list, metavar="N,N,...",
                   help="square matmul sides instead of the size's defaults")
    p.add_argument("--device", default="cpu", type=name_arg, action=_GivenAction,
                   help="cpu, cuda:N, tpu:N")
    p.add_argument("--framework", default="torch", type=nonempty, action=_GivenAction,
                   help="framework whose operators are measured: torch (default) or jax")
    add_measurement_args(p, repeats=False)
    p.add_argument("--measure-peaks", action="store_true",
                   help="measure missing device peaks first (for the %% of measured peak)")
    p.add_argument("--no-store", action="store_true", help="measure without saving")
    p.add_argument("--list", action="store_true",
                   help="list stored operator results instead of measuring")
    p.add_argument("--limit", type=integer(1), help="with --list: at most this many")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_cmd_ops, device_given=False, framework_given=False)
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

