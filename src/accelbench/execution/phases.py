"""``--phases``: where a training step's time and energy go, measured after the window.

Framework-neutral: the backend gives a :class:`~accelbench.backends.base.PhaseSteps` (the
step's pieces over the same model, batch and optimizer), and this module

1. **attributes** the step directly: N full steps of ``timed_step()``, the median per
   phase with a bootstrap CI95, their sum checked against the record's measured step;
2. runs the **differential loops** (forward, forward + backward, the full step and, in a
   data-parallel case, the step without gradient sync) in interleaved trials (A B C A B C:
   drift hits every loop alike), each long enough for the sensors (the case's
   energy-window rule) or, without one, a short time window; a phase is a difference of
   per-iteration figures with a bootstrap CI over trials (each loop's resampled on its
   own), labelled ``measured``, ``indistinguishable`` or ``negative``, never clipped;
3. times the **input** copy (host to device) where the case has one.

In a data-parallel case every rank runs the same loops the same number of iterations
(counts agreed with a MAX over the group), so collectives match; rank 0's times are
stored and the energy of every rank's sensors is summed on rank 0.
"""

from __future__ import annotations

import math
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelbench import phases as record
from accelbench.phases import Difference, Loop, Phase, PhaseName, PhasePlan, Phases

if TYPE_CHECKING:
    from accelbench.backends.base import PhaseSteps, TrainStep
    from accelbench.backends.ranks import RankGroup
    from accelbench.execution.measure import Timings
    from accelbench.meters.session import MeterSession
    from accelbench.meters.updates import EnergyWindow
    from accelbench.spec import RunSpec

#: Loop name -> (phase, loop added, loop subtracted); ``step_no_sync`` only in a
#: data-parallel case (then the optimizer is measured without the all-reduce).
_SINGLE = (("forward", "forward", None), ("backward", "forward_backward", "forward"),
           ("optimizer", "step", "forward_backward"))
_DDP = (("forward", "forward", None), ("backward", "forward_backward", "forward"),
        ("communication", "step", "step_no_sync"),
        ("optimizer", "step_no_sync", "forward_backward"))
NO_INPUT_NOTE = ("input: the batch is made on its device (synthetic data, no pipeline): "
                 "no host-to-device copy")
ESTIMATE_NOTE = ("per-phase energy needs a power sensor: this case's energy is an estimate "
                 "or unavailable, and an estimate from time would only restate the time split")


@dataclass(frozen=True, slots=True)
class PhaseContext:
    """What the phase pass reads beside the step's pieces: the case's meters, ranks and
    limits."""

    samples_per_step: int
    """Samples of one step on this rank (for the meters' readings)."""
    session: MeterSession | None = None
    """The case's meter session (closed window), or None: no energy."""
    window: EnergyWindow | None = None
    """The case's energy window; None where no sensor reads (then no energy)."""
    group: RankGroup | None = None
    """The process group of a data-parallel case."""
    seed: int = 0
    """Seeds the bootstrap."""
    device: str = "cpu"
    """This rank's device (which readings are inside ``boundary``)."""
    boundary: str = "device"
    """The record's energy boundary."""
    input_waits_s: tuple[float, ...] = ()
    """The measured window's waits for the next batch (``--data``): the input phase, in
    the step; empty with synthetic data (the input phase is then a loop of copies)."""
    on_loop: Callable[[str], None] | None = None
    """Called with a loop's name whenever it starts running (calibration and each trial;
    a test's fake sensor follows it)."""
    plan: PhasePlan = field(default_factory=PhasePlan)
    """Trial counts and lengths."""
    deadline_s: float | None = None
    """``time.perf_counter()`` by which the pass must end (the case's timeout): the
    attribution pass takes at most a quarter of what is left, and the loops run fewer
    trials (at least 3) or none, said in the notes."""

    @property
    def energy_session(self) -> MeterSession | None:
        """The session the loops' trials read energy from: None without a window."""
        return self.session if self.window is not None else None


@dataclass(frozen=True, slots=True)
class _Trial:
    """One trial of a loop: seconds and joules (None: not measured) per iteration, the
    iterations run, and the sources of the energy readings inside the boundary."""

    seconds: float
    joules: float | None
    iterations: int
    sources: frozenset[str] = frozenset()
    half_j: float | None = None
    """Half-width of ``joules``' 95% bound (its readings' half-widths added); None where a
    reading inside the boundary has none."""


