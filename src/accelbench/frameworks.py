"""The registry of framework backends: the framework name is a key here, not a fixed list.

A backend registers itself with :func:`register_backend` (a class decorator) in its own
module. The built-in backends are found by folder: every subpackage of
:mod:`accelbench.backends` that has a ``backend`` module is imported on the first look-up
(which imports no framework: backend modules import theirs inside functions only), so a
new framework is one new folder. A plugin (``--plugin``) registers its backend when it
is imported.

This module imports nothing from the rest of accelbench but the errors, and lies outside
:mod:`accelbench.backends`, so the layers below the backends (the spec, the workload
registry, the device list, operator records) can ask it which frameworks exist without
importing the layer above them. ``accelbench.backends.registry`` re-exports its names.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path
from typing import Any, TypeVar

from accelbench.errors import ConfigError, unknown_name

DEFAULT_FRAMEWORK = "torch"
"""The framework a case, an operator benchmark or a probe uses when none is named (the one
default: ``--framework``'s, :class:`accelbench.spec.RunSpec`'s; labels leave it out and the
framework comparison is relative to it). The only framework named outside ``backends/``
but for facts about old stores (records before the framework field were torch's)."""

T = TypeVar("T")

_BACKENDS: dict[str, Any] = {}
"""Registered backends by name (typed as :class:`accelbench.backends.base.Backend` by
:func:`accelbench.backends.base.get_backend`, which is the look-up to use)."""
#: Other names of each framework (``pytorch``), mapped to its registry key.
_ALIASES: dict[str, str] = {}
#: Module or file that registered each backend (what a child process imports to find it).
_ORIGINS: dict[str, str] = {}
_discovered: list[bool] = []


def register_backend(obj: T) -> T:
    """Class decorator (or call with an instance): add a framework backend to the registry.

    The backend's ``name`` is the key users type (``--framework NAME``); its ``aliases``
    are other names accepted for it. A class is instantiated with no arguments.

    Raises:
        ConfigError: the name or an alias is taken by another backend.
    """
    backend: Any = obj() if isinstance(obj, type) else obj
    name = str(backend.name)
    cls = type(backend)
    origin = origin_of(cls.__module__)
    existing = _BACKENDS.get(name)
    if existing is not None and not (
        type(existing).__qualname__ == cls.__qualname__ and _ORIGINS.get(name) == origin
    ):
        raise ConfigError(f"framework {name!r} is already registered by {_ORIGINS[name]}")
    aliases = tuple(getattr(backend, "aliases", ()) or ())
    for alias in aliases:
        if _ALIASES.get(alias, name) != name or (alias in _BACKENDS and alias != name):
            raise ConfigError(f"framework alias {alias!r} of {name!r} is already taken")
    _BACKENDS[name] = backend
    _ORIGINS[name] = origin
    for alias in aliases:
        _ALIASES[alias] = name
    return obj


def origin_of(module: str) -> str:
    """What a child process imports to find ``module``'s registrations: the module name, or
    the file path of a plugin file (imported under a private name) or of ``__main__``."""
    if module == "__main__" or module.startswith("__accelbench_plugin_"):
        path = getattr(sys.modules.get(module), "__file__", None)
        return str(Path(path).resolve()) if path else module
    return module


#: The folder whose subpackages are the built-in backends (found as plugins are: by
#: location, not by an import of the backends package from here).
BUILTIN_BACKENDS = Path(__file__).resolve().with_name("backends")


def _discover() -> None:
    """Import ``accelbench.backends.<name>.backend`` for every subpackage (once)."""
    if _discovered:
        return
    _discovered.append(True)
    for info in pkgutil.iter_modules([str(BUILTIN_BACKENDS)]):
        if not info.ispkg:
            continue
        module = f"{__package__}.{BUILTIN_BACKENDS.name}.{info.name}.backend"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)


def framework_names() -> tuple[str, ...]:
    """Every registered framework, the built-in ones first (torch, then jax)."""
    _discover()
    return tuple(sorted(_BACKENDS, key=lambda n: (getattr(_BACKENDS[n], "list_order", 100),
                                                   list(_BACKENDS).index(n))))


def is_registered(name: str) -> bool:
    """Whether ``name`` (or an alias) names a registered framework."""
    _discover()
    return name in _BACKENDS or name in _ALIASES


def normalize_framework(name: str) -> str:
    """The registry key of ``name`` (``pytorch`` -> ``torch``; any letter case).

    Raises:
        ConfigError: no framework has that name, with the closest registered ones.
    """
    _discover()
    canonical = _ALIASES.get(name, name)
    if canonical not in _BACKENDS and isinstance(name, str):  # any letter case
        folded = name.strip().lower()
        canonical = _ALIASES.get(folded, folded)
    if canonical not in _BACKENDS:
        names = framework_names()
        raise unknown_name("framework", str(name), (*names, *_ALIASES),
                           f"choose one of {', '.join(names)}")
    return canonical


def lookup(framework: str) -> Any:
    """The registered backend object of ``framework`` (an alias included); use
    :func:`accelbench.backends.base.get_backend`, which types it.

    Raises:
        ConfigError: unknown framework.
    """
    return _BACKENDS[normalize_framework(framework)]


def backend_origin(framework: str) -> str:
    """Module name or file path that registers ``framework``'s backend."""
    return _ORIGINS[normalize_framework(framework)]


def framework_label(name: str) -> str:
    """The human name of framework ``name`` for reports (``PyTorch``); the name itself for
    a framework not registered here (a stored result of a plugin not loaded)."""
    return str(backend_fact(name, "label", "") or name)


def compile_label(name: str) -> str:
    """What ``compile_s`` of framework ``name`` times (``torch.compile``, ``XLA compile``);
    ``compile`` for a framework not registered here."""
    return str(backend_fact(name, "compile_label", "") or "compile")


def backend_fact(framework: str, name: str, default: T) -> T:
    """Attribute ``name`` of ``framework``'s backend (an alias included), or ``default``
    where no such framework is registered here (a stored record of a plugin not loaded)
    or its backend lacks the attribute (a plugin's backend need not subclass
    :class:`accelbench.backends.base.BaseBackend`)."""
    if not is_registered(framework):
        return default
    return getattr(_BACKENDS[_ALIASES.get(framework, framework)], name, default)


def stack_packages() -> tuple[str, ...]:
    """Import names of the packages of every registered framework's software stack (each
    backend's ``stack_packages``), in framework order, each once."""
    out: dict[str, None] = {}
    for name in framework_names():
        out.update(dict.fromkeys(backend_fact(name, "stack_packages", ())))
    return tuple(out)
