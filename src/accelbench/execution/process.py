"""Parent side of case isolation: start a worker, watch it, turn every outcome into a Result.

A worker that runs past its timeout is killed (with its process group) and
recorded as ``timeout``; one that dies without reporting (segfault, abort,
``os._exit``) is recorded as ``error`` with its exit signal and the tail of
its stderr. Nothing a case does can take the suite down.

Workers of one rank are forked by the framework's warm server
(:mod:`accelbench.isolation.forkserver`); a case of many ranks starts a fresh launcher.
The worker checks its own device and precision first: :func:`prechecked` starts the
worker of ``run``'s case before the store is opened, raises its refusal (the message
the probe would have given, exit 2 in the CLI) and holds it until :func:`run_case`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.execution.request import CaseRequest, utc_now
from accelbench.isolation import ask, child
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


@dataclass(slots=True)
class _Worker:
    """A started worker: the process, its stderr log, the queue of its messages."""

    proc: child.ChildProcess
    err_path: str
    messages: child.Messages = field(default_factory=queue.Queue)

    def close(self) -> None:
        if self.proc.poll() is None:
            child.kill_group(self.proc)
            self.proc.wait()
        child.remove_log(self.err_path)


def _start(spec: RunSpec, plugins: Sequence[str], *, hold: bool = False) -> _Worker:
    """Start the worker of ``spec``; ``hold``: send it the check alone (the spec, plugins,
    our pid), the request to follow."""
    # A case of many ranks: the isolated child is the launcher of this node's ranks
    # (execution/launch.py), watched exactly like a single worker, started fresh.
    if spec.topology.distributed:
        proc, err_path = child.spawn("accelbench.execution.launch",
                                     log_prefix="accelbench-worker-")
    else:
        proc, err_path = child.spawn("accelbench.execution.worker",
                                     log_prefix="accelbench-worker-", warm=spec.framework)
    worker = _Worker(proc, err_path)
    assert proc.stdout is not None  # noqa: S101 - Popen contract
    threading.Thread(target=child.read_messages, args=(proc.stdout, worker.messages),
                     daemon=True).start()
    if hold:
        check = {"spec": spec.to_dict(), "plugins": list(plugins), "parent_pid": os.getpid()}
        child.send_request(proc, json.dumps(check) + "\n", close=False)
    return worker


_HELD: dict[tuple[str, tuple[str, ...]], _Worker] = {}


@contextlib.contextmanager
def prechecked(spec: RunSpec, plugins: Sequence[str] = ()) -> Iterator[None]:
    """Start the worker of ``spec`` now and let it check its device and precision; the
    next :func:`run_case` of ``spec`` inside the block takes it (a worker not taken is
    killed at the end). A case of many ranks is checked through the probe instead.

    Raises:
        UnsupportedError, ConfigError: the worker's refusal (the probe's messages), or
            the framework failing to start.
    """
    if spec.topology.distributed:
        ask.check_device(spec.framework, spec.device)
        ask.check_precision(spec.framework, spec.device, spec.precision)
        if spec.device.startswith("cuda"):
            ask.check_device(spec.framework, f"cuda:{spec.topology.nproc_per_node - 1}")
        yield
        return
    ask.check_installed(spec.framework)  # the probe's line, without a framework import
    key = (json.dumps(spec.to_dict(), sort_keys=True), tuple(plugins))
    worker = _start(spec, plugins, hold=True)
    try:
        _await_check(worker, spec)
        _HELD[key] = worker
        yield
    finally:
        if _HELD.get(key) is worker:
            del _HELD[key]
        worker.close()


def _await_check(worker: _Worker, spec: RunSpec) -> None:
    """Wait for the worker's ``checked``; raise its refusal, or its death at the start."""
    from accelbench.errors import UnsupportedError

    deadline = time.monotonic() + spec.policy.timeout_s
    while True:
        try:
            msg = worker.messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            msg = None
        if msg is None:  # died (or hung) before it could check
            if worker.proc.poll() is None:
                child.kill_group(worker.proc)
            child.reap(worker.proc, grace_s=10)
            last = child.last_line(child.tail(worker.err_path))
            raise UnsupportedError(
                f"{spec.framework} failed to start "
                f"({child.how_it_died(worker.proc.returncode)})" + (f": {last}" if last else ""))
        if msg.get("type") == "checked":
            if msg.get("devices") is not None:
                ask.remember(spec.framework, msg["devices"])
            return
        if msg.get("type") == "refused":
            raise _refusal(msg)


def _refusal(msg: dict[str, Any]) -> Exception:
    """The exception a worker's ``refused`` names (an accelbench error class)."""
    from accelbench.errors import UnsupportedError

    cls = child.accelbench_error(str(msg.get("module", "")), str(msg.get("cls")))
    return (cls or UnsupportedError)(str(msg.get("message", "")))


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
    held = _HELD.pop((json.dumps(spec.to_dict(), sort_keys=True), tuple(plugins)), None)
    worker = held or _start(spec, plugins)
    try:
        return _watch(worker, request, on_progress)
    finally:
        worker.close()


@dataclass(slots=True)
class _Watched:
    """What the parent saw of a worker: its record (None if it sent none), whether it ran
    out of time, its last phase and the parameter count a phase reported."""

    record: dict[str, Any] | None = None
    timed_out: bool = False
    phase: str = "start"
    param_count: int | None = None
    refused: str | None = None


def _listen(worker: _Worker, timeout_s: float,
            on_progress: ProgressCallback | None) -> _Watched:
    """Read the worker's messages until it closes its channel or runs out of time (then
    it is killed with its process group)."""
    proc, q = worker.proc, worker.messages
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
        elif kind == "refused":  # planned as runnable, refused here: the case's error
            seen.refused = str(msg.get("message", ""))
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


def _watch(worker: _Worker, request: CaseRequest, on_progress: ProgressCallback | None
           ) -> Result:
    proc, err_path = worker.proc, worker.err_path
    child.send_request(proc, json.dumps(request.to_dict()) + "\n")
    spec, draft = request.spec, request.draft
    seen = _listen(worker, spec.policy.timeout_s, on_progress)
    child.reap(proc, grace_s=30)
    if seen.record is not None and not seen.timed_out:
        # The worker's record is the draft completed (Result.to_dict); the distributed
        # launcher's answer to a failed launch carries only what it knows (status, error,
        # ranks), and the draft gives the rest.
        return Result.from_dict({**draft.to_dict(), "finished_at": utc_now(), **seen.record})
    tail = child.tail(err_path, _STDERR_TAIL_CHARS)
    status: Status
    if seen.refused is not None:
        status, error = "error", f"refused by the worker: {seen.refused}"
    elif seen.timed_out:
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
