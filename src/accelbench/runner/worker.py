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
    from accelbench.backends.ranks import RankGroup
    from accelbench.meters.session import MeterSession
    from accelbench.meters.updates import EnergyWindow
    from accelbench.result import EnergyReading
    from accelbench.runner.noise import NoiseProbe
    from accelbench.spec import RunSpec


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class _FileChannel:
    """Rank 0's messages for the launcher process (which forwards them to the parent):
    JSON lines appended to a file; a rank other than 0 sends nothing."""

    def __init__(self, path: str | None) -> None:
        self._stream = open(path, "a", buffering=1, encoding="utf-8") if path else None  # noqa: SIM115

    def send(self, kind: str, **payload: Any) -> None:
        if self._stream is None:
            return
        from accelbench import jsonout

        self._stream.write(jsonout.dumps({"type": kind, **payload}) + "\n")
        self._stream.flush()


def _measure(
    request: dict[str, Any], chan: child.Channel | _FileChannel, out: dict[str, Any],
    probe: NoiseProbe | None, group_out: list[RankGroup] | None = None,
) -> None:
    """Build, warm up and time the case, filling ``out`` as it goes.

    Filled in place so that a case failing late (OOM in the first step) still
    reports what was known before it failed (parameter count, build time).
    In a rank of a distributed case (``group_out`` given), the process group is joined
    first and appended to ``group_out``; rank 0 gathers the other ranks' times and
    readings into ``out``.
    """
    from accelbench.backends.startup import start_case
    from accelbench.runner.measure import run_loop
    from accelbench.spec import max_threads
    from accelbench.stats import compute_stats
    from accelbench.workloads.registry import get_implementation

    # The framework is prepared before a plugin or a model module imports it.
    spec, backend = start_case(request["spec"], request.get("plugins", []))
    group: RankGroup | None = None
    if group_out is not None:
        # Before the build: the train step wraps its model in DDP when the group is up.
        group = backend.distributed().join(spec.topology.dist_backend, spec.device)
        group_out.append(group)
    root = group is None or group.is_root
    impl = get_implementation(spec.workload, spec.framework)

    chan.send("phase", phase="build")
    t0 = time.perf_counter()
    step = backend.build_step(spec, impl)
    step.synchronize()
    out["build_time_s"] = time.perf_counter() - t0
    out["param_count"] = step.param_count
    if step.compile_s is not None:
        out["compile_s"] = step.compile_s
    # Weak scaling: every rank steps its own batch; the series is the slowest rank's.
    samples = spec.batch_size * (group.info.world_size if group is not None else 1)
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

    agree = None
    if group is not None:
        g = group

        def agree(t: float, elapsed: float) -> tuple[float, float]:
            own_times.append(t)
            both = g.max_all([t, elapsed])
            return both[0], both[1]

    own_times: list[float] = []
    with _meter_session(spec, group) as session:
        window = None
        if session is not None and any(s.readable for s in session.describe()):
            chan.send("phase", phase="idle")
            session.measure_idle()
            window = session.energy_window()
        if group is not None:
            window = _agreed_window(group, window)
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
            on_measure_start=open_window, energy_window=window, agree=agree,
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
            out["energy"] = [_not_measured(spec).to_dict()] if root else []
    if probe is not None:
        probe.gpu_end()
    n_total = len(timings.warmup_times_s) + len(timings.times_s)
    _check_loss(step, f"the end of measurement (iteration {n_total})", divergence)
    final_loss = step.loss_value()
    # A non-finite loss is in the error line; the record's JSON stays strict.
    out["final_loss"] = final_loss if final_loss is None or math.isfinite(final_loss) else None
    # The parent passes the cached count of this model (counting costs ~1 s).
    if root:
        out.update(request.get("flops") or _count_flops(spec))
    out["backend_extra"] = _extra(step, out)
    try:
        out["peak_memory_bytes"], out["peak_memory_source"] = step.peak_memory()
    except Exception as exc:  # the memory figure must never hide the measurement
        out["peak_memory_source"] = f"not read: {type(exc).__name__}: {exc}"[:300]
    out["warmup_times_s"] = list(timings.warmup_times_s)
    out["iteration_times_s"] = list(timings.times_s)
    if group is not None:
        n_warm = len(timings.warmup_times_s)
        _gather_ranks(spec, group, out, own_times[:n_warm], own_times[n_warm:])
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


