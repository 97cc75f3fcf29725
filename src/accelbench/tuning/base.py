"""The knob interface: one settable value of one device, read, checked, set, restored.

A knob's ``device`` string names the device across processes (the pending-restore rows
store it): ``nvidia:N`` and ``amd:N`` (vendor index), ``cpu`` (every cpufreq policy) and
``rapl`` (every RAPL package zone). :func:`knob_for` rebuilds a knob from that string and
the knob's name (a :class:`~accelbench.spec.DeviceSettings` field), which is how a later
process restores what a killed sweep left.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from accelbench.errors import ConfigError, UnsupportedError

KNOB_FIELDS: tuple[str, ...] = (
    "power_limit_w", "sm_clock_mhz", "mem_clock_mhz", "cpu_max_freq_khz", "cpu_power_limit_w",
)
"""The :class:`~accelbench.spec.DeviceSettings` fields a knob sets."""
GPU_KNOBS: tuple[str, ...] = ("power_limit_w", "sm_clock_mhz", "mem_clock_mhz")
UNITS: dict[str, str] = {
    "power_limit_w": "W", "sm_clock_mhz": "MHz", "mem_clock_mhz": "MHz",
    "cpu_max_freq_khz": "kHz", "cpu_power_limit_w": "W",
}
AUTO_STEPS = 8
"""Settings ``auto`` spans a knob's allowed range with."""


class PrivilegeError(UnsupportedError):
    """A knob exists but this process may not change it (the message says what is needed)."""


class Knob(Protocol):
    """One settable value of one device."""

    @property
    def name(self) -> str:
        """The :class:`~accelbench.spec.DeviceSettings` field this knob sets."""
        ...

    @property
    def device(self) -> str:
        """The device as pending restores name it (``nvidia:0``, ``amd:0``, ``cpu``, ``rapl``)."""
        ...

    def read(self) -> Any:
        """The current state as JSON-ready data that :meth:`restore` puts back."""
        ...

    def allowed(self) -> Sequence[float]:
        """The settable values (the bounds, or every supported value), in the knob's unit."""
        ...

    def check_writable(self) -> None:
        """Raise :class:`PrivilegeError` when a change would be refused; changes nothing."""
        ...

    def apply(self, value: float) -> None:
        """Set the knob (in the unit its name ends in)."""
        ...

    def restore(self, original: Any) -> None:
        """Put back what :meth:`read` returned."""
        ...

    def describe(self, original: Any) -> str:
        """``original`` in a few words, for the restore log line."""
        ...


def knob_for(device: str, name: str) -> Knob:
    """The knob ``name`` of ``device`` (a pending restore's ``device`` string).

    Raises:
        ConfigError: an unknown knob, or one that the device does not have.
        UnsupportedError: the device or its vendor library is not available.
    """
    if name not in KNOB_FIELDS:
        raise ConfigError(f"unknown knob {name!r}; knobs: {', '.join(KNOB_FIELDS)}")
    kind, _, index = device.partition(":")
    if kind in ("nvidia", "amd"):
        if name not in GPU_KNOBS:
            raise ConfigError(f"{name} is not a GPU knob")
        if not index.isdigit():
            raise ConfigError(f"GPU knob device {device!r} needs an index, e.g. {kind}:0")
        if kind == "nvidia":
            from accelbench.tuning.nvidia import NvidiaKnob

            return NvidiaKnob(name, int(index))
        from accelbench.tuning.amd import AmdPowerCap

        if name != "power_limit_w":
            raise UnsupportedError(f"{name} is not settable on AMD GPUs here (only the "
                                   "power cap, --power-limits)")
        return AmdPowerCap(int(index))
    if device == "cpu" and name == "cpu_max_freq_khz":
        from accelbench.tuning.cpu import CpuFreqKnob

        return CpuFreqKnob()
    if device == "rapl" and name == "cpu_power_limit_w":
        from accelbench.tuning.cpu import RaplLimitKnob

        return RaplLimitKnob()
    raise ConfigError(f"device {device!r} has no knob {name!r}")


def gpu_vendor(index: int) -> str:
    """``nvidia`` or ``amd``: the vendor library that sees GPU ``index``.

    Raises:
        UnsupportedError: neither NVML nor AMD SMI sees such a GPU.
    """
    from accelbench.tuning import amd, nvidia

    why = []
    for vendor, count in (("nvidia", nvidia.gpu_count), ("amd", amd.gpu_count)):
        try:
            n = count()
        except UnsupportedError as exc:
            why.append(str(exc))
            continue
        if index < n:
            return vendor
        why.append(f"{vendor}: {n} GPU(s), no index {index}")
    raise UnsupportedError(f"no GPU {index} to tune: {'; '.join(why)}")


def spread(lo: float, hi: float, steps: int = AUTO_STEPS, *, grain: float = 1.0) -> list[float]:
    """``steps`` values from ``hi`` down to ``lo``, rounded to ``grain`` (no duplicates)."""
    if hi < lo:
        lo, hi = hi, lo
    if steps <= 1 or hi == lo:
        return [hi]
    out: list[float] = []
    for i in range(steps):
        v = hi - (hi - lo) * i / (steps - 1)
        v = max(lo, min(hi, round(v / grain) * grain))
        if v not in out:
            out.append(v)
    return out


def pick(values: Sequence[float], steps: int = AUTO_STEPS) -> list[float]:
    """About ``steps`` of a discrete set of supported values, highest first."""
    ordered = sorted(set(values), reverse=True)
    if len(ordered) <= steps:
        return ordered
    idx = sorted({round(i * (len(ordered) - 1) / (steps - 1)) for i in range(steps)})
    return [ordered[i] for i in idx]
