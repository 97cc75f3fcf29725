"""The ``accelbench devices`` report."""

from __future__ import annotations

from typing import Any

from accelbench.devices.discovery import cpu_info, gpu_info, software_info


def _sensors() -> list[dict[str, Any]]:
    try:
        from accelbench.meters.live import sensor_report
    except ImportError:
        return []
    return sensor_report()


def devices_report() -> dict[str, Any]:
    """CPU, GPUs with their precisions, software versions and power sensors."""
    from accelbench.frameworks.torch_backend import supported_precisions

    return {
        "cpu": cpu_info(),
        "cpu_precisions": list(supported_precisions("cpu")),
        "gpus": gpu_info(),
        "software": software_info(),
        "sensors": _sensors(),
    }
