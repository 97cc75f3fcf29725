"""The meters of one case inside its worker: which sensors it reads, its energy trials,
and the readings as the record stores them."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelbench.result import EnergyReading

if TYPE_CHECKING:
    from accelbench.backends.base import TrainStep
    from accelbench.backends.ranks import RankGroup
    from accelbench.execution.measure import LiveWindowFn, Timings
    from accelbench.meters.session import MeterSession
    from accelbench.meters.updates import EnergyWindow
    from accelbench.spec import RunSpec


def meter_session(
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


def agreed_window(group: RankGroup, window: EnergyWindow | None) -> EnergyWindow | None:
    """One energy window for all ranks (the slowest sensor of any reader sizes it): ranks
    that disagreed on when the window may close would wait on each other for ever."""
    from accelbench.meters.updates import EnergyWindow

    [period] = group.max_all([window.update_period_s if window is not None else 0.0])
    return EnergyWindow.for_period(period) if period > 0 else None


def live_window(
    session: MeterSession | None, group: RankGroup | None
) -> LiveWindowFn | None:
    """The energy window of the sensors still working, re-sized as measurement goes past
    the policy's stop; in a rank, agreed over all ranks (each calls it at the same step)."""
    if group is None:
        return session.live_window if session is not None else None
    g = group

    def agreed() -> tuple[EnergyWindow | None, str]:
        window, why = session.live_window() if session is not None else (None, "")
        return agreed_window(g, window), why

    return agreed


def run_for(step: TrainStep) -> Callable[[float], None]:
    """Runs training steps for about ``seconds`` (synchronised at the end)."""

    def run(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            step.step()
            step.synchronize()

    return run


def window_readings(
    spec: RunSpec, step: TrainStep, session: MeterSession, window: EnergyWindow | None,
    timings: Timings, settle: dict[str, Any], samples: int,
    on_trials: Callable[[], None],
) -> tuple[tuple[EnergyReading, ...], dict[str, Any]]:
    """Close the measured window: its readings (refused when the window was too short; the
    median of ``--energy-trials`` windows when asked, ``on_trials`` called before the
    extra ones run), each with the thermal settle and the window's extension, and the
    power timeline."""
    readings, timeline = session.stop(samples=samples * timings.steps)
    if timings.energy_short:
        from accelbench.meters.session import refuse_energy

        readings = refuse_energy(readings, timings.energy_short)
    elif spec.meters.energy_trials > 1:
        on_trials()
        readings = more_trials(spec, step, session, window, readings)
    return tuple(with_window_facts(r, settle, timings) for r in readings), timeline


def more_trials(
    spec: RunSpec, step: TrainStep, session: MeterSession, window: EnergyWindow | None,
    first: tuple[EnergyReading, ...],
) -> tuple[EnergyReading, ...]:
    """Energy trials 2..K: each after a random delay, a window of the energy minimum;
    combined with the first (the measurement window) by the median per sample."""
    import random

    from accelbench.meters.common import join_notes
    from accelbench.meters.trials import between_trials, combine_trials

    k = spec.meters.energy_trials
    if window is None:
        note = f"--energy-trials {k} not run: no power sensor (an estimate needs no trials)"
        return tuple(dataclasses.replace(r, note=join_notes(r.note, note)) for r in first)
    rng = random.Random(spec.seed)
    trials: list[tuple[EnergyReading, ...]] = [first]
    delays = [0.0]
    for _ in range(k - 1):
        delay = between_trials(spec.meters.cooldown_s, window.update_period_s, rng)
        session.start()
        t0, n = time.perf_counter(), 0
        while not window.met(n, time.perf_counter() - t0):
            step.step()
            step.synchronize()
            n += 1
        readings, _timeline = session.stop(samples=spec.batch_size * n)
        trials.append(readings)
        delays.append(delay)
    combined = combine_trials(trials, delays)
    if spec.meters.cooldown_s > 0:
        note = (f"waited {spec.meters.cooldown_s:g} s (--cooldown-s) before each of the "
                f"{k - 1} later energy trials")
        combined = tuple(dataclasses.replace(r, note=join_notes(r.note, note),
                                             details={**(r.details or {}),
                                                      "cooldown_s": spec.meters.cooldown_s})
                         for r in combined)
    return combined


def with_window_facts(
    reading: EnergyReading, settle: dict[str, Any], timings: Timings
) -> EnergyReading:
    """The reading as stored, with the thermal settle and the energy-window extension."""
    details = dict(reading.details or {})
    if settle:
        details["settle"] = settle
    if timings.energy_extension:
        details["window_extension"] = timings.energy_extension
    return dataclasses.replace(reading, details=details)


def not_measured(spec: RunSpec) -> EnergyReading:
    """The reading of a case run with ``--no-energy``: unavailable, and why."""
    scope = "cpu-package" if spec.device == "cpu" else (
        "tpu" if spec.device.startswith("tpu") else "gpu")
    return EnergyReading(device=spec.device, scope=scope, source="unavailable",
                         note="energy not measured: --no-energy")
