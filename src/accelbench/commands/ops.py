"""Subcommands ``ops``, ``peaks`` and ``roofline``.

``ops`` measures operator benchmarks (matmul, conv2d, LSTM layer, attention)
and stores them; ``peaks`` shows (and measures) a device's compute and bandwidth
peaks; ``roofline`` writes the roofline chart and data from the store, optionally
measuring model step breakdowns first. Every measurement runs in an isolated
worker process with a timeout (:mod:`accelbench.runner.isolate`), like ``run``:
the kernels and the model code never run in the CLI process. Heavy imports
(matplotlib; torch or jax through the backends) happen inside the handlers.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from accelbench import jsonout
from accelbench.cliargs import (
    add_framework_arg,
    add_policy_args,
    finite,
    integer,
    nonempty,
    policy_kwargs,
    threads_arg,
)
from accelbench.errors import ConfigError

_OPS = ("matmul", "conv2d", "lstm", "attention")
_PASSES = ("forward", "forward_backward")
#: Largest matmul side or shape value accepted (2**20: a square fp32 matrix of 4 TiB).
_MAX_DIM = 1 << 20
#: Largest bandwidth copy buffer (MiB).
_MAX_COPY_MIB = 1 << 20
#: Default wall-clock limit of one ``roofline --model`` breakdown worker (s).
ROOFLINE_TIMEOUT_S = 900.0


# --------------------------------------------------------------------------- helpers


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.replace("x", ",").split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, got {text!r}"
        ) from None
    if not values or any(not 1 <= v <= _MAX_DIM for v in values):
        raise argparse.ArgumentTypeError(
            f"expected integers between 1 and {_MAX_DIM}, got {text!r}")
    return values


def _mnk(text: str) -> tuple[int, int, int]:
    values = _int_list(text)
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"--mnk takes M,N,K, got {text!r}")
    return values[0], values[1], values[2]


def _policy(args: argparse.Namespace, base: Any = None) -> Any:
    from accelbench.api import make_policy

    return make_policy(base, **policy_kwargs(args))


def _fmt_flops(value: float | None) -> str:
    from accelbench.roofline.plot import fmt_si

    return fmt_si(value, "FLOP/s")


def _fmt_pct(value: float | None) -> str:
    return f"{value:.1f}%" if value is not None else "-"


def _fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    ms = value * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def _open(args: argparse.Namespace) -> Any:
    from accelbench.store import open_store

    return open_store(args.db)


def _precisions(device: str, requested: list[str], framework: str) -> list[str]:
    from accelbench.ops.run import check_op_precision, op_precision, op_precisions

    if not requested:
        return list(op_precisions(device, framework))
    out = []
    for p in requested:
        check_op_precision(device, p, framework)
        out.append(op_precision(p))
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------- ops


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
            _fmt_ms(r.median_s),
            f"{_fmt_ms(r.ci_low_s)}-{_fmt_ms(r.ci_high_s)}" if r.median_s else "-",
            _fmt_flops(r.achieved_flop_per_s),
            _fmt_pct(r.pct_measured_peak),
            _fmt_pct(r.pct_theoretical_peak),
            f"{c.intensity_flop_per_byte:.3g}",
            str(len(r.times_s)) if r.times_s else "-",
        )
    return table


def _check_device(args: argparse.Namespace) -> str:
    from accelbench.backends.probe import check_device

    return check_device(args.framework, args.device)


def _cmd_ops(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.list:
        return _list_ops(args, out)
    from accelbench.devices import cpu_info, software_info
    from accelbench.ops.cases import default_cases
    from accelbench.ops.run import run_cases_isolated
    from accelbench.roofline.peaks import device_name_of, ensure_peaks
    from accelbench.roofline.theoretical import theoretical_flop_per_s
    from accelbench.spec import check_size

    device = _check_device(args)
    size = check_size(args.size)
    precisions = _precisions(device, args.precision, args.framework)
    policy = _policy(args)
    cases = default_cases(
        size, precisions, ops=args.op or _OPS, passes=getattr(args, "pass") or _PASSES,
        extra_mnk=args.mnk, matmul_sides=args.matmul_sizes,
    )
    name = device_name_of(device, args.framework)
    store = None if args.no_store else _open(args)
    measured: dict[str, float] = {}
    try:
        if store is not None:
            notice = None if args.quiet else (lambda m: err.print(m, highlight=False))
            peaks = ensure_peaks(store, device, precisions, measure_missing=args.measure_peaks,
                                 bandwidth=args.measure_peaks, threads=args.threads,
                                 on_measure=notice, framework=args.framework)
            measured = {k: p.value for k, p in peaks.items()}
            missing = [p for p in precisions if p not in measured]
            if missing and not args.quiet:
                err.print(f"no measured peak for {', '.join(missing)} on {device}: % of measured "
                          "peak left empty (accelbench peaks, or ops --measure-peaks)",
                          highlight=False)
        theoretical = {p: theoretical_flop_per_s(device, name, p) for p in precisions}
        machine = {"cpu": cpu_info(), "software": software_info(args.framework)}

        def on_start(case: Any) -> None:
            if not args.quiet:
                err.print(f"running {case.label}", highlight=False)

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
    from accelbench.ops.run import op_precision

    device = args.device if args.device_given else None
    precision = op_precision(args.precision[0]) if len(args.precision) == 1 else None
    with _open(args) as store:
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


# --------------------------------------------------------------------------- peaks


def _cmd_peaks(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.roofline.peaks import (
        BANDWIDTH,
        PEAK_POLICY,
        device_name_of,
        ensure_peaks,
        lookup_device,
    )
    from accelbench.roofline.theoretical import (
        cpu_peak_estimate,
        theoretical_bytes_per_s,
        theoretical_flop_per_s,
    )

    device = _check_device(args)
    precisions = _precisions(device, args.precision, args.framework)
    policy = _policy(args, PEAK_POLICY)
    name = device_name_of(device, args.framework)
    notice = None if args.quiet else (lambda m: err.print(m, highlight=False))
    with _open(args) as store:
        peaks = ensure_peaks(
            store, device, precisions, remeasure=args.measure,
            measure_missing=not args.no_measure, sides=args.gemm_sizes,
            copy_bytes=args.copy_mib * 2**20 if args.copy_mib else None, policy=policy,
            threads=args.threads, on_measure=notice, framework=args.framework,
            timeout_s=policy.timeout_s,
        )
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
            r["precision"], fmt_si(r["measured"], r["unit"]), _fmt_pct(r["pct_of_theoretical"]),
            fmt_si(r["theoretical"], r["unit"]),
            (r["method"] or "not measured (run with --measure)")
            + (f"\ntheoretical: {r['theoretical_source']}" if r["theoretical_source"] else ""),
            (r["measured_at"] or "-")[:19],
        )
    out.print(table)
    return 0


# --------------------------------------------------------------------------- roofline


def _cmd_roofline(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.roofline.report import roofline_data, write_roofline

    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():  # refused before anything is measured
        raise ConfigError(f"--out {out_dir} is a file, not a directory: choose a directory "
                          "(it is created if missing)")
    device = _check_device(args) if args.device else None
    if args.model:  # every choice checked before anything is printed, opened or measured
        from accelbench.runner.cases import prepare_case

        for workload in args.model:
            prepare_case(workload, size=args.size, batch_size=args.batch_size,
                         precision=args.precision, device=device or "cpu",
                         framework=args.framework, threads=args.threads)
    with _open(args) as store:
        if args.model:
            from accelbench.roofline.breakdown import breakdown_isolated, save_breakdown

            for workload in args.model:
                if not args.quiet:
                    err.print(f"breaking down a {workload} {args.size} training step on "
                              f"{device or 'cpu'}", highlight=False)
                bd = breakdown_isolated(
                    workload, size=args.size, batch_size=args.batch_size,
                    precision=args.precision, device=device or "cpu", threads=args.threads,
                    repeats=args.repeats, framework=args.framework, timeout_s=args.timeout,
                )
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
                _fmt_ms(k["time_s"]), _fmt_pct(100 * k["share_of_step"]),
                f"{p['intensity_flop_per_byte']:.3g}" if p.get("intensity_flop_per_byte")
                else "-",
                fmt_si(p.get("achieved_flop_per_s"), "FLOP/s"), p.get("bound") or "-",
                _fmt_pct(p.get("pct_of_roof")) + flag,
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

    from accelbench.roofline.plot import fmt_si
    from accelbench.roofline.report import ABOVE_ROOF_REASON

    table = Table(title=f"{len(above)} point(s) ABOVE their measured roof", header_style="bold")
    for col in ("point", "device", "achieved", "roof", "% of roof"):
        table.add_column(col)
    for p in above:
        table.add_row(p.get("case", "") + (" " if p.get("case") else "") + p["label"],
                      p["device"], fmt_si(p["achieved_flop_per_s"], "FLOP/s"),
                      fmt_si(p.get("roof_flop_per_s"), "FLOP/s"), _fmt_pct(p["pct_of_roof"]))
    out.print(table)
    out.print(f"above roof: {ABOVE_ROOF_REASON}", highlight=False)


# --------------------------------------------------------------------------- parsers


class _GivenAction(argparse.Action):
    """Store the option and remember it was given (``ops --list`` filters only then)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None
                 ) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