@dataclass(frozen=True, slots=True)
class _LoopRuns:
    """What the differential loops produce: each loop's trials ``(seconds/iteration,
    joules/iteration or None, iterations)``, the energy sources read, and notes."""

    runs: dict[str, list[tuple[float, float | None, int]]]
    sources: set[str]
    notes: list[str]
    halves: dict[str, list[float | None]] = field(default_factory=dict)
    """Each trial's half-width of its joules per iteration (:attr:`_Trial.half_j`)."""


def measure_phases(pieces: PhaseSteps, step_time_s: float | None, ctx: PhaseContext
                   ) -> Phases:
    """Split the step into phases (see the module's docstring).

    ``pieces`` are the backend's pieces of the measured step; ``step_time_s`` the record's
    measured median step time (the sum is checked against it); ``ctx`` what else the pass
    reads (:class:`PhaseContext`).
    """
    from accelbench.stats import bootstrap_median_ci

    plan, group, seed = ctx.plan, ctx.group, ctx.seed
    notes: list[str] = []
    budget = _agreed_budget(ctx.deadline_s, group)
    direct, n_direct = _attribute(pieces, plan, group, budget)
    collectives, collectives_method = _collectives(pieces, group)
    loops = dict(pieces.loops())
    copy = pieces.input_copy()
    if copy is not None and not ctx.input_waits_s:
        loops["input"] = copy
    elif not ctx.input_waits_s:
        notes.append(NO_INPUT_NOTE)
    ran = _run_loops(pieces, loops, ctx)
    runs, sources = ran.runs, ran.sources
    notes.extend(ran.notes)
    times = {name: [t for t, _, _ in trials] for name, trials in runs.items()}
    energies, halves = _energies_over_ranks(runs, ran.halves, group)
    if group is not None:
        gathered = group.gather(sorted(sources))
        sources = {s for got in gathered or [sorted(sources)] for s in got}
    source, energy_note = _energy_state(ctx.session, ctx.window, energies, plan, sources)
    if not runs:
        source, energy_note = "unavailable", "no differential loops ran (see the notes)"
    ddp = "step_no_sync" in loops
    phases: list[Phase] = []
    if ctx.input_waits_s:
        phases.append(_wait_phase(ctx.input_waits_s, energy_note))
    elif "input" in times:
        phases.append(_input_phase(times["input"], (energies, halves), source,
                                   energy_note, plan, seed))
    diff_t = _differences(times, _DDP if ddp else _SINGLE, plan, seed, "time")
    diff_e = (with_bounds(_differences(energies, _DDP if ddp else _SINGLE, plan, seed,
                                       "energy"),
                          energies, halves, _DDP if ddp else _SINGLE)
              if source != "unavailable" and energies is not None else {})
    order: tuple[PhaseName, ...] = ("forward", "backward", "communication", "optimizer")
    for name in order:
        if name not in diff_t and name not in direct:
            continue
        times_d = direct.get(name)
        t_med = statistics.median(times_d) if times_d else None
        t_ci = bootstrap_median_ci(times_d) if times_d and len(times_d) >= 3 else None
        dt = diff_t.get(name)
        agrees = _overlap(t_ci, dt.ci95) if (t_ci and dt and dt.ci95) else None
        if agrees is False and t_med is not None and dt is not None and dt.value is not None:
            notes.append(f"{name}: direct {t_med * 1e3:.4g} ms vs differential "
                         f"{dt.value * 1e3:.4g} ms, CIs apart (the direct pass waits for the "
                         "device at each boundary; the loops keep the overlap and caching "
                         "of repeated pieces)")
        energy = diff_e.get(name) or Difference(value=None, note=energy_note)
        phases.append(Phase(name=name, time_s=t_med, time_ci95_s=t_ci, diff_time=dt,
                            energy=energy, in_step=True, agrees=agrees))
    phases += inside_phases(pieces, phases)
    sum_rel = _sum_rel(phases, step_time_s)
    if sum_rel is not None and abs(sum_rel) > record.SUM_TOLERANCE_REL:
        notes.append(_sum_note(sum_rel, ddp))
    loop_records = tuple(
        Loop(name=name, iterations=tuple(n for _, _, n in runs[name]), time_s=tuple(times[name]),
             energy_j=tuple(energies[name]) if energies is not None else ())
        for name in runs)
    return Phases(phases=tuple(sorted(phases, key=lambda p: record.PHASE_NAMES.index(p.name))),
                  method=pieces.method, attribution_steps=n_direct,
                  step_time_s=step_time_s, sum_rel_diff=sum_rel, loops=loop_records,
                  energy_source=source, energy_note=energy_note, notes=tuple(notes),
                  collectives=collectives, collectives_method=collectives_method)


