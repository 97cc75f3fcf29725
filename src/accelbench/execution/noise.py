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
- GPU (``cuda:N`` with NVML): other processes on the device, SM/memory clocks,
  throttle reasons, utilisation and temperature, at the start of warm-up and at
  the end of the window (pynvml is optional);
- the shape of the raw step times: trimmed mean against the median, the ratio
  of the quartiles, and a two-mode check.

The verdict (``flagged`` and one reason line each) uses these thresholds:

- other processes used more than :data:`OTHER_CORES_MAX` (0.5) cores on average
  during the window. Absolute, not relative to spare cores: work on "free"
  cores still shares caches, memory bandwidth, turbo headroom and often an SMT
  sibling with the case; a half-core of background load is where the quiet/loaded
  difference becomes visible in CPU benchmarks on small machines;
- another process holds a context on the case's GPU, or the GPU reported a
  thermal or hardware slowdown (:data:`GPU_SLOWDOWNS`; the ordinary power cap
  of a busy GPU is recorded but not flagged);
- the quartile ratio q3/q1 exceeds :data:`QUARTILE_RATIO_MAX` (1.25), or the
  trimmed mean is more than :data:`TRIMMED_MEDIAN_MAX` (10%) from the median,
  or the times split into two tight modes (:func:`two_modes`).

Windows shorter than :data:`MIN_HOST_WINDOW_S` are too coarse for CPU time
(counted in 10 ms ticks): the before-window is judged instead, or nothing.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from accelbench.meters.tdp import logical_cpus, own_cpu_s, system_cpu_s

OTHER_CORES_MAX = 0.5
"""Cores of CPU time other processes may use during a case before it is flagged."""
MIN_HOST_WINDOW_S = 0.2
"""Shortest window whose CPU-time figures are judged."""
QUARTILE_RATIO_MAX = 1.25
"""Largest q3/q1 of the step times of a clean case."""
TRIMMED_MEDIAN_MAX = 0.10
"""Largest |trimmed mean / median - 1| of a clean case."""
MIN_SHAPE_SAMPLES = 5
"""Fewest times the quartile and trimmed-mean checks are made on."""
MIN_MODE_SAMPLES = 20
"""Fewest times the two-mode check is made on."""
MODE_MIN_COUNT = 3
"""Each of two modes must hold at least this many times (two outliers are not a mode)."""
MODE_MIN_SHARE = 0.1
"""Each of two modes must hold at least this share of the times."""
MODE_MIN_SEPARATION = 0.10
"""Two modes must be at least 10% apart (ratio of their medians)."""
MODE_MIN_TIGHTNESS = 4.0
"""... and their distance at least this many of their own (robust) spreads, in log time:
a long tail or a uniform spread splits at about 1.4-3.5, two real modes far above."""
GPU_SLOWDOWNS = (
    "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
)
"""Throttle reasons that mean the GPU ran slower than it would on a quiet, cool machine."""


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
    busy = max(b.busy_s - a.busy_s, 0.0) / window_s
    own = max(b.own_s - a.own_s, 0.0) / window_s
    out.update(
        busy_cores=busy,
        own_cores=own,
        other_cores=max(busy - own, 0.0),
        steal_cores=max(b.steal_s - a.steal_s, 0.0) / window_s,
        own_share=own / case_cores if case_cores else None,
    )
    return out


# -- step times ----------------------------------------------------------------------------


def two_modes(times_s: ArrayLike) -> dict[str, Any] | None:
    """The best split of the times into two modes, if they form two tight, separate groups.

    The split maximises the between-group variance of log times (Otsu's method
    in one dimension), each group holding at least :data:`MODE_MIN_SHARE`. The
    times are two modes when the groups' medians are :data:`MODE_MIN_SEPARATION`
    apart and their distance is :data:`MODE_MIN_TIGHTNESS` times their pooled
    robust spread (1.4826 x MAD). Returns ``{"low_s", "high_s", "high_share",
    "tightness"}`` for two modes, else None.
    """
    arr = np.sort(np.asarray(times_s, dtype=float))
    n = arr.size
    if n < MIN_MODE_SAMPLES or arr[0] <= 0:
        return None
    logs = np.log(arr)
    m = max(MODE_MIN_COUNT, math.ceil(MODE_MIN_SHARE * n))
    if n - m < m:
        return None
    cums = np.cumsum(logs)
    total = cums[-1]
    ks = np.arange(m, n - m + 1)
    mean_low = cums[ks - 1] / ks
    mean_high = (total - cums[ks - 1]) / (n - ks)
    between = ks * (n - ks) * (mean_high - mean_low) ** 2
    k = int(ks[int(np.argmax(between))])
    low, high = logs[:k], logs[k:]
    med_low, med_high = float(np.median(low)), float(np.median(high))
    spread = max(
        1.4826 * float(np.sqrt((np.median(np.abs(low - med_low)) ** 2 * low.size
                                + np.median(np.abs(high - med_high)) ** 2 * high.size) / n)),
        1e-3,  # 0.1%: timer resolution; identical times are one mode, not a split
    )
    distance = med_high - med_low
    tightness = distance / spread
    if math.exp(distance) - 1.0 < MODE_MIN_SEPARATION or tightness < MODE_MIN_TIGHTNESS:
        return None
    return {
        "low_s": math.exp(med_low),
        "high_s": math.exp(med_high),
        "high_share": high.size / n,
        "tightness": tightness,
    }


