"""The worker process: measures exactly one case and reports it on a private channel.

Started by :mod:`accelbench.runner.process` as ``python -m accelbench.runner.worker``
with a JSON request on stdin. Messages go out as JSON lines on a duplicate of
the original stdout; the worker's own fd 1 is pointed at stderr so that
anything a model prints cannot corrupt the channel.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import time
import traceback
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any

from accelbench import __version__

if TYPE_CHECKING:
    from accelbench.meters.session import MeterSession
    from accelbench.spec import RunSpec


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _die_with_parent(parent_pid: int) -> None:
    # A suite killed with SIGKILL must not leave workers running on the machine.
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if os.getppid() != parent_pid:
        os._exit(1)


class Channel:
    """JSON-lines messages to the parent process."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def send(self, kind: str, **payload: Any) -> None:
        self._stream.write(json.dumps({"type": kind, **payload}) + "\n")
        self._stream.flush()


def _measure(request: dict[str, Any], chan: Channel, out: dict[str, Any]) -> None:
    """Build, warm up and time the case, filling ``out`` as it goes.

    Filled in place so that a case failing late (OOM in the first step) still
    reports what was known before it failed (parameter count, build time).
    """
    from accelbench.backends import get_backend
    from accelbench.runner.measure import run_loop
    from accelbench.spec import RunSpec
    from accelbench.stats import compute_stats
    from accelbench.workloads.registry import get_implementation, load_plugin

    spec = RunSpec.from_dict(request["spec"])
    backend = get_backend(spec.framework)
    backend.prepare_process(spec)  # before a plugin or a model module imports the framework
    for origin in request.get("plugins", []):
        load_plugin(origin)
    impl = get_implementation(spec.workload, spec.framework)

    chan.send("phase", phase="build")
    t0 = time.perf_counter()
    step = backend.build_step(spec, impl)
    step.synchronize()
    out["build_time_s"] = time.perf_counter() - t0
    out["param_count"] = step.param_count
    if step.compile_s is not None:
        out["compile_s"] = step.compile_s
    samples = spec.batch_size

    def progress(phase: str, n: int, tput: float, elapsed: float) -> None:
        chan.send("progress", phase=phase, iterations=n, samples_per_s=tput, elapsed_s=elapsed)

    with _meter_session(spec) as session:
        if session is not None and any(s.readable for s in session.describe()):
            chan.send("phase", phase="idle")
            session.measure_idle()

        def open_window() -> None:
            chan.send("phase", phase="measure")
            if session is not None:
                session.start()

        chan.send("phase", phase="warmup", param_count=step.param_count)
        timings = run_loop(
            step.step, step.synchronize, spec.policy, samples, progress,
            on_measure_start=open_window,
        )
        if session is not None:
            readings, timeline = session.stop(samples=samples * len(timings.times_s))
            out["energy"] = [r.to_dict() for r in readings]
            out["power_timeline"] = timeline
    out["final_loss"] = step.loss_value()
    # The parent passes the cached count of this model (counting costs ~1 s).
    out.update(request.get("flops") or _count_flops(spec))
    out["backend_extra"] = _extra(step, out)
    out["warmup_times_s"] = list(timings.warmup_times_s)
    out["iteration_times_s"] = list(timings.times_s)
    out["stats"] = compute_stats(
        timings.times_s,
        samples,
        trim_fraction=spec.policy.trim_fraction,
        stop_reason=timings.stop_reason,
    ).to_dict()


def _count_flops(spec: RunSpec) -> dict[str, Any]:
    """Training FLOPs per sample, counted here (inside the isolated worker, because
    counting runs the user's model code); the parent caches the answer."""
    from accelbench.runner.facts import count_here

    facts = count_here(spec.workload, spec.size, spec.framework)
    facts.pop("param_count", None)  # the built model's own count is already in the record
    return facts


def _extra(step: Any, out: dict[str, Any]) -> dict[str, Any]:
    """The backend's own facts, with a note where its FLOP estimate disagrees with ours."""
    try:
        extra = dict(step.extra())
    except Exception as exc:  # extra facts must never hide the measurement
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    theirs, ours = extra.get("xla_flop_per_sample"), out.get("flop_per_sample")
    if theirs and ours:
        diff = theirs / ours - 1.0
        extra["xla_flop_rel_diff"] = diff
        if abs(diff) > 0.10:
            extra["note"] = (
                f"XLA's cost analysis counts {theirs / 1e9:.4g} GFLOP/sample, "
                f"{diff:+.0%} from accelbench's {ours / 1e9:.4g} (XLA also counts elementwise "
                "work, and counts a loop body such as an RNN's scan once)"
            )
    return extra


def _meter_session(spec: RunSpec) -> contextlib.AbstractContextManager[MeterSession | None]:
    """Meters for the case's device, plus the host CPU when the case runs on a GPU."""
    opts = spec.meters
    if not opts.enabled:
        return contextlib.nullcontext()
    from accelbench.backends import get_backend
    from accelbench.meters import open_session

    backend = get_backend(spec.framework)
    devices = [spec.device] if spec.device == "cpu" else [spec.device, "cpu"]
    uuids: dict[str, str] = {}
    uuid = backend.device_uuid(spec.device)
    if uuid:
        uuids[spec.device] = uuid
    names: dict[str, str] = {}
    if spec.device.startswith("tpu"):  # the TPU estimate needs the chip generation
        names = {d.device: d.name for d in backend.devices() if d.device == spec.device}
    return open_session(
        devices, interval_s=opts.interval_s, counter_poll_s=opts.counter_poll_s,
        cpu_tdp_w=opts.cpu_tdp_w, idle_s=opts.idle_s,
        gpu_uuids=uuids or None, device_names=names or None,
    )


def _framework(request: dict[str, Any]) -> str:
    from accelbench.spec import normalize_framework

    return normalize_framework(str(request.get("spec", {}).get("framework", "torch")))


def _is_oom(request: dict[str, Any], exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    try:
        from accelbench.backends import get_backend

        return get_backend(_framework(request)).is_oom(exc)
    except Exception:  # a bad request has no backend to ask
        return False


def main() -> int:
    """Entry point of the worker process."""
    chan_stream = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    chan = Channel(chan_stream)
    request = json.loads(sys.stdin.read())
    _die_with_parent(int(request.get("parent_pid", os.getppid())))

    record: dict[str, Any] = {"status": "ok", "error": None, "started_at": _utc_now()}
    try:
        _measure(request, chan, record)
    except BaseException as exc:  # the parent needs a status for every outcome
        traceback.print_exc(file=sys.stderr)
        if isinstance(exc, KeyboardInterrupt):
            raise
        record["status"] = "oom" if _is_oom(request, exc) else "error"
        record["error"] = f"{type(exc).__name__}: {exc}".strip()
    record["finished_at"] = _utc_now()
    try:
        from accelbench.devices import machine_info

        record["machine"] = machine_info(_framework(request))
    except Exception as exc:  # machine info must never hide the measurement
        record["machine"] = {"error": f"machine info unavailable: {exc}"}
    record["accelbench_version"] = __version__
    chan.send("result", record=record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