def _collectives(pieces: PhaseSteps, group: RankGroup | None
                 ) -> tuple[tuple[dict[str, Any], ...], str]:
    """A sharded case's time per collective kind on every rank, gathered on rank 0 (the
    pieces' optional ``collective_times()``; empty where they have none or return None)."""
    timer = getattr(pieces, "collective_times", None)
    mine = timer() if callable(timer) else None
    if mine is None:
        return (), ""
    gathered = group.gather(mine) if group is not None else [mine]
    if not gathered:  # a rank other than 0: rank 0 stores the record
        return (), ""
    per_rank = tuple({"rank": i, **got} for i, got in enumerate(gathered))
    return per_rank, str(getattr(pieces, "collectives_method", ""))


# -- the direct attribution pass ------------------------------------------------------------


def _agreed_budget(deadline_s: float | None, group: RankGroup | None) -> float | None:
    """Seconds left before the deadline (the least of any rank's), or None."""
    left = deadline_s - time.perf_counter() if deadline_s is not None else math.inf
    if group is not None:
        [neg] = group.max_all([-min(left, 1e12)])
        left = -neg
    return left if left < 1e12 else None


def _attribute(pieces: PhaseSteps, plan: PhasePlan, group: RankGroup | None,
               budget_s: float | None) -> tuple[dict[str, list[float]], int]:
    """Full steps of ``timed_step()`` until the plan's time and count are met (the stop
    decided on the elapsed time agreed over the ranks); at most a quarter of
    ``budget_s`` once it has 3 steps."""
    max_s = plan.attribution_max_s if budget_s is None else min(plan.attribution_max_s,
                                                                 budget_s / 4)
    pieces.timed_step()  # the pieces' first run (allocations, caches) is not measured
    pieces.synchronize()
    per_phase: dict[str, list[float]] = {}
    t0, n = time.perf_counter(), 0
    while True:
        for name, seconds in pieces.timed_step().items():
            per_phase.setdefault(name, []).append(float(seconds))
        n += 1
        elapsed = time.perf_counter() - t0
        if group is not None:
            [elapsed] = group.max_all([elapsed])
        if (n >= plan.attribution_max_steps
                or (n >= plan.attribution_min_steps and elapsed >= plan.attribution_min_s)
                or (n >= 3 and elapsed >= max_s)):
            return per_phase, n


def _sum_rel(phases: list[Phase], step_time_s: float | None) -> float | None:
    parts = [p.time_s for p in phases if p.in_step]
    if not step_time_s or not parts or any(t is None for t in parts):
        return None
    return (sum(t for t in parts if t is not None) - step_time_s) / step_time_s


def _sum_note(sum_rel: float, ddp: bool) -> str:
    side = "more" if sum_rel > 0 else "less"
    why = ("each phase boundary waits for the device, so work that the real step overlaps "
           "or fuses across phases runs apart here, and every wait costs its own latency")
    if ddp:
        why += ("; the real step overlaps the gradient all-reduce with the backward pass, "
                "the direct pass runs it after")
    if sum_rel < 0:
        why = ("the pass ran after the measured window, where the step ran faster "
               "(warmer caches, less competition) or the headline step waited on something "
               "the phases do not time")
    return (f"the in-step phases' direct times sum to {abs(sum_rel):.1%} {side} than the "
            f"measured step (tolerance {record.SUM_TOLERANCE_REL:.0%}): {why}")


# -- the differential loops -----------------------------------------------------------------


