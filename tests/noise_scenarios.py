"""Measurements the noise verdicts are made of, the same in every version of accelbench:
host counters, GPU states and step times given to a real :class:`NoiseProbe`.

``tests/data/noise_written.json`` holds the ``noise`` each scenario got from accelbench
before verdicts were read (the verdict stored beside the figures), written by running
this module against that version::

    git archive 7bd82d0 src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src:. python -m tests.noise_scenarios > tests/data/noise_written.json

Only names every version has are used here (``NoiseProbe``, ``HostSample``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from accelbench.execution import noise
from accelbench.execution.noise import HostSample, NoiseProbe


def _tight() -> list[float]:
    return list(np.random.default_rng(1).normal(0.010, 0.0002, 200))


def _level_shift() -> list[float]:
    rng = np.random.default_rng(2)
    return list(np.concatenate([rng.normal(0.010, 0.0002, 120), rng.normal(0.016, 0.0003, 80)]))


def _small_shift() -> list[float]:
    rng = np.random.default_rng(3)
    return list(np.concatenate([rng.normal(0.010, 0.0001, 180), rng.normal(0.0115, 0.0001, 20)]))


def _alternating(slow_outliers: float = 1.0) -> list[float]:
    """JAX on a CPU: two modes spread through the run; one slow step in four
    ``slow_outliers`` times as slow again."""
    rng = np.random.default_rng(4)
    slow = rng.random(200) < 0.4
    times = np.where(slow, rng.normal(0.651e-3, 0.006e-3, 200),
                     rng.normal(0.444e-3, 0.004e-3, 200))
    times[np.flatnonzero(slow)[::4]] *= slow_outliers
    return list(times)


def _outliers(factor: float) -> list[float]:
    """Tight times with one in twenty-five ``factor`` times as slow (too few for a mode)."""
    times = np.random.default_rng(5).normal(0.010, 0.0002, 200)
    times[::25] *= factor
    return list(times)


def _wide() -> list[float]:
    return list(np.random.default_rng(6).uniform(0.008, 0.016, 200))


def _gpu_state(pids: list[int], throttle: list[str]) -> dict[str, Any]:
    return {"available": True, "processes": [{"pid": p, "used_memory_bytes": 2**30}
                                             for p in pids],
            "throttle_reasons": throttle, "sm_clock_mhz": 1410}


def _probe(other: float = 0.1, *, window_s: float = 1.0, before_s: float = 0.01,  # noqa: PLR0913
           before_other: float = 0.0, steal: float = 0.0, load: float | None = 1.75,
           device: str = "cpu", framework: str = "*",
           gpu: tuple[dict[str, Any], dict[str, Any]] | None = None) -> NoiseProbe:
    """A probe whose measured window of ``window_s`` saw ``other`` cores of other
    processes (the case itself one core), after a before-window of ``before_s``."""
    probe = NoiseProbe()
    probe.configure(device, case_cores=1, framework=framework)
    probe._t0 = HostSample(t_s=0.0, busy_s=0.0, steal_s=0.0, own_s=0.0, load_avg_1m=0.25)
    probe._before = HostSample(t_s=before_s, busy_s=(1.0 + before_other) * before_s,
                               steal_s=0.0, own_s=before_s, load_avg_1m=load)
    probe._w0 = HostSample(t_s=0.0, busy_s=0.0, steal_s=0.0, own_s=0.0, load_avg_1m=0.5)
    probe._w1 = HostSample(t_s=window_s, busy_s=(1.0 + other) * window_s,
                           steal_s=steal * window_s, own_s=window_s, load_avg_1m=load)
    if gpu is not None:
        probe._gpu_before, probe._gpu_end = gpu
    return probe


OWN = -1
"""Stands for this process's PID in a GPU's process list."""


def _pids(pids: list[int]) -> list[int]:
    return [os.getpid() if p == OWN else p for p in pids]


SCENARIOS: dict[str, Callable[[], tuple[NoiseProbe, list[float]]]] = {
    "quiet": lambda: (_probe(0.1), _tight()),
    "busy": lambda: (_probe(0.9), _tight()),
    "busy_at_the_threshold": lambda: (_probe(0.5), _tight()),
    "busy_just_above": lambda: (_probe(0.51), _tight()),
    "busy_with_steal": lambda: (_probe(1.4, steal=0.3), _tight()),
    "busy_no_load_average": lambda: (_probe(0.9, load=None), _tight()),
    "busy_before_only": lambda: (_probe(0.9, window_s=0.1, before_s=0.3, before_other=0.8),
                                 _tight()),
    "nothing_judged": lambda: (_probe(3.0, window_s=0.1, before_s=0.1, before_other=3.0),
                               _tight()),
    "level_shift": lambda: (_probe(0.1), _level_shift()),
    "small_shift_torch_cpu": lambda: (_probe(0.1, framework="torch"), _small_shift()),
    "small_shift_uncalibrated": lambda: (_probe(0.1), _small_shift()),
    "jax_modes_quiet": lambda: (_probe(0.1, framework="jax"), _alternating()),
    "jax_modes_busy": lambda: (_probe(0.9, framework="jax"), _alternating()),
    "jax_modes_and_slow_outliers": lambda: (_probe(0.1, framework="jax"), _alternating(2.0)),
    "outliers": lambda: (_probe(0.1), _outliers(6.0)),
    "few_outliers_torch_cpu": lambda: (_probe(0.1, framework="torch"), _outliers(1.5)),
    "wide_quartiles": lambda: (_probe(0.1), _wide()),
    "busy_and_wide": lambda: (_probe(1.2, steal=0.1), _wide()),
    "few_times": lambda: (_probe(0.1), _wide()[:4]),
    "gpu_alone": lambda: (_probe(0.1, device="cuda:0", gpu=(
        _gpu_state(_pids([OWN]), []), _gpu_state(_pids([OWN]), ["sw_power_cap"]))), _tight()),
    "gpu_shared_and_hot": lambda: (_probe(0.1, device="cuda:0", gpu=(
        _gpu_state(_pids([OWN, 424242]), []),
        _gpu_state(_pids([OWN, 424242, 31337]), ["sw_power_cap", "hw_thermal_slowdown",
                                                  "hw_slowdown"]))), _tight()),
    "gpu_other_namespace": lambda: (_probe(0.1, device="cuda:0", gpu=(
        _gpu_state([7, 9], []), _gpu_state([7, 9], [])
    )), _tight()),
    "gpu_unreadable_busy_host": lambda: (_probe(0.9, device="cuda:1", gpu=(
        {"available": False, "reason": "no NVML"}, {"available": False, "reason": "no NVML"}
    )), _wide()),
}
"""Each scenario: a configured probe and the step times it judges."""


@contextmanager
def eight_cpus() -> Iterator[None]:
    """The machine the scenarios ran on: 8 logical CPUs."""
    saved = noise.logical_cpus
    noise.logical_cpus = lambda: 8
    try:
        yield
    finally:
        noise.logical_cpus = saved


def measure(name: str) -> dict[str, Any]:
    """The ``noise`` this version of accelbench writes for scenario ``name``."""
    with eight_cpus():
        probe, times = SCENARIOS[name]()
        return probe.verdict(times, 0.01, ["a note"] if name == "busy" else ())


if __name__ == "__main__":
    json.dump({name: measure(name) for name in SCENARIOS}, sys.stdout, indent=1,
              sort_keys=True)
    sys.stdout.write("\n")
