"""The step's wait for its next batch, timed where the step asks for it, and the record's
``input`` section (DESIGN: input pipelines are measured where the step asks for its next
batch, never guessed inside the loader).

The step (a backend's) adds one wait per batch it takes; the worker marks where the
measured window opens (:meth:`InputTimer.open`) and, after it, reads the window's waits
beside its step times (:meth:`InputTimer.window`). Each step time includes its wait.

The loader's CPU use is read over the same window, as evidence for the input-bound verdict
(:func:`accelbench.verdicts.input_bound`): the CPU time of this process's child processes
(the DataLoader's workers) at the window's open and close, or with 0 workers the training
thread's own CPU time while it waited (it prepares the batches itself).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from accelbench.input_stats import InputStats, LoaderCpu
from accelbench.stats import bootstrap_median_ci

METHOD = ("time from asking the loader for the next batch until it is on the step's "
          "device, inside each timed step (the step time includes it)")
CPU_WORKERS = ("CPU time (user + system) of this process's child processes (the loader's "
               "workers) read at the measured window's open and close, over its wall time")
CPU_IN_PROCESS = ("CPU time of the training thread while it waited for its batches (with "
                  "0 workers it prepares them itself), over the window's wall time")
_NOT_LOADER = ("compile_worker",)
"""Words in the command line of child processes that are not the loader's (torch
inductor's compile pool)."""


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask), training included."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def children_cpu_s() -> dict[int, float] | str:
    """CPU seconds of each child process of this one (by pid), or why they cannot be read."""
    try:
        import psutil
    except ImportError:
        return "psutil is not installed (pip install psutil)"
    out: dict[int, float] = {}
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error as exc:
        return f"the child processes could not be listed ({type(exc).__name__})"
    for child in children:
        try:
            if any(w in " ".join(child.cmdline()) for w in _NOT_LOADER):
                continue
            t = child.cpu_times()
            out[child.pid] = t.user + t.system
        except psutil.Error:  # gone, or not ours to read: not counted
            continue
    return out


class InputTimer:
    """Waits for batches, in the order the step took them."""

    def __init__(self, facts: dict[str, Any]) -> None:
        self.facts = dict(facts)
        """What the record says about the pipeline (source, path, layout, workers ...)."""
        self.waits_s: list[float] = []
        self.wait_cpu_s: list[float] = []
        """The training thread's CPU seconds during each wait."""
        self._start = 0
        self._opened: tuple[float, dict[int, float] | str] | None = None

    def take(self, fetch: Callable[[], Any]) -> Any:
        """``fetch()``'s batch, its wait added."""
        c0, t0 = time.thread_time(), time.perf_counter()
        batch = fetch()
        self.waits_s.append(time.perf_counter() - t0)
        self.wait_cpu_s.append(time.thread_time() - c0)
        return batch

    def open(self) -> None:
        """The measured window starts with the next batch taken."""
        self._start = len(self.waits_s)
        self._opened = (time.perf_counter(),
                        children_cpu_s() if self._workers() > 0 else {})

    def _workers(self) -> int:
        return int(self.facts.get("loader_workers") or 0)

    def window_waits(self, steps: int) -> list[float]:
        """The measured window's waits (the first ``steps`` batches after :meth:`open`)."""
        return self.waits_s[self._start:self._start + steps]

    def loader_cpu(self, steps: int) -> LoaderCpu:
        """The loader's CPU use from :meth:`open` until now."""
        cores = usable_cores()
        if self._opened is None:
            return LoaderCpu(cores_available=cores,
                             unavailable="the measured window's opening was not marked")
        t_open, before = self._opened
        wall = time.perf_counter() - t_open
        if self._workers() == 0:
            cpu = sum(self.wait_cpu_s[self._start:self._start + steps])
            return LoaderCpu(cpu_s=cpu, wall_s=wall, cores_available=cores, processes=0,
                             method=CPU_IN_PROCESS)
        after = children_cpu_s()
        if isinstance(before, str) or isinstance(after, str):
            reason = before if isinstance(before, str) else after
            return LoaderCpu(cores_available=cores, unavailable=str(reason))
        both = sorted(set(before) & set(after))
        if not both:
            return LoaderCpu(cores_available=cores, unavailable=(
                "no loader worker process lived through the measured window"))
        method = CPU_WORKERS
        if len(both) != self._workers():
            method += (f"; {len(both)} child processes read, the loader has "
                       f"{self._workers()} workers")
        return LoaderCpu(cpu_s=sum(after[p] - before[p] for p in both), wall_s=wall,
                         cores_available=cores, processes=len(both), method=method)

    def window(self, steps: int, times_s: Sequence[float], block_steps: Sequence[int] = ()
               ) -> InputStats:
        """The record's ``input``: the facts, each measured step's wait, their median and
        its 95% CI, the stall fraction (waits over step time, the window's sums) and the
        loader's CPU use. ``times_s``/``block_steps``: the loop's series (per-step means
        of blocks where ``block_steps`` is given)."""
        waits = self.window_waits(steps)
        total = (sum(t * k for t, k in zip(times_s, block_steps, strict=False))
                 if block_steps else sum(times_s))
        stats = InputStats.from_dict({**self.facts, "method": METHOD, "wait_s": waits})
        if not waits:
            return stats
        return dataclasses.replace(
            stats, wait_median_s=statistics.median(waits),
            wait_median_ci95_s=bootstrap_median_ci(waits),
            wait_mean_s=sum(waits) / len(waits),
            stall_fraction=sum(waits) / total if total > 0 else None,
            loader_cpu=self.loader_cpu(steps))

def stall_line(record: InputStats | None) -> str | None:
    """``input  generated, 2 workers: waited 1.2 ms/step (median; CI 1.0-1.4), stall
    3.1% of the step``: ``run``'s summary line, or None without an ``input`` section."""
    if record is None or record.wait_median_s is None:
        return None
    from accelbench.durations import fmt_time

    lo, hi = record.wait_median_ci95_s or (None, None)
    ci = f"; CI {fmt_time(lo, 2)}-{fmt_time(hi, 2)}" if lo is not None else ""
    frac = record.stall_fraction
    share = f", stall {100 * frac:.1f}% of the step time" if frac is not None else ""
    workers = record.loader_workers
    return (f"{record.source}, {workers} loader worker{'' if workers == 1 else 's'}: "
            f"waited "
            f"{fmt_time(record.wait_median_s, 2)}/step (median{ci}){share}")


def cpu_line(record: InputStats | None) -> str | None:
    """``loader CPU 1.6 of 2 cores (2 worker processes)``, or why unavailable; None
    without an ``input`` section or in records from before it was read."""
    cpu = record.loader_cpu if record is not None else None
    if cpu is None:
        return None
    used = cpu.cores_used
    if used is None:
        return f"loader CPU unavailable: {cpu.unavailable or 'not read'}"
    who = (f"{cpu.processes} worker process{'' if cpu.processes == 1 else 'es'}"
           if cpu.processes else "in the training process")
    return f"loader CPU {used:.3g} of {cpu.cores_available} cores ({who})"