def _run_loops(pieces: PhaseSteps, loops: dict[str, Callable[[], None]], ctx: PhaseContext
               ) -> _LoopRuns:
    """Each loop's trials, interleaved: ``(seconds/iteration, joules/iteration or None,
    iterations)`` per trial; fewer trials (or none) where the deadline allows no more."""
    plan, window, group, on_loop = ctx.plan, ctx.window, ctx.group, ctx.on_loop
    notes: list[str] = []
    sources: set[str] = set()
    counts: dict[str, int] = {}
    round_s = 0.0
    for name, fn in loops.items():
        if on_loop is not None:
            on_loop(name)
        counts[name], per_iter = _iterations(fn, pieces, plan, window, group)
        round_s += counts[name] * per_iter
    if group is not None:  # every rank the same counts, so collectives match
        agreed = group.max_all([float(n) for n in counts.values()] + [round_s])
        counts = {name: int(n) for name, n in zip(counts, agreed, strict=False)}
        round_s = agreed[-1]
    trials = plan.trials
    left = _agreed_budget(ctx.deadline_s, group)
    if left is not None:
        trials = min(trials, int(left / max(round_s, 1e-9)))
        if trials < 3:
            notes.append(f"differential loops not run: 3 rounds of the loops need about "
                         f"{3 * round_s:.3g} s, {max(left, 0.0):.3g} s were left before the "
                         "case's --timeout (raise --timeout for time and energy per phase "
                         "from the loops)")
            return _LoopRuns({}, sources, notes)
        if trials < plan.trials:
            notes.append(f"{trials} trials per loop instead of {plan.trials}: the case's "
                         "--timeout left no time for more")
    runs: dict[str, list[tuple[float, float | None, int]]] = {name: [] for name in loops}
    halves: dict[str, list[float | None]] = {name: [] for name in loops}
    for _ in range(trials):
        for name, fn in loops.items():
            if on_loop is not None:
                on_loop(name)
            trial = _trial(fn, counts[name], pieces, ctx)
            sources.update(trial.sources)
            runs[name].append((trial.seconds, trial.joules, trial.iterations))
            halves[name].append(trial.half_j)
    return _LoopRuns(runs, sources, notes, halves)


def _iterations(fn: Callable[[], None], pieces: PhaseSteps, plan: PhasePlan,
                window: EnergyWindow | None, group: RankGroup | None) -> tuple[int, float]:
    """Iterations of one trial of a loop: enough for the energy window (10% margin) or,
    without one, the plan's time window; from a short calibration after two warm-ups
    (doubling batches; in a rank, the elapsed time agreed, so every rank runs the same
    iterations: the loops hold collectives)."""
    for _ in range(2):
        fn()
    pieces.synchronize()
    t0, k, batch = time.perf_counter(), 0, 1
    while True:
        for _ in range(batch):
            fn()
        pieces.synchronize()
        k += batch
        elapsed = time.perf_counter() - t0
        if group is not None:
            [elapsed] = group.max_all([elapsed])
        if k >= 2 and (elapsed >= 0.05 or k >= 1000):
            break
        batch = k
    per_iter = max(elapsed / k, 1e-7)
    if window is not None:
        need_s, need_n = 1.1 * window.min_s, max(window.min_steps, plan.trial_min_iterations)
    else:
        need_s, need_n = plan.trial_s, plan.trial_min_iterations
    return int(min(max(need_n, math.ceil(need_s / per_iter)), 10_000_000)), per_iter


def _trial(fn: Callable[[], None], n: int, pieces: PhaseSteps, ctx: PhaseContext) -> _Trial:
    """One trial of ``n`` iterations, extended by quarters until the energy window is met
    (the elapsed time agreed over the ranks: ``window`` is the same on every rank)."""
    session, window, group = ctx.energy_session, ctx.window, ctx.group
    pieces.synchronize()
    if session is not None:
        session.start()
    t0, done = time.perf_counter(), 0
    while True:
        for _ in range(n - done):
            fn()
        done = n
        pieces.synchronize()
        elapsed = time.perf_counter() - t0
        if window is None:
            break
        agreed = group.max_all([elapsed])[0] if group is not None else elapsed
        if window.met(n, agreed):
            break
        n += max(1, math.ceil(n / 4))
    if session is None:
        return _Trial(elapsed / n, None, n)
    readings, _timeline = session.stop(samples=ctx.samples_per_step * n)
    joules, sources, half = per_iteration_j(readings, ctx)
    return _Trial(elapsed / n, joules, n, sources, half)


