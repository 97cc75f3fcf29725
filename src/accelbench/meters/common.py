"""The meter interface and what the meters share.

A :class:`Meter` measures the energy of one device (or of several domains of
one device, such as RAPL package and DRAM) over a window opened by
:meth:`Meter.start` and closed by :meth:`Meter.stop`. Each source lives in its
own module (``nvml``, ``amd``, ``rapl``, ``tdp``); :class:`NullMeter`
stands in when nothing can measure a device, so readings always say
``unavailable`` with a reason and never report a silent zero. GPU meters build on
:class:`~accelbench.meters.counter.CounterSampleMeter`.

Vendor errors are translated into :class:`accelbench.errors.MeterError` where they
enter (GPU libraries in :mod:`accelbench.devices.gpu`, sysfs in the meter reading it);
:class:`SensorUnsupportedError` marks a sensor that the device does not have at all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

from accelbench.devices.errors import DeviceNotSupportedError
from accelbench.devices.gpu.common import clear_cache as clear_gpu_cache
from accelbench.meters import clock
from accelbench.meters.sampler import (
    LiveValue,
    PowerSampler,
    PowerSeries,
)
from accelbench.result import EnergyReading

MIN_COVERAGE = 0.9
"""Samples leaving more of the window uncovered than this share (and than
:data:`MAX_GAP_INTERVALS` intervals) are not used as the energy."""
MAX_GAP_INTERVALS = 5
"""A few missed samples at the window edges are tolerated whatever the window length."""
WHOLE_WINDOW_COVERAGE = 0.99
"""A reading whose energy covers at least this share of the window stands for all of it
(the edges of a window are read a few hundred microseconds inside it). Below it, the
reading's ``details["coverage"]`` holds the share and per-sample energy is taken over
the samples processed in the covered part only (:mod:`accelbench.meters.session`)."""
MAX_CONSECUTIVE_ERRORS = 20
"""Sampling of a sensor stops after this many failed reads in a row."""


def covers_window(covered_s: float, window_s: float, interval_s: float) -> bool:
    """Whether samples spanning ``covered_s`` may stand for a ``window_s`` window.

    True when the uncovered time is within ``1 - MIN_COVERAGE`` of the window or
    within :data:`MAX_GAP_INTERVALS` sampling intervals, whichever is larger.
    """
    if window_s <= 0 or covered_s <= 0:
        return False
    gap_s = max(window_s - covered_s, 0.0)
    return gap_s <= max((1.0 - MIN_COVERAGE) * window_s, MAX_GAP_INTERVALS * interval_s)


SensorUnsupportedError = DeviceNotSupportedError
"""The device has no such sensor (NVML ``NotSupported``, a node meter asked for energy):
the hardware layer's error, a :class:`~accelbench.errors.MeterError`."""


