"""How long a case will take, said before it starts (``run``, ``suite --dry-run``).

An estimate, labelled with what it rests on, in order of trust:

1. ``previous run``: the same case (same case key) stored before: its step time and
   build time.
2. ``similar runs``: the model's FLOPs (cached model facts) at the FLOP rate other cases
   of the same size achieved on this device and precision in the store.
3. ``peak``: the model's FLOPs at a fraction of the device's measured (or theoretical)
   peak, the fraction a training step typically reaches.

Nothing here runs a model or imports a framework; without any basis the estimate is None
and the caller says so rather than guessing.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.spec import MeasurementPolicy, RunSpec

if TYPE_CHECKING:
    from accelbench.store import Store

#: Share of the peak a whole training step reaches when nothing better is known. The
#: paper's end-to-end GPU runs sit between 0.2 and 0.5 of peak; small CPU models lower.
_PEAK_FRACTION = 0.25
#: Seconds a case costs beyond its model's build and its steps: the worker forked by the
#: framework's warm server (isolation/forkserver.py), its device check, the record stored.
#: Measured from suite quick records on a 2-core CPU machine, loaded (2026-12-04): 0.05 to
#: 0.35 s a case, median 0.22 s; 0.16-0.35 s again at load ~2 (benchmarks/startup.py
#: --only suite). It was 1.9-5.0 s a case with a fresh worker and a probe.
_START_S = 0.35
#: Seconds to build a model when no build of the same case, nor of another case of the
#: framework at that size on that device, is stored (tiny torch builds took 1.3 s on that
#: machine at load ~2; larger sizes take longer).
_BUILD_S = 2.0


@dataclass(frozen=True, slots=True)
class Estimate:
    """Expected wall-clock seconds of one case, and what the figure rests on."""

    seconds: float
    step_s: float
    basis: str


def loop_seconds(policy: MeasurementPolicy, step_s: float) -> float:
    """Seconds of warm-up and measurement at ``step_s`` per step under ``policy`` (an upper
    estimate: the adaptive stop may end sooner)."""
    warm_n = max(policy.warmup_min, min(policy.warmup_max, 10))
    warm = max(policy.warmup_min * step_s, min(warm_n * step_s, policy.warmup_max_time_s))
    if policy.iterations is not None:
        return warm + policy.iterations * step_s
    measured = max(policy.min_iterations * step_s,
                   min(policy.max_time_s, policy.max_iterations * step_s))
    return warm + measured


def estimate_case(spec: RunSpec, store: Store | None) -> Estimate | None:
    """The expected duration of ``spec``, or None when nothing supports a figure."""
    from accelbench.store import ResultFilter

    overhead = _START_S + (spec.meters.idle_s if spec.meters.enabled else 0.0)
    if store is not None:
        same = [r for r in store.query(ResultFilter(
            workload=spec.workload, size=spec.size, device=spec.device,
            precision=spec.precision, framework=spec.framework, status="ok", limit=50))
            if r.spec.case_key() == spec.case_key() and r.stats is not None]
        if same:
            r = same[0]
            assert r.stats is not None  # noqa: S101 - filtered above
            step = r.stats.median_s
            # The loop's wall time is its steps at their mean (a run with slow bursts
            # took n x mean, not n x median); the median is the step shown.
            wall_step = max(step, r.stats.mean_s)
            build = (r.build_time_s if r.build_time_s is not None
                     else _build_s(spec, store)) + (r.compile_s or 0.0)
            # Its readings say whether a sensor read (none: it ran without meters).
            sensor = measured_energy(r.energy_source) if r.energy else None
            return _scaled(spec, Estimate(build + overhead + loop_seconds(spec.policy, wall_step)
                                          + phase_pass_seconds(spec, step, sensor=sensor),
                                          step, "previous run"))
    flops = _train_flops(spec)
    if flops is None:
        return None
    rate, basis = _flop_rate(spec, store)
    if rate is None:
        return None
    step = flops * spec.batch_size / rate
    return _scaled(spec, Estimate(_build_s(spec, store) + overhead
                                  + loop_seconds(spec.policy, step)
                                  + phase_pass_seconds(spec, step), step, basis))


def measured_energy(source: str) -> bool:
    """Whether an ``energy_source`` (a record's) came from a power sensor: a counter or
    integrated samples, not an estimate or nothing."""
    return any(part in ("counter", "integrated_samples") for part in source.split("+"))


def sensor_reads(spec: RunSpec) -> bool:
    """Whether a power sensor will read the case's device, so that each of ``--phases``'
    trials must fill an energy window: a readable RAPL package counter for a CPU; an
    accelerator is assumed to have one (NVML, amd-smi)."""
    if not spec.meters.enabled:
        return False
    if spec.device != "cpu":
        return True
    from accelbench.meters import rapl

    return any(d.readable and d.scope == "cpu-package" for d in rapl.cpu_domains())


#: Seconds of a differential loop's calibration beyond its steps (execution/phases.py's
#: ``_iterations``: two warm-up runs, then runs until 0.05 s and 2 runs).
_CALIBRATION_S = 0.05


def phase_pass_seconds(spec: RunSpec, step_s: float, *, sensor: bool | None = None) -> float:
    """Seconds ``--phases`` adds after the measured window (0 without it): the attribution
    pass, each differential loop's calibration, then its trials: where a power sensor
    reads (``sensor``; None: :func:`sensor_reads`), each trial fills the energy window
    with the pass's 10% margin (the slowest sensor assumed to be NVML's 100 ms: 5.5 s),
    else the pass's short trial (0.2 s). Without a sensor the trials are short: counting
    a 5 s energy window per trial put 75 s into a CPU case whose pass took 4 s."""
    if not spec.policy.phases:
        return 0.0
    from accelbench.meters.updates import EnergyWindow
    from accelbench.phases import PhasePlan

    plan = PhasePlan()
    if sensor is None:
        sensor = sensor_reads(spec)
    direct = step_s + min(max(plan.attribution_min_s, plan.attribution_min_steps * step_s),
                          plan.attribution_max_steps * step_s, plan.attribution_max_s)
    # forward, forward + backward, the step; the step without all-reduce; the input copy.
    loops = 3 + spec.topology.distributed + (spec.device != "cpu")
    trial = 1.1 * EnergyWindow.for_period(0.1).min_s if sensor else plan.trial_s
    calibration = max(_CALIBRATION_S, 2 * step_s) + 2 * step_s
    return direct + loops * (calibration
                             + plan.trials * max(trial, plan.trial_min_iterations * step_s))


def _build_s(spec: RunSpec, store: Store | None) -> float:
    """A build time for a case whose own is not stored: the median of the stored builds of
    the framework at the case's size on its device, else :data:`_BUILD_S`."""
    if store is not None:
        from accelbench.store import ResultFilter

        builds = [r.build_time_s for r in store.query(ResultFilter(
            framework=spec.framework, size=spec.size, device=spec.device, status="ok",
            limit=50)) if r.build_time_s is not None]
        if builds:
            return float(statistics.median(builds))
    return _BUILD_S


