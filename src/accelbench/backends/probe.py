"""What each framework offers on this machine, asked in a subprocess.

The CLI and the API validate devices and precisions before anything runs, but
must not import a framework themselves: importing torch and jax in one process
can clash over vendor libraries, JAX takes GPU memory on import, and a broken
install must fail as one clear line, not a traceback. So ``python -m
accelbench.backends.probe FRAMEWORK`` imports the framework in a child process
and prints what the backend sees as JSON; the answer is cached for the life of
the calling process.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from accelbench.backends.base import DeviceInfo, get_backend
from accelbench.backends.registry import backend_origin, normalize_framework
from accelbench.errors import UnsupportedError
from accelbench.spec import Precision

PROBE_TIMEOUT_S = 180.0


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


def _probe_here(framework: str) -> dict[str, Any]:
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


@functools.cache
def probe(framework: str) -> Probe:
    """Ask ``framework``'s backend, in a subprocess, what it can run here (cached)."""
    fw = normalize_framework(framework)
    backend = get_backend(fw)
    if not installed(backend.package):
        return Probe(fw, installed=False,
                     error=f"{fw} is not installed: {backend.install_hint}")
    # A plugin's backend: the child imports the plugin that registers it first.
    origin = backend_origin(fw)
    plugin = [] if origin.startswith("accelbench.") else [origin]
    try:
        out = subprocess.run(
            [sys.executable, "-m", "accelbench.backends.probe", fw, *plugin],
            capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False,
        )
    except subprocess.TimeoutExpired:
        return Probe(fw, installed=True,
                     error=f"{fw} did not answer within {PROBE_TIMEOUT_S:g} s")
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return Probe(fw, installed=True,
                     error=f"{fw} failed to start (exit {out.returncode}): {tail}"[:500])
    data = json.loads(lines[-1])
    return Probe(
        fw,
        installed=bool(data.get("installed")),
        devices=tuple(DeviceInfo.from_dict(d) for d in data.get("devices") or ()),
        versions=data.get("versions"),
        error=data.get("error"),
    )


def require(framework: str) -> Probe:
    """The probe of an installed, working framework.

    Raises:
        UnsupportedError: the framework is missing or broken, with the fix.
    """
    p = probe(framework)
    if p.error:
        raise UnsupportedError(p.error)
    return p


def check_device(framework: str, device: str) -> str:
    """Normalise ``device`` for ``framework`` and make sure this machine has it.

    Raises:
        ConfigError: a device name the framework does not know.
        UnsupportedError: the framework is missing, or the device is not present.
    """
    fw = normalize_framework(framework)
    dev = get_backend(fw).normalize_device(device)
    p = require(fw)
    if p.device(dev) is None:
        kind = dev.split(":")[0]
        same = [d.device for d in p.devices if d.device.split(":")[0] == kind]
        seen = f"{fw} sees {', '.join(same)}" if same else f"{fw} sees no {kind} device"
        raise UnsupportedError(f"device {dev} is unavailable: {seen}")
    return dev


def supported_precisions(framework: str, device: str) -> tuple[Precision, ...]:
    """Precisions ``framework`` can run on ``device`` here (the device must exist)."""
    dev = check_device(framework, device)
    info = require(framework).device(dev)
    assert info is not None  # noqa: S101 - check_device guarantees it
    return info.precisions  # type: ignore[return-value]


def check_precision(framework: str, device: str, precision: str) -> None:
    """Refuse an unsupported precision/device pair before anything runs.

    Raises:
        UnsupportedError: with the list of precisions the device supports.
    """
    ok = supported_precisions(framework, device)
    if precision not in ok:
        raise UnsupportedError(
            f"precision {precision} is not supported on {device} with {framework}; "
            f"supported: {', '.join(ok)}"
        )


def main(argv: list[str] | None = None) -> int:
    """Child side: print the probe of ``argv[0]`` as one JSON line (``argv[1]``: the plugin
    that registers a framework accelbench does not ship)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        from accelbench.workloads.registry import load_plugin

        load_plugin(args[1])
    print(json.dumps(_probe_here(args[0])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
