"""The registry of framework backends, as the backends see it: the names of
:mod:`accelbench.frameworks`, which lives below every layer that needs to know which
frameworks exist (the spec, the workload registry, the device list), the default framework
among them."""

from accelbench.frameworks import (
    DEFAULT_FRAMEWORK,
    backend_fact,
    backend_origin,
    compile_label,
    framework_label,
    framework_names,
    is_registered,
    lookup,
    normalize_framework,
    origin_of,
    register_backend,
    stack_packages,
)

__all__ = [
    "DEFAULT_FRAMEWORK",
    "backend_fact",
    "backend_origin",
    "compile_label",
    "framework_label",
    "framework_names",
    "is_registered",
    "lookup",
    "normalize_framework",
    "origin_of",
    "register_backend",
    "stack_packages",
]
