"""The first thing a child process does for a case: its spec and backend, the framework
prepared before any plugin can import it.

A framework reads some settings once, at import (JAX: GPU preallocation, its CPU
threads), and a plugin may import its framework at the top of its file: so a built-in
framework is prepared first, then the plugins load. A framework that a plugin registers
is known only once that plugin has loaded: then the plugins load first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from accelbench.backends.base import get_backend
from accelbench.backends.registry import DEFAULT_FRAMEWORK, is_registered, stack_packages

if TYPE_CHECKING:
    from accelbench.backends.base import Backend
    from accelbench.spec import RunSpec


def start_case(spec_data: Mapping[str, Any], plugins: Sequence[str]) -> tuple[RunSpec, Backend]:
    """The case's :class:`~accelbench.spec.RunSpec` and prepared backend, with ``plugins``
    (modules or files) loaded.

    Raises:
        ConfigError: a bad spec, an unknown framework, or a plugin that fails to import.
    """
    from accelbench.spec import RunSpec
    from accelbench.workloads.registry import load_plugin

    shipped = is_registered(str(spec_data.get("framework", DEFAULT_FRAMEWORK)))
    if not shipped:
        for origin in plugins:
            load_plugin(origin)
    spec = RunSpec.from_dict(dict(spec_data))
    backend = get_backend(spec.framework)
    backend.prepare_process(spec)
    if shipped:
        for origin in plugins:
            load_plugin(origin)
    return spec, backend


def preload(framework: str) -> list[str]:
    """Import, without starting anything, what a worker of ``framework`` imports of it: the
    framework (after its ``prepare_process`` without a spec), its backend and models. The
    warm server (:func:`accelbench.isolation.serve.preload`) calls it before it forks:
    nothing here may start a thread pool, touch a device or initialise a JAX backend.
    Returns the top-level framework modules now imported. A framework accelbench does not
    ship (a plugin's) preloads nothing here: its plugin loads in each child."""
    import contextlib
    import importlib
    import sys

    from accelbench.workloads.registry import (
        implementation_frameworks,
        list_workloads,
        workload_origin,
    )

    if is_registered(framework):
        backend = get_backend(framework)
        backend.prepare_process(None)  # type: ignore[arg-type]
        importlib.import_module(backend.package)
        for name in getattr(backend, "preload_modules", ()):  # a plugin's may lack it
            importlib.import_module(name)
        importlib.import_module(type(backend).__module__)
        # The step and the FLOP counter every case builds (not the launcher's or the
        # operator benchmarks' modules).
        base = type(backend).__module__.rpartition(".")[0]
        for name in ("step", "flops", "model"):
            with contextlib.suppress(ImportError):
                importlib.import_module(f"{base}.{name}")
        for wl in list_workloads():  # the model modules (they import the framework's nn)
            if framework in implementation_frameworks(wl.name):
                origin = workload_origin(wl.name, framework)
                if origin.startswith("accelbench."):
                    importlib.import_module(origin)
    return sorted(m for m in (*stack_packages(), "numpy") if m in sys.modules)