def _scaled(spec: RunSpec, one: Estimate) -> Estimate:
    """One run's estimate times ``--repeats``, plus the extra energy trials (each at least
    the 5 s energy window, after its --cooldown-s) and the thermal settle's bound."""
    from accelbench.meters.updates import MIN_WINDOW_S

    extra = 0.0
    if spec.meters.enabled:
        extra = ((spec.meters.energy_trials - 1) * (MIN_WINDOW_S + spec.meters.cooldown_s)
                 + spec.meters.settle_max_s)
    return dataclasses.replace(one, seconds=(one.seconds + extra) * spec.policy.repeats)


def _train_flops(spec: RunSpec) -> float | None:
    from accelbench.errors import AccelbenchError
    from accelbench.planning import facts

    try:
        known = facts.lookup(spec.workload, spec.size, spec.framework)
    except AccelbenchError:  # a workload this process does not know: no figure
        return None
    value = (known or {}).get("flop_per_sample")
    return float(value) if value else None


def _flop_rate(spec: RunSpec, store: Store | None) -> tuple[float | None, str]:
    if store is not None:
        from accelbench.store import ResultFilter

        # Same size only: tiny models reach a far smaller share of the peak than paper ones.
        rates = [r.achieved_flop_per_s for r in store.query(ResultFilter(
            device=spec.device, precision=spec.precision, framework=spec.framework,
            size=spec.size, status="ok", limit=200)) if r.achieved_flop_per_s and not r.noisy]
        if rates:
            return statistics.median(rates), f"similar runs ({len(rates)} stored)"
        from accelbench.roofline.peaks import peak_flop_per_s

        peak = peak_flop_per_s(store, spec.device, spec.precision)
        if peak:
            return peak * _PEAK_FRACTION, f"{_PEAK_FRACTION:.0%} of the measured peak"
    from accelbench.roofline.theoretical import theoretical_flop_per_s

    theo = theoretical_flop_per_s(spec.device, None, spec.precision) \
        if spec.device == "cpu" else None
    if theo:
        return theo * _PEAK_FRACTION, f"{_PEAK_FRACTION:.0%} of the theoretical peak"
    return None, ""


def fmt_duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
