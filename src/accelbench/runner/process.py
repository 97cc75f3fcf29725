"""Parent side of case isolation: start a worker, watch it, turn every outcome into a Result.

A worker that runs past its timeout is killed (with its process group) and
recorded as ``timeout``; one that dies without reporting (segfault, abort,
``os._exit``) is recorded as ``error`` with its exit signal and the tail of
its stderr. Nothing a case does can take the suite down.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from accelbench import __version__
from accelbench.result import EnergyReading, Result, Stats, Status
from accelbench.runner import child
from accelbench.spec import RunSpec


@dataclass(frozen=True, slots=True)
class Progress:
    """A progress report from a running worker."""

    phase: str
    """``start``, ``build``, ``warmup``, ``measure`` or ``done``."""
    iterations: int = 0
    samples_per_s: float = 0.0
    elapsed_s: float = 0.0


ProgressCallback = Callable[[Progress], None]

_STDERR_TAIL_CHARS = 2000


def new_result_id() -> str:
    """A fresh, sortable-enough unique id for a record."""
    return uuid.uuid4().hex[:12]


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def run_case(
    spec: RunSpec,
    *,
    samples_per_step: int,
    sample_unit: str,
    plugins: Sequence[str] = (),
    suite_id: str | None = None,
    on_progress: ProgressCallback | None = None,
    result_id: str | None = None,
    known_flops: dict[str, Any] | None = None,
) -> Result:
    """Measure one case in a fresh worker process and return its Result (never raises
    for what happens inside the case)."""
    rid = result_id or new_result_id()
    request = {
        "spec": spec.to_dict(),
        "plugins": list(plugins),
        "flops": known_flops,
        "parent_pid": os.getpid(),
    }
    started_at = _utc_now()
    # A case of many ranks: the isolated child is the launcher of this node's ranks
    # (runner/launch.py), watched exactly like a single worker.
    module = ("accelbench.runner.launch" if spec.topology.distributed
              else "accelbench.runner.worker")
    proc, err_path = child.spawn(module, log_prefix="accelbench-worker-")
    try:
        return _watch(
            proc, request, spec, rid, suite_id, started_at, err_path,
            samples_per_step, sample_unit, on_progress,
        )
    finally:
        if proc.poll() is None:
            child.kill_group(proc)
            proc.wait()
        child.remove_log(err_path)


def _watch(
    proc: subprocess.Popen[str],
    request: dict[str, Any],
    spec: RunSpec,
    rid: str,
    suite_id: str | None,
    started_at: str,
    err_path: str,
    samples_per_step: int,
    sample_unit: str,
    on_progress: ProgressCallback | None,
) -> Result:
    assert proc.stdout is not None  # noqa: S101 - Popen contract
    child.send_request(proc, json.dumps(request))
    q: child.Messages = queue.Queue()
    threading.Thread(target=child.read_messages, args=(proc.stdout, q), daemon=True).start()
    deadline = time.monotonic() + spec.policy.timeout_s
    record: dict[str, Any] | None = None
    timed_out = False
    phase = "start"
    param_count: int | None = None
    if on_progress:
        on_progress(Progress(phase))
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            child.kill_group(proc)
            break
        try:
            msg = q.get(timeout=min(0.5, remaining))
        except queue.Empty:
            continue
        if msg is None:
            break
        kind = msg.get("type")
        if kind == "result":
            record = msg["record"]
        elif kind == "phase":
            phase = msg["phase"]
            param_count = msg.get("param_count", param_count)
            if on_progress:
                on_progress(Progress(phase))
        elif kind == "progress" and on_progress:
            on_progress(
                Progress(
                    msg["phase"], msg["iterations"], msg["samples_per_s"], msg["elapsed_s"]
                )
            )
    child.reap(proc, grace_s=30)
    base: dict[str, Any] = {
        "id": rid,
        "spec": spec,
        "suite_id": suite_id,
        "sample_unit": sample_unit,
        "samples_per_step": samples_per_step,
        "started_at": started_at,
        "accelbench_version": __version__,
    }
    if record is not None and not timed_out:
        stats = record.get("stats")
        return Result(
            **base,
            status=record["status"],
            error=record.get("error"),
            param_count=record.get("param_count"),
            stats=Stats.from_dict(stats) if stats else None,
            iteration_times_s=tuple(record.get("iteration_times_s") or ()),
            warmup_times_s=tuple(record.get("warmup_times_s") or ()),
            build_time_s=record.get("build_time_s"),
            compile_s=record.get("compile_s"),
            peak_memory_bytes=record.get("peak_memory_bytes"),
            peak_memory_source=record.get("peak_memory_source", ""),
            final_loss=record.get("final_loss"),
            energy=tuple(EnergyReading.from_dict(e) for e in record.get("energy") or ()),
            power_timeline=record.get("power_timeline") or {},
            forward_flop_per_sample=record.get("forward_flop_per_sample"),
            flop_per_sample=record.get("flop_per_sample"),
            flop_method=record.get("flop_method", ""),
            backend_extra=record.get("backend_extra") or {},
            noise=record.get("noise") or {},
            machine=record.get("machine") or {},
            ranks=record.get("ranks") or {},
            finished_at=record.get("finished_at") or _utc_now(),
        )
    tail = child.tail(err_path, _STDERR_TAIL_CHARS)
    status: Status
    if timed_out:
        status = "timeout"
        error = f"timed out after {spec.policy.timeout_s:g} s in phase {phase!r}"
    else:
        status = "error"
        last = child.last_line(tail)
        error = f"worker {child.how_it_died(proc.returncode)} in phase {phase!r} without a " \
            "result" + (f": {last}" if last else "")
    if on_progress:
        on_progress(Progress("done"))
    return Result(**base, status=status, error=error, finished_at=_utc_now(),
                  param_count=param_count,
                  machine={"worker_stderr_tail": tail} if tail else {})
