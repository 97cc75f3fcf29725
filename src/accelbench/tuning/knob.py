"""The knob interface: one settable value of one device, read, checked, set, restored.

A knob's ``device`` string names the device across processes (the pending-restore rows
store it): ``nvidia:N`` and ``amd:N`` (the vendor library's physical index), ``cpu`` (every
cpufreq policy) and ``rapl`` (every RAPL package zone). Implementations import this
module; :mod:`accelbench.tuning.base` builds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from accelbench.devices.errors import PrivilegeError as PrivilegeError

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
