"""The CPU device meter: RAPL package and DRAM counters where readable
(:mod:`.rapl`), else the labelled estimate from TDP and utilisation (:mod:`.tdp`).
Registers the ``cpu`` device meter (:mod:`accelbench.meters.registry`)."""

from __future__ import annotations

from typing import Any

from accelbench.meters import rapl, tdp
from accelbench.meters.common import Meter
from accelbench.meters.registry import DeviceMeterOptions, register_device_meter


def open_meter(options: DeviceMeterOptions) -> Meter:
    """RAPL for ``cpu`` where its counters read, else the estimate from TDP (an
    ``unavailable`` reading where no TDP is known)."""
    meter = rapl.open_cpu_meter(interval_s=options.counter_poll_s,
                                max_samples=options.max_samples)
    if meter is not None:
        return meter
    return tdp.open_meter(
        options.cpu_tdp_w,
        interval_s=options.interval_s,
        extra_note=rapl.unreadable_note(),
        max_samples=options.max_samples,
    )


def watch(options: DeviceMeterOptions) -> list[Meter]:
    """Every readable RAPL zone, else the estimate of the whole machine (``accelbench
    power`` watches everything, not itself)."""
    domains = [d for d in rapl.discover_domains() if d.readable]
    if domains:
        return [rapl.RaplMeter(domains, interval_s=options.interval_s)]
    cpu = tdp.open_meter(options.cpu_tdp_w, interval_s=options.interval_s, whole_system=True)
    return [cpu] if cpu.kind != "null" else []


def diagnose(options: Any) -> tuple[list[Any], list[tuple[Meter, str, str]]]:
    """``accelbench doctor``'s CPU part: the RAPL zones that do not read, with the fix;
    where none reads, the estimate from TDP (or the command a CPU the table lacks needs)."""
    from accelbench.meters.doctor import (
        RAPL_DRIVER_FIX,
        Finding,
        cpu_tdp_finding,
        rapl_permission_fix,
    )

    root = rapl.powercap_root()
    domains = rapl.discover_domains(root)
    findings: list[Finding] = []
    if not domains:
        findings.append(Finding(
            sensor="RAPL (powercap)", kind="rapl", boundary="device+host", readable=False,
            problem=f"no intel-rapl zones under {root} (no RAPL driver, a VM, or not Linux)",
            fix=RAPL_DRIVER_FIX,
        ))
    for d in domains:
        if d.readable:
            continue
        permission = "chmod" in d.reason or "root" in d.reason
        findings.append(Finding(
            sensor=f"RAPL {d.name} ({d.zone})", kind="rapl", boundary="device+host",
            readable=False, problem=d.reason.split(":")[0] if permission else d.reason,
            fix=rapl_permission_fix(root) if permission else "",
        ))
    readable = [d for d in domains if d.readable]
    if not readable:  # no CPU energy sensor: what the estimate from TDP needs
        findings.append(cpu_tdp_finding(getattr(options, "cpu_tdp_w", None)))
        return findings, []
    # A sub-millisecond poll resolves the counters' ~1 ms updates during the probe.
    return findings, [(rapl.RaplMeter(readable, interval_s=rapl.MIN_POLL_S), "rapl",
                       "device+host")]


def _available() -> tuple[bool, str]:
    if any(d.readable for d in rapl.discover_domains()):
        return True, ""
    return False, rapl.unreadable_note()


def _open(device: str, options: DeviceMeterOptions) -> Meter:
    return open_meter(options)


register_device_meter(
    "cpu", claims=lambda device: device == "cpu", open=_open, available=_available,
    sensors=lambda: rapl.list_sensors() + tdp.list_sensors(), visible=lambda: ["cpu"],
    watch=watch, diagnose=diagnose, boundary="device+host", order=20,
)
