"""Knobs by name: :func:`knob_for` rebuilds a knob from a pending restore's ``device``
string and the knob's name (a :class:`~accelbench.spec.DeviceSettings` field), which is how
a later process restores what a killed sweep left; :func:`gpu_device` names the GPU behind
a framework's ``cuda:N`` as a knob's device string, through the visible-devices mapping
the meters use (:mod:`accelbench.devices.gpu.common`). The interface is
:mod:`accelbench.tuning.knob`.
"""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.devices import gpu
from accelbench.errors import ConfigError, UnsupportedError
from accelbench.tuning.amd import AmdPowerCap
from accelbench.tuning.cpu import CpuFreqKnob, RaplLimitKnob
from accelbench.tuning.knob import (
    AUTO_STEPS,
    GPU_KNOBS,
    KNOB_FIELDS,
    UNITS,
    Knob,
    PrivilegeError,
)
from accelbench.tuning.nvidia import NvidiaKnob

__all__ = ["AUTO_STEPS", "GPU_KNOBS", "KNOB_FIELDS", "UNITS", "Knob", "PrivilegeError",
           "gpu_device", "gpu_vendor", "knob_for", "pick", "spread"]


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
            return NvidiaKnob(name, int(index))
        if name != "power_limit_w":
            raise UnsupportedError(f"{name} is not settable on AMD GPUs here (only the "
                                   "power cap, --power-limits)")
        return AmdPowerCap(int(index))
    if device == "cpu" and name == "cpu_max_freq_khz":
        return CpuFreqKnob()
    if device == "rapl" and name == "cpu_power_limit_w":
        return RaplLimitKnob()
    raise ConfigError(f"device {device!r} has no knob {name!r}")


def gpu_device(ordinal: int) -> str:
    """The knob device string (``nvidia:P`` or ``amd:P``, P the vendor library's index) of
    the GPU a framework in this process calls ``cuda:<ordinal>``.

    The visible devices (``CUDA_VISIBLE_DEVICES`` ...: indices, UUIDs, PCI bus ids) are
    mapped exactly as the meter maps them, so a sweep sets the GPU it measures.

    Raises:
        UnsupportedError: no GPU library sees such a GPU.
    """
    try:
        with gpu.open_gpus() as gpus:
            if gpus.vendor == "none":
                raise UnsupportedError(gpu.unavailable_reason())
            index, _ = gpus.physical_index(ordinal)
            return f"{gpus.vendor}:{index}"
    except UnsupportedError as exc:
        raise UnsupportedError(f"no GPU {ordinal} to tune: {exc}") from exc


def gpu_vendor(ordinal: int) -> str:
    """``nvidia`` or ``amd``: the vendor library that sees ``cuda:<ordinal>``
    (:func:`gpu_device`)."""
    return gpu_device(ordinal).partition(":")[0]


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
