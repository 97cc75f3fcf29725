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
from accelbench.backends.registry import is_registered

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

    shipped = is_registered(str(spec_data.get("framework", "torch")))
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
