"""The worker process: measures exactly one case and reports it on a private channel.

Started by :mod:`accelbench.execution.process`, forked by the framework's warm server
(:mod:`accelbench.isolation.forkserver`) or as ``python -m accelbench.execution.worker``.
The :class:`~accelbench.execution.request.CaseRequest` comes as one JSON line on stdin;
the worker starts the framework and first checks that this machine has the device and
runs the precision, answering ``checked`` (with the devices it sees) or ``refused`` (the
error's class and message: the parent raises it, or stores it in a suite). A parent
that holds the worker until it knows the case can go on (``run``: the store is opened
after the check) sends the check alone first (the spec, the plugins, its pid) and the
request as a second line, or closes stdin to release it. Messages go out as JSON lines
on a duplicate of the original stdout; the worker's own fd 1 is pointed at stderr so
that anything a model prints cannot corrupt the channel. The last message is the case's record,
:meth:`Result.to_dict` of the request's draft completed here.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.execution.metering import (
    agreed_window,
    live_window,
    meter_session,
    not_measured,
    run_for,
    window_readings,
)
from accelbench.execution.ranks import FileChannel, gather_ranks, leave, write_json
from accelbench.execution.record import (
    Draft,
    backend_extra,
    check_loss,
    count_here,
    failure,
    finish,
    flop_facts,
)
from accelbench.execution.request import CaseRequest
from accelbench.isolation import channel

if TYPE_CHECKING:
    from accelbench.backends.base import Backend, TrainStep
    from accelbench.backends.ranks import RankGroup
    from accelbench.execution.measure import Timings
    from accelbench.execution.noise import NoiseProbe
    from accelbench.meters.session import MeterSession
    from accelbench.meters.updates import EnergyWindow
    from accelbench.spec import RunSpec


class Sender(Protocol):
    """Where a worker's messages go: the parent's channel, or rank 0's message file."""

    def send(self, kind: str, **payload: Any) -> None: ...


def measure_case(
    request: CaseRequest, chan: Sender, draft: Draft, probe: NoiseProbe | None,
    group_out: list[RankGroup] | None = None, started: tuple[RunSpec, Backend] | None = None,
) -> None:
    """Build, warm up and time the case, filling ``draft`` as it goes.

    In a rank of a distributed case (``group_out`` given), the process group is joined
    first and appended to ``group_out``; rank 0 gathers the other ranks' times and
    readings into ``draft``. ``started``: the spec and backend :func:`start_case` gave.
    """
    from accelbench.backends.startup import start_case
    from accelbench.spec import max_threads
    from accelbench.workloads.registry import get_implementation

    # The framework is prepared before a plugin or a model module imports it.
    spec, backend = started or start_case(request.spec.to_dict(), request.plugins)
    group: RankGroup | None = None
    if group_out is not None:
        # Before the build: the train step wraps its model in DDP when the group is up.
        group = backend.distributed().join(spec.topology.dist_backend, spec.device)
        group_out.append(group)
    impl = get_implementation(spec.workload, spec.framework)

    chan.send("phase", phase="build")
    t0 = time.perf_counter()
    step = backend.build_step(spec, impl)
    step.synchronize()
    draft.add(build_time_s=time.perf_counter() - t0, param_count=step.param_count)
    if step.compile_s is not None:
        draft.add(compile_s=step.compile_s)
    # Weak scaling: every data-parallel rank steps its own batch (a tensor-parallel group
    # shares one); the series is the slowest rank's.
    # One process's mesh (JAX --devices) holds every replica's batch itself.
    samples = spec.batch_size * (spec.topology.dp_degree if group is not None
                                 or spec.topology.devices else 1)
    if probe is not None:
        cores = spec.threads or (max_threads() if spec.device == "cpu" else None)
        uuid = backend.device_uuid(spec.device) if spec.device.startswith("cuda") else None
        probe.configure(spec.device, case_cores=cores, gpu_uuid=uuid,
                        framework=spec.framework)
    case = _Case(request, spec, step, samples, chan, probe, group, draft)
    _conclude(case, _timed(case))


@dataclass(frozen=True, slots=True)
class _Case:
    """What the timed loop and the record's completion read: the request and the started
    spec, the built step, the samples of one step over the ranks, where messages go, the
    noise probe, the ranks, and the draft record they fill."""

    request: CaseRequest
    spec: RunSpec
    step: TrainStep
    samples: int
    chan: Sender
    probe: NoiseProbe | None
    group: RankGroup | None
    draft: Draft


