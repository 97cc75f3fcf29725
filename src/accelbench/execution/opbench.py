"""Running operator cases (:mod:`accelbench.opbench`) with the framework-neutral measurement
loop: execution's part of the operator benchmarks.

:func:`run_cases_isolated` (what ``accelbench ops`` uses) runs the cases in an
isolated worker process (:mod:`accelbench.isolation.isolate`), each within the
policy's timeout: a case that hangs is killed and stored as ``timeout``, one that
crashes the worker as ``error``, and the remaining cases go on in a fresh worker.
:func:`run_case` and :func:`run_cases` run in the calling process (the worker's side).

The framework's part (allocating tensors, one execution, synchronisation,
math mode) comes from the backend's ``ops()``. Each case allocates its
tensors on the device, is timed by :func:`accelbench.execution.measure.run_loop`
(warm-up, device-synchronised iterations, adaptive stop) and releases its
memory before the next one. An
out-of-memory failure becomes status ``oom``, any other failure ``error``;
neither stops the remaining cases.
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from accelbench.backends.registry import DEFAULT_FRAMEWORK
from accelbench.errors import UnsupportedError
from accelbench.execution.measure import Loop, ProgressFn, run_loop
from accelbench.opbench.cases import OpCase
from accelbench.opbench.precision import TRAINING_TO_OP_PRECISION, op_precision
from accelbench.opbench.result import OpResult
from accelbench.spec import MeasurementPolicy

Step = Callable[[], None]


def op_precisions(device: str, framework: str = DEFAULT_FRAMEWORK) -> tuple[str, ...]:
    """Operator precisions ``device`` supports with ``framework`` (the device must exist)."""
    from accelbench.isolation.ask import supported_precisions

    return tuple(TRAINING_TO_OP_PRECISION[p] for p in supported_precisions(framework, device))


def check_op_precision(device: str, precision: str, framework: str = DEFAULT_FRAMEWORK) -> None:
    """Refuse a precision the device cannot run.

    Raises:
        UnsupportedError: with the supported list.
    """
    ok = op_precisions(device, framework)
    if op_precision(precision) not in ok:
        raise UnsupportedError(
            f"precision {precision} is not supported on {device}; supported: {', '.join(ok)}"
        )


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True, kw_only=True)
class OpRun:
    """Where and how operator cases run, and what each of their records carries."""

    device: str
    """``cpu`` or ``cuda:N``, already checked."""
    policy: MeasurementPolicy
    """Warm-up and stopping rules; ``timeout_s`` bounds each case of an isolated run only."""
    framework: str = DEFAULT_FRAMEWORK
    """The backend that runs the operators."""
    threads: int | None = None
    """CPU threads (None: leave the framework's setting)."""
    device_name: str | None = None
    """Model name stored with each record."""
    tag: str = ""
    """Free text stored with each record."""
    machine: dict[str, Any] = field(default_factory=dict)
    """Machine description stored with each record."""
    measured_peaks: dict[str, float] = field(default_factory=dict)
    """Measured GEMM peak per operator precision, where known (a record's % of it)."""
    theoretical_peaks: dict[str, float | None] = field(default_factory=dict)
    """Theoretical peak per operator precision, where known."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, for the isolated worker."""
        return {**dataclasses.asdict(self), "policy": dataclasses.asdict(self.policy)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OpRun:
        """The inverse of :meth:`to_dict`."""
        return cls(**{**data, "policy": MeasurementPolicy(**data["policy"])})


def run_case(case: OpCase, run: OpRun, progress: ProgressFn | None = None) -> OpResult:
    """Measure one operator case as ``run`` says and return its record (``progress`` is
    called as the loop advances)."""
    from accelbench.backends import get_backend
    from accelbench.stats import bootstrap_median_ci

    device = run.device
    backend = get_backend(run.framework)
    ops = backend.ops()
    common: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "case": case,
        "device": device,
        "device_name": run.device_name,
        "hostname": socket.gethostname(),
        "threads": ops.threads(run.threads),
        "framework": backend.name,
        "tag": run.tag,
        "machine": run.machine,
        "created_at": _utc_now(),
    }
    sync = ops.synchronizer(device)
    try:
        with ops.math_mode(case.precision):
            step = ops.build_step(case, device)
            timings = run_loop(Loop(step, sync, run.policy, 1, progress))
        del step
    except Exception as exc:  # one failing case must not stop the others
        ops.release(device)
        return OpResult(
            **common,
            status="oom" if backend.is_oom(exc) else "error",
            error=f"{type(exc).__name__}: {exc}".strip().splitlines()[0],
        )
    ops.release(device)
    times = timings.times_s
    import numpy as np

    median = float(np.median(times))
    # No confidence interval from fewer than 3 samples (it would claim a precision
    # the data cannot have).
    low, high = bootstrap_median_ci(times) if len(times) >= 3 else (None, None)
    achieved = case.flops / median

    def pct(peak: float | None) -> float | None:
        return 100.0 * achieved / peak if peak else None

    return OpResult(
        **common,
        status="ok",
        times_s=tuple(times),
        warmup_times_s=tuple(timings.warmup_times_s),
        stop_reason=timings.stop_reason,
        median_s=median,
        ci_low_s=low,
        ci_high_s=high,
        achieved_flop_per_s=achieved,
        pct_measured_peak=pct(run.measured_peaks.get(case.precision)),
        pct_theoretical_peak=pct(run.theoretical_peaks.get(case.precision)),
    )


def run_cases(
    cases: Sequence[OpCase],
    run: OpRun,
    *,
    on_result: Callable[[OpResult], None] | None = None,
    on_start: Callable[[OpCase], None] | None = None,
    progress: ProgressFn | None = None,
) -> list[OpResult]:
    """Run ``cases`` one after another; ``on_result`` sees each record as it is made."""
    out: list[OpResult] = []
    for case in cases:
        if on_start is not None:
            on_start(case)
        res = run_case(case, run, progress)
        if on_result is not None:
            on_result(res)
        out.append(res)
    return out


def run_cases_child(
    cases: Sequence[dict[str, Any]], run: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """Worker side of :func:`run_cases_isolated`: a ``start`` event, then a ``result``, per case."""
    how = OpRun.from_dict(run)
    for index, data in enumerate(cases):
        yield {"event": "start", "index": index}
        res = run_case(OpCase(**data), how)
        yield {"event": "result", "index": index, "record": res.to_dict()}


def _case_dict(case: OpCase) -> dict[str, Any]:
    return {"op": case.op, "shape": dict(case.shape), "precision": case.precision,
            "pass_": case.pass_}


def run_cases_isolated(
    cases: Sequence[OpCase],
    run: OpRun,
    *,
    on_result: Callable[[OpResult], None] | None = None,
    on_start: Callable[[OpCase], None] | None = None,
) -> list[OpResult]:
    """Run ``cases`` in an isolated worker, each within the policy's ``timeout_s``.

    A case that runs past the timeout becomes a ``timeout`` record, one during which
    the worker dies (a segfault, an abort, an exit) an ``error`` record with the
    worker's last stderr line; the following cases go on in a fresh worker. Every
    record, failed or not, is passed to ``on_result`` as it is made.

    Raises:
        AccelbenchError: what the worker raised outside a case (an unsupported device).
    """
    from accelbench.isolation.isolate import IsolatedError, stream

    todo = list(cases)
    out: list[OpResult] = []

    def emit(res: OpResult) -> None:
        if on_result is not None:
            on_result(res)
        out.append(res)

    while todo:
        started, finished = -1, 0
        request = {"cases": [_case_dict(c) for c in todo], "run": run.to_dict()}
        try:
            for event in stream("accelbench.execution.opbench:run_cases_child", request,
                                what="operator worker", timeout_s=run.policy.timeout_s,
                                warm=run.framework):
                if event["event"] == "start":
                    started = int(event["index"])
                    if on_start is not None:
                        on_start(todo[started])
                else:
                    finished += 1
                    emit(OpResult.from_dict(event["record"]))
            todo = []
        except IsolatedError as exc:
            # Results arrive in order, so the case the worker was on is the first without one.
            if started < 0 and exc.kind == "raised":
                # It failed before its first case: every case would fail the same way.
                failed, todo = todo, []
            else:
                failed, todo = todo[finished:finished + 1], todo[finished + 1:]
            for case in failed:
                emit(OpResult(
                    id=uuid.uuid4().hex, case=case, device=run.device,
                    device_name=run.device_name, hostname=socket.gethostname(),
                    threads=run.threads, framework=run.framework, tag=run.tag,
                    machine=run.machine, created_at=_utc_now(),
                    status="timeout" if exc.kind == "timeout" else "error",
                    error=exc.detail,
                ))
    return out
