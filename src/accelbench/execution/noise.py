"""Noise awareness: what competed with a case for its device, and whether its times look clean.

A number measured while other jobs shared the machine can be off by 10x and
still carry a tight CI, because the CI only sees the spread of the times the
case got. So the worker records, before the case (the build and idle phase)
and during the measured window:

- host: the 1-minute load average, the CPU time of *other* processes (system
  busy time from ``/proc/stat`` minus this worker's own ``utime + stime`` from
  ``/proc/self/stat``, both through psutil, in cores: CPU seconds per second;
  steal time, the hypervisor running someone else on this VM's CPUs, counts as
  other processes), and the worker's own CPU time in cores and as a share of
  the cores the case may use;
- GPU (``cuda:N`` with NVML or AMD SMI): other processes on the device, SM/memory clocks,
  throttle reasons, utilisation and temperature, at the start of warm-up and at
  the end of the window (pynvml and amdsmi are optional);
- the shape of the raw step times (:mod:`accelbench.execution.shape`).

The record keeps these figures, not a verdict: the two verdicts are read from them by
:mod:`accelbench.verdicts` (where their thresholds live), whenever a record is read.

- **contention** (:data:`CONTENTION`, worded "busy machine"): other processes used
  more than :data:`OTHER_CORES_MAX` (0.5) cores on average during the window
  (absolute, not relative to spare cores: work on "free" cores still shares
  caches, memory bandwidth, turbo headroom and often an SMT sibling with the case),
  another process holds a context on the case's GPU, or the GPU reported a thermal
  or hardware slowdown (:data:`GPU_SLOWDOWNS`; the ordinary power cap of a busy GPU
  is recorded but not flagged);
- **unstable timing** (:data:`UNSTABLE`, worded "step times vary"): the shape checks
  alone, against the limits of the case's framework and device kind.

Stable behaviour of the runtime (two modes spread evenly through the run) is
described in ``noise["described"]``, not flagged. ``Result.noisy`` is either verdict.
Records written with their verdict (``flagged``, ``reasons``, ``by_kind``) are read as
they stored it.

Windows shorter than :data:`MIN_HOST_WINDOW_S` are too coarse for CPU time
(counted in 10 ms ticks): the before-window is judged instead, or nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.execution.shape import (  # noqa: F401  (the names tests and readers use)
    MIN_MODE_SAMPLES,
    MIN_SHAPE_SAMPLES,
    time_checks,
    two_modes,
)
from accelbench.meters.tdp import logical_cpus, own_cpu_s, system_cpu_s
from accelbench.verdicts import (  # noqa: F401  (re-exported: the names readers use)
    CONTENTION,
    GPU_SLOWDOWNS,
    KIND_LABELS,
    KIND_PHRASES,
    KINDS,
    OTHER_CORES_MAX,
    UNSTABLE,
    contention_reasons,
    kinds_of,
    reasons_by_kind,
    verdict_label,
    verdict_lines,
)

MIN_HOST_WINDOW_S = 0.2
"""Shortest window whose CPU-time figures are judged."""


# -- host ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostSample:
    """Cumulative CPU counters at one moment."""

    t_s: float
    """Monotonic time."""
    busy_s: float
    """System-wide busy CPU seconds (every CPU; idle and iowait excluded; steal included)."""
    steal_s: float
    own_s: float
    """This process's user + system CPU seconds (all its threads)."""
    load_avg_1m: float | None


def _load_avg_1m() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def host_sample() -> HostSample:
    """The counters now (psutil reads ``/proc/stat`` and ``/proc/self/stat`` on Linux)."""
    busy_s, steal_s = system_cpu_s()
    return HostSample(
        t_s=time.monotonic(), busy_s=busy_s, steal_s=steal_s, own_s=own_cpu_s(),
        load_avg_1m=_load_avg_1m(),
    )


def host_window(a: HostSample, b: HostSample, *, case_cores: float | None) -> dict[str, Any]:
    """CPU use between two samples, in cores (CPU seconds per second)."""
    window_s = b.t_s - a.t_s
    out: dict[str, Any] = {"window_s": window_s, "load_avg_1m": b.load_avg_1m}
    if window_s <= 0:
        return out
    # /proc/stat counts in clock ticks (10 ms): over a short window the system's busy time
    # can read a few ticks more than the window holds (2.44 cores on 2 CPUs over a loaded
    # machine's short window). No more than every CPU can be busy.
    busy = min(max(b.busy_s - a.busy_s, 0.0) / window_s, float(logical_cpus()))
    own = max(b.own_s - a.own_s, 0.0) / window_s
    out.update(
        busy_cores=busy,
        own_cores=own,
        other_cores=max(busy - own, 0.0),
        steal_cores=max(b.steal_s - a.steal_s, 0.0) / window_s,
        own_share=own / case_cores if case_cores else None,
    )
    return out


# -- GPU -----------------------------------------------------------------------------------