def per_iteration_j(readings: Sequence[Any], ctx: PhaseContext
                     ) -> tuple[float | None, frozenset[str], float | None]:
    """Joules per iteration inside the energy boundary (None unless every reading in it
    is a measured one: a counter or integrated samples), the sources of the readings
    inside it, and the half-width of the joules' 95% bound: each reading's ``rel_95``
    (:mod:`accelbench.meters.uncertainty`) times its joules, added (None where a reading
    has no bound)."""
    from accelbench.result import boundary_readings

    inside = boundary_readings(readings, ctx.device, ctx.boundary,
                               distributed=ctx.group is not None)
    sources = frozenset(r.source for r in inside)
    per_sample = [r.energy_j_per_sample for r in inside
                  if r.source in ("counter", "integrated_samples")]
    if not inside or len(per_sample) < len(inside) or None in per_sample:
        return None, sources, None
    # Per sample (over the covered part of the window) x samples of a step.
    joules = sum(e for e in per_sample if e is not None) * ctx.samples_per_step
    rels: list[float] = []
    for r in inside:
        rel = ((r.details or {}).get("uncertainty") or {}).get("rel_95")
        if not isinstance(rel, (int, float)):
            return joules, sources, None
        rels.append(float(rel))
    half = sum(abs(e or 0.0) * rel for e, rel in zip(per_sample, rels, strict=True))
    return joules, sources, half * ctx.samples_per_step


Series = dict[str, list[float | None]]


def _energies_over_ranks(
    runs: dict[str, list[tuple[float, float | None, int]]], halves: Series,
    group: RankGroup | None,
) -> tuple[Series | None, Series | None]:
    """Joules per iteration of each loop's trials and their bounds' half-widths, each
    summed over the ranks that read a sensor (on rank 0: the sum's half-width is the
    ranks' half-widths added); ``(None, None)`` where no rank read one."""
    mine: Series | None = {name: [e for _, e, _ in trials] for name, trials in runs.items()}
    if mine is not None and all(e is None for es in mine.values() for e in es):
        mine = None
    mine_h = {name: list(halves.get(name) or [None] * len(es))
              for name, es in mine.items()} if mine is not None else None
    if group is None:
        return mine, mine_h
    gathered = group.gather({"e": mine, "h": mine_h})
    if gathered is None:  # not rank 0: it stores nothing
        return mine, mine_h
    readers = [g for g in gathered if g["e"] is not None]
    if not readers:
        return None, None

    def total(key: str) -> Series:
        return {name: [None if any(r[key][name][i] is None for r in readers)
                       else sum(r[key][name][i] for r in readers) for i in range(len(trials))]
                for name, trials in readers[0]["e"].items()}

    return total("e"), total("h")


def _energy_state(session: MeterSession | None, window: EnergyWindow | None,
                  energies: dict[str, list[float | None]] | None, plan: PhasePlan,
                  sources: set[str]) -> tuple[str, str]:
    """The loops' energy source and its note (why unavailable, or what bounds it)."""
    if energies is None or window is None:
        if session is None:
            return "unavailable", "energy not measured in this case (--no-energy)"
        return "unavailable", ESTIMATE_NOTE
    measured = sorted(sources & {"counter", "integrated_samples"})
    return "+".join(measured) or "counter", (
        f"{plan.trials} interleaved trials per loop, each {window.describe()}; energy inside "
        "the record's boundary, idle power included")


# -- differences and their CIs --------------------------------------------------------------


