"""Power and energy meters: one interface (:mod:`.common`), one module per source.

Device meters, each one module registered in :mod:`.registry` (``register_device_meter``)
by the devices it claims: GPUs, NVIDIA through NVML and AMD through AMD SMI, in one meter
(:mod:`.gpu`, on :mod:`accelbench.devices.gpu`), the CPU's package and DRAM through Linux
powercap RAPL else a labelled TDP estimate (:mod:`.cpu`: :mod:`.rapl`, :mod:`.tdp`), TPUs'
published-TDP estimate (:mod:`.tpu`), and a plugin's own. Node meters (:mod:`.external`:
IPMI DCMI, a command printing watts) are registered by name in the same
:mod:`.registry` (``register_meter``). The runner uses :func:`open_session`, sized by
:mod:`.updates` (update periods, the energy window rule) and combined over trials by
:mod:`.trials`; ``accelbench power``, ``devices`` and ``doctor`` use :func:`watch_power`,
:func:`sensor_report` and :mod:`.doctor`; all of them ask the registry.

Vendor packages are imported inside their modules' functions only, so importing
this package has no side effects and needs none of them.
"""

from accelbench.meters.common import (
    Meter,
    MeterOutput,
    NullMeter,
    SensorInfo,
    SensorUnsupportedError,
    clear_availability_cache,
)
from accelbench.meters.live import sensor_report, watch_power
from accelbench.meters.sampler import PowerSampler, PowerSeries
from accelbench.meters.session import MeterSession, open_session

__all__ = [
    "Meter",
    "MeterOutput",
    "MeterSession",
    "NullMeter",
    "PowerSampler",
    "PowerSeries",
    "SensorInfo",
    "SensorUnsupportedError",
    "clear_availability_cache",
    "open_session",
    "sensor_report",
    "watch_power",
]
