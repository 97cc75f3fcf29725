"""CPU package and DRAM energy through Linux powercap ``intel-rapl`` zones.

Intel CPUs, and AMD CPUs since Zen, expose RAPL energy counters as
``<root>/intel-rapl:<pkg>[:<sub>]/energy_uj`` (microjoules), with the zone's
``name`` (``package-0``, ``dram``, ``core``, ``uncore``, ``psys``) and the wrap
point ``max_energy_range_uj``. The counters are polled on the sampler thread
often enough that a wrap is never missed (a package wraps after minutes, the
sampler polls every few milliseconds), so any number of wraps in one window is
corrected. ``intel-rapl-mmio`` zones duplicate the package zones and are skipped.

The root is ``/sys/class/powercap`` unless ``ACCELBENCH_POWERCAP_ROOT`` is set
(read at call time). Since the 2020 PLATYPUS side channel (CVE-2020-8694) most
kernels make ``energy_uj`` readable by root only; such a domain is reported
``unavailable`` with the command that grants access, never as zero.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import MeterError
from accelbench.meters.common import (
    MAX_CONSECUTIVE_ERRORS,
    WHOLE_WINDOW_COVERAGE,
    Meter,
    MeterOutput,
    SensorInfo,
    covers_window,
    join_notes,
)
from accelbench.meters.sampler import (
    DEFAULT_INTERVAL_S,
    DEFAULT_MAX_SAMPLES,
    PowerSampler,
)
from accelbench.result import EnergyReading

ROOT_ENV = "ACCELBENCH_POWERCAP_ROOT"
DEFAULT_ROOT = "/sys/class/powercap"
MAX_PLAUSIBLE_DOMAIN_W = 10_000.0
"""A counter decrease implying more than this is a reset, not a wrap (no CPU package
or DRAM domain draws 10 kW)."""
MEASURED_SCOPES = ("cpu-package", "dram")
"""Domains that add up to the CPU's energy without double counting (core and uncore
are parts of the package)."""

_ZONE_RE = re.compile(r"^intel-rapl:(\d+)(?::(\d+))?$")
_SCOPES = {"dram": "dram", "core": "cpu-core", "uncore": "cpu-uncore", "psys": "platform"}


def powercap_root() -> Path:
    """The powercap sysfs root: ``$ACCELBENCH_POWERCAP_ROOT`` or ``/sys/class/powercap``."""
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


def _open_text(path: Path) -> str:
    """Read a sysfs file. The one place this module opens files."""
    with open(path, encoding="ascii") as f:
        return f.read()


def _read_int(path: Path) -> int:
    return int(_open_text(path).strip())


def access_note(root: Path | None = None) -> str:
    """How to make the RAPL counters readable."""
    root = root if root is not None else powercap_root()
    return (
        "RAPL energy counters are readable only by root: run as root, or grant read access "
        f"with `sudo chmod a+r {root}/intel-rapl:*/energy_uj` (resets at reboot)"
    )


@dataclass(frozen=True, slots=True)
class RaplDomain:
    """One powercap RAPL zone."""

    zone: str
    """Directory name, e.g. ``intel-rapl:0:1``."""
    name: str
    """Contents of ``name``: ``package-0``, ``dram``, ``core`` ..."""
    path: Path
    package_index: int
    max_energy_range_uj: int | None
    """Wrap point of ``energy_uj``; None if the file is missing or unreadable."""
    readable: bool
    reason: str = ""
    """Why it is unreadable, with the fix."""

    @property
    def scope(self) -> str:
        """``cpu-package``, ``dram``, ``cpu-core``, ``cpu-uncore``, ``platform`` or the name."""
        if self.name.startswith("package"):
            return "cpu-package"
        return _SCOPES.get(self.name, self.name)

    @property
    def device(self) -> str:
        """Reading label: ``package-0``, ``dram-0``, ``core-0``, ``psys``."""
        if self.name.startswith("package") or self.name == "psys":
            return self.name
        return f"{self.name}-{self.package_index}"


def _domain(path: Path, root: Path) -> RaplDomain | None:
    match = _ZONE_RE.match(path.name)
    if match is None or not path.is_dir():
        return None
    try:
        name = _open_text(path / "name").strip() or path.name
    except OSError:
        name = path.name
    try:
        max_range: int | None = _read_int(path / "max_energy_range_uj")
    except (OSError, ValueError):
        max_range = None
    readable, reason = True, ""
    try:
        _read_int(path / "energy_uj")
    except PermissionError:
        readable, reason = False, access_note(root)
    except FileNotFoundError:
        readable, reason = False, f"{path.name} has no energy_uj counter"
    except (OSError, ValueError) as exc:
        readable, reason = False, f"cannot read {path / 'energy_uj'}: {exc}"
    return RaplDomain(
        zone=path.name,
        name=name,
        path=path,
        package_index=int(match.group(1)),
        max_energy_range_uj=max_range,
        readable=readable,
        reason=reason,
    )


def discover_domains(root: Path | None = None) -> list[RaplDomain]:
    """Every RAPL zone under the powercap root (``[]`` if there is none).

    Args:
        root: Powercap root; default :func:`powercap_root`.
    """
    root = root if root is not None else powercap_root()
    if not root.is_dir():
        return []
    candidates: list[Path] = []
    for top in sorted(root.iterdir()):
        candidates.append(top)
        if _ZONE_RE.match(top.name) and top.is_dir():
            # Sub-zones appear at the top level in sysfs, but also nested in copies.
            candidates.extend(sorted(p for p in top.iterdir() if _ZONE_RE.match(p.name)))
    seen: dict[str, RaplDomain] = {}
    for path in candidates:
        if path.name not in seen:
            domain = _domain(path, root)
            if domain is not None:
                seen[path.name] = domain

    def order(d: RaplDomain) -> tuple[int, int]:
        match = _ZONE_RE.match(d.zone)
        sub = match.group(2) if match else None
        return d.package_index, -1 if sub is None else int(sub)

    return sorted(seen.values(), key=order)


class CounterAccumulator:
    """Turns successive raw readings of a wrapping counter into increments.

    A decrease is a wrap when the wrap point is known and the increment it
    implies is plausible (under ``max_rate_per_s`` over the elapsed time);
    otherwise it is a reset (or, without a wrap point, an unknown decrease) and
    the increment is bridged from the previous rate.

    Args:
        max_range: Wrap point (``max_energy_range_uj``), or None if unknown.
        max_rate_per_s: Fastest plausible growth, in counter units per second.
    """

    def __init__(self, max_range: int | None, *, max_rate_per_s: float) -> None:
        self.max_range = max_range
        self.max_rate_per_s = max_rate_per_s
        self.wraps = 0
        self.resets = 0
        self.unknown_decreases = 0
        self.bridged = 0.0
        """Counter units estimated rather than counted."""
        self._last_raw: int | None = None
        self._last_t_s = 0.0
        self._last_rate: float | None = None

    def update(self, raw: int, t_s: float) -> float:
        """Feed a reading; return the increment since the previous one (0 for the first)."""
        if self._last_raw is None:
            self._last_raw, self._last_t_s = raw, t_s
            return 0.0
        dt_s = max(t_s - self._last_t_s, 0.0)
        counted = True
        if raw >= self._last_raw:
            increment = float(raw - self._last_raw)
        else:
            wrapped: float | None = None
            if self.max_range is not None and self.max_range >= self._last_raw:
                candidate = float(self.max_range - self._last_raw + raw)
                if candidate <= self.max_rate_per_s * max(dt_s, 1e-3):
                    wrapped = candidate
            if wrapped is not None:
                self.wraps += 1
                increment = wrapped
            else:
                if self.max_range is None:
                    self.unknown_decreases += 1
                else:
                    self.resets += 1
                counted = False
                # The counter restarted from (about) zero: `raw` was counted since then;
                # the time before is bridged at the last known rate when there is one.
                increment = self._last_rate * dt_s if self._last_rate is not None else float(raw)
                self.bridged += increment
        if counted and dt_s > 0:
            self._last_rate = increment / dt_s
        self._last_raw, self._last_t_s = raw, t_s
        return increment


class RaplMeter(Meter):
    """Energy of RAPL domains, one reading per domain.

    Args:
        domains: Domains to measure; unreadable ones give ``unavailable`` readings.
        interval_s: Polling interval.
        max_samples: Bound on stored samples per domain.
        device: accelbench device the domains belong to.
    """

    kind = "rapl"

    def __init__(
        self,
        domains: Sequence[RaplDomain],
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        device: str = "cpu",
    ) -> None:
        super().__init__(device, "cpu-package")
        self.domains = list(domains)
        self.interval_s = interval_s
        self.max_samples = max_samples
        self._readable = [d for d in self.domains if d.readable]
        self._accumulators: list[CounterAccumulator] = []
        self._failed_reads: list[int] = []
        self._last_errors: list[str] = []
        self._consecutive_all_failed = 0
        self._t_start_s = 0.0

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        root = powercap_root()
        domains = discover_domains(root)
        if not domains:
            return (
                False,
                f"no intel-rapl powercap zones under {root} (no RAPL driver, a VM, or not Linux)",
            )
        if any(d.readable for d in domains):
            return True, ""
        return False, domains[0].reason

    @classmethod
    def _availability_key(cls) -> Hashable:
        return str(powercap_root())

    def describe(self) -> list[SensorInfo]:
        return [
            SensorInfo(f"RAPL {d.name} ({d.zone})", "rapl", self.device, d.readable, d.reason)
            for d in self.domains
        ]

    def poll(self) -> list[float]:
        """Read every counter once; joules per domain since the previous poll (``nan`` on error).

        Raises:
            MeterError: After too many polls in a row in which every read failed.
        """
        out: list[float] = []
        for i, (domain, acc) in enumerate(zip(self._readable, self._accumulators, strict=True)):
            t0 = time.monotonic()
            try:
                raw = _read_int(domain.path / "energy_uj")
            except (OSError, ValueError) as exc:
                self._failed_reads[i] += 1
                self._last_errors[i] = str(exc)
                out.append(math.nan)
                continue
            t1 = time.monotonic()
            out.append(acc.update(raw, 0.5 * (t0 + t1)) * 1e-6)
        if out and all(math.isnan(v) for v in out):
            self._consecutive_all_failed += 1
            if self._consecutive_all_failed >= MAX_CONSECUTIVE_ERRORS:
                raise MeterError(
                    f"every RAPL counter read failed {MAX_CONSECUTIVE_ERRORS} times in a row"
                )
        else:
            self._consecutive_all_failed = 0
        return out

    def start(self) -> None:
        self._accumulators = [
            CounterAccumulator(d.max_energy_range_uj, max_rate_per_s=MAX_PLAUSIBLE_DOMAIN_W * 1e6)
            for d in self._readable
        ]
        self._failed_reads = [0] * len(self._readable)
        self._last_errors = [""] * len(self._readable)
        self._consecutive_all_failed = 0
        self._t_start_s = time.monotonic()
        self._sampler = None
        if self._readable:
            sampler = PowerSampler(
                self.poll,
                [d.device for d in self._readable],
                interval_s=self.interval_s,
                mode="energy",
                max_samples=self.max_samples,
                name="accelbench-rapl",
            )
            sampler.start()
            self._sampler = sampler

    def stop(self) -> list[MeterOutput]:
        sampler = self._stop_sampler()
        window_s = time.monotonic() - self._t_start_s
        outputs: list[MeterOutput] = []
        readable_index = {d.zone: i for i, d in enumerate(self._readable)}
        for domain in self.domains:
            i = readable_index.get(domain.zone)
            if i is None or sampler is None:
                outputs.append(
                    MeterOutput(
                        reading=EnergyReading(
                            device=domain.device,
                            scope=domain.scope,
                            source="unavailable",
                            window_s=window_s,
                            note=domain.reason or "not measured",
                            details={
                                "sensor": "rapl",
                                "zone": domain.zone,
                                "path": str(domain.path),
                            },
                        )
                    )
                )
                continue
            outputs.append(self._reading(domain, i, sampler, window_s))
        return outputs

    def _reading(
        self, domain: RaplDomain, i: int, sampler: PowerSampler, window_s: float
    ) -> MeterOutput:
        acc = self._accumulators[i]
        series = sampler.series[domain.device]
        notes: list[str] = []
        if domain.max_energy_range_uj is None:
            notes.append("max_energy_range_uj missing: counter wraps cannot be corrected")
        if acc.unknown_decreases:
            notes.append(
                f"counter decreased {acc.unknown_decreases} time(s) with no known wrap point; "
                "those intervals bridged from the neighbouring power (estimate)"
            )
        if acc.resets:
            notes.append(
                f"counter reset detected {acc.resets} time(s); those intervals bridged from the "
                "neighbouring power (estimate)"
            )
        if self._failed_reads[i]:
            notes.append(f"{self._failed_reads[i]} counter read(s) failed ({self._last_errors[i]})")
        if sampler.error is not None:
            notes.append(f"polling stopped early ({sampler.error})")
        details: dict[str, Any] = {
            "sensor": "rapl",
            "zone": domain.zone,
            "name": domain.name,
            "path": str(domain.path),
            "max_energy_range_uj": domain.max_energy_range_uj,
            "wraps": acc.wraps,
            "resets": acc.resets,
            "unknown_decreases": acc.unknown_decreases,
            "bridged_energy_j": acc.bridged * 1e-6,
            "counter_unit_j": 1e-6,  # file unit; the hardware unit (often 15.3 uJ) is not exposed
            "power_samples": series.interval_stats(),
        }
        coverage = series.covered_s / window_s if window_s > 0 else 0.0
        common: dict[str, Any] = {
            "device": domain.device,
            "scope": domain.scope,
            "details": details,
            "n_samples": series.n_samples or None,
            "interval_s": series.mean_interval_s,
        }
        if series.n_samples < 2 or not covers_window(series.covered_s, window_s, self.interval_s):
            notes.insert(0, f"counter readings cover only {coverage:.0%} of the window")
            reading = EnergyReading(
                source="unavailable", window_s=window_s, note=join_notes(*notes), **common
            )
            return MeterOutput(reading=reading, series=series)
        energy_j = series.energy_j
        span_s = series.covered_s
        # The energy is that of the covered span only: say how much of the window it is, so
        # per-sample energy is taken over the samples of that span (never all of them).
        details["coverage"] = min(coverage, 1.0)
        if coverage < WHOLE_WINDOW_COVERAGE:
            notes.insert(
                0,
                f"counter readings cover {coverage:.1%} of the window; energy and power are "
                "those of the covered part",
            )
        reading = EnergyReading(
            source="counter",
            energy_j=energy_j,
            avg_power_w=energy_j / span_s if span_s > 0 else None,
            peak_power_w=series.peak_power_w,
            window_s=span_s,
            note=join_notes(*notes),
            **common,
        )
        return MeterOutput(reading=reading, series=series)


def cpu_domains(root: Path | None = None) -> list[RaplDomain]:
    """The package and DRAM domains (what ``cpu`` is measured by)."""
    return [d for d in discover_domains(root) if d.scope in MEASURED_SCOPES]


def open_cpu_meter(
    *, interval_s: float = DEFAULT_INTERVAL_S, max_samples: int = DEFAULT_MAX_SAMPLES
) -> RaplMeter | None:
    """A RAPL meter of the CPU package(s) and DRAM, or None if no package counter is readable."""
    domains = cpu_domains()
    if not any(d.readable and d.scope == "cpu-package" for d in domains):
        return None
    return RaplMeter(domains, interval_s=interval_s, max_samples=max_samples)


def unreadable_note() -> str:
    """The access note if RAPL package zones exist but cannot be read, else ``""``."""
    domains = [d for d in cpu_domains() if d.scope == "cpu-package"]
    if domains and not any(d.readable for d in domains):
        return domains[0].reason
    return ""


def list_sensors() -> list[SensorInfo]:
    """Every RAPL zone, for ``accelbench devices``."""
    root = powercap_root()
    domains = discover_domains(root)
    if not domains:
        return [
            SensorInfo(
                "RAPL (powercap)",
                "rapl",
                "cpu",
                False,
                f"no intel-rapl zones under {root} (no RAPL driver, a VM, or not Linux)",
            )
        ]
    out = []
    for d in domains:
        remark = d.reason
        if d.readable and d.scope == "platform":
            remark = "whole-platform energy; not added to the CPU total"
        elif d.readable and d.scope not in MEASURED_SCOPES:
            remark = "part of the package; not added to the CPU total"
        out.append(SensorInfo(f"RAPL {d.name} ({d.zone})", "rapl", "cpu", d.readable, remark))
    return out