def _agreed_window(group: RankGroup, window: EnergyWindow | None) -> EnergyWindow | None:
    """One energy window for all ranks (the slowest sensor of any reader sizes it): ranks
    that disagreed on when the window may close would wait on each other for ever."""
    from accelbench.meters.updates import EnergyWindow

    [period] = group.max_all([window.update_period_s if window is not None else 0.0])
    return EnergyWindow.for_period(period) if period > 0 else None


#: How the iteration time of a distributed case is derived (stored with its per-rank times).
ITERATION_TIME_RULE = (
    "iteration i's time is the max over ranks of each rank's own device-synchronised step "
    "time (all-reduced MAX after the step, outside the timed region); throughput is the "
    "global batch (batch x world size) over the median of those"
)


def _gather_ranks(
    spec: RunSpec, group: RankGroup, out: dict[str, Any],
    warmup_times_s: list[float], times_s: list[float],
) -> None:
    """Gather every rank's own times, device and readings to rank 0 and put the case's
    ``ranks`` record and its merged energy readings (one reader per sensor) in ``out``."""
    info = group.info
    mine = {
        "rank": info.rank,
        "local_rank": info.local_rank,
        "node": info.group_rank,
        "host": group.host,
        "pid": os.getpid(),
        "device": str(group.device),
        "device_uuid": group.device_uuid(),
        "threads": group.threads(),
        "iteration_times_s": times_s,
        "warmup_times_s": warmup_times_s,
        "peak_memory_bytes": out.get("peak_memory_bytes"),
        "energy": out.get("energy") or [],
        "power_timeline": out.get("power_timeline") or {},
    }
    gathered = group.gather(mine)
    if gathered is None:
        return
    energy, timeline, readers = _merge_energy(spec, gathered)
    topo = spec.topology
    per_rank = [{k: v for k, v in r.items() if k not in ("energy", "power_timeline")}
                for r in gathered]
    host_reader = ("host CPU packages and DRAM (RAPL, else the TDP estimate) and any node "
                   "meter: local rank 0 of each node")
    out["energy"] = energy
    out["power_timeline"] = timeline
    out["ranks"] = {
        "world_size": info.world_size,
        "nnodes": topo.nnodes,
        "nproc_per_node": topo.nproc_per_node,
        "backend": group.backend,
        "launcher": "torch.distributed elastic_launch (c10d rendezvous, no restarts)",
        "iteration_time": ITERATION_TIME_RULE,
        "per_rank": per_rank,
        "energy_readers": readers,
        "energy_rule": (
            "every physical sensor has one reader: each GPU by the rank that drives it "
            "(deduplicated by UUID); " + host_reader + "; readings are gathered to rank 0 "
            "and summed per kind over the global samples of the window"
        ),
    }


