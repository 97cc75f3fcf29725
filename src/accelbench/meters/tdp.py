"""CPU power estimated from TDP and utilisation, where no sensor exists.

The model, stated in every reading's note::

    P = idle_fraction * TDP + (1 - idle_fraction) * TDP * util

with ``util`` the share of the machine's CPUs the measuring process itself used
over the window (its own user + system CPU time, all threads, divided by wall
time x logical CPUs) and ``idle_fraction`` = 0.3 (a package idles at very roughly
a third of its TDP).
The TDP is the one the user gives (``cpu_tdp_w``, for all packages together) or
comes from :data:`KNOWN_TDP_W` times the number of packages. Readings are
always labelled ``source="estimate"``; with no TDP known the reading is
``unavailable``.

The utilisation is the process's own, not the system-wide one: on a shared
machine other people's jobs would otherwise be billed to the case (a busy
neighbour on one of two cores would add 35% of the TDP to every sample).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from accelbench.errors import ConfigError
from accelbench.meters import clock
from accelbench.meters.common import Meter, MeterOutput, NullMeter, SensorInfo, join_notes
from accelbench.meters.sampler import DEFAULT_MAX_SAMPLES, PowerSampler
from accelbench.result import EnergyReading

IDLE_FRACTION = 0.3
"""Share of TDP drawn at zero utilisation in the model."""
MIN_INTERVAL_S = 0.1
"""Utilisation is counted in scheduler ticks; finer slices are noise."""
NO_TDP_NOTE = "no power sensor and no TDP known; pass --cpu-tdp-w"

# TDP / processor base power per package in watts, from the vendors' spec sheets:
# Intel ARK (ark.intel.com, "Processor Base Power" / "TDP") and AMD product pages
# (amd.com/en/products/processors, "Default TDP"). Keys are lower-case model names
# as they appear in /proc/cpuinfo after dropping (R), (TM), "CPU" and "Processor".
KNOWN_TDP_W: dict[str, float] = {
    # Intel desktop
    "core i9-14900k": 125.0,
    "core i9-13900k": 125.0,
    "core i9-12900k": 125.0,
    "core i9-10900k": 125.0,
    "core i9-9900k": 95.0,
    "core i7-13700k": 125.0,
    "core i7-12700k": 125.0,
    "core i7-9700k": 95.0,
    "core i7-8700k": 95.0,
    "core i7-7700k": 91.0,
    "core i7-6700k": 91.0,
    "core i5-13600k": 125.0,
    "core i5-12600k": 125.0,
    "core i5-12400": 65.0,
    # Intel server
    "xeon e5-2630 v4": 85.0,
    "xeon e5-2650 v4": 105.0,
    "xeon e5-2680 v4": 120.0,
    "xeon e5-2690 v4": 135.0,
    "xeon e5-2698 v4": 135.0,
    "xeon silver 4114": 85.0,
    "xeon silver 4210": 85.0,
    "xeon gold 6130": 125.0,
    "xeon gold 6148": 150.0,
    "xeon gold 6230": 125.0,
    "xeon gold 6248": 150.0,
    "xeon platinum 8180": 205.0,
    "xeon platinum 8280": 205.0,
    "xeon platinum 8380": 270.0,
    "xeon platinum 8480": 350.0,
    # AMD desktop and workstation
    "ryzen 7 3700x": 65.0,
    "ryzen 7 5800x": 105.0,
    "ryzen 9 3950x": 105.0,
    "ryzen 9 5900x": 105.0,
    "ryzen 9 5950x": 105.0,
    "ryzen 9 7950x": 170.0,
    "ryzen threadripper 3990x": 280.0,
    # AMD server
    "epyc 7282": 120.0,
    "epyc 7543": 225.0,
    "epyc 7702": 200.0,
    "epyc 7742": 225.0,
    "epyc 7763": 280.0,
    "epyc 9654": 360.0,
}

_NOISE_RE = re.compile(r"\((?:r|tm)\)|\b(?:cpu|processor)\b")


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_model_name() -> str:
    """The CPU model string (``/proc/cpuinfo``, else ``platform.processor()``)."""
    for line in _cpuinfo().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    import platform

    return platform.processor() or platform.machine()


def _cpu_packages() -> int:
    ids = {
        line.partition(":")[2].strip()
        for line in _cpuinfo().splitlines()
        if line.partition(":")[0].strip() == "physical id"
    }
    return max(1, len(ids))


def _under_hypervisor() -> bool:
    for line in _cpuinfo().splitlines():
        if line.partition(":")[0].strip() == "flags":
            return "hypervisor" in line.split()
    return False


def normalize_model(model: str) -> str:
    """Lower-case ``model`` without (R), (TM), "CPU", "Processor" and extra spaces."""
    return " ".join(_NOISE_RE.sub(" ", model.lower()).split())


def lookup_tdp_w(model: str) -> tuple[str, float] | None:
    """``(table key, TDP per package)`` for a CPU model string, or None if unknown."""
    normalized = normalize_model(model)
    for key in sorted(KNOWN_TDP_W, key=len, reverse=True):
        if re.search(r"(?<![\w-])" + re.escape(key) + r"(?!\w)", normalized):
            return key, KNOWN_TDP_W[key]
    return None


@dataclass(frozen=True, slots=True)
class TdpInfo:
    """Where the TDP of the estimate came from."""

    tdp_w: float
    """Total over all packages."""
    source: str
    """``user`` (cpu_tdp_w) or ``table``."""
    cpu_model: str
    packages: int
    table_key: str | None = None

    def describe(self) -> str:
        if self.source == "user":
            return f"TDP = {self.tdp_w:g} W (given by --cpu-tdp-w)"
        per = self.tdp_w / self.packages
        count = f" x {self.packages} packages" if self.packages > 1 else ""
        return (
            f"TDP = {self.tdp_w:g} W ({per:g} W{count} from the vendor spec sheet of "
            f"'{self.table_key}')"
        )


def resolve_tdp(cpu_tdp_w: float | None) -> TdpInfo | None:
    """The TDP to use: the user's, else the table's for this CPU, else None.

    Raises:
        ConfigError: If ``cpu_tdp_w`` is not a positive number.
    """
    model = cpu_model_name()
    if cpu_tdp_w is not None:
        if not cpu_tdp_w > 0:
            raise ConfigError(f"--cpu-tdp-w must be > 0 W, got {cpu_tdp_w}")
        return TdpInfo(tdp_w=float(cpu_tdp_w), source="user", cpu_model=model, packages=1)
    found = lookup_tdp_w(model)
    if found is None:
        return None
    packages = _cpu_packages()
    return TdpInfo(
        tdp_w=found[1] * packages,
        source="table",
        cpu_model=model,
        packages=packages,
        table_key=found[0],
    )


def estimate_power_w(tdp_w: float, util: float, idle_fraction: float = IDLE_FRACTION) -> float:
    """The model: ``idle_fraction*TDP + (1-idle_fraction)*TDP*util``, util clamped to [0, 1]."""
    util = min(max(util, 0.0), 1.0)
    return idle_fraction * tdp_w + (1.0 - idle_fraction) * tdp_w * util


def own_cpu_s() -> float:
    """User + system CPU seconds of this process (every thread), from ``/proc/self/stat``."""
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


def system_cpu_s() -> tuple[float, float]:
    """System-wide busy and steal CPU seconds (every CPU; idle and iowait are not busy),
    from ``/proc/stat``."""
    fields = psutil.cpu_times()._asdict()
    # guest time is already inside user/nice on Linux
    total = sum(v for k, v in fields.items() if k not in ("guest", "guest_nice"))
    busy = total - fields.get("idle", 0.0) - fields.get("iowait", 0.0)
    return busy, fields.get("steal", 0.0)


def _system_busy_cpu_s() -> float:
    return system_cpu_s()[0]


def logical_cpus() -> int:
    """CPUs of the machine (what ``/proc/stat`` counts)."""
    return max(1, psutil.cpu_count(logical=True) or 1)


class _Utilisation:
    """CPU share since the previous call: this process's own (a case), or the whole
    system's (``accelbench power``, which watches the machine, not itself)."""

    def __init__(self, whole_system: bool = False) -> None:
        self._read = _system_busy_cpu_s if whole_system else own_cpu_s
        self._cpu_s = self._read()
        self._t_s = clock.now()
        self._cpus = logical_cpus()

    def since_last(self) -> float | None:
        cpu_s, t_s = self._read(), clock.now()
        d_cpu, d_t = cpu_s - self._cpu_s, t_s - self._t_s
        self._cpu_s, self._t_s = cpu_s, t_s
        if d_t <= 0:
            return None
        return min(max(d_cpu / (d_t * self._cpus), 0.0), 1.0)


