"""Device knobs a sweep sets (power limits, locked clocks, CPU frequency, RAPL limits).

``base.py`` is the interface (:class:`Knob`, :func:`knob_for`), one module per source
(``nvidia.py`` through pynvml, ``amd.py`` through amdsmi, ``cpu.py`` through sysfs), and
``guard.py`` applies a case's :class:`~accelbench.spec.DeviceSettings` with the originals
saved in the store first and restored afterwards (also by the next accelbench process on
the host, after a SIGKILL). Vendor modules are imported inside the functions that use them.
"""

from accelbench.tuning.base import KNOB_FIELDS, Knob, PrivilegeError, knob_for

__all__ = ["KNOB_FIELDS", "Knob", "PrivilegeError", "knob_for"]