def _merge_energy(
    spec: RunSpec, gathered: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """All ranks' readings with their provenance, each physical GPU once (by UUID); device
    names of nodes other than the first get a ``nodeN/`` prefix so none collide."""
    several_nodes = len({r["node"] for r in gathered}) > 1
    energy: list[dict[str, Any]] = []
    timeline: dict[str, Any] = {}
    readers: list[dict[str, Any]] = []
    seen_uuids: set[str] = set()
    for r in gathered:
        prefix = f"node{r['node']}/" if several_nodes and r["node"] != 0 else ""
        names: list[str] = []
        for e in r["energy"]:
            if e.get("scope") == "gpu" and r["device_uuid"]:
                if r["device_uuid"] in seen_uuids:
                    continue  # one GPU, two ranks: read once
                seen_uuids.add(r["device_uuid"])
            e = dict(e)
            e["device"] = prefix + str(e["device"])
            details = dict(e.get("details") or {})
            details["provenance"] = {"rank": r["rank"], "local_rank": r["local_rank"],
                                     "node": r["node"], "host": r["host"],
                                     "device_uuid": r["device_uuid"]}
            e["details"] = details
            energy.append(e)
            names.append(e["device"])
        for key, series in r["power_timeline"].items():
            timeline[prefix + key] = series
        if names:
            readers.append({"rank": r["rank"], "node": r["node"], "host": r["host"],
                            "reads": names})
    if not energy and not spec.meters.enabled:
        energy = [_not_measured(spec).to_dict()]
    return energy, timeline, readers


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


def _meter_session(
    spec: RunSpec, group: RankGroup | None = None
) -> contextlib.AbstractContextManager[MeterSession | None]:
    """Meters for the case's device, plus the host CPU when the case runs on a GPU.

    In a rank of a distributed case, each sensor has one reader: the rank's own GPU; the
    host (and a node meter) only on local rank 0 of each node; nothing on the other
    ranks of a CPU case.
    """
    opts = spec.meters
    if not opts.enabled:
        return contextlib.nullcontext()
    from accelbench.backends import get_backend
    from accelbench.meters import open_session

    backend = get_backend(spec.framework)
    device = spec.device if group is None else str(group.device)
    host_reader = group is None or group.info.local_rank == 0
    if device == "cpu":
        devices = [device] if host_reader else []
    else:
        devices = [device, "cpu"] if host_reader else [device]
    if not devices:
        return contextlib.nullcontext()
    uuids: dict[str, str] = {}
    uuid = backend.device_uuid(device)
    if uuid:
        uuids[device] = uuid
    names: dict[str, str] = {}
    if spec.device.startswith("tpu"):  # the TPU estimate needs the chip generation
        names = {d.device: d.name for d in backend.devices() if d.device == spec.device}
    from accelbench.meters.registry import open_node_meter

    # A node meter that cannot read is a NullMeter saying why.
    node = open_node_meter(opts) if host_reader else None
    return open_session(
        devices, interval_s=opts.interval_s, counter_poll_s=opts.counter_poll_s,
        cpu_tdp_w=opts.cpu_tdp_w, idle_s=opts.idle_s,
        gpu_uuids=uuids or None, device_names=names or None,
        extra=[node] if node is not None else [],
    )


def _framework(request: dict[str, Any]) -> str:
    from accelbench.spec import normalize_framework

    return normalize_framework(str(request.get("spec", {}).get("framework", "torch")))


def _is_oom(request: dict[str, Any], exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is an out-of-memory condition, as the case's
    backend classifies it."""
    from accelbench.backends import caused_by_oom

    return caused_by_oom(str(request.get("spec", {}).get("framework", "torch")), exc)


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
    _finish_record(record, request)
    chan.send("result", record=record)
    return 0


def _finish_record(record: dict[str, Any], request: dict[str, Any]) -> None:
    """Stamp the end time, the machine and the version on a finished case's record."""
    record["finished_at"] = _utc_now()
    try:
        from accelbench.devices import machine_info

        record["machine"] = machine_info(_framework(request))
    except Exception as exc:  # machine info must never hide the measurement
        record["machine"] = {"error": f"machine info unavailable: {exc}"}
    record["accelbench_version"] = __version__


def rank_main(rundir: str) -> int:
    """Entry point of one rank of a distributed case (started by torch's elastic agent in
    :mod:`accelbench.runner.launch`, with ``RANK``, ``LOCAL_RANK`` ... set).

    The request is ``rundir/request.json``; rank 0 writes progress to
    ``rundir/messages.jsonl`` and the record to ``rundir/result.json``; a rank that fails
    writes ``rundir/rank-R.json`` (its status, ``oom`` included, and why) before it exits
    non-zero, so the launcher can say which rank failed and how.
    """
    from accelbench.backends.ranks import RankInfo

    info = RankInfo.from_env()
    rank = info.rank if info is not None else 0
    with open(os.path.join(rundir, "request.json"), encoding="utf-8") as f:
        request = json.load(f)
    child.die_with_parent(int(request["agent_pid"]))
    probe = _start_probe() if rank == 0 else None
    chan = _FileChannel(os.path.join(rundir, "messages.jsonl") if rank == 0 else None)
    record: dict[str, Any] = {"status": "ok", "error": None, "started_at": _utc_now()}
    groups: list[RankGroup] = []
    try:
        _measure(request, chan, record, probe, group_out=groups)
    except BaseException as exc:  # the launcher needs each rank's own reason
        traceback.print_exc(file=sys.stderr)
        status = "oom" if _is_oom(request, exc) else "error"
        import socket

        failure = {"rank": rank, "host": socket.gethostname(), "pid": os.getpid(),
                   "status": status, "error": f"{type(exc).__name__}: {exc}".strip()[:1000]}
        _write_json(os.path.join(rundir, f"rank-{rank}.json"), failure)
        return 1
    if rank == 0:
        _finish_record(record, request)
        _write_json(os.path.join(rundir, "result.json"), record)
    for g in groups:
        g.close()
    return 0


def _write_json(path: str, data: dict[str, Any]) -> None:
    """Write atomically: the launcher never reads half a file."""
    from accelbench import jsonout

    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(jsonout.dumps(data))
    os.replace(tmp, path)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank":
        sys.exit(rank_main(sys.argv[2]))
    sys.exit(main())
