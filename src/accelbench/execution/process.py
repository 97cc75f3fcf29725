"""Parent side of case isolation: start a worker, watch it, turn every outcome into a Result.

A worker that runs past its timeout is killed (with its process group) and
recorded as ``timeout``; one that dies without reporting (segfault, abort,
``os._exit``) is recorded as ``error`` with its exit signal and the tail of
its stderr. Nothing a case does can take the suite down.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.execution import child
from accelbench.execution.request import CaseRequest, utc_now
from accelbench.result import Result, Status
from accelbench.spec import RunSpec
from accelbench.version import __version__


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
    draft = Result(id=result_id or new_result_id(), suite_id=suite_id, status="ok",
                   spec=spec, sample_unit=sample_unit, samples_per_step=samples_per_step,
                   started_at=utc_now(), accelbench_version=__version__)
    request = CaseRequest(draft=draft, plugins=tuple(plugins), flops=known_flops,
                          parent_pid=os.getpid())
    # A case of many ranks: the isolated child is the launcher of this node's ranks
    # (execution/launch.py), watched exactly like a single worker.
    module = ("accelbench.execution.launch" if spec.topology.distributed
              else "accelbench.execution.worker")
    proc, err_path = child.spawn(module, log_prefix="accelbench-worker-")
    try:
        return _watch(proc, request, err_path, on_progress)
    finally:
        if proc.poll() is None:
            child.kill_group(proc)
            proc.wait()
        child.remove_log(err_path)


@dataclass(slots=True)
class _Watched:
    """What the parent saw of a worker: its record (None if it sent none), whether it ran
    out of time, its last phase and the parameter count a phase reported."""

    record: dict[str, Any] | None = None
    timed_out: bool = False
    phase: str = "start"
    param_count: int | None = None


def _listen(proc: subprocess.Popen[str], timeout_s: float,
            on_progress: ProgressCallback | None) -> _Watched:
    """Read the worker's messages until it closes its channel or runs out of time (then
    it is killed with its process group)."""
    assert proc.stdout is not None  # noqa: S101 - Popen contract
    q: child.Messages = queue.Queue()
    threading.Thread(target=child.read_messages, args=(proc.stdout, q), daemon=True).start()
    deadline = time.monotonic() + timeout_s
    seen = _Watched()
    if on_progress:
        on_progress(Progress(seen.phase))
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            seen.timed_out = True
            child.kill_group(proc)
            return seen
        try:
            msg = q.get(timeout=min(0.5, remaining))
        except queue.Empty:
            continue
        if msg is None:
            return seen
        kind = msg.get("type")
        if kind == "result":
            seen.record = msg["record"]
        elif kind == "phase":
            seen.phase = msg["phase"]
            seen.param_count = msg.get("param_count", seen.param_count)
            if on_progress:
                on_progress(Progress(seen.phase))
        elif kind == "progress" and on_progress:
            on_progress(
                Progress(
                    msg["phase"], msg["iterations"], msg["samples_per_s"], msg["elapsed_s"]
                )
            )


def _watch(
    proc: subprocess.Popen[str],
    request: CaseRequest,
    err_path: str,
    on_progress: ProgressCallback | None,
) -> Result:
    child.send_request(proc, json.dumps(request.to_dict()))
    spec, draft = request.spec, request.draft
    seen = _listen(proc, spec.policy.timeout_s, on_progress)
    child.reap(proc, grace_s=30)
    if seen.record is not None and not seen.timed_out:
        # The worker's record is the draft completed (Result.to_dict); the distributed
        # launcher's answer to a failed launch carries only what it knows (status, error,
        # ranks), and the draft gives the rest.
        return Result.from_dict({**draft.to_dict(), "finished_at": utc_now(), **seen.record})
    tail = child.tail(err_path, _STDERR_TAIL_CHARS)
    status: Status
    if seen.timed_out:
        status = "timeout"
        error = f"timed out after {spec.policy.timeout_s:g} s in phase {seen.phase!r}"
    else:
        status = "error"
        last = child.last_line(tail)
        error = f"worker {child.how_it_died(proc.returncode)} in phase {seen.phase!r} " \
            "without a result" + (f": {last}" if last else "")
    if on_progress:
        on_progress(Progress("done"))
    return dataclasses.replace(draft, status=status, error=error, finished_at=utc_now(),
                               param_count=seen.param_count,
                               machine={"worker_stderr_tail": tail} if tail else {})
