"""Errors of the hardware layer: what a vendor library's failures become where they enter.

They sit under both :class:`~accelbench.errors.MeterError` (a meter reading the device)
and :class:`~accelbench.errors.UnsupportedError` (a knob or a device that is not there),
so meters and tuning catch them by the names they already use.
"""

from __future__ import annotations

from accelbench.errors import MeterError, UnsupportedError


class DeviceError(MeterError, UnsupportedError):
    """A device's vendor library is missing, does not start, or a call to it failed."""


class DeviceNotSupportedError(DeviceError):
    """The device has no such sensor or setting (NVML ``NotSupported``, AMD SMI
    ``NOT_SUPPORTED``)."""


class PrivilegeError(DeviceError):
    """A setting exists but this process may not change it (the message says what is
    needed)."""
