"""What each framework offers on this machine, asked outside the calling process.

The CLI and the API validate devices and precisions before anything runs, but
must not import a framework themselves: importing torch and jax in one process
can clash over vendor libraries, JAX takes GPU memory on import, and a broken
install must fail as one clear line, not a traceback. ``run`` asks no probe: its
worker checks its own case (:func:`accelbench.backends.probe.check_here`, the same
messages) before the store is opened. Where a plan needs the facts first (a suite's
precisions and device count, ``devices``, ``ops``), :func:`probe` asks a child forked by
the framework's warm server (:mod:`accelbench.isolation.forkserver`, which the suite's
cases then reuse), or ``python -m accelbench.isolation.ask FRAMEWORK`` where none can
run; the answer is cached for the life of the calling process (a worker's ``checked``
answer fills the same cache: :func:`remember`). What the child computes, and the
refusals' wording, are the backend's (:mod:`accelbench.backends.probe`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from typing import Any

from accelbench.backends.base import DeviceInfo, get_backend
from accelbench.backends.probe import (
    Probe,
    device_refusal,
    installed,
    precision_refusal,
    probe_here,
)
from accelbench.backends.registry import backend_origin
from accelbench.errors import UnsupportedError
from accelbench.isolation import child, forkserver
from accelbench.spec import Precision
from accelbench.workloads.registry import load_plugin

PROBE_TIMEOUT_S = 180.0


_CACHE: dict[str, Probe] = {}


def remember(framework: str, devices: list[dict[str, Any]]) -> None:
    """Keep what a worker of ``framework`` saw (its ``checked`` answer) as the probe of
    this process, unless one was asked already."""
    _CACHE.setdefault(framework, Probe(framework, installed=True, devices=tuple(
        DeviceInfo.from_dict(d) for d in devices)))


def probe(framework: str) -> Probe:
    """Ask ``framework``'s backend, in a child process, what it can run here (cached).

    Every function here takes a framework's registry key: the options' declarations
    turned what a user typed into it (an alias or letter case is no key here)."""
    if framework not in _CACHE:
        _CACHE[framework] = _ask(framework)
    return _CACHE[framework]


def _ask(fw: str) -> Probe:
    backend = get_backend(fw)
    if not installed(backend.package):
        return Probe(fw, installed=False,
                     error=f"{fw} is not installed: {backend.install_hint}")
    # A plugin's backend: the child imports the plugin that registers it first.
    origin = backend_origin(fw)
    plugin = [] if origin.startswith("accelbench.") else [origin]
    out = _warm(fw) if not plugin else None
    if out is None:
        try:
            out = subprocess.run(
                [sys.executable, "-m", "accelbench.isolation.ask", fw, *plugin],
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


def _warm(fw: str) -> subprocess.CompletedProcess[str] | None:
    """The probe's answer from a child of ``fw``'s warm server; None where there is none."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        proc = forkserver.spawn(fw, "accelbench.isolation.ask:main", [fw], errlog.fileno())
        if proc is None:
            return None
        assert proc.stdin is not None and proc.stdout is not None  # noqa: S101
        proc.stdin.close()
        text = proc.stdout.read()
        proc.stdout.close()
        try:
            code = proc.wait(PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill_group(proc)
            return None
        errlog.seek(0)
        return subprocess.CompletedProcess([fw], code, text, errlog.read())


def check_installed(framework: str) -> None:
    """Refuse a framework the import system cannot find (looked up, not imported).

    Raises:
        UnsupportedError: the framework is not installed, with the install command.
    """
    backend = get_backend(framework)
    if not installed(backend.package):
        raise UnsupportedError(f"{framework} is not installed: {backend.install_hint}")


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
    dev = get_backend(framework).normalize_device(device)
    why = device_refusal(framework, dev, require(framework).devices)
    if why:
        raise UnsupportedError(why)
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
    why = precision_refusal(framework, device, precision,
                             supported_precisions(framework, device))
    if why:
        raise UnsupportedError(why)


def main(argv: list[str] | None = None) -> int:
    """Child side: print the probe of ``argv[0]`` as one JSON line (``argv[1]``: the plugin
    that registers a framework accelbench does not ship)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        load_plugin(args[1])
    print(json.dumps(probe_here(args[0])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