def _differences(series: dict[str, list[Any]], combos: Sequence[tuple[str, str, str | None]],
                 plan: PhasePlan, seed: int, what: str) -> dict[str, Difference]:
    """Each phase of ``combos`` as a :class:`Difference` of the loops' per-iteration means,
    its CI95 from resampling each loop's trials on their own (seeded)."""
    import numpy as np

    from accelbench.stats import bootstrap

    rng = np.random.default_rng(seed)
    usable = {name: [float(v) for v in vals if v is not None]
              for name, vals in series.items()}
    boots = {name: bootstrap(vals, plan.resamples, rng, ("mean",))[0]
             for name, vals in usable.items() if len(vals) >= 2}
    unit = "s" if what == "time" else "J"
    out: dict[str, Difference] = {}
    for phase, plus, minus in combos:
        if plus not in usable:
            continue
        names = [plus] + ([minus] if minus else [])
        if any(n not in boots for n in names):
            out[phase] = Difference(value=None, note=f"fewer than 2 trials of the {what} loops "
                                    "met the energy window")
            continue
        value = float(np.mean(usable[plus]) - (np.mean(usable[minus]) if minus else 0.0))
        diff = boots[plus] - (boots[minus] if minus else 0.0)
        low, high = (float(q) for q in np.quantile(diff, [0.025, 0.975]))
        scale = max(abs(float(np.mean(usable[n]))) for n in names)
        out[phase] = _labelled(value, (low, high), 1e-9 * scale, plus, minus, unit)
    return out


BOUND_NONE_NOTE = ("error bound unavailable: a reading inside the boundary has none (too "
                   "little is known of its sensor, e.g. no measured update period)")


def with_bounds(diffs: dict[str, Difference], energies: Series, halves: Series | None,
                combos: Sequence[tuple[str, str, str | None]]) -> dict[str, Difference]:
    """Each energy difference with its 95% bound from the sensors (issue 44): a loop's
    half-width per iteration is the mean of its trials' (those whose energy was read:
    the mean's error is at most the mean of the errors), and a phase's is its loops'
    added, at their worst as a reading's own terms are, over ``|value|``. The bootstrap CI
    is the trials' spread; this is what every trial's sensor may be off by besides."""
    import dataclasses

    out = dict(diffs)
    for phase, plus, minus in combos:
        d = diffs.get(phase)
        if d is None or d.value is None:
            continue
        half = 0.0
        for name in [plus] + ([minus] if minus else []):
            hs = [h for e, h in zip(energies.get(name) or [], (halves or {}).get(name) or [],
                                    strict=False) if e is not None]
            if not hs or any(h is None for h in hs):
                half = math.nan
                break
            half += sum(h for h in hs if h is not None) / len(hs)
        if math.isnan(half):
            out[phase] = dataclasses.replace(d, bound_note=BOUND_NONE_NOTE)
        elif d.value == 0:
            out[phase] = dataclasses.replace(
                d, bound_note=f"error bound unavailable as a share: the phase's energy is "
                f"0 J (+- {half:.3g} J per step)")
        else:
            out[phase] = dataclasses.replace(d, rel_95=half / abs(d.value))
    return out


def _labelled(value: float, ci: tuple[float, float], eps: float, plus: str,
              minus: str | None, unit: str) -> Difference:
    low, high = ci
    if high < -eps:
        return Difference(value=value, ci95=ci, status="negative",
                          note=f"{plus} cost less than {minus} per iteration: the loops did not "
                          "add up (noise, a busy machine, or the pieces overlap differently)")
    if low <= eps:
        return Difference(value=value, ci95=ci, status="indistinguishable",
                          note=f"CI95 [{low:.3g}, {high:.3g}] {unit} includes 0: not "
                          "distinguishable from zero at this precision")
    return Difference(value=value, ci95=ci, status="measured")


def _input_phase(times: list[float], series: tuple[Series | None, Series | None],
                 source: str, energy_note: str, plan: PhasePlan, seed: int) -> Phase:
    """The host-to-device copy of one batch: its own loop (outside the measured step);
    ``series`` the loops' energies and their half-widths."""
    combo = (("input", "input", None),)
    diff = _differences({"input": times}, combo, plan, seed, "time")
    t = diff.get("input")
    energy = Difference(value=None, note=energy_note)
    energies, halves = series
    if energies is not None and source != "unavailable":
        energy = with_bounds(_differences({"input": energies["input"]}, combo, plan, seed,
                                          "energy"), energies, halves, combo
                             ).get("input") or energy
    return Phase(name="input", time_s=t.value if t else None,
                 time_ci95_s=t.ci95 if t else None, energy=energy, in_step=False,
                 note="timed as its own loop of copies (pinned host memory, non-blocking)")


