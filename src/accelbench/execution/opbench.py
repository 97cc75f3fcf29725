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


def run_case(  # noqa: PLR0913
    case: OpCase,
    device: str,
    policy: MeasurementPolicy,
    *,
    measured_peak_flop_per_s: float | None = None,
    theoretical_peak_flop_per_s: float | None = None,
    device_name: str | None = None,
    threads: int | None = None,
    tag: str = "",
    machine: dict[str, Any] | None = None,
    progress: ProgressFn | None = None,
    framework: str = DEFAULT_FRAMEWORK,
) -> OpResult:
    """Measure one operator case on ``device`` (already checked) and return its record.

    Args:
        case: What to run.
        device: ``cpu`` or ``cuda:N``.
        policy: Warm-up and stopping rules (``timeout_s`` is not enforced in-process).
        measured_peak_flop_per_s: Measured GEMM peak of the case's precision, if known.
        theoretical_peak_flop_per_s: Theoretical peak of the case's precision, if known.
        device_name: Model name stored with the record.
        threads: CPU threads (None: leave the framework's setting).
        tag: Free text stored with the record.
        machine: Machine description stored with the record.
        progress: Called as the loop advances.
        framework: The backend that runs the operator.
    """
    from accelbench.backends import get_backend
    from accelbench.stats import bootstrap_median_ci

    backend = get_backend(framework)
    ops = backend.ops()
    common: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "case": case,
        "device": device,
        "device_name": device_name,
        "hostname": socket.gethostname(),
        "threads": ops.threads(threads),
        "framework": backend.name,
        "tag": tag,
        "machine": machine or {},
        "created_at": _utc_now(),
    }
    sync = ops.synchronizer(device)
    try:
        with ops.math_mode(case.precision):
            step = ops.build_step(case, device)
            timings = run_loop(Loop(step, sync, policy, 1, progress))
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
        pct_measured_peak=pct(measured_peak_flop_per_s),
        pct_theoretical_peak=pct(theoretical_peak_flop_per_s),
    )


def run_cases(  # noqa: PLR0913
    cases: Sequence[OpCase],
    device: str,
    policy: MeasurementPolicy,
    *,
    measured_peaks: dict[str, float] | None = None,
    theoretical_peaks: dict[str, float | None] | None = None,
    device_name: str | None = None,
    threads: int | None = None,
    tag: str = "",
    machine: dict[str, Any] | None = None,
    on_result: Callable[[OpResult], None] | None = None,
    on_start: Callable[[OpCase], None] | None = None,
    progress: ProgressFn | None = None,
    framework: str = DEFAULT_FRAMEWORK,
) -> list[OpResult]:
    """Run ``cases`` one after another; ``on_result`` sees each record as it is made."""
    measured_peaks = measured_peaks or {}
    theoretical_peaks = theoretical_peaks or {}
    out: list[OpResult] = []
    for case in cases:
        if on_start is not None:
            on_start(case)
        res = run_case(
            case, device, policy,
            measured_peak_flop_per_s=measured_peaks.get(case.precision),
            theoretical_peak_flop_per_s=theoretical_peaks.get(case.precision),
            device_name=device_name, threads=threads, tag=tag, machine=machine,
            progress=progress, framework=framework,
        )
        if on_result is not None:
            on_result(res)
        out.append(res)
    return out


def run_cases_child(
    cases: Sequence[dict[str, Any]],
    device: str,
    policy: dict[str, Any],
    **kwargs: Any,
) -> Iterator[dict[str, Any]]:
    """Worker side of :func:`run_cases_isolated`: a ``start`` event, then a ``result``, per case."""
    pol = MeasurementPolicy(**policy)
    measured = kwargs.pop("measured_peaks", None) or {}
    theoretical = kwargs.pop("theoretical_peaks", None) or {}
    for index, data in enumerate(cases):
        case = OpCase(**data)
        yield {"event": "start", "index": index}
        res = run_case(
            case, device, pol,
            measured_peak_flop_per_s=measured.get(case.precision),
            theoretical_peak_flop_per_s=theoretical.get(case.precision),
            **kwargs,
        )
        yield {"event": "result", "index": index, "record": res.to_dict()}


def _case_dict(case: OpCase) -> dict[str, Any]:
    return {"op": case.op, "shape": dict(case.shape), "precision": case.precision,
            "pass_": case.pass_}


def run_cases_isolated(  # noqa: PLR0913
    cases: Sequence[OpCase],
    device: str,
    policy: MeasurementPolicy,
    *,
    measured_peaks: dict[str, float] | None = None,
    theoretical_peaks: dict[str, float | None] | None = None,
    device_name: str | None = None,
    threads: int | None = None,
    tag: str = "",
    machine: dict[str, Any] | None = None,
    on_result: Callable[[OpResult], None] | None = None,
    on_start: Callable[[OpCase], None] | None = None,
    framework: str = DEFAULT_FRAMEWORK,
) -> list[OpResult]:
    """Run ``cases`` in an isolated worker, each within ``policy.timeout_s``.

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
        request = {
            "cases": [_case_dict(c) for c in todo], "device": device,
            "policy": dataclasses.asdict(policy),
            "measured_peaks": measured_peaks or {}, "theoretical_peaks": theoretical_peaks or {},
            "device_name": device_name, "threads": threads, "tag": tag,
            "machine": machine or {}, "framework": framework,
        }
        try:
            for event in stream("accelbench.execution.opbench:run_cases_child", request,
                                what="operator worker", timeout_s=policy.timeout_s,
                                warm=framework):
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
                    id=uuid.uuid4().hex, case=case, device=device, device_name=device_name,
                    hostname=socket.gethostname(), threads=threads, framework=framework,
                    tag=tag, machine=machine or {}, created_at=_utc_now(),
                    status="timeout" if exc.kind == "timeout" else "error",
                    error=exc.detail,
                ))
    return out
