"""``accelbench power``: live power of every sensor on this machine."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench.cli.args import add_options
from accelbench.options import option
from accelbench.power_watch import PowerWatch


@dataclass(frozen=True, kw_only=True, slots=True)
class PowerServe:
    """``accelbench power --prometheus``."""

    prometheus: str | None = option(
        None, flag="--prometheus", metavar="HOST:PORT", nonempty=True,
        help="also serve every sensor's power (accelbench_power_watts) and energy "
        "(accelbench_energy_joules_total) for Prometheus at HOST:PORT/metrics; :PORT serves "
        "this machine only (127.0.0.1), 0.0.0.0:PORT every interface "
        "(pip install 'accelbench[prometheus]')")


def cmd_power(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelbench.meters import watch_power

    if args.prometheus is None:
        watch_power(args.interval_ms, args.duration, out, cpu_tdp_w=args.cpu_tdp_w)
        return 0
    from accelbench.sinks.prometheus import parse_host_port, serve_power, serving_line

    collector, stop = serve_power(args.prometheus)  # bound before any sensor is read
    # Said whatever --quiet says: a port open to others is never opened in silence.
    err.print(serving_line(*parse_host_port(args.prometheus)), highlight=False,
              markup=False, soft_wrap=True)
    try:
        watch_power(args.interval_ms, args.duration, out, cpu_tdp_w=args.cpu_tdp_w,
                    on_start=collector.watch)
    finally:
        stop()
    return 0


def register(sub: Any) -> None:
    """Add ``power`` to ``sub``."""
    from accelbench.spec import MeterOptions

    p = sub.add_parser("power", help="live power of every sensor on this machine")
    add_options(p, PowerWatch, filled=True)
    add_options(p, MeterOptions, only=("cpu_tdp_w",))
    add_options(p, PowerServe, filled=True)
    p.set_defaults(handler=cmd_power)