@dataclass(frozen=True, slots=True)
class _Timed:
    """What :func:`_timed` produces: the timings, this rank's own step times (in a rank of
    a distributed case), and the loss checks' divergence lines so far."""

    timings: Timings
    own_times: list[float]
    divergence: list[str]


class _Progress:
    """The loop's progress sent to the parent; remembers the warm-up's iterations."""

    def __init__(self, chan: Sender) -> None:
        self.chan = chan
        self.warmup_n = 0

    def __call__(self, phase: str, n: int, tput: float, elapsed: float) -> None:
        if phase == "warmup":
            self.warmup_n = n
        self.chan.send("progress", phase=phase, iterations=n, samples_per_s=tput,
                       elapsed_s=elapsed)


def _agreement(group: RankGroup | None
               ) -> tuple[list[float], Callable[[float, float], tuple[float, float]] | None]:
    """This rank's own step times (filled as it runs) and the MAX over the ranks that
    makes every rank hold one series; no agreement for one process."""
    own_times: list[float] = []
    if group is None:
        return own_times, None
    g = group

    def agree(t: float, elapsed: float) -> tuple[float, float]:
        own_times.append(t)
        both = g.max_all([t, elapsed])
        return both[0], both[1]

    return own_times, agree


def _energy_window(case: _Case, session: MeterSession | None) -> EnergyWindow | None:
    """The idle power read and the energy window sized where a sensor reads (agreed over
    the ranks)."""
    window = None
    if session is not None and any(s.readable for s in session.describe()):
        case.chan.send("phase", phase="idle")
        session.measure_idle()
        window = session.energy_window()
    if case.group is not None:
        window = agreed_window(case.group, window)
    return window


class _Opening:
    """Opens the measured window when warm-up ends: the loss checked, the device settled,
    the probe and the meters started."""

    def __init__(self, case: _Case, session: MeterSession | None, progress: _Progress
                 ) -> None:
        self.case, self.session, self.progress = case, session, progress
        self.settle: dict[str, Any] = {}
        self.divergence: list[str] = []

    def __call__(self) -> None:
        case, session = self.case, self.session
        # The loss is read here and at the end only: one sync, outside the timed steps.
        check_loss(case.step, f"the end of warm-up (iteration {self.progress.warmup_n})",
                   self.divergence)
        if session is not None and case.spec.meters.settle_max_s > 0:
            case.chan.send("phase", phase="settle")
            self.settle.update(session.settle(run_for(case.step),
                                              case.spec.meters.settle_max_s))
        case.chan.send("phase", phase="measure")
        timer = getattr(case.step, "input_timer", None)  # --data: the window's waits start
        if timer is not None:
            timer.open()
        if case.probe is not None:
            case.probe.window_start()
        if session is not None:
            session.start()


def _timed(case: _Case) -> _Timed:
    """Warm-up and the timed iterations inside the case's meter session; the window's
    readings (and the phase pass) go into the draft."""
    from accelbench.backends.blocks import block_timer_of
    from accelbench.execution.measure import Loop, run_loop

    spec, step, chan, probe, group = case.spec, case.step, case.chan, case.probe, case.group
    progress = _Progress(chan)
    own_times, agree = _agreement(group)
    with meter_session(spec, group) as session:
        window = _energy_window(case, session)
        opening = _Opening(case, session, progress)
        chan.send("phase", phase="warmup", param_count=step.param_count)
        if probe is not None:
            probe.before_done()
        timings = run_loop(Loop(step.step, step.synchronize, spec.policy, case.samples,
                                progress, energy_window=window, agree=agree,
                                live_window=live_window(session, group),
                                blocks=block_timer_of(step)), on_measure_start=opening)
        if probe is not None:
            probe.window_stop()
        timer = getattr(step, "input_timer", None)
        if timer is not None:  # the measured steps' waits, before energy trials take more
            case.draft.add(input=timer.window(timings.steps, timings.times_s,
                                              timings.block_steps))
        _window_energy(case, session, window, timings, opening.settle)
        if spec.input_analysis:  # three more passes after the window (data/analysis.py)
            from accelbench.data.analysis import analyse_case

            chan.send("phase", phase="input analysis")
            stats = case.draft.result.input
            assert stats is not None  # noqa: S101 - the timer wrote it above
            case.draft.add(input=analyse_case(
                step, stats, case.samples, timings.steps,
                case.draft.result.energy, spec.device, session,
                window.met if window is not None else None))
        if spec.policy.phases:  # after the window, inside the session: the loops read it
            from accelbench.execution.phases import phases_of_case

            if probe is not None:
                probe.gpu_end()  # the window's GPU state, not the phase pass's
            chan.send("phase", phase="phases")
            case.draft.add(phases=phases_of_case(spec, step, timings, session, window,
                                                 group))
    return _Timed(timings, own_times, opening.divergence)


