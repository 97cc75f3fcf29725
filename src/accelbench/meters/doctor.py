"""``accelbench doctor``: every power sensor found, whether it reads, and the fix when not.

:func:`diagnose` asks every registered device meter (:mod:`.registry`): the GPU meter
lists NVIDIA (NVML) and AMD (AMD SMI) sensors with their fixes, the CPU meter the RAPL
zones, the TPU meter a note where TPUs are present, a plugin its sensors; then the node
meter the options name.
Readable sensors are probed together for ``probe_s`` seconds to measure their
update period (else the nominal one is shown). Each finding says which
measurement boundary it gives (``device``, ``device+host`` part, ``node``) and,
for a problem, the exact fix. Where no CPU sensor reads, the CPU estimate from TDP is
listed too: its TDP, or the ``--cpu-tdp-w`` command a CPU model the table lacks needs.
:func:`energy_measurable` is the exit status: whether any sensor can give a measured
(not estimated) energy figure.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelbench.devices.gpu.amd_energy import AMDSMI_MIN_ROCM, amdsmi_fix, rocm_version
from accelbench.devices.gpu.nvidia_energy import NVML_CONTAINER_FIX, NVML_INSTALL_FIX, nvml_fix
from accelbench.errors import AccelbenchError
from accelbench.meters import rapl
from accelbench.meters.common import Meter, MeterOutput, NullMeter
from accelbench.meters.registry import DeviceMeterOptions, DeviceMeterPlugin

RAPL_DRIVER_FIX = (
    "on bare-metal Linux load the RAPL driver (`sudo modprobe intel_rapl_common "
    "intel_rapl_msr`; Intel, and AMD since Zen); VMs usually expose none"
)
NODE_METER_HINT = (
    "or measure the whole node: `--node-meter ipmi` (BMC DCMI) or `--node-meter-cmd 'CMD'` "
    "(a PDU or wall meter command printing watts)"
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One sensor (or a missing one) as ``accelbench doctor`` reports it."""

    sensor: str
    """What it is: ``RAPL package-0 (intel-rapl:0)``, ``GPU 0: NVIDIA H100 energy counter``."""
    kind: str
    """``nvml``, ``amdsmi``, ``rapl``, ``tpu``, ``tdp`` (the CPU estimate) or ``node``."""
    boundary: str
    """The measurement boundary it gives: ``device``, ``device+host`` (host part) or
    ``node``."""
    readable: bool
    """Whether accelbench read it (during the probe, where one ran)."""
    energy: bool = False
    """Whether it gives a measured energy figure (not an estimate) when readable."""
    update_period_s: float | None = None
    """Seconds between the sensor's updates."""
    period_how: str = ""
    """``measured``, ``upper bound`` (the poll was slower than the sensor) or ``nominal``."""
    problem: str = ""
    """What is wrong, or a remark."""
    fix: str = ""
    """The exact fix, where there is one."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for ``--json``."""
        return asdict(self)


def rapl_permission_fix(root: Path | None = None) -> str:
    """The one-off chmod, the systemd-tmpfiles line and the udev rule that make RAPL
    ``energy_uj`` readable."""
    root = root if root is not None else rapl.powercap_root()
    return (
        f"one-off (until reboot): `sudo chmod a+r {root}/intel-rapl:*/energy_uj "
        f"{root}/intel-rapl:*/intel-rapl:*/energy_uj`; persistent: a systemd-tmpfiles file "
        "/etc/tmpfiles.d/accelbench-rapl.conf with the lines "
        f"`z {root}/intel-rapl:*/energy_uj 0444 - - -` and "
        f"`z {root}/intel-rapl:*/intel-rapl:*/energy_uj 0444 - - -`, or a udev rule "
        "/etc/udev/rules.d/99-accelbench-rapl.rules: `ACTION==\"add\", "
        "SUBSYSTEM==\"powercap\", KERNEL==\"intel-rapl:*\", "
        "RUN+=\"/bin/chmod 0444 /sys%p/energy_uj\"`; readable counters expose the PLATYPUS "
        "side channel (CVE-2020-8694) to local users: on shared machines grant a group "
        "(chgrp + 0440) instead"
    )


#: The command a CPU without sensor and without a TDP in the table needs (the wattage is
#: an example to replace: the CPU's own TDP, from its spec sheet).
CPU_TDP_EXAMPLE_W = 280


def cpu_tdp_finding(cpu_tdp_w: float | None = None) -> Finding:
    """The CPU estimate from TDP, for a machine with no readable CPU energy sensor: its
    TDP (given or from the table), or, for a model the table does not hold (a cloud VM's
    "AMD EPYC"), the exact command that gives one (``--cpu-tdp-w``)."""
    from accelbench.meters import tdp

    model = tdp.cpu_model_name()
    info = tdp.resolve_tdp(cpu_tdp_w)
    sensor = f"CPU estimate from TDP ({model})"
    if info is not None:
        return Finding(sensor=sensor, kind="tdp", boundary="device", readable=True,
                       energy=False, problem=f"estimated, not measured: {info.describe()}")
    return Finding(
        sensor=sensor, kind="tdp", boundary="device", readable=False, energy=False,
        problem=f"CPU model {model!r} is not in the TDP table, so CPU cases have no energy "
        "(J/sample '-')",
        fix=f"give the CPU's TDP in watts (its vendor's spec sheet, all packages together) "
        f"to estimate it: `accelbench run WORKLOAD --cpu-tdp-w {CPU_TDP_EXAMPLE_W}` (with "
        f"{CPU_TDP_EXAMPLE_W} replaced by this CPU's TDP; `suite`, `sweep` and `power` take "
        "--cpu-tdp-w too); an estimate from TDP and utilisation, labelled `estimate`",
    )