class CpuEstimateMeter(Meter):
    """CPU package power from TDP and measured utilisation. Always labelled an estimate.

    Args:
        tdp: The TDP and its provenance.
        interval_s: Timeline sampling interval (at least 0.1 s).
        idle_fraction: Share of TDP drawn when idle.
        extra_note: Remark added to the note (e.g. why RAPL was not used).
        max_samples: Bound on stored samples.
        whole_system: Use the system-wide utilisation (``accelbench power``) instead of
            this process's own (a case: other processes are not billed to it).
    """

    kind = "estimate"

    def __init__(
        self,
        tdp: TdpInfo,
        *,
        interval_s: float = MIN_INTERVAL_S,
        idle_fraction: float = IDLE_FRACTION,
        extra_note: str = "",
        max_samples: int = DEFAULT_MAX_SAMPLES,
        whole_system: bool = False,
    ) -> None:
        super().__init__("cpu", "cpu-package")
        self.whole_system = whole_system
        if not 0.0 <= idle_fraction <= 1.0:
            raise ConfigError(f"idle_fraction must be in [0, 1], got {idle_fraction}")
        self.tdp = tdp
        self.interval_s = max(interval_s, MIN_INTERVAL_S)
        self.idle_fraction = idle_fraction
        self.extra_note = extra_note
        self.max_samples = max_samples
        self._window: _Utilisation | None = None
        self._slices: _Utilisation | None = None
        self._t_start_s = 0.0

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        tdp = resolve_tdp(None)
        if tdp is None:
            return False, NO_TDP_NOTE
        return True, ""

    def describe(self) -> list[SensorInfo]:
        return [
            SensorInfo(
                f"CPU estimate from TDP ({self.tdp.cpu_model})",
                "estimate",
                "cpu",
                True,
                self.tdp.describe(),
            )
        ]

    def _slice_power_w(self) -> float:
        """Estimated power over the slice since the previous call (the sampler's read function)."""
        util = self._slices.since_last() if self._slices is not None else None
        if util is None:
            return math.nan
        return estimate_power_w(self.tdp.tdp_w, util, self.idle_fraction)

    def start(self) -> None:
        self._window = _Utilisation(self.whole_system)
        self._slices = _Utilisation(self.whole_system)
        self._t_start_s = clock.now()
        sampler = PowerSampler.single(
            self._slice_power_w,
            "cpu",
            interval_s=self.interval_s,
            max_samples=self.max_samples,
            name="accelbench-cpu-estimate",
        )
        sampler.start()
        self._sampler = sampler

    def stop(self) -> list[MeterOutput]:
        sampler = self._stop_sampler()
        window_s = clock.now() - self._t_start_s
        util = self._window.since_last() if self._window is not None else None
        series = sampler.series["cpu"] if sampler is not None else None
        details: dict[str, Any] = {
            "sensor": "estimate",
            "model": "P = idle_fraction*TDP + (1-idle_fraction)*TDP*util",
            "tdp_w": self.tdp.tdp_w,
            "tdp_source": self.tdp.source,
            "cpu_model": self.tdp.cpu_model,
            "packages": self.tdp.packages,
            "idle_fraction": self.idle_fraction,
            "utilisation": util,
            "utilisation_of": "the whole system (busy CPU time / (wall time x logical CPUs))"
            if self.whole_system
            else "this process (own CPU time / (wall time x logical CPUs))",
        }
        if util is None or window_s <= 0:
            note = join_notes(
                "the window had no duration; no estimate", self.extra_note
            )
            reading = EnergyReading(
                device="cpu",
                scope="cpu-package",
                source="unavailable",
                window_s=window_s,
                note=note,
                details=details,
            )
            return [MeterOutput(reading=reading, series=series)]
        power_w = estimate_power_w(self.tdp.tdp_w, util, self.idle_fraction)
        energy_j = power_w * window_s
        hypervisor = (
            "running under a hypervisor: the TDP is the whole physical package, of which this "
            "machine may get a share, so the estimate may be high"
            if _under_hypervisor()
            else ""
        )
        note = join_notes(
            (
                f"estimated, not measured: P = {self.idle_fraction:g}*TDP + "
                f"{1 - self.idle_fraction:g}*TDP*util with {self.tdp.describe()} and "
                f"util = {util:.3f} ("
                + ("system-wide busy CPU time" if self.whole_system
                   else "this process's own CPU time")
                + f" over the window / (window x {logical_cpus()} CPUs)"
                + ("" if self.whole_system else "; other processes are not counted")
                + ")"
            ),
            hypervisor,
            self.extra_note,
        )
        peak_w = series.peak_power_w if series is not None and series.peak_power_w else power_w
        reading = EnergyReading(
            device="cpu",
            scope="cpu-package",
            source="estimate",
            energy_j=energy_j,
            avg_power_w=power_w,
            peak_power_w=max(peak_w, power_w),
            window_s=window_s,
            interval_s=series.mean_interval_s if series is not None else None,
            n_samples=series.n_samples if series is not None else None,
            note=note,
            details=details,
        )
        return [MeterOutput(reading=reading, series=series)]


