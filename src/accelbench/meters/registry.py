"""Meter plugins: meters registered by name, such as node meters (``--node-meter NAME``).

A plugin is a factory ``factory(options) -> Meter`` taking the run's
:class:`accelbench.spec.MeterOptions`, registered with :func:`register_meter`
under a name and the measurement boundary its readings give (``device``,
``device+host`` or ``node``). The built-ins are ``ipmi`` (the BMC's DCMI power
reading) and ``cmd`` (a user's command printing watts), both in
:mod:`accelbench.meters.external`. A plugin file registers its own::

    from accelbench.meters.registry import register_meter

    register_meter("my_pdu", lambda options: MyPduMeter(interval_s=1.0))
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.errors import ConfigError, unknown_name
from accelbench.spec import BOUNDARIES, Boundary, MeterOptions

if TYPE_CHECKING:
    from accelbench.meters.common import Meter

MeterFactory = Callable[[MeterOptions], "Meter"]
"""Builds a meter from the run's meter options."""

_NAME_RE = re.compile(r"^[a-z][a-z0-9_.-]*$")


@dataclass(frozen=True, slots=True)
class MeterPlugin:
    """One registered meter kind."""

    name: str
    factory: MeterFactory
    boundary: str
    """The measurement boundary of its readings: ``device`` (the accelerator's own
    sensor), ``device+host`` (adds CPU package and DRAM) or ``node`` (an external meter:
    everything behind the power supplies); :data:`accelbench.spec.BOUNDARIES`."""
    origin: str
    """Module that registered it."""


_REGISTRY: dict[str, MeterPlugin] = {}
_BUILTINS = ("ipmi", "cmd")


def register_meter(
    name: str, factory: MeterFactory, *, boundary: str = "node", replace: bool = False
) -> MeterFactory:
    """Register ``factory`` as meter ``name`` (registering the same factory again is a
    no-op) and return it.

    Args:
        name: Lower-case name users type (``--node-meter NAME``).
        factory: ``factory(options: MeterOptions) -> Meter``.
        boundary: ``device``, ``device+host`` or ``node``.
        replace: Replace an existing registration of the same name.

    Raises:
        ConfigError: Bad name or boundary, a factory that is not callable, or the name is
            taken by another factory and ``replace`` is False.
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"meter name must be lower case letters, digits, '_', '-' or '.', starting with "
            f"a letter, got {name!r}"
        )
    if boundary not in BOUNDARIES:
        raise ConfigError(
            f"meter {name!r}: boundary must be one of {', '.join(BOUNDARIES)}, got {boundary!r}"
        )
    if not callable(factory):
        raise ConfigError(f"meter {name!r}: factory must be callable, got {factory!r}")
    if name not in _BUILTINS:
        _ensure_builtins()  # so a plugin cannot silently shadow a built-in
    existing = _REGISTRY.get(name)
    if existing is not None and existing.factory is not factory and not replace:
        raise ConfigError(
            f"meter {name!r} is already registered (by {existing.origin}); pass replace=True "
            "to replace it"
        )
    origin = str(getattr(factory, "__module__", None) or "?")
    _REGISTRY[name] = MeterPlugin(name=name, factory=factory, boundary=boundary, origin=origin)
    return factory


def _ensure_builtins() -> None:
    if all(name in _REGISTRY for name in _BUILTINS):
        return
    from accelbench.meters import external

    for name, factory in (("ipmi", external.ipmi_factory), ("cmd", external.command_factory)):
        if name not in _REGISTRY:
            register_meter(name, factory, boundary="node")


def get_meter_plugin(name: str) -> MeterPlugin:
    """The registered meter ``name`` with its boundary.

    Raises:
        ConfigError: Unknown name, with the closest registered names.
    """
    _ensure_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        registered = ", ".join(sorted(_REGISTRY))
        raise unknown_name("meter", name, _REGISTRY, f"registered: {registered}") from None


def get_meter_factory(name: str) -> MeterFactory:
    """The factory of registered meter ``name``.

    Raises:
        ConfigError: Unknown name, with the closest registered names.
    """
    return get_meter_plugin(name).factory


def list_meters() -> list[MeterPlugin]:
    """Every registered meter, sorted by name."""
    _ensure_builtins()
    return sorted(_REGISTRY.values(), key=lambda p: p.name)


def node_meter_name(options: Any) -> str | None:
    """The node meter ``options`` ask for: ``node_meter``, else ``cmd`` when only
    ``node_meter_cmd`` is set, else None."""
    name = getattr(options, "node_meter", None)
    if name:
        return str(name)
    if getattr(options, "node_meter_cmd", None):
        return "cmd"
    return None


def open_node_meter(options: Any) -> Meter | None:
    """The node meter ``options`` ask for (see :func:`node_meter_name`), or None.

    A meter that cannot read here comes back as a :class:`~accelbench.meters.common.NullMeter`
    (its readings ``unavailable`` with the fix), never as nothing.

    Raises:
        ConfigError: Unknown meter name, or options the meter refuses.
    """
    name = node_meter_name(options)
    if name is None:
        return None
    return get_meter_factory(name)(options)


__all__ = [
    "BOUNDARIES",
    "Boundary",
    "MeterFactory",
    "MeterPlugin",
    "get_meter_factory",
    "get_meter_plugin",
    "list_meters",
    "node_meter_name",
    "open_node_meter",
    "register_meter",
]