def register(sub: Any) -> None:
    """Add ``ops``, ``peaks`` and ``roofline`` to the ``accelbench`` subparsers."""
    p = sub.add_parser("ops", help="operator benchmarks: matmul, conv2d, LSTM layer, attention")
    p.add_argument("--size", default="paper", type=nonempty,
                   help="tiny, small or paper (default; the paper's shapes)")
    p.add_argument("--op", action="append", default=[], choices=_OPS,
                   help="only these operators (repeatable)")
    p.add_argument("--precision", action="append", default=[], type=nonempty,
                   help="fp32, tf32, fp16, bf16 (repeatable; default: all the device supports)")
    p.add_argument("--pass", action="append", default=[], choices=_PASSES,
                   help="forward and/or forward_backward (default both; matmul is forward only)")
    p.add_argument("--mnk", action="append", default=[], type=_mnk, metavar="M,N,K",
                   help="an extra M x K @ K x N matmul (repeatable)")
    p.add_argument("--matmul-sizes", type=_int_list, metavar="N,N,...",
                   help="square matmul sides instead of the size's defaults")
    p.add_argument("--device", default="cpu", type=nonempty, action=_GivenAction,
                   help="cpu, cuda:N, tpu:N")
    p.add_argument("--framework", default="torch", type=nonempty, action=_GivenAction,
                   help="framework whose operators are measured: torch (default) or jax")
    add_policy_args(p, timeout=True, repeats=False)
    p.add_argument("--measure-peaks", action="store_true",
                   help="measure missing device peaks first (for the %% of measured peak)")
    p.add_argument("--no-store", action="store_true", help="measure without saving")
    p.add_argument("--list", action="store_true",
                   help="list stored operator results instead of measuring")
    p.add_argument("--limit", type=integer(1), help="with --list: at most this many")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_cmd_ops, device_given=False, framework_given=False)

    p = sub.add_parser("peaks", help="measured (cached) and theoretical peaks of a device")
    p.add_argument("--device", default="cpu", type=nonempty, help="cpu, cuda:N or tpu:N")
    add_framework_arg(p)
    p.add_argument("--precision", action="append", default=[], type=nonempty,
                   help="fp32, tf32, fp16, bf16 (repeatable; default: all the device supports)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--measure", action="store_true", help="measure again even if cached")
    when.add_argument("--no-measure", action="store_true",
                      help="only show cached values; measure nothing")
    p.add_argument("--gemm-sizes", type=_int_list, metavar="N,N,...",
                   help="square GEMM sides of the compute sweep")
    p.add_argument("--copy-mib", type=integer(1, _MAX_COPY_MIB),
                   help="MiB per buffer of the bandwidth copy")
    add_policy_args(p, timeout=True, tag=False, repeats=False)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_cmd_peaks)

    from accelbench.spec import MAX_SECONDS

    p = sub.add_parser("roofline", help="roofline chart and data (PNG, SVG, JSON, CSV)")
    p.add_argument("--device", type=nonempty,
                   help="only this device (default: every device in the store)")
    add_framework_arg(p)
    p.add_argument("--out", default="roofline", type=nonempty,
                   help="output directory (default ./roofline)")
    p.add_argument("--model", action="append", default=[], metavar="WORKLOAD", type=nonempty,
                   help="first break down a training step of this workload (repeatable)")
    p.add_argument("--size", default="tiny", type=nonempty,
                   help="with --model: tiny (default), small, paper")
    p.add_argument("--batch-size", type=integer(1), help="with --model: samples per step")
    p.add_argument("--precision", default="fp32", type=nonempty,
                   help="with --model: training precision")
    p.add_argument("--threads", type=threads_arg, help="with --model: CPU threads")
    p.add_argument("--repeats", type=integer(1, 1000), default=3,
                   help="with --model: profiled steps")
    p.add_argument("--timeout", type=finite(0.0, MAX_SECONDS, lo_open=True),
                   default=ROOFLINE_TIMEOUT_S,
                   help=f"with --model: wall-clock limit of each breakdown's worker (s, "
                   f"default {ROOFLINE_TIMEOUT_S:g})")
    p.add_argument("--tag", default="", help="with --model: free text stored")
    p.add_argument("--json", action="store_true", help="also print the data as JSON")
    p.set_defaults(handler=_cmd_roofline)
