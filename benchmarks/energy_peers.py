"""The peers on accelbench's simulated truth: Zeus's ``ZeusMonitor`` and CodeCarbon's
tracker reading the same fake pynvml as accelbench (``energy_accuracy.py --peers``).

Each peer is imported from the benchmark's own environment (never an accelbench
dependency): ``python -m venv /tmp/peers && /tmp/peers/bin/pip install zeus codecarbon
pytest torch==2.13.0 -e .``. Both read NVML's total-energy counter where the GPU has one,
so they run on the ``nvml-counter`` sensor; the same trace, seed and window as
accelbench's trial. Without a counter, Zeus polls power in a separate process and
CodeCarbon on a 1 s thread of real time: neither reaches an in-process fake on simulated
time, so those rows say so rather than guess.
"""

from __future__ import annotations

import logging
import math
import random
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml

from tests.sensor_sim import PRE_S, TRACE_KINDS, make_trace, simulated_sensor, window_for


def _extra_nvml(mp: Any) -> None:
    """What the peers ask NVML beyond accelbench's calls, answered as an H100 would."""
    answers: dict[str, Callable[..., Any]] = {
        "nvmlDeviceGetArchitecture": lambda h: pynvml.NVML_DEVICE_ARCH_HOPPER,
        "nvmlDeviceGetTemperatureV": lambda h, s: 55,
        "nvmlDeviceGetPowerManagementDefaultLimit": lambda h: 700_000,
        "nvmlDeviceGetPowerManagementLimit": lambda h: 700_000,
        "nvmlDeviceGetMemoryInfo": lambda h: pynvml.c_nvmlMemory_t(80 << 30, 80 << 30, 0),
        "nvmlDeviceGetUtilizationRates": lambda h: pynvml.c_nvmlUtilization_t(100, 50),
        "nvmlDeviceGetComputeMode": lambda h: 0,
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [],
        "nvmlDeviceGetGraphicsRunningProcesses": lambda h: [],
        "nvmlSystemGetDriverVersion": lambda: "570.00",
        "nvmlSystemGetCudaDriverVersion": lambda: 12080,
    }
    for name, fn in answers.items():
        if hasattr(pynvml, name):
            mp.setattr(pynvml, name, fn)

    def c2c(*_: Any) -> Any:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    if hasattr(pynvml, "nvmlDeviceGetC2cModeInfoV"):
        mp.setattr(pynvml, "nvmlDeviceGetC2cModeInfoV", c2c)


def _window(kind: str, seed: int, work: Path,
            measure: Callable[[Callable[[float], None]], float]) -> float:
    """The peer's relative error on accelbench's trial ``(nvml-counter, kind, seed)``:
    the same trace, sensor grid and window length (the random draws in the same order)."""
    import pytest

    sensor = "nvml-counter"
    rng = random.Random(f"{sensor}/{kind}/{seed}")
    window_s = window_for(sensor) * rng.uniform(1.0, 1.5)
    trace = make_trace(kind, rng, PRE_S + window_s + 2.0)
    with (simulated_sensor(sensor, trace, rng, work / f"peer-{kind}-{seed}") as clock,
          pytest.MonkeyPatch.context() as mp):
        _extra_nvml(mp)
        _fake_nvidia_smi(mp, work)
        clock.sleep(PRE_S + rng.uniform(0, 1.0))
        t0 = clock.now()
        energy_j = measure(lambda s: clock.sleep(s if s > 0 else window_s))
        t1 = clock.now()
    true_j = trace.energy_j(t0, t1)
    return (energy_j - true_j) / true_j


def zeus_measure(advance: Callable[[float], None]) -> float:
    import zeus.device.gpu as zeus_gpu
    from zeus.monitor import ZeusMonitor

    zeus_gpu._gpus = None  # noqa: SLF001 - Zeus caches the GPUs: this trial's fake is new

    monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[], sync_execution_with=None)
    monitor.begin_window("w", sync_execution=False)
    advance(0)
    m = monitor.end_window("w", sync_execution=False)
    return float(m.gpu_energy[0])


def _fake_nvidia_smi(mp: Any, work: Path) -> None:
    """CodeCarbon finds NVIDIA GPUs by running ``nvidia-smi --help``: one that answers."""
    import os
    import stat

    bindir = work / "nvidia-bin"
    bindir.mkdir(parents=True, exist_ok=True)
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    mp.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def codecarbon_measure(advance: Callable[[float], None]) -> float:
    from codecarbon import OfflineEmissionsTracker
    from codecarbon.core import gpu_nvidia

    gpu_nvidia.clear_nvidia_system_cache()

    tracker = OfflineEmissionsTracker(country_iso_code="USA", gpu_ids=[0], save_to_file=False,
                                      log_level="error", measure_power_secs=3600,
                                      tracking_mode="machine", allow_multiple_runs=True)
    tracker.start()
    advance(0)
    # CodeCarbon takes its last reading at stop only when its previous one is 50 ms old
    # on the real clock; simulated time passes in microseconds.
    time.sleep(0.06)
    tracker.stop()
    return float(tracker._total_gpu_energy.kWh) * 3.6e6  # noqa: SLF001 - its GPU part only


PEERS = {"Zeus": zeus_measure, "CodeCarbon": codecarbon_measure}


def print_peers(trials: int, work: Path, accelbench: dict[str, list[float]]) -> None:
    """The peers' rows, after accelbench's on the same seeds (``accelbench``: its
    nvml-counter errors per kind, seed 0 first)."""
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    print("\npeers on the nvml-counter sensor, the same traces and windows "
          "(|error| against the truth):")
    print(f"{'tool':11s} {'kind':7s} {'trials':>6s} {'median |err|':>12s} {'worst |err|':>11s}")
    for kind in TRACE_KINDS:
        errs = [abs(e) for e in accelbench.get(kind, [])[:trials]]
        if errs:
            print(f"{'accelbench':11s} {kind:7s} {len(errs):6d} "
                  f"{100 * statistics.median(errs):11.2f}% {100 * max(errs):10.2f}%")
    for name, measure in PEERS.items():
        for kind in TRACE_KINDS:
            try:
                errs = [abs(_window(kind, s, work, measure)) for s in range(trials)]
            except Exception as exc:  # a peer missing or failing: say why, not a number
                print(f"{name:11s} {kind:7s} unavailable: {type(exc).__name__}: "
                      f"{str(exc)[:120]}")
                continue
            ok = [e for e in errs if not math.isnan(e)]
            print(f"{name:11s} {kind:7s} {len(ok):6d} {100 * statistics.median(ok):11.2f}% "
                  f"{100 * max(ok):10.2f}%")
    print("sampled power only (nvml-sampled, nvml-power1s): not run for the peers: Zeus "
          "polls power in a separate process, CodeCarbon on a thread of real time; neither "
          "reaches the in-process fake on simulated time")
