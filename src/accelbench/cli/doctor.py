"""``accelbench doctor``: can energy be measured here, and if not, what exactly to fix."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from accelbench.cli.args import add_options, options_from_args
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class DoctorOptions:
    """``accelbench doctor`` (beside the node meter options)."""

    probe_s: float = option(1.0, flag="--probe-s", lo=0.0, hi=60.0, metavar="S",
                            default_text="default 1; 0: nominal periods",
                            help="seconds to read the sensors to measure their update period")
    json: bool = option(False, flag="--json", help="print JSON")


def cmd_doctor(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Print every power sensor's state and fix; exit 0 when energy can be measured."""
    from accelbench.meters import doctor
    from accelbench.spec import MeterOptions

    options = options_from_args(MeterOptions, args)
    if options.node_meter is not None:
        from accelbench.meters.registry import get_meter_factory

        get_meter_factory(options.node_meter)  # an unknown name: one line, exit 2
    findings = doctor.diagnose(probe_s=args.probe_s, options=options)
    ok = doctor.energy_measurable(findings)
    if args.json:
        print(json.dumps({"energy_measurable": ok, "sensors": doctor.to_json(findings)},
                         indent=2))
    else:
        print(doctor.render_text(findings))
    return 0 if ok else 1


def register(sub: Any) -> None:
    """Add ``doctor`` to ``sub``."""
    from accelbench.spec import MeterOptions

    p = sub.add_parser(
        "doctor", help="which power sensors work here, and the fix for each that does not",
        description="List every power sensor found (NVIDIA NVML, AMD SMI, RAPL, TPU, a node "
        "meter if named): whether it is readable, its update period (measured over a short "
        "probe), the energy boundary it gives, and for each problem the exact fix. Exit "
        "status 0 when energy can be measured, 1 when it cannot.",
    )
    add_options(p, DoctorOptions, only=("probe_s",), filled=True)
    add_options(p, MeterOptions, only=("node_meter", "node_meter_cmd", "cpu_tdp_w"))
    add_options(p, DoctorOptions, only=("json",), filled=True)
    p.set_defaults(handler=cmd_doctor)