def inside_phases(pieces: PhaseSteps, phases: list[Phase]) -> list[Phase]:
    """A ``communication`` phase whose collectives run inside the other phases' pieces
    (the pieces' optional ``communication_note``: a JAX mesh, where GSPMD puts them in
    each compiled piece), where the case has none of its own: no figure, the reason in its
    note and its energy's; not in the sum (``in_step`` False: its time is in theirs)."""
    note = getattr(pieces, "communication_note", None)
    if not isinstance(note, str) or not note or any(p.name == "communication"
                                                    for p in phases):
        return []
    return [Phase(name="communication", time_s=None, in_step=False, note=note,
                  energy=Difference(value=None, note=note))]


WAIT_NOTE = ("the step's measured wait for its next batch (--data): from asking the loader "
             "until the batch is on the device, inside each measured step (the record's "
             "input section)")
WAIT_ENERGY_NOTE = ("the wait's energy is not split out: the differential loops train on a "
                    "batch already taken")


def _wait_phase(waits_s: Sequence[float], energy_note: str) -> Phase:
    """The input phase of a step that reads data: its measured waits (median, CI), in the
    step; no differential loop (a loop of fetches would time the loader alone, not the
    wait the step sees beside its compute)."""
    from accelbench.stats import bootstrap_median_ci

    ci = bootstrap_median_ci(list(waits_s)) if len(waits_s) >= 3 else None
    return Phase(name="input", time_s=statistics.median(waits_s), time_ci95_s=ci,
                 energy=Difference(value=None, note=f"{WAIT_ENERGY_NOTE}"
                                   + (f"; {energy_note}" if energy_note else "")),
                 in_step=True, note=WAIT_NOTE)


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


# -- the worker's side ----------------------------------------------------------------------


def _deadline(timeout_s: float) -> float | None:
    """``perf_counter()`` by which the phase pass should end so that the worker, started
    when this process was, finishes its record within ``timeout_s`` (15% and 10 s kept
    for the rest of the record)."""
    try:
        import psutil

        age = time.time() - psutil.Process().create_time()
    except Exception:  # no process start time here: no deadline
        return None
    return time.perf_counter() + 0.85 * timeout_s - 10.0 - age


def phase_samples(spec: RunSpec, group: RankGroup | None) -> int:
    """Samples of one step on this process: a rank's ``--batch-size``, or one process's
    mesh (``--devices``) every data-parallel replica's (the global batch, as the
    throughput counts it)."""
    topo = spec.topology
    return spec.batch_size * (topo.dp_degree if group is None and topo.devices else 1)


def phases_of_case(spec: RunSpec, step: TrainStep, timings: Timings,
                   session: MeterSession | None, window: EnergyWindow | None,
                   group: RankGroup | None) -> Phases:
    """The worker's phase pass after the measured window (inside the meter session); a
    failure is a record with the error in its notes, never a lost measurement."""
    from accelbench.backends.base import phase_steps_of

    step_time = statistics.median(timings.times_s) if timings.times_s else None
    try:
        pieces = phase_steps_of(step)
        if pieces is None:
            return Phases(phases=(), method="", attribution_steps=0, step_time_s=step_time,
                          sum_rel_diff=None, notes=(f"framework {spec.framework} cannot "
                                                    "split its step into phases",))
        device = spec.device if group is None else str(group.device)
        timer = getattr(step, "input_timer", None)  # --data: the window's waits
        waits = tuple(timer.window_waits(timings.steps)) if timer is not None else ()
        ctx = PhaseContext(samples_per_step=phase_samples(spec, group), session=session,
                           window=window, group=group, seed=spec.seed, device=device,
                           boundary=spec.meters.boundary,
                           deadline_s=_deadline(spec.policy.timeout_s), input_waits_s=waits)
        return measure_phases(pieces, step_time, ctx)
    except Exception as exc:  # the headline measurement is already in the record
        traceback.print_exc()
        return Phases(phases=(), method="", attribution_steps=0, step_time_s=step_time,
                      sum_rel_diff=None,
                      notes=(f"the phase pass failed: {type(exc).__name__}: {exc}"[:500],))
