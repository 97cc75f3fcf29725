"""What a framework offers on this machine, asked in the process that has imported it.

The answer of a probe (:class:`Probe`, :func:`probe_here`) and the worker's check of its own
case (:func:`check_here`), with the one-line refusals both give. Asking a framework from a
process that must not import it (the CLI, the API, a suite's plan) happens in an isolated
child: :mod:`accelbench.isolation.ask`.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from accelbench.backends.base import DeviceInfo, get_backend
from accelbench.errors import UnsupportedError


@dataclass(frozen=True, slots=True)
class Probe:
    """One framework's view of this machine."""

    framework: str
    installed: bool
    devices: tuple[DeviceInfo, ...] = ()
    versions: dict[str, Any] | None = None
    error: str | None = None
    """Why the framework could not be asked (not installed, broken install)."""

    def device(self, name: str) -> DeviceInfo | None:
        return next((d for d in self.devices if d.device == name), None)


def installed(package: str) -> bool:
    """Whether ``package`` can be found by the import system (without importing it)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def probe_here(framework: str) -> dict[str, Any]:
    """The probe's answer, computed in this process (the child side; :func:`probe` has
    checked that the framework is installed)."""
    backend = get_backend(framework)
    try:
        devices = [d.to_dict() for d in backend.devices()]
        versions = backend.versions()
    except Exception as exc:  # a broken install must become one line for the user
        return {"installed": True, "devices": [],
                "error": f"{framework} failed to start: {type(exc).__name__}: {exc}"[:500]}
    return {"installed": True, "devices": devices, "versions": versions}


def device_refusal(fw: str, dev: str, devices: tuple[DeviceInfo, ...]) -> str | None:
    if any(d.device == dev for d in devices):
        return None
    kind = dev.split(":")[0]
    same = [d.device for d in devices if d.device.split(":")[0] == kind]
    seen = f"{fw} sees {', '.join(same)}" if same else f"{fw} sees no {kind} device"
    return f"device {dev} is unavailable: {seen}"


def precision_refusal(fw: str, dev: str, precision: str, ok: tuple[str, ...]) -> str | None:
    if precision in ok:
        return None
    return (f"precision {precision} is not supported on {dev} with {fw}; "
            f"supported: {', '.join(ok)}")


def check_here(spec: Any, backend: Any) -> tuple[DeviceInfo, ...]:
    """In a worker (the framework imported here): refuse the case's device or precision
    with :func:`check_device`'s and :func:`check_precision`'s messages, else return the
    devices the backend sees.

    Raises:
        UnsupportedError: the device is not here, the precision does not run on it, or
            the framework fails to start.
    """
    fw = spec.framework
    try:
        devices = tuple(backend.devices())
    except Exception as exc:  # a broken install: one line, as the probe says it
        raise UnsupportedError(
            f"{fw} failed to start: {type(exc).__name__}: {exc}"[:500]) from None
    why = device_refusal(fw, spec.device, devices)
    info = next((d for d in devices if d.device == spec.device), None)
    if why is None and info is not None:
        why = precision_refusal(fw, spec.device, spec.precision, tuple(info.precisions))
    if why:
        raise UnsupportedError(why)
    return devices