def gpu_state(device: str, uuid: str | None) -> dict[str, Any]:
    """The device meter's view of ``cuda:N`` now (NVML or AMD SMI: processes, clocks,
    throttling), or ``{"available": False, "reason": ...}``."""
    if not device.startswith("cuda"):
        return {"available": False, "reason": f"no GPU probe for {device}"}
    from accelbench.meters.registry import device_activity

    return device_activity(device, uuid)


def _other_gpu_processes(state: dict[str, Any], own_pid: int) -> tuple[list[int], str]:
    """PIDs of other processes on the GPU, and a remark when they cannot be told apart."""
    pids = [int(p["pid"]) for p in state.get("processes") or []]
    if own_pid in pids:
        return [p for p in pids if p != own_pid], ""
    if not pids:
        return [], ""
    # In a container NVML reports the host's PIDs: this worker is one of those listed.
    return sorted(pids)[1:], (
        f"this worker's PID {own_pid} is not among NVML's {pids} (a PID namespace, e.g. a "
        "container); one of them is assumed to be this worker"
    )


# -- the probe -----------------------------------------------------------------------------


class NoiseProbe:
    """Collects the competition around one case; the worker drives it.

    Created when the worker starts (the before-window opens), then
    :meth:`configure` once the case is known, :meth:`before_done` when warm-up
    starts, :meth:`window_start` / :meth:`window_stop` around the measured
    iterations and :meth:`verdict` at the end.
    """

    def __init__(self) -> None:
        self._t0 = host_sample()
        self._before: HostSample | None = None
        self._w0: HostSample | None = None
        self._w1: HostSample | None = None
        self.device = "cpu"
        self.framework = "*"
        self.case_cores: float | None = None
        self.gpu_uuid: str | None = None
        self._gpu_before: dict[str, Any] = {}
        self._gpu_end: dict[str, Any] = {}

    def configure(self, device: str, *, case_cores: float | None,
                  gpu_uuid: str | None = None, framework: str = "*") -> None:
        self.device = device
        self.framework = framework
        self.case_cores = case_cores
        self.gpu_uuid = gpu_uuid

    def before_done(self) -> None:
        """Close the before-window (build and idle phases) and read the GPU."""
        self._before = host_sample()
        if self.device.startswith("cuda"):
            self._gpu_before = gpu_state(self.device, self.gpu_uuid)

    def window_start(self) -> None:
        self._w0 = host_sample()

    def window_stop(self) -> None:
        self._w1 = host_sample()

    def gpu_end(self) -> None:
        """Read the GPU at the end of the window (after the energy window is closed)."""
        if self.device.startswith("cuda"):
            self._gpu_end = gpu_state(self.device, self.gpu_uuid)

    def verdict(self, times_s: Sequence[float], trim_fraction: float,
                measure_notes: Sequence[str] = ()) -> dict[str, Any]:
        """The record's ``noise``: the figures the two verdicts are read from
        (:mod:`accelbench.verdicts`) in ``host``, ``gpu`` and ``times``, ``described``
        (behaviour seen but not flagged) and ``measure_notes`` (where measurement departed
        from the policy). The verdict itself is not stored: it is decided when read."""
        host: dict[str, Any] = {
            "cpus": logical_cpus(),
            "case_cores": self.case_cores,
            "other_cores_max": OTHER_CORES_MAX,
        }
        before = host_window(self._t0, self._before, case_cores=self.case_cores) \
            if self._before is not None else None
        during = host_window(self._w0, self._w1, case_cores=self.case_cores) \
            if self._w0 is not None and self._w1 is not None else None
        host["before"] = before
        host["during"] = during
        host["judged"] = None
        if during is not None and during["window_s"] >= MIN_HOST_WINDOW_S:
            host["judged"] = "during"
        elif before is not None and before["window_s"] >= MIN_HOST_WINDOW_S:
            host["judged"] = "before"
        gpu: dict[str, Any] = {}
        if self.device.startswith("cuda"):
            gpu = {"device": self.device, "before": self._gpu_before, "end": self._gpu_end}
            self._gpu_figures(gpu)
        times = time_checks(times_s, trim_fraction, framework=self.framework,
                            device=self.device, contended=bool(contention_reasons(host, gpu)))
        times.pop("reasons")  # the unstable verdict, read from the figures kept
        return {
            "described": times.pop("described"),
            "host": host,
            "gpu": gpu,
            "times": times,
            "measure_notes": list(measure_notes),
        }

    def _gpu_figures(self, gpu: dict[str, Any]) -> None:
        """Other processes on the GPU (``other_pids``) and why they may be uncertain."""
        own = os.getpid()
        others: set[int] = set()
        remarks: list[str] = []
        for key in ("before", "end"):
            state = gpu.get(key) or {}
            if not state.get("available"):
                continue
            pids, remark = _other_gpu_processes(state, own)
            others.update(pids)
            if remark:
                remarks.append(remark)
        gpu["other_pids"] = sorted(others)
        if remarks:
            gpu["pid_remark"] = remarks[0]