@dataclass(frozen=True, slots=True)
class SensorInfo:
    """One power or energy sensor, for the devices listing."""

    name: str
    """Human-readable sensor name."""
    kind: str
    """Source kind: ``nvml-energy``, ``nvml-power``, ``amdsmi-energy``, ``rapl`` ..."""
    device: str
    """accelbench device it measures (``cuda:0``, ``cpu``), or ``""`` if none."""
    readable: bool
    """Whether accelbench can read it now."""
    reason: str = ""
    """Why not (with the fix), or a remark."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON and tables."""
        return {
            "name": self.name,
            "kind": self.kind,
            "device": self.device,
            "readable": self.readable,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class MeterOutput:
    """What a meter hands back for one device or domain at :meth:`Meter.stop`."""

    reading: EnergyReading
    series: PowerSeries | None = None
    """The samples behind the reading, for the power timeline."""


_AVAILABILITY: dict[tuple[type, Hashable], tuple[bool, str]] = {}


def clear_availability_cache() -> None:
    """Forget cached :meth:`Meter.is_available` answers and the GPU libraries' (tests,
    hot-plug)."""
    _AVAILABILITY.clear()
    clear_gpu_cache()


def join_notes(*notes: str) -> str:
    """Join non-empty notes with ``"; "``."""
    return "; ".join(n for n in notes if n)


class Meter(ABC):
    """Measures energy of one device over a window.

    Subclasses implement :meth:`describe`, :meth:`start` and :meth:`stop`, and
    may override :meth:`_probe` (availability of the source on this machine)
    and :meth:`_availability_key` (what the cached answer depends on).

    Args:
        device: accelbench device string (``cpu``, ``cuda:0``).
        scope: What is measured (``gpu``, ``cpu-package`` ...).
    """

    kind: ClassVar[str] = "meter"

    def __init__(self, device: str, scope: str) -> None:
        self.device = device
        self.scope = scope
        self._sampler: PowerSampler | None = None
        """The background sampler of the open window, for meters that sample."""

    # -- availability ----------------------------------------------------------------------

    @classmethod
    def is_available(cls) -> bool:
        """Whether this source can measure anything here (cached per class and key)."""
        return cls._cached_probe()[0]

    @classmethod
    def unavailable_reason(cls) -> str:
        """Why :meth:`is_available` is False (with the fix), or ``""``."""
        return cls._cached_probe()[1]

    @classmethod
    def _cached_probe(cls) -> tuple[bool, str]:
        key = (cls, cls._availability_key())
        if key not in _AVAILABILITY:
            _AVAILABILITY[key] = cls._probe()
        return _AVAILABILITY[key]

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        """``(available, reason)``; uncached. Default: not available."""
        return False, f"{cls.kind}: no sensor"

    @classmethod
    def _availability_key(cls) -> Hashable:
        """What the availability answer depends on besides the class."""
        return ()

    # -- measuring -------------------------------------------------------------------------

    @abstractmethod
    def describe(self) -> list[SensorInfo]:
        """The sensors this meter reads."""

    @abstractmethod
    def start(self) -> None:
        """Open the measurement window. May be called again after :meth:`stop`."""

    @abstractmethod
    def stop(self) -> list[MeterOutput]:
        """Close the window and return one output per device or domain."""

    def update_period_s(self) -> float | None:
        """Seconds between updates of the sensor this meter's energy comes from.

        Nominal (documented) until a window or the idle baseline has measured it
        (:func:`accelbench.meters.updates.detect_update_period`). None for what is not
        a sensor (an estimate, a null meter). The session sizes the energy window from
        it: at least :data:`~accelbench.meters.updates.MIN_SENSOR_UPDATES` updates.
        """
        return None

    def failure(self) -> str:
        """While a window is open: why this meter's sensor can give it no figure any more
        (every read so far failed, sampling stopped on errors), or ``""`` while it may.
        The energy window is sized from the meters that still work
        (:meth:`accelbench.meters.session.MeterSession.live_window`). Here: a background
        sampler that stopped on errors, or whose every read so far failed."""
        sampler = self._sampler
        if sampler is None:
            return ""
        if sampler.error is not None:
            return f"sampling stopped ({sampler.error})"
        if all(v.t_s is None for v in sampler.live().values()):
            return "every read failed so far"
        return ""

    def temperature_c(self) -> float | None:
        """The device's temperature now, where the sensor reports one (thermal settle)."""
        return None

    def live(self) -> dict[str, LiveValue]:
        """Latest power and energy so far per sensor while running (for live displays)."""
        return self._sampler.live() if self._sampler is not None else {}

    def _stop_sampler(self) -> PowerSampler | None:
        """Stop the window's sampler (if any) and hand it over; the meter no longer holds it."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.stop()
        return sampler

    def close(self) -> None:  # noqa: B027 - optional hook, most meters hold nothing
        """Release vendor library handles. The meter is unusable afterwards."""

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class NullMeter(Meter):
    """Stands in for a device nothing can measure: readings are ``unavailable``.

    Args:
        device: accelbench device string.
        scope: What would have been measured.
        note: Why it is unavailable, with the fix.
    """

    kind = "null"

    def __init__(self, device: str, scope: str, note: str) -> None:
        super().__init__(device, scope)
        self.note = note
        self._t_start_s: float | None = None

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        return True, ""

    def describe(self) -> list[SensorInfo]:
        return [
            SensorInfo(
                name=f"{self.device} (no sensor)",
                kind="none",
                device=self.device,
                readable=False,
                reason=self.note,
            )
        ]

    def start(self) -> None:
        self._t_start_s = clock.now()

    def stop(self) -> list[MeterOutput]:
        window_s = None if self._t_start_s is None else clock.now() - self._t_start_s
        self._t_start_s = None
        reading = EnergyReading(
            device=self.device,
            scope=self.scope,
            source="unavailable",
            window_s=window_s,
            note=self.note,
        )
        return [MeterOutput(reading=reading)]


