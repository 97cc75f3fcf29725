"""Power and energy meters: one interface (:mod:`.common`), one module per source.

Sources: NVIDIA GPUs through NVML (:mod:`.nvml`), AMD GPUs through AMD SMI
(:mod:`.amd`), CPU package and DRAM through Linux powercap RAPL (:mod:`.rapl`),
a labelled TDP estimate where no sensor exists (:mod:`.tdp`, :mod:`.tpu`), and
node meters (:mod:`.external`: IPMI DCMI, a command printing watts) registered by name
in :mod:`.registry`, where plugins add their own (``register_meter``). The runner uses
:func:`open_session`, sized by :mod:`.updates` (update periods, the energy window rule)
and combined over trials by :mod:`.trials`; ``accelbench power``, ``devices`` and
``doctor`` use :func:`watch_power`, :func:`sensor_report` and :mod:`.doctor`.

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
