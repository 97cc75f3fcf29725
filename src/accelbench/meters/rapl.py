"""CPU package and DRAM energy through Linux powercap ``intel-rapl`` zones.

Intel CPUs, and AMD CPUs since Zen, expose RAPL energy counters as
``<root>/intel-rapl:<pkg>[:<sub>]/energy_uj`` (microjoules), with the zone's
``name`` (``package-0``, ``dram``, ``core``, ``uncore``, ``psys``) and the wrap
point ``max_energy_range_uj``, found by :mod:`accelbench.devices.powercap`.

Wraps: a counter that wraps more than once between two polls would be silently
under-counted, so the poll interval is derived per domain. A domain drawing at
most ``P`` watts wraps no sooner than ``max_energy_range_uj / P`` (its *wrap
period*); the meter polls at most every half of the shortest wrap period of its
domains, and never slower than the requested interval. ``P`` is the largest
``constraint_*_max_power_uw`` of the zone, else :data:`MAX_PLAUSIBLE_DOMAIN_W`.
Any number of wraps the polling sees is then counted exactly; if two successful
reads of a domain are ever further apart than its wrap period (a stalled poller,
a suspended VM), wraps may have been missed and that window's energy is
``unavailable`` with a note naming the gap, never a mis-counted figure.

A domain only root may read (:mod:`accelbench.devices.powercap`) is reported
``unavailable`` with the command that grants access, never as zero.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from accelbench.devices import powercap
from accelbench.devices.powercap import (
    MAX_PLAUSIBLE_DOMAIN_W,
    RaplDomain,
    discover_domains,
    powercap_root,
)
from accelbench.errors import MeterError
from accelbench.meters import clock
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
from accelbench.meters.updates import detect_update_period
from accelbench.result import EnergyReading

NOMINAL_UPDATE_PERIOD_S = 1e-3
"""RAPL energy status registers update about every millisecond (Intel SDM vol. 3B,
section 15.10.3 "Package RAPL Domain"; measured at ~1 ms by Hähnel et al., "Measuring
Energy Consumption for Short Code Paths Using RAPL", SIGMETRICS PER 2012, and Khan et
al., "RAPL in Action", ACM TOMPECS 2018). Polled every 100 ms, the counter changes at
every read, so a window shows only an upper bound (the poll interval)."""
MIN_POLL_S = 5e-4
"""Fastest poll the meter asks for (the ``--counter-poll-ms`` floor); a domain that
would need a faster one is polled at this rate and any gap is flagged."""
RAW_READS_KEPT = 4096
"""Latest raw counter reads kept per domain for update-period detection."""
MEASURED_SCOPES = ("cpu-package", "dram")
"""Domains that add up to the CPU's energy without double counting (core and uncore
are parts of the package)."""

def poll_interval(domains: Sequence[RaplDomain], interval_s: float) -> tuple[float, str]:
    """The poll interval that sees every wrap of ``domains``, and why it was chosen.

    Half the shortest wrap period of the domains, capped at ``interval_s`` (the requested
    poll is an upper bound) and floored at :data:`MIN_POLL_S`.

    Args:
        domains: The domains one sampler polls.
        interval_s: Requested (slowest allowed) poll interval.

    Returns:
        ``(poll_s, reason)``.
    """
    periods = [(d.wrap_period_s, d) for d in domains if d.wrap_period_s is not None]
    if not periods:
        return interval_s, f"the requested {interval_s:g} s (no wrap point known)"
    wrap_s, domain = min(periods, key=lambda item: item[0])
    bound = (
        f"{domain.max_power_w:g} W from {domain.max_power_file}"
        if domain.max_power_uw
        else f"at most {MAX_PLAUSIBLE_DOMAIN_W:g} W assumed (no constraint_*_max_power_uw)"
    )
    why = (
        f"{domain.zone} can wrap every {wrap_s:.4g} s "
        f"({domain.max_energy_range_uj} uJ range, {bound})"
    )
    half_s = 0.5 * wrap_s
    if half_s >= interval_s:
        return interval_s, f"the requested {interval_s:g} s; {why}, half of it is longer"
    if half_s < MIN_POLL_S:
        return MIN_POLL_S, (
            f"{MIN_POLL_S:g} s, the fastest poll: {why}, half of it is shorter; "
            "a gap longer than a wrap period flags the window"
        )
    return half_s, f"half the shortest wrap period: {why}"


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
        interval_s: Slowest poll interval; the meter polls faster when a domain could
            wrap within two intervals (:func:`poll_interval`).
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
        self.poll_s, self.poll_reason = poll_interval(self._readable, interval_s)
        """Poll interval in use and why (half the shortest wrap period, or the request)."""
        self._accumulators: list[CounterAccumulator] = []
        self._failed_reads: list[int] = []
        self._last_errors: list[str] = []
        self._consecutive_all_failed = 0
        self._t_start_s = 0.0
        # Per readable domain: start time of the latest successful read, the longest span
        # between two successful reads, how many spans exceeded the wrap period, the raw reads.
        self._last_ok_t0_s: list[float | None] = []
        self._max_gap_s: list[float] = []
        self._long_gaps: list[int] = []
        self._raw: list[deque[tuple[float, int]]] = []
        self._measured_period_s: float | None = None

    def update_period_s(self) -> float | None:
        """The counter's update period: measured when a window resolved it, else nominal
        (:data:`NOMINAL_UPDATE_PERIOD_S`); a poll-limited upper bound is not used."""
        if self._measured_period_s is not None:
            return self._measured_period_s
        return NOMINAL_UPDATE_PERIOD_S

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
            t0 = clock.now()
            try:
                raw = powercap.read_int(domain.path / "energy_uj")
            except (OSError, ValueError) as exc:
                self._failed_reads[i] += 1
                self._last_errors[i] = str(exc)
                out.append(math.nan)
                continue
            t1 = clock.now()
            # The value may come from any instant of either read call: the span that
            # matters for a missed wrap runs from the start of the previous successful
            # read to the end of this one.
            last_t0 = self._last_ok_t0_s[i]
            if last_t0 is not None:
                gap_s = t1 - last_t0
                self._max_gap_s[i] = max(self._max_gap_s[i], gap_s)
                wrap_s = domain.wrap_period_s
                if wrap_s is not None and gap_s > wrap_s:
                    self._long_gaps[i] += 1
            self._last_ok_t0_s[i] = t0
            self._raw[i].append((0.5 * (t0 + t1), raw))
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
        n = len(self._readable)
        self._failed_reads = [0] * n
        self._last_errors = [""] * n
        self._last_ok_t0_s = [None] * n
        self._max_gap_s = [0.0] * n
        self._long_gaps = [0] * n
        self._raw = [deque(maxlen=RAW_READS_KEPT) for _ in range(n)]
        self._consecutive_all_failed = 0
        self._t_start_s = clock.now()
        self._sampler = None
        if self._readable:
            sampler = PowerSampler(
                self.poll,
                [d.device for d in self._readable],
                interval_s=self.poll_s,
                mode="energy",
                max_samples=self.max_samples,
                name="accelbench-rapl",
            )
            sampler.start()
            self._sampler = sampler

    def stop(self) -> list[MeterOutput]:
        # The window ends now: joining the poller can take long on a busy machine, and a
        # window counting it looked partly covered (9% more energy per sample at 55 ms).
        window_s = clock.now() - self._t_start_s
        sampler = self._stop_sampler()
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

    def _update_details(self, i: int, window_s: float) -> dict[str, Any]:
        """``update_period`` and ``sensor_updates`` of domain ``i`` for this window.

        The counter updates about every millisecond, far faster than it is polled, so a
        window usually shows only an upper bound (the poll interval); the nominal period
        then stands and the bound is kept beside it.
        """
        raw = self._raw[i]
        found = detect_update_period([t for t, _ in raw], [float(v) for _, v in raw])
        if found is not None and not found.upper_bound:
            self._measured_period_s = found.period_s
            return {"update_period": found.to_dict(), "sensor_updates": found.updates}
        period: dict[str, Any] = {"period_s": NOMINAL_UPDATE_PERIOD_S, "nominal": True}
        if found is not None:
            period["upper_bound_s"] = found.period_s
            period["note"] = (
                "the counter changed at every poll: the poll interval is only an upper "
                "bound of its update period; the nominal ~1 ms (Intel SDM) stands"
            )
        return {
            "update_period": period,
            "sensor_updates": int(window_s / NOMINAL_UPDATE_PERIOD_S),
        }

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
            "poll_interval_s": self.poll_s,
            "poll_reason": self.poll_reason,
            "wrap_period_s": domain.wrap_period_s,
            "max_power_w": domain.max_power_w,
            "max_power_source": domain.max_power_file or "assumed bound",
            "max_read_gap_s": self._max_gap_s[i],
        }
        details.update(self._update_details(i, series.covered_s or window_s))
        coverage = series.covered_s / window_s if window_s > 0 else 0.0
        common: dict[str, Any] = {
            "device": domain.device,
            "scope": domain.scope,
            "details": details,
            "n_samples": series.n_samples or None,
            "interval_s": series.mean_interval_s,
        }
        wrap_s = domain.wrap_period_s
        if self._long_gaps[i] and wrap_s is not None:
            details["long_gaps"] = self._long_gaps[i]
            notes.insert(
                0,
                f"{self._long_gaps[i]} gap(s) between two reads of energy_uj, the longest "
                f"{self._max_gap_s[i]:.3g} s, exceed the counter's wrap period of {wrap_s:.3g} s "
                f"({domain.max_energy_range_uj} uJ at up to {domain.max_power_w:g} W): wraps may "
                "have been missed, so the energy is not reported (was the poller stalled or "
                "the machine suspended?)",
            )
            reading = EnergyReading(
                source="unavailable", window_s=window_s, note=join_notes(*notes), **common
            )
            return MeterOutput(reading=reading)
        if series.n_samples < 2 or not covers_window(series.covered_s, window_s, self.poll_s):
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