def _period(output: MeterOutput, meter: Meter) -> tuple[float | None, str]:
    period = output.reading.details.get("update_period") if output.reading.details else None
    if isinstance(period, dict) and isinstance(period.get("period_s"), (int, float)):
        if period.get("nominal"):
            return float(period["period_s"]), "nominal"
        return float(period["period_s"]), "upper bound" if period.get("upper_bound") else (
            "measured")
    return meter.update_period_s(), "nominal"


def _probe(
    meters: Sequence[tuple[Meter, str, str]], probe_s: float
) -> list[Finding]:
    """Read every meter over one shared window of ``probe_s`` seconds."""
    started: list[tuple[Meter, str, str]] = []
    findings: list[Finding] = []
    for meter, kind, boundary in meters:
        try:
            meter.start()
        except AccelbenchError as exc:
            findings.append(Finding(sensor=meter.describe()[0].name if meter.describe() else
                                    meter.device, kind=kind, boundary=boundary,
                                    readable=False, problem=f"failed to start: {exc}"))
            meter.close()
            continue
        started.append((meter, kind, boundary))
    if started and probe_s > 0:
        time.sleep(probe_s)
    for meter, kind, boundary in started:
        try:
            outputs = meter.stop()
        except AccelbenchError as exc:
            findings.append(Finding(sensor=meter.device, kind=kind, boundary=boundary,
                                    readable=False, problem=f"failed while reading: {exc}"))
            continue
        finally:
            meter.close()
        for output in outputs:
            reading = output.reading
            ok = reading.source != "unavailable"
            period_s, how = _period(output, meter)
            name = reading.details.get("zone") if reading.details else None
            label = f"{meter.kind} {reading.device}" + (f" ({name})" if name else "")
            findings.append(Finding(
                sensor=label, kind=kind, boundary=boundary, readable=ok,
                energy=ok and reading.source in ("counter", "integrated_samples"),
                update_period_s=period_s if ok else None, period_how=how if ok else "",
                problem="" if ok else reading.note, fix="",
            ))
    return findings


def diagnose(probe_s: float = 1.0, options: Any = None) -> list[Finding]:
    """Every power sensor found, whether it reads, its update period, boundary and fixes.

    Args:
        probe_s: Seconds the readable sensors are read together to measure their update
            period (0: no probe, nominal periods).
        options: The run's :class:`~accelbench.spec.MeterOptions`, for the node meter it
            names (None: no node meter).

    Returns:
        Findings: readable sensors first, then problems.
    """
    from accelbench.meters import registry

    findings: list[Finding] = []
    probes: list[tuple[Meter, str, str]] = []
    for plugin in registry.device_meters():
        found, probe = (plugin.diagnose(options) if plugin.diagnose is not None
                        else default_diagnosis(plugin))
        findings += found
        probes += probe

    if options is not None and registry.node_meter_name(options) is not None:
        node = registry.open_node_meter(options)
        if isinstance(node, NullMeter):
            findings.append(Finding(sensor=f"node meter {registry.node_meter_name(options)}",
                                    kind="node", boundary="node", readable=False,
                                    problem=node.note))
        elif node is not None:
            probes.append((node, "node", registry.get_meter_plugin(
                registry.node_meter_name(options) or "").boundary))

    measured = _probe(probes, probe_s)
    return measured + findings


def default_diagnosis(
    plugin: DeviceMeterPlugin,
) -> tuple[list[Finding], list[tuple[Meter, str, str]]]:
    """What ``doctor`` says of a device meter without its own ``diagnose``: its unreadable
    sensors with the reason, and a meter per visible device to probe."""
    findings = [
        Finding(sensor=info.name, kind=plugin.kind, boundary=plugin.boundary, readable=False,
                problem=info.reason or "not readable")
        for info in plugin.sensors() if not info.readable
    ]
    options = DeviceMeterOptions()
    probes = [(plugin.open(device, options), plugin.kind, plugin.boundary)
              for device in plugin.visible()]
    return findings, probes


def energy_measurable(findings: Sequence[Finding]) -> bool:
    """Whether any sensor gives a measured (not estimated) energy figure."""
    return any(f.readable and f.energy for f in findings)


def _period_text(f: Finding) -> str:
    if f.update_period_s is None:
        return ""
    value = f.update_period_s
    shown = f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"
    return f", updates every {shown} ({f.period_how})"


def render_text(findings: Sequence[Finding]) -> str:
    """Plain-text report, one line per finding (and one per fix)."""
    lines = [
        "energy can be measured" if energy_measurable(findings)
        else f"energy cannot be measured: no readable energy sensor (fixes below; "
        f"{NODE_METER_HINT})"
    ]
    for f in findings:
        mark = "ok" if f.readable and f.energy else "est" if f.readable else "--"
        line = f"[{mark}] {f.sensor} [{f.kind}, boundary {f.boundary}]{_period_text(f)}"
        if f.problem:
            line += f": {f.problem}"
        lines.append(line)
        if f.fix:
            lines.append(f"     fix: {f.fix}")
    return "\n".join(lines)


def to_json(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """Findings as plain dicts, for ``--json``."""
    return [f.to_dict() for f in findings]


__all__ = [
    "AMDSMI_MIN_ROCM",
    "NVML_CONTAINER_FIX",
    "NVML_INSTALL_FIX",
    "Finding",
    "default_diagnosis",
    "amdsmi_fix",
    "cpu_tdp_finding",
    "diagnose",
    "energy_measurable",
    "nvml_fix",
    "rapl_permission_fix",
    "render_text",
    "rocm_version",
    "to_json",
]