def _window_energy(case: _Case, session: MeterSession | None, window: EnergyWindow | None,
                   timings: Timings, settle: dict[str, Any]) -> None:
    """The window's energy readings and power timeline into the draft."""
    spec, group = case.spec, case.group
    if session is not None:
        energy, timeline = window_readings(
            spec, case.step, session, window, timings, settle, case.samples,
            on_trials=lambda: case.chan.send("phase", phase="energy trials"))
        case.draft.add(energy=energy, power_timeline=timeline)
    elif group is None or group.is_root:
        case.draft.add(energy=(not_measured(spec),))


def _conclude(case: _Case, timed: _Timed) -> None:
    """Everything after the timed loop: the loss, FLOPs, memory, the raw times (gathered
    over ranks), the statistics, the noise verdict and the case's status."""
    from accelbench.stats import compute_stats

    request, step, samples, probe = case.request, case.step, case.samples, case.probe
    group, draft = case.group, case.draft
    timings, own_times, divergence = timed.timings, timed.own_times, timed.divergence
    spec = request.spec
    if probe is not None and not spec.policy.phases:  # else read before the phase pass
        probe.gpu_end()
    n_total = len(timings.warmup_times_s) + timings.steps
    check_loss(step, f"the end of measurement (iteration {n_total})", divergence)
    final_loss = step.loss_value()
    # A non-finite loss is in the error line; the record's JSON stays strict.
    draft.add(final_loss=final_loss if final_loss is None or math.isfinite(final_loss)
              else None)
    if group is None or group.is_root:
        # The parent passes the cached count of this model (counting costs ~1 s).
        draft.add(**flop_facts(request.flops or count_here(spec)))
    draft.add(backend_extra=backend_extra(step, draft.result.flop_per_sample))
    try:
        peak, source = step.peak_memory()
        draft.add(peak_memory_bytes=peak, peak_memory_source=source)
    except Exception as exc:  # the memory figure must never hide the measurement
        draft.add(peak_memory_source=f"not read: {type(exc).__name__}: {exc}"[:300])
    draft.add(warmup_times_s=timings.warmup_times_s, iteration_times_s=timings.times_s)
    if group is not None:
        n_warm = len(timings.warmup_times_s)
        draft.result = gather_ranks(spec, group, draft.result,
                                    own_times[:n_warm], own_times[n_warm:])
    stats = compute_stats(
        timings.times_s, samples, trim_fraction=spec.policy.trim_fraction,
        stop_reason=timings.stop_reason, with_ci=not timings.below_minimum,
    )
    draft.add(stats=dataclasses.replace(stats, n=timings.steps, timing=timings.timing(),
                                        steps_per_block=timings.steps_per_block,
                                        block_steps=timings.block_steps))
    draft.add(noise=_noise(probe, timings, spec.policy.trim_fraction))
    if divergence:
        draft.add(status="diverged", error=divergence[0])
    elif timings.below_minimum:
        draft.add(status="insufficient", error=timings.notes[-1])


def _noise(probe: NoiseProbe | None, timings: Timings, trim_fraction: float
           ) -> dict[str, Any]:
    if probe is None:
        return {"measure_notes": list(timings.notes)}
    try:
        # Each step's own times where the clock has them (device events), else the series.
        return probe.verdict(timings.step_times_s or timings.times_s, trim_fraction,
                             timings.notes)
    except Exception as exc:  # the noise record must never hide the measurement
        return {"error": f"noise check failed: {type(exc).__name__}: {exc}"[:300],
                "measure_notes": list(timings.notes)}


