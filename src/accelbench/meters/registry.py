"""Meter plugins: device meters by the devices they claim, node meters by name.

**Device meters** (:func:`register_device_meter`) measure the accelbench devices a case
runs on (``cuda:N``, ``cpu``, ``tpu:N``, a plugin's own). Each is one module that
registers itself: its kind, which devices it claims, how it detects whether it can read
here, how it builds a meter, and the sensors it lists. The run's meter session,
``accelbench power``, ``accelbench devices``, ``accelbench doctor`` and the contention
check of a case all ask this registry; the built-ins are :mod:`.gpu` (NVIDIA and AMD
through :mod:`accelbench.devices.gpu`), :mod:`.cpu` (RAPL, else the TDP estimate) and
:mod:`.tpu`: a module of :mod:`accelbench.meters` that registers a device meter is
found there, one that a plugin file (``--plugin`` or ``ACCELBENCH_PLUGINS``) registers is
too::

    from accelbench.meters.registry import register_device_meter

    register_device_meter(
        "npu", claims=lambda device: device.startswith("npu:"),
        open=lambda device, options: NpuMeter(device, interval_s=options.interval_s),
        visible=lambda: ["npu:0"],
    )

**Node meters** are registered by name (``--node-meter NAME``).

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

from accelbench.errors import AccelbenchError, ConfigError, unknown_name
from accelbench.meters.sampler import DEFAULT_INTERVAL_S, DEFAULT_MAX_SAMPLES
from accelbench.spec import BOUNDARIES, Boundary, MeterOptions

if TYPE_CHECKING:
    from accelbench.meters.common import Meter, SensorInfo

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


# -- device meters ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceMeterOptions:
    """What a device meter is built with (the run's sampling settings)."""

    interval_s: float = DEFAULT_INTERVAL_S
    """Power sampling interval."""
    counter_poll_s: float = 0.1
    """Poll interval of energy counters that integrate in hardware (RAPL)."""
    cpu_tdp_w: float | None = None
    """TDP of the CPU packages for the estimate where no CPU sensor reads."""
    uuid: str | None = None
    """The device's UUID where the framework knows it (overrides the visible devices)."""
    max_samples: int = DEFAULT_MAX_SAMPLES
    """Bound on stored samples per sensor."""
    device_name: str | None = None
    """The device's model name where the meter depends on it (a TPU's ``device_kind``)."""


def _no_sensors() -> list[SensorInfo]:
    return []


def _no_devices() -> list[str]:
    return []


def _always() -> tuple[bool, str]:
    return True, ""


@dataclass(frozen=True, slots=True)
class DeviceMeterPlugin:
    """One registered device meter (see :func:`register_device_meter`)."""

    kind: str
    claims: Callable[[str], bool]
    open: Callable[[str, DeviceMeterOptions], Meter]
    available: Callable[[], tuple[bool, str]] = _always
    sensors: Callable[[], list[SensorInfo]] = _no_sensors
    visible: Callable[[], list[str]] = _no_devices
    watch: Callable[[DeviceMeterOptions], list[Meter]] | None = None
    activity: Callable[[str, str | None], dict[str, Any]] | None = None
    diagnose: Callable[[Any], tuple[list[Any], list[tuple[Meter, str, str]]]] | None = None
    boundary: str = "device"
    order: int = 100
    origin: str = "?"

    def open_watched(self, options: DeviceMeterOptions) -> list[Meter]:
        """Meters for every readable sensor of this kind here (``accelbench power``):
        :attr:`watch`, else one per :attr:`visible` device, unreadable ones left out."""
        if self.watch is not None:
            return self.watch(options)
        meters = [self.open(device, options) for device in self.visible()]
        for meter in meters:
            if meter.kind == "null":
                meter.close()
        return [m for m in meters if m.kind != "null"]


_DEVICE_METERS: dict[str, DeviceMeterPlugin] = {}
_DISCOVERED: list[bool] = []


def register_device_meter(  # noqa: PLR0913
    kind: str,
    *,
    claims: Callable[[str], bool],
    open: Callable[[str, DeviceMeterOptions], Meter],  # noqa: A002 - the hook's name
    available: Callable[[], tuple[bool, str]] = _always,
    sensors: Callable[[], list[SensorInfo]] = _no_sensors,
    visible: Callable[[], list[str]] = _no_devices,
    watch: Callable[[DeviceMeterOptions], list[Meter]] | None = None,
    activity: Callable[[str, str | None], dict[str, Any]] | None = None,
    diagnose: Callable[[Any], tuple[list[Any], list[tuple[Meter, str, str]]]] | None = None,
    boundary: str = "device",
    order: int = 100,
    replace: bool = False,
) -> DeviceMeterPlugin:
    """Register a device meter; the first registered one that claims a device measures it.

    Args:
        kind: Lower-case name (``gpu``, ``cpu``, ``tpu``, a plugin's own).
        claims: ``claims(device) -> bool``: whether it measures this accelbench device
            (``cuda:0``, ``cpu``, ...).
        open: ``open(device, options) -> Meter``: the meter for one claimed device, a
            :class:`~accelbench.meters.common.NullMeter` saying why where it cannot read.
        available: ``() -> (bool, why not)``: whether it can read on this machine.
        sensors: ``() -> [SensorInfo]``: every sensor it finds, readable or not, with why
            (``accelbench devices``; ``doctor`` lists the unreadable ones with the reason).
        visible: ``() -> [device]``: the devices it sees here (``accelbench power`` and
            ``doctor`` open a meter on each).
        watch: ``(options) -> [Meter]``, where watching every sensor is more than one meter
            per visible device (the CPU's RAPL zones, else the estimate).
        activity: ``(device, uuid) -> dict``: other processes (``processes``: ``pid``),
            ``throttle_reasons`` ... on a device, for the contention check of a case.
        diagnose: ``(options) -> (findings, probes)``: what ``accelbench doctor`` says, with
            fixes (:class:`accelbench.meters.doctor.Finding`), and ``(meter, kind,
            boundary)`` to probe; default: the unreadable :attr:`sensors` and a meter per
            visible device.
        boundary: The measurement boundary of its readings (``device``, ``device+host``).
        order: Where it is listed and asked (``power``, ``devices``, ``doctor``; the first
            that claims a device measures it): the built-ins GPU 10, CPU 20, TPU 30.
        replace: Replace an existing registration of the same kind.

    Raises:
        ConfigError: Bad kind or boundary, a hook that is not callable, or the kind is
            taken and ``replace`` is False.
    """
    if not isinstance(kind, str) or not _NAME_RE.match(kind):
        raise ConfigError(
            f"device meter kind must be lower case letters, digits, '_', '-' or '.', "
            f"starting with a letter, got {kind!r}"
        )
    if boundary not in BOUNDARIES:
        raise ConfigError(f"device meter {kind!r}: boundary must be one of "
                          f"{', '.join(BOUNDARIES)}, got {boundary!r}")
    hooks = {"claims": claims, "open": open, "available": available, "sensors": sensors,
             "visible": visible, "watch": watch, "activity": activity, "diagnose": diagnose}
    for hook, fn in hooks.items():
        if fn is not None and not callable(fn):
            raise ConfigError(f"device meter {kind!r}: {hook} must be callable, got {fn!r}")
    origin = str(getattr(open, "__module__", None) or "?")
    if not origin.startswith("accelbench.meters."):
        _ensure_device_builtins()  # so a plugin comes after the built-ins
    existing = _DEVICE_METERS.get(kind)
    if existing is not None and existing.origin != origin and not replace:
        raise ConfigError(f"device meter {kind!r} is already registered (by {existing.origin}); "
                          "pass replace=True to replace it")
    plugin = DeviceMeterPlugin(kind=kind, claims=claims, open=open, available=available,
                               sensors=sensors, visible=visible, watch=watch,
                               activity=activity, diagnose=diagnose, boundary=boundary,
                               order=order, origin=origin)
    _DEVICE_METERS[kind] = plugin
    return plugin


def _ensure_device_builtins() -> None:
    """Import every module of :mod:`accelbench.meters` once: a built-in device meter is
    one module there that registers itself on import."""
    if _DISCOVERED:
        return
    _DISCOVERED.append(True)
    import importlib
    import pkgutil
    from pathlib import Path

    package = __name__.rpartition(".")[0]
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]),
                       key=lambda m: m.name):
        importlib.import_module(f"{package}.{info.name}")