def time_checks(times_s: ArrayLike, trim_fraction: float) -> dict[str, Any]:
    """Shape statistics of the measured times and the reasons they look unclean."""
    from accelbench.stats import trimmed_mean

    arr = np.asarray(times_s, dtype=float)
    out: dict[str, Any] = {"n": int(arr.size)}
    reasons: list[str] = []
    if arr.size >= MIN_SHAPE_SAMPLES:
        median = float(np.median(arr))
        trimmed = trimmed_mean(arr, trim_fraction)
        q1, q3 = (float(v) for v in np.quantile(arr, [0.25, 0.75]))
        rel = trimmed / median - 1.0 if median > 0 else None
        ratio = q3 / q1 if q1 > 0 else None
        out.update(median_s=median, trimmed_mean_s=trimmed, trim_fraction=trim_fraction,
                   trimmed_rel_diff=rel, q1_s=q1, q3_s=q3, q3_q1=ratio)
        if ratio is not None and ratio > QUARTILE_RATIO_MAX:
            reasons.append(
                f"step times spread widely: q3/q1 = {ratio:.2f} (> {QUARTILE_RATIO_MAX:g})"
            )
        if rel is not None and abs(rel) > TRIMMED_MEDIAN_MAX:
            reasons.append(
                f"trimmed mean is {rel:+.0%} from the median (more than "
                f"{TRIMMED_MEDIAN_MAX:.0%}): outliers or a second mode"
            )
    modes = two_modes(arr) if arr.size >= MIN_MODE_SAMPLES else None
    out["bimodal"] = modes is not None
    if modes is not None:
        out["modes"] = modes
        reasons.append(
            f"step times form two modes: {_ms(modes['low_s'])} "
            f"({1 - modes['high_share']:.0%}) and {_ms(modes['high_s'])} "
            f"({modes['high_share']:.0%})"
        )
    out["reasons"] = reasons
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


# -- GPU -----------------------------------------------------------------------------------


def gpu_state(device: str, uuid: str | None) -> dict[str, Any]:
    """NVML's view of ``cuda:N`` now, or ``{"available": False, "reason": ...}``."""
    if not device.startswith("cuda"):
        return {"available": False, "reason": f"no GPU probe for {device}"}
    from accelbench.errors import MeterError
    from accelbench.meters import nvml

    try:
        state = nvml.device_activity(device, uuid=uuid)
    except MeterError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, **state}


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
        self.case_cores: float | None = None
        self.gpu_uuid: str | None = None
        self._gpu_before: dict[str, Any] = {}
        self._gpu_end: dict[str, Any] = {}

    def configure(self, device: str, *, case_cores: float | None,
                  gpu_uuid: str | None = None) -> None:
        self.device = device
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
        """The record's ``noise``: ``flagged``, ``reasons``, ``host``, ``gpu``, ``times``
        and ``measure_notes`` (where measurement departed from the policy's limits)."""
        reasons: list[str] = []
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
        judged: dict[str, Any] | None = None
        which = ""
        host["judged"] = None
        if during is not None and during["window_s"] >= MIN_HOST_WINDOW_S:
            judged, which, host["judged"] = during, "during the measurement", "during"
        elif before is not None and before["window_s"] >= MIN_HOST_WINDOW_S:
            judged, host["judged"] = before, "before"
            which = "before the measurement (the measured window was too short to judge)"
        if judged is not None and judged.get("other_cores", 0.0) > OTHER_CORES_MAX:
            load = judged.get("load_avg_1m")
            steal = judged.get("steal_cores") or 0.0
            extra = f"; load average {load:.2f} on {host['cpus']} CPUs" if load is not None else ""
            if steal > 0.05:
                extra += f"; {steal:.2f} of them stolen by the hypervisor"
            reasons.append(
                f"other processes used {judged['other_cores']:.2f} CPU cores {which} "
                f"(more than {OTHER_CORES_MAX:g}){extra}"
            )
        gpu: dict[str, Any] = {}
        if self.device.startswith("cuda"):
            gpu = {"device": self.device, "before": self._gpu_before, "end": self._gpu_end}
            reasons.extend(self._gpu_reasons(gpu))
        times = time_checks(times_s, trim_fraction)
        reasons.extend(times.pop("reasons"))
        return {
            "flagged": bool(reasons),
            "reasons": reasons,
            "host": host,
            "gpu": gpu,
            "times": times,
            "measure_notes": list(measure_notes),
        }

    def _gpu_reasons(self, gpu: dict[str, Any]) -> list[str]:
        reasons: list[str] = []
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
        if others:
            reasons.append(
                f"{len(others)} other process(es) used {self.device} during the case "
                f"(PIDs {', '.join(str(p) for p in sorted(others))})"
            )
        end = gpu.get("end") or {}
        slow = [r for r in end.get("throttle_reasons") or () if r in GPU_SLOWDOWNS]
        if slow:
            reasons.append(f"{self.device} was slowed down at the end of the window: "
                           f"{', '.join(slow)}")
        return reasons
