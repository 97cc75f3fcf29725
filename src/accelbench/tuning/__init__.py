"""Device knobs a sweep sets (power limits, locked clocks, CPU frequency, RAPL limits).

``knob.py`` is the interface (:class:`Knob`, :class:`PrivilegeError`), one module per
source (``nvidia.py`` and ``amd.py`` on :mod:`accelbench.devices.gpu`, ``cpu.py`` through
sysfs), ``base.py`` the factory (:func:`knob_for`, :func:`~accelbench.tuning.base.gpu_device`)
and ``guard.py`` applies a case's :class:`~accelbench.spec.DeviceSettings` with the originals
saved in the store first and restored afterwards (also by the next accelbench process on
the host, after a SIGKILL).
"""

from accelbench.tuning.base import knob_for
from accelbench.tuning.knob import KNOB_FIELDS, Knob, PrivilegeError

__all__ = ["KNOB_FIELDS", "Knob", "PrivilegeError", "knob_for"]
