"""``accelbench doctor``: every power sensor found, whether it reads, and the fix when not.

:func:`diagnose` lists NVIDIA (NVML) and AMD (AMD SMI) GPU sensors, the RAPL
zones, a TPU note where TPUs are present, and the node meter the options name.
Readable sensors are probed together for ``probe_s`` seconds to measure their
update period (else the nominal one is shown). Each finding says which
measurement boundary it gives (``device``, ``device+host`` part, ``node``) and,
for a problem, the exact fix. Where no CPU sensor reads, the CPU estimate from TDP is
listed too: its TDP, or the ``--cpu-tdp-w`` command a CPU model the table lacks needs.
:func:`energy_measurable` is the exit status: whether any sensor can give a measured
(not estimated) energy figure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelbench.devices import gpu
from accelbench.errors import AccelbenchError
from accelbench.meters import amd, nvml, rapl
from accelbench.meters.common import Meter, MeterOutput, NullMeter, SensorInfo

NVML_CONTAINER_FIX = (
    "in a container, start it with the GPUs and NVML: `docker run --gpus all -e "
    "NVIDIA_DRIVER_CAPABILITIES=compute,utility ...` (NVML ships in the `utility` "
    "capability; Kubernetes: request `nvidia.com/gpu`); on the host, `nvidia-smi` must work"
)
NVML_INSTALL_FIX = "`pip install nvidia-ml-py` (the NVML bindings)"
AMDSMI_MIN_ROCM = "6.0"
"""ROCm release whose AMD SMI library has ``amdsmi_get_energy_count``."""
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


def _in_container() -> bool:
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return True
    try:
        cgroup = Path("/proc/1/cgroup").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return any(word in cgroup for word in ("docker", "kubepods", "containerd", "libpod"))


def nvml_fix(reason: str) -> str:
    """The fix for an NVML problem, from its reason."""
    if "not installed" in reason:
        return f"{NVML_INSTALL_FIX}; then, if NVML still cannot start: {NVML_CONTAINER_FIX}"
    if "not visible" in reason:
        return "set CUDA_VISIBLE_DEVICES to include it, if it should be measured"
    if "not supported" in reason:
        return "this GPU lacks the sensor; accelbench falls back to the other one, labelled"
    if _in_container():
        return NVML_CONTAINER_FIX
    return "install and load the NVIDIA driver (`nvidia-smi` must list the GPUs)"


def rocm_version() -> str | None:
    """The installed ROCm release from ``/opt/rocm/.info/version``, or None."""
    root = os.environ.get("ROCM_PATH") or "/opt/rocm"
    try:
        return (Path(root) / ".info" / "version").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def amdsmi_fix(reason: str) -> str:
    """The fix for an AMD SMI problem, from its reason."""
    rocm = rocm_version()
    match = (
        f"`pip install amdsmi=={rocm.split('-')[0]}`, matching the installed ROCm {rocm}"
        if rocm
        else "`pip install amdsmi==X.Y.Z` with X.Y.Z the installed ROCm version "
        "(`cat /opt/rocm/.info/version`)"
    )
    if "not installed" in reason:
        return (f"{match} (the Python package must match the ROCm library); the energy "
                f"counter needs ROCm >= {AMDSMI_MIN_ROCM}")
    if "not visible" in reason:
        return "set HIP_VISIBLE_DEVICES to include it, if it should be measured"
    if "not supported" in reason or "virtual" in reason.lower() or "VM" in reason:
        return (f"the counter needs ROCm >= {AMDSMI_MIN_ROCM} on bare metal (unsupported in "
                "VM guests); accelbench integrates the power samples instead, labelled")
    return (f"load the amdgpu driver and make sure {match}; the energy counter needs "
            f"ROCm >= {AMDSMI_MIN_ROCM}")


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


def _gpu_findings(
    kind: str, infos: list[SensorInfo], fix_for: Any
) -> tuple[list[Finding], list[str]]:
    """Findings of unreadable GPU sensors, and the visible devices with a readable one."""
    findings: list[Finding] = []
    devices: list[str] = []
    for info in infos:
        if info.readable and info.device and not info.reason:
            if info.device not in devices:
                devices.append(info.device)
            continue
        problem = info.reason or "not readable"
        findings.append(Finding(sensor=info.name, kind=kind, boundary="device",
                                readable=info.readable and bool(info.device), energy=False,
                                problem=problem, fix=fix_for(problem)))
    return findings, devices


def _rapl_findings() -> tuple[list[Finding], list[rapl.RaplDomain]]:
    root = rapl.powercap_root()
    domains = rapl.discover_domains(root)
    if not domains:
        return [Finding(
            sensor="RAPL (powercap)", kind="rapl", boundary="device+host", readable=False,
            problem=f"no intel-rapl zones under {root} (no RAPL driver, a VM, or not Linux)",
            fix=RAPL_DRIVER_FIX,
        )], []
    findings: list[Finding] = []
    for d in domains:
        if d.readable:
            continue
        permission = "chmod" in d.reason or "root" in d.reason
        findings.append(Finding(
            sensor=f"RAPL {d.name} ({d.zone})", kind="rapl", boundary="device+host",
            readable=False, problem=d.reason.split(":")[0] if permission else d.reason,
            fix=rapl_permission_fix(root) if permission else "",
        ))
    return findings, [d for d in domains if d.readable]


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


def _tpu_finding() -> Finding | None:
    if not any(Path("/dev").glob("accel[0-9]*")) and not os.environ.get("TPU_NAME"):
        return None
    return Finding(
        sensor="TPU chips", kind="tpu", boundary="device", readable=False, energy=False,
        problem="TPUs expose no power sensor: energy is an estimate from the published TDP "
        "(an upper bound), labelled `estimate`",
        fix=NODE_METER_HINT.removeprefix("or "),
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

    vendor = gpu.detect().vendor
    nv_findings, nv_devices = _gpu_findings("nvml", nvml.list_sensors(), nvml_fix)
    findings += nv_findings
    if vendor == "nvidia":
        probes += [(nvml.open_meter(device), "nvml", "device") for device in nv_devices]
    else:  # AMD, or neither: then both say why not
        amd_findings, amd_devices = _gpu_findings("amdsmi", amd.list_sensors(), amdsmi_fix)
        findings += amd_findings
        for device in amd_devices:
            probes.append((amd.open_meter(device), "amdsmi", "device"))

    rapl_findings, domains = _rapl_findings()
    findings += rapl_findings
    if domains:
        # A sub-millisecond poll resolves the counters' ~1 ms updates during the probe.
        probes.append((rapl.RaplMeter(domains, interval_s=rapl.MIN_POLL_S), "rapl",
                       "device+host"))

    tpu = _tpu_finding()
    if tpu is not None:
        findings.append(tpu)
    if not domains:  # no CPU energy sensor: what the estimate from TDP needs
        findings.append(cpu_tdp_finding(getattr(options, "cpu_tdp_w", None)))

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
    "Finding",
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
