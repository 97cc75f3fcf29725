"""GPU access, one module per vendor library: :mod:`.common` (the interface, the
visible-devices mapping, the null object, the :class:`~.common.GpuEnergy` the GPU meter
reads), :mod:`.nvidia` (pynvml) and :mod:`.amd` (amdsmi), with what the meter reads
through each in :mod:`.nvidia_energy` and :mod:`.amd_energy`. Nothing else in accelbench
imports a GPU vendor library.

:func:`detect` is the one vendor fallback (NVIDIA, else AMD, else none), used by the
meters, the sensor listings, ``accelbench doctor`` and the knobs alike.
"""

from __future__ import annotations

from accelbench.devices.gpu import amd_energy, nvidia_energy
from accelbench.devices.gpu.amd import AmdGpus
from accelbench.devices.gpu.common import GpuSession, NoGpus, VendorEnergy, clear_cache
from accelbench.devices.gpu.nvidia import NvidiaGpus

VENDORS: tuple[type[GpuSession], ...] = (NvidiaGpus, AmdGpus)
"""Vendor libraries in the order they are tried."""
ENERGY: dict[type[GpuSession], VendorEnergy] = {
    v.session: v for v in (nvidia_energy.VENDOR, amd_energy.VENDOR)
}
"""What the GPU meter reads through each vendor library (:mod:`.nvidia_energy`,
:mod:`.amd_energy`)."""


def detect() -> type[GpuSession]:
    """The session class of the first vendor library that starts here and sees a GPU
    (:data:`VENDORS` order), else :class:`NoGpus`. Cached per vendor (:func:`clear_cache`)."""
    for cls in VENDORS:
        if cls.is_available():
            return cls
    return NoGpus


def unavailable_reason() -> str:
    """Why no vendor library sees a GPU, vendor by vendor (``NVIDIA: ...; AMD: ...``)."""
    return "; ".join(f"{cls.vendor_name}: {cls.unavailable_reason()}" for cls in VENDORS)


def open_gpus() -> GpuSession:
    """A session of the vendor :func:`detect` picks; a :class:`NoGpus` saying why if none.

    Raises:
        DeviceError: The library was there a moment ago and now fails to start.
    """
    cls = detect()
    if cls is NoGpus:
        return NoGpus(unavailable_reason())
    return cls()


__all__ = ["ENERGY", "VENDORS", "AmdGpus", "GpuSession", "NoGpus", "NvidiaGpus", "clear_cache",
           "detect", "open_gpus", "unavailable_reason"]
