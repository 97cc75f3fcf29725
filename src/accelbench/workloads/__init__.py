"""Training workloads: framework-neutral descriptions, and the registries of implementations.

Importing this package is cheap on purpose: it imports no framework, and the names below
are loaded from :mod:`accelbench.workloads.registry` on first use (the spec imports
:mod:`accelbench.workloads.sizes` at start-up). The built-in workloads (every module of
this package) register on first use of :func:`get_workload` or :func:`list_workloads`;
their implementations live in each backend's model files (``@implements``) and are
imported only by the backend that runs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.workloads.registry import (
        Batch,
        Workload,
        check_implemented,
        check_positive_batch_size,
        get_implementation,
        get_workload,
        implementation_frameworks,
        implements,
        list_workloads,
        load_plugin,
        register_implementation,
        register_workload,
        workload_origin,
    )

__all__ = [
    "Batch",
    "Workload",
    "check_implemented",
    "check_positive_batch_size",
    "get_implementation",
    "get_workload",
    "implementation_frameworks",
    "implements",
    "list_workloads",
    "load_plugin",
    "register_implementation",
    "register_workload",
    "workload_origin",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from accelbench.workloads import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'accelbench.workloads' has no attribute {name!r}")
