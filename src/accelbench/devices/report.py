"""The ``accelbench devices`` report: what each framework can run here, and the sensors."""

from __future__ import annotations

from typing import Any

from accelbench.devices.discovery import cpu_info, software_info
from accelbench.spec import FRAMEWORKS


def _sensors() -> list[dict[str, Any]]:
    try:
        from accelbench.meters.live import sensor_report
    except ImportError:
        return []
    return sensor_report()


def devices_report() -> dict[str, Any]:
    """CPU, each framework's devices with their precisions, software versions, power sensors.

    Frameworks are asked in subprocesses (:mod:`accelbench.backends.probe`); a
    missing one is listed with the command that installs it.
    """
    from accelbench.backends.probe import probe

    frameworks: dict[str, Any] = {}
    for fw in FRAMEWORKS:
        p = probe(fw)
        frameworks[fw] = {
            "installed": p.installed,
            "error": p.error,
            "versions": p.versions or {},
            "devices": [d.to_dict() for d in p.devices],
        }
    torch_cpu = next((d for d in frameworks["torch"]["devices"] if d["device"] == "cpu"), None)
    return {
        "cpu": cpu_info(),
        "cpu_precisions": torch_cpu["precisions"] if torch_cpu else [],
        "gpus": [d for d in frameworks["torch"]["devices"] if d["device"] != "cpu"],
        "frameworks": frameworks,
        "software": software_info(),
        "sensors": _sensors(),
    }
