"""The registry of framework backends, as the backends see it: the names of
:mod:`accelbench.frameworks`, which lives below every layer that needs to know which
frameworks exist (the spec, the workload registry, the device list), and the default
framework (a framework is named only in ``backends/``)."""

from accelbench.frameworks import (
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

DEFAULT_FRAMEWORK = "torch"
"""The framework a case, an operator benchmark or a probe uses when none is named (the one
default: ``--framework``'s, :class:`accelbench.spec.RunSpec`'s; labels leave it out and the
framework comparison is relative to it)."""

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