def open_meter(
    cpu_tdp_w: float | None,
    *,
    interval_s: float = MIN_INTERVAL_S,
    extra_note: str = "",
    max_samples: int = DEFAULT_MAX_SAMPLES,
    whole_system: bool = False,
) -> Meter:
    """A :class:`CpuEstimateMeter` if a TDP is known, else a :class:`NullMeter` saying so.

    Args:
        cpu_tdp_w: The user's TDP for all packages together, or None to look it up.
        interval_s: Timeline sampling interval.
        extra_note: Why no sensor was used (added to the note).
        max_samples: Bound on stored samples.
        whole_system: Estimate the whole machine's power (``accelbench power``), not
            this process's share.

    Raises:
        ConfigError: If ``cpu_tdp_w`` is not positive.
    """
    tdp = resolve_tdp(cpu_tdp_w)
    if tdp is None:
        if extra_note:
            return NullMeter(
                "cpu", "cpu-package", f"{extra_note}; or pass --cpu-tdp-w for an estimate"
            )
        model = cpu_model_name()
        return NullMeter(
            "cpu", "cpu-package", f"{NO_TDP_NOTE} (CPU model '{model}' is not in the TDP table)"
        )
    return CpuEstimateMeter(
        tdp, interval_s=interval_s, extra_note=extra_note, max_samples=max_samples,
        whole_system=whole_system,
    )


def list_sensors() -> list[SensorInfo]:
    """The estimate's availability, for ``accelbench devices``."""
    model = cpu_model_name()
    tdp = resolve_tdp(None)
    if tdp is None:
        return [
            SensorInfo(
                f"CPU estimate from TDP ({model})",
                "estimate",
                "cpu",
                False,
                "model not in the TDP table; pass --cpu-tdp-w to estimate",
            )
        ]
    return [SensorInfo(f"CPU estimate from TDP ({model})", "estimate", "cpu", True, tdp.describe())]