def start_probe() -> NoiseProbe | None:
    """The noise probe of the case, or None where this machine has no counters for it."""
    try:
        from accelbench.execution.noise import NoiseProbe

        return NoiseProbe()
    except Exception:  # no psutil counters here: the case is measured without the probe
        return None


def start_checked(check: dict[str, Any], chan: Sender
                  ) -> tuple[tuple[RunSpec, Backend] | None, BaseException | None]:
    """Start the case's framework and check its device and precision here; answer the
    parent ``checked`` or ``refused``. Returns the spec and backend, or the start's failure
    (for the case's record); ``(None, None)`` after a refusal."""
    from accelbench.backends.probe import check_here
    from accelbench.backends.startup import start_case
    from accelbench.errors import AccelbenchError

    try:
        spec, backend = start_case(check["spec"], check.get("plugins") or ())
    except BaseException as exc:  # a plugin that fails here is the case's error, as before
        chan.send("checked", devices=None)
        return None, exc
    try:
        devices = check_here(spec, backend)
    except AccelbenchError as exc:
        chan.send("refused", cls=type(exc).__name__, module=type(exc).__module__,
                  message=str(exc))
        return None, None
    chan.send("checked", devices=[d.to_dict() for d in devices])
    return (spec, backend), None


def main() -> int:
    """Entry point of the worker process."""
    probe = start_probe()  # first: the before-window covers the imports and the build
    chan = channel.Channel()
    check = json.loads(sys.stdin.readline() or "{}")
    channel.die_with_parent(check.get("parent_pid") or os.getppid())
    if "spec" not in check:
        return 0
    started, failed = start_checked(check, chan)
    if started is None and failed is None:
        return 0  # refused: the parent has the reason
    # The case itself came first (nothing was held), or it follows the check.
    line = json.dumps(check) if "draft" in check else sys.stdin.readline()
    if not line.strip():
        return 0  # released: the parent only wanted the check
    request = CaseRequest.from_dict(json.loads(line))
    draft = Draft(request.draft)
    try:
        if failed is not None:
            raise failed
        measure_case(request, chan, draft, probe, started=started)
    except BaseException as exc:  # the parent needs a status for every outcome
        traceback.print_exc(file=sys.stderr)
        if isinstance(exc, KeyboardInterrupt):
            raise
        status, error = failure(request.spec.framework, exc)
        draft.add(status=status, error=error)
    chan.send("result", record=finish(draft.result).to_dict())
    return 0


def rank_main(rundir: str) -> int:
    """Entry point of one rank of a distributed case (started by torch's elastic agent in
    :mod:`accelbench.execution.launch`, with ``RANK``, ``LOCAL_RANK`` ... set).

    The request is ``rundir/request.json``; rank 0 writes progress to
    ``rundir/messages.jsonl`` and the record to ``rundir/result.json``; a rank that fails
    writes ``rundir/rank-R.json`` (its status, ``oom`` included, and why) before it exits
    non-zero, so the launcher can say which rank failed and how.
    """
    from accelbench.backends.ranks import RankInfo

    info = RankInfo.from_env()
    rank = info.rank if info is not None else 0
    with open(os.path.join(rundir, "request.json"), encoding="utf-8") as f:
        request = CaseRequest.from_dict(json.load(f))
    channel.die_with_parent(request.agent_pid or os.getppid())
    probe = start_probe() if rank == 0 else None
    chan = FileChannel(os.path.join(rundir, "messages.jsonl") if rank == 0 else None)
    draft = Draft(request.draft)
    groups: list[RankGroup] = []
    try:
        measure_case(request, chan, draft, probe, group_out=groups)
    except BaseException as exc:  # the launcher needs each rank's own reason
        traceback.print_exc(file=sys.stderr)
        status, error = failure(request.spec.framework, exc)
        import socket

        report = {"rank": rank, "host": socket.gethostname(), "pid": os.getpid(),
                  "status": status, "error": error[:1000]}
        write_json(os.path.join(rundir, f"rank-{rank}.json"), report)
        return 1
    if rank == 0:
        write_json(os.path.join(rundir, "result.json"), finish(draft.result).to_dict())
    for g in groups:
        g.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank":
        leave(rank_main(sys.argv[2]))  # no interpreter teardown in a rank (see leave)
    sys.exit(main())
