"""The worker process: measures exactly one case and reports it on a private channel.

Started by :mod:`accelbench.runner.process` as ``python -m accelbench.runner.worker``
with a JSON request on stdin. Messages go out as JSON lines on a duplicate of
the original stdout; the worker's own fd 1 is pointed at stderr so that
anything a model prints cannot corrupt the channel.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from accelbench import __version__
from accelbench.runner import child

if TYPE_CHECKING:
    from accelbench.meters.session import MeterSession
    from accelbench.meters.updates import EnergyWindow
    from accelbench.result import EnergyReading
    from accelbench.runner.noise import NoiseProbe
    from accelbench.spec import RunSpec


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _measure(
    request: dict[str, Any], chan: child.Channel, out: dict[str, Any], probe: NoiseProbe | None
) -> None:
    """Build, warm up and time the case, filling ``out`` as it goes.

    Filled in place so that a case failing late (OOM in the first step) still
    reports what was known before it failed (parameter count, build time).
    """
    from accelbench.backends import get_backend
    from accelbench.runner.measure import run_loop
    from accelbench.spec import RunSpec, max_threads
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
    if probe is not None:
        cores = spec.threads or (max_threads() if spec.device == "cpu" else None)
        uuid = backend.device_uuid(spec.device) if spec.device.startswith("cuda") else None
        probe.configure(spec.device, case_cores=cores, gpu_uuid=uuid)

    def progress(phase: str, n: int, tput: float, elapsed: float) -> None:
        chan.send("progress", phase=phase, iterations=n, samples_per_s=tput, elapsed_s=elapsed)

    divergence: list[str] = []
    warmup_n = [0]

    def warmup_progress(phase: str, n: int, tput: float, elapsed: float) -> None:
        if phase == "warmup":
            warmup_n[0] = n
        progress(phase, n, tput, elapsed)

    with _meter_session(spec) as session:
        window = None
        if session is not None and any(s.readable for s in session.describe()):
            chan.send("phase", phase="idle")
            session.measure_idle()
            window = session.energy_window()
        settle: dict[str, Any] = {}

        def open_window() -> None:
            # The loss is read here and at the end only: one sync, outside the timed steps.
            _check_loss(step, f"the end of warm-up (iteration {warmup_n[0]})", divergence)
            if session is not None and spec.meters.settle_max_s > 0:
                chan.send("phase", phase="settle")
                settle.update(session.settle(_run_for(step), spec.meters.settle_max_s))
            chan.send("phase", phase="measure")
            if probe is not None:
                probe.window_start()
            if session is not None:
                session.start()

        chan.send("phase", phase="warmup", param_count=step.param_count)
        if probe is not None:
            probe.before_done()
        timings = run_loop(
            step.step, step.synchronize, spec.policy, samples, warmup_progress,
            on_measure_start=open_window, energy_window=window,
        )
        if probe is not None:
            probe.window_stop()
        if session is not None:
            readings, timeline = session.stop(samples=samples * len(timings.times_s))
            if timings.energy_short:
                from accelbench.meters.session import refuse_energy

                readings = refuse_energy(readings, timings.energy_short)
            elif spec.meters.energy_trials > 1:
                chan.send("phase", phase="energy trials")
                readings = _more_trials(spec, step, session, window, readings)
            out["energy"] = [_with_window_facts(r, settle, timings) for r in readings]
            out["power_timeline"] = timeline
        else:
            out["energy"] = [_not_measured(spec).to_dict()]
    if probe is not None:
        probe.gpu_end()
    n_total = len(timings.warmup_times_s) + len(timings.times_s)
    _check_loss(step, f"the end of measurement (iteration {n_total})", divergence)
    final_loss = step.loss_value()
    # A non-finite loss is in the error line; the record's JSON stays strict.
    out["final_loss"] = final_loss if final_loss is None or math.isfinite(final_loss) else None
    # The parent passes the cached count of this model (counting costs ~1 s).
    out.update(request.get("flops") or _count_flops(spec))
    out["backend_extra"] = _extra(step, out)
    try:
        out["peak_memory_bytes"], out["peak_memory_source"] = step.peak_memory()
    except Exception as exc:  # the memory figure must never hide the measurement
        out["peak_memory_source"] = f"not read: {type(exc).__name__}: {exc}"[:300]
    out["warmup_times_s"] = list(timings.warmup_times_s)
    out["iteration_times_s"] = list(timings.times_s)
    out["stats"] = compute_stats(
        timings.times_s,
        samples,
        trim_fraction=spec.policy.trim_fraction,
        stop_reason=timings.stop_reason,
        with_ci=not timings.below_minimum,
    ).to_dict()
    if probe is not None:
        try:
            out["noise"] = probe.verdict(
                timings.times_s, spec.policy.trim_fraction, timings.notes
            )
        except Exception as exc:  # the noise record must never hide the measurement
            out["noise"] = {"error": f"noise check failed: {type(exc).__name__}: {exc}"[:300],
                            "measure_notes": list(timings.notes)}
    else:
        out["noise"] = {"measure_notes": list(timings.notes)}
    if divergence:
        out["status"] = "diverged"
        out["error"] = divergence[0]
    elif timings.below_minimum:
        out["status"] = "insufficient"
        out["error"] = timings.notes[-1]


def _run_for(step: Any) -> Callable[[float], None]:
    """Runs training steps for about ``seconds`` (synchronised at the end)."""

    def run_for(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            step.step()
            step.synchronize()

    return run_for


def _more_trials(
    spec: RunSpec, step: Any, session: MeterSession, window: EnergyWindow | None,
    first: tuple[EnergyReading, ...],
) -> tuple[EnergyReading, ...]:
    """Energy trials 2..K: each after a random delay, a window of the energy minimum;
    combined with the first (the measurement window) by the median per sample."""
    import dataclasses
    import random

    from accelbench.meters.common import join_notes
    from accelbench.meters.trials import combine_trials, trial_delay_s

    k = spec.meters.energy_trials
    if window is None:
        note = f"--energy-trials {k} not run: no power sensor (an estimate needs no trials)"
        return tuple(dataclasses.replace(r, note=join_notes(r.note, note)) for r in first)
    rng = random.Random(spec.seed)
    trials: list[tuple[EnergyReading, ...]] = [first]
    delays = [0.0]
    for _ in range(k - 1):
        delay = trial_delay_s(window.update_period_s, rng)
        time.sleep(delay)
        session.start()
        t0, n = time.perf_counter(), 0
        while not window.met(n, time.perf_counter() - t0):
            step.step()
            step.synchronize()
            n += 1
        readings, _timeline = session.stop(samples=spec.batch_size * n)
        trials.append(readings)
        delays.append(delay)
    return combine_trials(trials, delays)


def _with_window_facts(
    reading: EnergyReading, settle: dict[str, Any], timings: Any
) -> dict[str, Any]:
    """The reading as stored, with the thermal settle and the energy-window extension."""
    data = reading.to_dict()
    details = dict(data.get("details") or {})
    if settle:
        details["settle"] = settle
    if timings.energy_extension:
        details["window_extension"] = timings.energy_extension
    data["details"] = details
    return data


def _check_loss(step: Any, where: str, found: list[str]) -> None:
    """Append one line to ``found`` when the last loss is NaN or infinite."""
    if found:
        return
    loss = step.loss_value()
    if loss is not None and not math.isfinite(loss):
        found.append(f"loss became {loss} at {where}; the case diverged (lower the learning "
                     "rate or use a wider precision)")


def _not_measured(spec: RunSpec) -> EnergyReading:
    """The reading of a case run with ``--no-energy``: unavailable, and why."""
    from accelbench.result import EnergyReading

    scope = "cpu-package" if spec.device == "cpu" else (
        "tpu" if spec.device.startswith("tpu") else "gpu")
    return EnergyReading(device=spec.device, scope=scope, source="unavailable",
                         note="energy not measured: --no-energy")


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
    from accelbench.meters.registry import open_node_meter

    node = open_node_meter(opts)  # a node meter that cannot read is a NullMeter saying why
    return open_session(
        devices, interval_s=opts.interval_s, counter_poll_s=opts.counter_poll_s,
        cpu_tdp_w=opts.cpu_tdp_w, idle_s=opts.idle_s,
        gpu_uuids=uuids or None, device_names=names or None,
        extra=[node] if node is not None else [],
    )


def _framework(request: dict[str, Any]) -> str:
    from accelbench.spec import normalize_framework

    return normalize_framework(str(request.get("spec", {}).get("framework", "torch")))


def _exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it (``raise ... from``, or raised while handling)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 16:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _is_oom(request: dict[str, Any], exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it: a model may wrap the allocator's error) is an
    out-of-memory condition, as the case's backend classifies it."""
    chain = _exception_chain(exc)
    if any(isinstance(e, MemoryError) for e in chain):
        return True
    try:
        from accelbench.backends import get_backend

        backend = get_backend(_framework(request))
        return any(backend.is_oom(e) for e in chain)
    except Exception:  # a bad request has no backend to ask
        return False


def _start_probe() -> NoiseProbe | None:
    try:
        from accelbench.runner.noise import NoiseProbe

        return NoiseProbe()
    except Exception:  # no psutil counters here: the case is measured without the probe
        return None


def main() -> int:
    """Entry point of the worker process."""
    probe = _start_probe()  # first: the before-window covers the imports and the build
    chan = child.Channel()
    request = json.loads(sys.stdin.read())
    child.die_with_parent(int(request.get("parent_pid", os.getppid())))

    record: dict[str, Any] = {"status": "ok", "error": None, "started_at": _utc_now()}
    try:
        _measure(request, chan, record, probe)
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
