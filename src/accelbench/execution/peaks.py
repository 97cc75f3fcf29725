"""Measuring a device's peaks: a GEMM sweep per precision and a large device copy, each in
an isolated worker with a timeout, stored per host and device with the machine's state.

* Compute: a sweep of large square GEMMs per precision; the peak is the best
  sustained rate, i.e. the highest median-time FLOP/s over the sweep.
* Memory bandwidth: a large device copy; bytes read plus bytes written over
  the median time.

Measurements run in an isolated worker with a timeout (:func:`ensure_peaks`);
every measured peak is stored per host and device (``peaks`` table) with its time and
the machine's state while it ran (``details["noise"]``: load average, other processes'
CPU, and whether that counts as quiet), and reused. Which stored peak MFU uses is
:mod:`accelbench.roofline.peaks`' rule; theoretical peaks come from
:mod:`accelbench.roofline.theoretical`.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.backends.registry import DEFAULT_FRAMEWORK
from accelbench.errors import UnsupportedError
from accelbench.execution.opbench import OpRun, run_case
from accelbench.opbench.cases import OpCase, matmul_shape
from accelbench.opbench.precision import op_precision
from accelbench.spec import MeasurementPolicy
from accelbench.store.opbench import BANDWIDTH, Peak

if TYPE_CHECKING:
    from accelbench.store.db import Store

#: GEMM sides of the compute sweep, per device kind.
DEFAULT_GEMM_SIDES: dict[str, tuple[int, ...]] = {
    "cpu": (1024, 2048, 4096),
    "cuda": (4096, 8192, 16384),
    "mps": (2048, 4096, 8192),
}
#: Bytes of each copy buffer (source and destination), per device kind; at
#: least several times the last-level cache, so the copy streams from memory.
DEFAULT_COPY_BYTES: dict[str, int] = {"cpu": 1 << 30, "cuda": 2 << 30, "mps": 1 << 30}

#: Timing of each point of a sweep: a short warm-up, then at least 5 iterations.
PEAK_POLICY = MeasurementPolicy(
    warmup_min=2, warmup_max=10, warmup_max_time_s=10.0, target_ci=0.02,
    min_iterations=5, max_iterations=50, max_time_s=10.0,
)

MeasureNotice = Callable[[str], None]


def device_name_of(device: str, framework: str = DEFAULT_FRAMEWORK) -> str | None:
    """Model name of ``device``: the CPU model or the accelerator's name (from the probe)."""
    if device == "cpu":
        from accelbench.devices.discovery import cpu_info

        return str(cpu_info()["model"])
    from accelbench.isolation.ask import probe

    info = probe(framework).device(device)
    return info.name if info is not None else None


def _kind(device: str) -> str:
    return device.split(":")[0]


def measure_compute_peak(
    device: str,
    precision: str,
    *,
    sides: Sequence[int] | None = None,
    policy: MeasurementPolicy | None = None,
    threads: int | None = None,
    framework: str = DEFAULT_FRAMEWORK,
) -> Peak:
    """Best sustained GEMM rate of ``device`` at ``precision`` over a sweep of square sizes.

    Args:
        device: A checked device (``cpu``, ``cuda:N``).
        precision: ``fp32``, ``tf32``, ``fp16``, ``bf16`` (or ``amp_fp16``/``amp_bf16``).
        sides: GEMM sides to sweep (default :data:`DEFAULT_GEMM_SIDES`).
        policy: Timing of each point (default :data:`PEAK_POLICY`).
        threads: CPU threads (None: the framework's default).
        framework: The backend whose GEMM is measured.

    Raises:
        UnsupportedError: every size failed (out of memory or an error).
    """
    prec = op_precision(precision)
    sides = tuple(sides or DEFAULT_GEMM_SIDES.get(_kind(device), (2048, 4096)))
    policy = policy or PEAK_POLICY
    sweep: list[dict[str, Any]] = []
    for n in sides:
        case = OpCase(op="matmul", shape=matmul_shape(n, n, n), precision=prec)
        res = run_case(case, OpRun(device=device, policy=policy, threads=threads,
                                   framework=framework))
        sweep.append(
            {"n": n, "status": res.status, "flop_per_s": res.achieved_flop_per_s,
             "median_s": res.median_s, "iterations": len(res.times_s), "error": res.error}
        )
        threads = res.threads
    rates = [(s["flop_per_s"], s["n"]) for s in sweep if s["flop_per_s"]]
    if not rates:
        errors = "; ".join(f"N={s['n']}: {s['error']}" for s in sweep)
        raise UnsupportedError(f"GEMM peak of {device} {prec} could not be measured: {errors}")
    best, best_n = max(rates)
    return Peak(
        device=device,
        device_name=device_name_of(device, framework),
        hostname=socket.gethostname(),
        precision=prec,
        value=float(best),
        unit="FLOP/s",
        method=(
            f"{framework} square GEMM sweep N={','.join(map(str, sides))}, best median-time "
            f"rate (N={best_n})"
        ),
        details={"sweep": sweep, "threads": threads, "framework": framework},
    )


