"""Training workloads: the registry and the paper's six built-in models.

Importing this package is cheap on purpose: it does not import torch. The
built-in workloads register on first use of :func:`get_workload` or
:func:`list_workloads`, which imports :mod:`accelbench.workloads.builtin`.
"""

from __future__ import annotations

from accelbench.workloads.registry import (
    Batch,
    Workload,
    get_workload,
    list_workloads,
    load_plugin,
    register_workload,
    workload_origin,
)

__all__ = [
    "Batch",
    "Workload",
    "get_workload",
    "list_workloads",
    "load_plugin",
    "register_workload",
    "workload_origin",
]