def device_meters() -> list[DeviceMeterPlugin]:
    """Every registered device meter, by :attr:`DeviceMeterPlugin.order` (GPU, CPU, TPU,
    then plugins), then in the order they registered."""
    _ensure_device_builtins()
    plugins = list(_DEVICE_METERS.values())
    return sorted(plugins, key=lambda p: (p.order, plugins.index(p)))


def unregister_device_meter(kind: str) -> None:
    """Forget device meter ``kind`` (a plugin's, e.g. at the end of a test); a kind not
    registered is ignored."""
    _DEVICE_METERS.pop(kind, None)


def device_meter_for(device: str) -> DeviceMeterPlugin | None:
    """The device meter that claims ``device``, or None."""
    return next((p for p in device_meters() if p.claims(device)), None)


def open_device_meter(device: str, options: DeviceMeterOptions) -> Meter:
    """The meter for ``device`` from the device meter that claims it; a
    :class:`~accelbench.meters.common.NullMeter` where none does."""
    plugin = device_meter_for(device)
    if plugin is None:
        from accelbench.meters.common import NullMeter

        return NullMeter(device, "device", f"accelbench has no power meter for device {device!r}")
    return plugin.open(device, options)


def device_activity(device: str, uuid: str | None = None) -> dict[str, Any]:
    """Other processes, throttling ... on ``device`` from its device meter (the contention
    check), or ``{"available": False, "reason": ...}``."""
    plugin = device_meter_for(device)
    if plugin is None or plugin.activity is None:
        return {"available": False, "reason": f"no activity probe for {device}"}
    ok, why = plugin.available()
    if not ok:
        return {"available": False, "reason": why}
    try:
        state = plugin.activity(device, uuid)
    except AccelbenchError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, **state}


__all__ = [
    "BOUNDARIES",
    "Boundary",
    "DeviceMeterOptions",
    "DeviceMeterPlugin",
    "device_activity",
    "device_meter_for",
    "device_meters",
    "open_device_meter",
    "register_device_meter",
    "unregister_device_meter",
    "MeterFactory",
    "MeterPlugin",
    "get_meter_factory",
    "get_meter_plugin",
    "list_meters",
    "node_meter_name",
    "open_node_meter",
    "register_meter",
]
