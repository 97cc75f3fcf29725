"""accelbench: benchmark deep-learning training for performance and energy efficiency.

The public Python surface is small::

    import accelbench
    from accelbench import MeasurementPolicy, RunChoices

    result = accelbench.run("resnet50", RunChoices(size="tiny"),
                            policy=MeasurementPolicy(iterations=20))
    print(result.samples_per_s)

The option objects (``RunChoices``, ``MeasurementPolicy``, ``MeterOptions``, ``Topology``,
``FastPaths``, ``DeviceSettings``) are the same dataclasses the CLI's flags come from; see
:mod:`accelbench.api` for a notebook-style example.

Heavy imports (torch, SQLAlchemy) happen on first use, not at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.version import __version__

if TYPE_CHECKING:
    from accelbench.api import export, report, run, suite, sweep, train
    from accelbench.meters.registry import register_meter
    from accelbench.result import Result
    from accelbench.spec import (
        DeviceSettings,
        FastPaths,
        MeasurementPolicy,
        MeterOptions,
        RunChoices,
        Topology,
    )
    from accelbench.workloads.registry import Workload, register_workload

_SPEC = ("DeviceSettings", "FastPaths", "MeasurementPolicy", "MeterOptions", "RunChoices",
         "Topology")
__all__ = ["DeviceSettings", "FastPaths", "MeasurementPolicy", "MeterOptions", "Result",
           "RunChoices", "Topology", "Workload", "__version__", "register_meter",
           "export", "register_workload", "report", "run", "suite", "sweep", "sweep_to_target",
           "train"]


def __getattr__(name: str) -> Any:
    # Lazy re-exports keep `import accelbench` cheap (no torch at import time).
    if name in ("run", "suite", "sweep", "sweep_to_target", "report", "export", "train"):
        from accelbench import api

        return getattr(api, name)
    if name in _SPEC:
        from accelbench import spec

        return getattr(spec, name)
    if name == "Result":
        from accelbench.result import Result

        return Result
    if name == "register_meter":
        from accelbench.meters.registry import register_meter

        return register_meter
    if name in ("Workload", "register_workload"):
        from accelbench.workloads import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'accelbench' has no attribute {name!r}")
