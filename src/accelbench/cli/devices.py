"""``accelbench devices``: the CPU, GPUs, frameworks and power sensors of this machine."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelbench.backends.registry import backend_fact
from accelbench.cli.args import add_options
from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class DevicesOptions:
    """``accelbench devices``."""

    json: bool = option(False, flag="--json", help="")


def _sensors() -> list[dict[str, Any]]:
    try:
        from accelbench.meters.live import sensor_report
    except ImportError:
        return []
    return sensor_report()


def devices_report() -> dict[str, Any]:
    """CPU, each framework's devices with their precisions, software versions, power sensors.

    Frameworks are asked in subprocesses (:mod:`accelbench.isolation.ask`); a
    missing one is listed with the command that installs it.
    """
    from accelbench.backends.registry import framework_names
    from accelbench.devices.discovery import cpu_info, software_info
    from accelbench.isolation.ask import probe

    frameworks: dict[str, Any] = {}
    for fw in framework_names():
        p = probe(fw)
        frameworks[fw] = {
            "installed": p.installed,
            "error": p.error,
            "versions": p.versions or {},
            "devices": [d.to_dict() for d in p.devices],
        }
    # The host's precisions and GPUs as the first framework that sees them reports them.
    host = [d for info in frameworks.values() for d in info["devices"]]
    cpu = next((d for d in host if d["device"] == "cpu"), None)
    gpus = next(([d for d in info["devices"] if d["device"] != "cpu"]
                 for info in frameworks.values()
                 if any(d["device"] != "cpu" for d in info["devices"])), [])
    return {
        "cpu": cpu_info(),
        "cpu_precisions": cpu["precisions"] if cpu else [],
        "gpus": gpus,
        "frameworks": frameworks,
        "software": software_info(),
        "sensors": _sensors(),
    }


def cmd_devices(args: argparse.Namespace, out: Console, err: Console) -> int:
    report = devices_report()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    cpu = report["cpu"]
    out.print(f"[bold]CPU[/bold]  {escape(str(cpu['model']))} ({escape(str(cpu['arch']))})",
              highlight=False)
    out.print(
        f"     {cpu['physical_cores']} physical / {cpu['logical_cores']} logical cores, "
        f"{cpu['usable_cores']} usable; {cpu['memory_bytes'] / 2**30:.1f} GiB memory; "
        f"ISA: {escape(', '.join(cpu['isa'])) or '-'}", highlight=False
    )
    out.print(f"[bold]Python[/bold]  {escape(str(report['software']['python']))}",
              highlight=False)
    for fw, info in report["frameworks"].items():
        if info["error"]:
            # Literal text (an install command's '.[jax]' is no markup): escaped.
            out.print(f"[bold]{escape(fw)}[/bold]  unavailable: {escape(str(info['error']))}",
                      highlight=False)
            continue
        v = info["versions"]
        keys: tuple[str, ...] = backend_fact(fw, "device_libraries", ())
        libs = ", ".join(f"{k} {v[k]}" for k in keys if v.get(k))
        out.print(f"[bold]{escape(fw)}[/bold]  {escape(str(v.get(fw, '?')))}"
                  + (f" ({escape(libs)})" if libs else ""),
                  highlight=False)
        for d in info["devices"]:
            mem = f", {d['memory_bytes'] / 2**30:.1f} GiB" if d.get("memory_bytes") else ""
            runtime = f", {d['runtime']}" if d.get("runtime") else ""
            driver = f", driver {d['driver_version']}" if d.get("driver_version") else ""
            out.print(escape(f"     {d['device']}  {d['name']}{mem}{runtime}{driver}; "
                             f"precisions: {', '.join(d['precisions'])}"), highlight=False)
    for s in report.get("sensors", []):
        state = "readable" if s["readable"] else f"unavailable ({s['reason']})"
        line = f"{s['name']}: {state}"
        out.print(f"[bold]sensor[/bold] {escape(line)}", highlight=False)
    return 0


def register(sub: Any) -> None:
    """Add ``devices`` to ``sub``."""
    p = sub.add_parser("devices", help="CPU, GPUs and the precisions each supports")
    add_options(p, DevicesOptions, filled=True)
    p.set_defaults(handler=cmd_devices)