def measure_bandwidth(
    device: str,
    *,
    nbytes: int | None = None,
    policy: MeasurementPolicy | None = None,
    threads: int | None = None,
    framework: str = DEFAULT_FRAMEWORK,
) -> Peak:
    """Memory bandwidth of ``device`` from a large copy: (read + written bytes) / median time.

    Args:
        device: A checked device.
        nbytes: Size of each of the two buffers (default :data:`DEFAULT_COPY_BYTES`,
            capped at an eighth of the free memory).
        policy: Timing (default :data:`PEAK_POLICY`).
        threads: CPU threads (None: the framework's default).
        framework: The backend whose device copy is measured.
    """
    import numpy as np

    from accelbench.backends import get_backend
    from accelbench.execution.measure import Loop, run_loop

    ops = get_backend(framework).ops()
    used_threads = ops.threads(threads)
    policy = policy or PEAK_POLICY
    size = nbytes or _default_copy_bytes(device, ops.free_bytes(device))
    n = max(1, size // 4)
    copy = ops.copy_step(device, n)
    try:
        timings = run_loop(Loop(copy, ops.synchronizer(device), policy, 1))
    finally:
        del copy
        ops.release(device)
    median = float(np.median(timings.times_s))
    moved = 2 * n * 4
    return Peak(
        device=device,
        device_name=device_name_of(device, framework),
        hostname=socket.gethostname(),
        precision=BANDWIDTH,
        value=moved / median,
        unit="B/s",
        method=(f"{framework} device copy of {n * 4 / 2**20:.0f} MiB: bytes read + written "
                "/ median time"),
        details={
            "buffer_bytes": n * 4, "iterations": len(timings.times_s), "median_s": median,
            "threads": used_threads, "framework": framework,
        },
    )


def _default_copy_bytes(device: str, device_free: int | None) -> int:
    default = DEFAULT_COPY_BYTES.get(_kind(device), 1 << 30)
    if device == "cpu":
        import psutil

        free: int | None = int(psutil.virtual_memory().available)
    else:
        free = device_free
    if free is None:
        return default  # free memory unknown: keep the default
    return max(1 << 24, min(default, free // 8))


@dataclass(frozen=True, kw_only=True)
class PeakSweep:
    """How missing peaks are measured: each in an isolated worker with a timeout."""

    sides: Sequence[int] | None = None
    """GEMM sides of the compute sweep (default :data:`DEFAULT_GEMM_SIDES`)."""
    copy_bytes: int | None = None
    """Buffer size of the bandwidth copy (default :data:`DEFAULT_COPY_BYTES`, capped)."""
    policy: MeasurementPolicy | None = None
    """Timing of each measurement (default :data:`PEAK_POLICY`)."""
    threads: int | None = None
    """CPU threads (None: the framework's default)."""
    framework: str = DEFAULT_FRAMEWORK
    """The backend that measures (cached peaks are the device's, whichever framework
    measured them)."""
    timeout_s: float | None = None
    """Wall-clock limit of each measurement's worker (default: the policy's ``timeout_s``)."""


def ensure_peaks(
    store: Store,
    device: str,
    precisions: Sequence[str],
    *,
    remeasure: bool = False,
    measure_missing: bool = True,
    bandwidth: bool = True,
    sweep: PeakSweep = PeakSweep(),
    on_measure: MeasureNotice | None = None,
) -> dict[str, Peak]:
    """Cached peaks of ``device`` on this host, measuring those missing (or all, if asked).

    Args:
        store: The results store.
        device: A checked device.
        precisions: Compute precisions wanted.
        remeasure: Measure even where a cached value exists.
        measure_missing: Measure those not cached (False: return only cached ones).
        bandwidth: Also the memory bandwidth.
        sweep: How a peak is measured (sizes, timing, threads, framework, timeout).
        on_measure: Told, in words, what is being measured before it starts.

    Raises:
        WorkerError: a measurement's worker crashed or timed out (peaks measured before
            it are stored).

    Returns:
        ``{precision or "bandwidth": Peak}`` for every peak known.
    """
    host = socket.gethostname()
    name = device_name_of(device, sweep.framework)
    wanted = [op_precision(p) for p in precisions]
    keys = list(dict.fromkeys(wanted)) + ([BANDWIDTH] if bandwidth else [])
    out: dict[str, Peak] = {}
    for key in keys:
        cached = store.latest_peak(device, key, hostname=host, device_name=name)
        if cached is not None and not remeasure:
            out[key] = cached
            continue
        if not (measure_missing or remeasure):
            continue
        if on_measure is not None:
            what = "memory bandwidth" if key == BANDWIDTH else f"{key} GEMM peak"
            on_measure(f"measuring {what} of {device} ({name})")
        peak = _measure_isolated(device, key, sweep)
        out[key] = store.save_peak(peak)
    return out


def measure_in_worker(
    device: str,
    key: str,
    *,
    sides: Sequence[int] | None = None,
    copy_bytes: int | None = None,
    policy: dict[str, Any] | None = None,
    threads: int | None = None,
    framework: str = DEFAULT_FRAMEWORK,
) -> dict[str, Any]:
    """Worker side of :func:`_measure_isolated`: one peak, as a dict, with the machine's
    state while it was measured (``details["noise"]``, :func:`machine_state`)."""
    from accelbench.execution.noise import host_sample

    pol = MeasurementPolicy(**policy) if policy else None
    before = host_sample()
    if key == BANDWIDTH:
        peak = measure_bandwidth(device, nbytes=copy_bytes, policy=pol, threads=threads,
                                 framework=framework)
    else:
        peak = measure_compute_peak(device, key, sides=sides, policy=pol, threads=threads,
                                    framework=framework)
    state = machine_state(before, host_sample())
    return dataclasses.replace(peak, details={**peak.details, "noise": state}).to_dict()


def machine_state(before: Any, after: Any) -> dict[str, Any]:
    """The competition a measurement had, from two :func:`accelbench.execution.noise.host_sample`
    readings of the measuring process: load average, other processes' CPU (cores) and
    ``quiet``: True when others used at most
    :data:`~accelbench.execution.noise.OTHER_CORES_MAX` core over a window of at least
    :data:`~accelbench.execution.noise.MIN_HOST_WINDOW_S`, None when the window was too short
    to judge."""
    from accelbench.execution.noise import MIN_HOST_WINDOW_S, OTHER_CORES_MAX, host_window

    state = host_window(before, after, case_cores=None)
    state["load_avg_1m_before"] = before.load_avg_1m
    other = state.get("other_cores")
    if other is None or state["window_s"] < MIN_HOST_WINDOW_S:
        state["quiet"] = None
    else:
        state["quiet"] = bool(other <= OTHER_CORES_MAX)
    state["rule"] = (f"quiet: other processes used at most {OTHER_CORES_MAX:g} core over "
                     f"at least {MIN_HOST_WINDOW_S:g} s")
    return state


def _measure_isolated(device: str, key: str, sweep: PeakSweep) -> Peak:
    """Measure one peak (``key``: a precision or ``bandwidth``) in an isolated worker.

    The kernels run in a child process with a timeout, like a ``run`` case: a crash
    or a hang of the framework becomes a one-line :class:`WorkerError`, never the
    end of the command.
    """
    from accelbench.isolation.isolate import call

    pol = sweep.policy or PEAK_POLICY
    what = f"peaks: measuring {'memory bandwidth' if key == BANDWIDTH else key} of {device}"
    data = call(
        "accelbench.execution.peaks:measure_in_worker",
        {"device": device, "key": key, "sides": list(sweep.sides) if sweep.sides else None,
         "copy_bytes": sweep.copy_bytes, "policy": dataclasses.asdict(pol),
         "threads": sweep.threads, "framework": sweep.framework},
        what=what, timeout_s=sweep.timeout_s if sweep.timeout_s is not None else pol.timeout_s,
        warm=sweep.framework,
    )
    fields = {f.name for f in dataclasses.fields(Peak)}
    return Peak(**{k: v for k, v in data.items() if k in fields and k not in ("id",
                                                                              "created_at")})
