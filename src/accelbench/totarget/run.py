"""Runs of one recipe to its target over several seeds, and what they add up to.

The framework backend trains one seed (:func:`accelbench.backends.torch.totarget.
train_to_target`); here the seeds are run, each outcome becomes a stored record with its
energy figure, and the set is scored the way MLPerf scores it (:mod:`accelbench.totarget.
score`).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from accelbench.durations import utc_now
from accelbench.errors import ConfigError
from accelbench.frameworks import DEFAULT_FRAMEWORK
from accelbench.totarget.energy import Metering, Window
from accelbench.totarget.outcome import Limits, RunOutcome
from accelbench.totarget.recipes import Recipe
from accelbench.totarget.record import Energy, SensorEnergy, ToTargetRecord
from accelbench.totarget.score import ConvergenceCheck, Score, mlperf_score, rcp_check


def trainers() -> dict[str, str]:
    """The framework backends ``train`` runs on: framework -> the module with
    ``train_to_target`` (each backend's ``totarget``, asked of the registry)."""
    from accelbench.frameworks import backend_fact, framework_names

    return {fw: str(m) for fw in framework_names()
            if (m := backend_fact(fw, "totarget", None)) is not None}

NO_SENSOR = ("no CPU energy counter (RAPL) is readable here; --cpu-tdp-w W gives an "
             "estimate")


def trainer(framework: str, *, threads: int | None = None) -> Callable[..., RunOutcome]:
    """The ``train_to_target`` of ``framework``'s backend, or a one-line refusal; with
    ``threads``, also the backend's refusal of a thread count it cannot honour (its
    ``check_threads``, where it has one), before anything is written."""
    module = trainers().get(framework)
    if module is None:
        raise ConfigError(f"accelbench train --framework {framework}: not implemented yet "
                          f"(train runs on: {', '.join(trainers())})")
    backend = importlib.import_module(module)
    check = getattr(backend, "check_threads", None)
    if threads is not None and check is not None:
        check(threads)
    fn: Callable[..., RunOutcome] = backend.train_to_target
    return fn


def checked_device(framework: str, device: str) -> str:
    """``device`` as ``framework``'s trainer names it (``cuda`` -> ``cuda:0``), or a one-line
    refusal where the name is unknown or the device is not present here (the backend's
    ``check_device``: ``run``'s names and words)."""
    check = getattr(importlib.import_module(trainers()[framework]), "check_device", None)
    if check is None:
        if device != "cpu":
            raise ConfigError(f"accelbench train --framework {framework} --device {device}: "
                              "this backend trains on the CPU only")
        return device
    return str(check(device))


def fitted(framework: str, recipe: Recipe) -> Recipe:
    """``recipe`` as ``framework``'s trainer feeds it (the backend's ``fit_recipe``, where it
    has one: a one-line refusal of what it cannot train, or the recipe it trains)."""
    fit = getattr(importlib.import_module(trainers()[framework]), "fit_recipe", None)
    return recipe if fit is None else fit(recipe)


def energy_of(cpu_tdp_w: float | None) -> Energy:
    """The energy figure of a run no sensor measured: a TDP estimate where one was given,
    else unavailable."""
    if cpu_tdp_w is None:
        return Energy(source="unavailable", boundary="", reason=NO_SENSOR)
    return Energy(source="estimate: --cpu-tdp-w x training time", boundary="cpu package",
                  power_w=cpu_tdp_w)


def parse_target(text: str, recipe: Recipe) -> float:
    """``auto`` (the recipe's documented target) or a number the metric can take."""
    if text.strip().lower() == "auto":
        return recipe.auto_target()
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"--target {text!r}: a number or auto") from None
    if not math.isfinite(value) or value <= 0 or (recipe.metric != "loss" and value > 1):
        what = {"accuracy": "an accuracy in (0, 1]", "cer": "a character error rate in (0, 1]"
                }.get(recipe.metric, "a loss > 0 (nats)")
        raise ConfigError(f"--target {text}: {recipe.workload} is scored by {what}")
    return value


def run_seeds(recipe: Recipe, limits: Limits, *, seeds: int, metering: Metering,
              framework: str = DEFAULT_FRAMEWORK, threads: int = 1, first_seed: int = 0,
              on_run: Callable[[ToTargetRecord], None] | None = None) -> list[ToTargetRecord]:
    """Train seeds ``first_seed`` .. ``first_seed + seeds - 1`` to the target on
    ``metering.device`` with ``framework``'s backend, one record each. Before the first
    seed, each sensor's idle power is measured for ``metering.idle_s`` seconds (where a
    sensor reads); every sensor (and the node meter ``metering`` names) is then read over
    each run's training clock, with its energy at each evaluation point."""
    train_to_target = trainer(framework)
    group = secrets.token_hex(8)
    out = []
    window = Window(metering, device=metering.device)
    # A CPU run asks no device of the trainer (a plugin's trainer may train on the CPU only;
    # checked_device refuses any other device for one without check_device).
    where = {} if metering.device == "cpu" else {"device": metering.device}
    try:
        window.measure_idle()
        for seed in range(first_seed, first_seed + seeds):
            outcome = train_to_target(recipe, seed=seed, limits=limits, threads=threads,
                                      clock=window.clock, **where)
            energy = energy_from(window.sensors(outcome.points), window, outcome.time_s)
            outcome = with_point_energy(outcome, energy)
            rec = ToTargetRecord(id=secrets.token_hex(8), group_id=group,
                                 created_at=utc_now(), framework=framework, recipe=recipe,
                                 target=limits.target, eval_every=limits.eval_every,
                                 outcome=outcome, energy=energy, device=metering.device)
            out.append(rec)
            if on_run is not None:
                on_run(rec)
    finally:
        window.close()
    return out


def energy_from(sensors: tuple[SensorEnergy, ...], window: Window, time_s: float) -> Energy:
    """The run's energy: the device boundary's sensors where any measured, else the TDP
    estimate or unavailable; every sensor (host and node too) kept beside the figure."""
    device = [s for s in sensors if s.boundary == "device"]
    if not device:
        fallback = (energy_of(window.metering.cpu_tdp_w) if window.device == "cpu" else
                    Energy(source="unavailable", boundary="", reason=(
                        f"no energy sensor of {window.device} read here (accelbench doctor "
                        "says why); --cpu-tdp-w estimates a CPU only")))
        return dataclasses.replace(fallback, sensors=sensors, idle_s=window.idle_s,
                                   idle_note=window.idle_note)
    return Energy(source=", ".join(sorted({s.source for s in device})),
                  boundary=", ".join(f"{s.device} {s.scope}" for s in device),
                  measured_j=sum(s.energy_j for s in device), sensors=sensors,
                  idle_s=window.idle_s, idle_note=window.idle_note,
                  note=window.window_note(time_s))


def with_point_energy(outcome: RunOutcome, energy: Energy) -> RunOutcome:
    """The outcome with each evaluation point's device energy: the sensors' interpolated
    energy, or an estimate's power x the point's clock, else None."""
    points = []
    for i, p in enumerate(outcome.points):
        joules = energy.point_j(i)
        # A sensor's point carries its bound; an estimate's (power x clock) is the
        # estimate's stated model error, read from the record (not stored: its bytes stay).
        rel = energy.point_rel_95(i) if joules is not None else None
        if joules is None and energy.power_w is not None:
            joules = energy.power_w * p.time_s
        points.append(dataclasses.replace(p, energy_j=joules, energy_rel_95=rel))
    return dataclasses.replace(outcome, points=tuple(points))


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """What a set of seeds adds up to."""

    runs: int
    reached: int
    diverged: int
    time_score: Score | None
    """MLPerf's score of time-to-target (None with < 3 runs or > 1 miss: ``why_no_score``)."""
    why_no_score: str
    samples_cv: float | None
    """Coefficient of variation (sd ddof 1 / mean) of samples-to-target over reached runs."""
    convergence: ConvergenceCheck | None
    """Samples-to-target against the shipped reference runs (None: ``why_no_check``)."""
    why_no_check: str


def _convergence(records: list[ToTargetRecord],
                 samples: list[int]) -> tuple[ConvergenceCheck | None, str]:
    from accelbench.totarget.references import reference_for

    first = records[0]
    ref, why = reference_for(first.recipe, eval_every=first.eval_every, target=first.target,
                             framework=first.framework)
    if ref is None:
        return None, why
    if len(samples) < 3:
        return None, f"{len(samples)} run(s) reached the target; the check needs 3"
    return rcp_check(samples, ref.samples_to_target), ""


def summarise(records: list[ToTargetRecord]) -> Summary:
    """Score the seeds: a run that diverged or hit its cap counts as not converged."""
    times = [r.time_to_target_s for r in records]
    samples = [r.samples_to_target for r in records if r.samples_to_target is not None]
    score, why = None, ""
    try:
        score = mlperf_score(times)
    except ValueError as exc:
        why = str(exc)
    cv = (float(np.std(samples, ddof=1) / np.mean(samples)) if len(samples) >= 2 else None)
    check, why_not = _convergence(records, samples)
    return Summary(runs=len(records), reached=len(samples),
                   diverged=sum(r.outcome.status == "diverged" for r in records),
                   time_score=score, why_no_score=why, samples_cv=cv, convergence=check,
                   why_no_check=why_not)


def _split(energy: Energy, boundary: str = "device") -> str:
    """``idle X J, dynamic Y J +- z%`` where a baseline was measured, else ``""``."""
    from accelbench.result_text import bound_text

    idle, dyn = energy.idle_j(boundary), energy.dynamic_j(boundary)
    if idle is None or dyn is None:
        return ""
    return (f"idle {idle:.4g} J, dynamic {dyn:.4g} J "
            f"{bound_text(energy.rel_95(boundary, dynamic=True))}")


def describe(rec: ToTargetRecord) -> str:
    """One line per seed: status, what it took, the best metric, energy."""
    o: RunOutcome = rec.outcome
    best = o.best(lower_is_better=rec.recipe.lower_is_better)
    best_s = "none (no evaluation)" if best is None else f"{best:.4g}"
    from accelbench.result_text import bound_text

    joules = rec.energy.joules(o.time_s)
    what = ", ".join(filter(None, [rec.energy.label(), _split(rec.energy)]))
    energy = (f"energy {rec.energy.label()}" if joules is None
              else f"energy {joules:.4g} J {bound_text(rec.energy.rel_95())} ({what})")
    node = rec.energy.total_j("node")
    if node is not None:
        split = _split(rec.energy, "node")
        energy += (f", node {node:.4g} J {bound_text(rec.energy.rel_95('node'))}"
                   + (f" ({split})" if split else ""))
    return (f"seed {o.seed}: {o.status} after {o.samples} samples, {o.time_s:.2f} s "
            f"(evaluation {o.eval_s:.2f} s; start-up {o.startup_s:.2f} s apart), best "
            f"{rec.recipe.metric} {best_s}, {energy}; {input_line(rec)}; {o.reason}")


def input_line(rec: ToTargetRecord) -> str:
    """``input generated, 0 loader workers: waited 1.2 ms/step (median; CI 1.0-1.4), stall
    3.1% of the step time`` (``run --data``'s words), or why there is no such figure."""
    from accelbench.data.stall import stall_line

    line = stall_line(rec.outcome.input)
    if line is not None:
        return f"input {line}"
    if rec.recipe.feed == "memory":
        why = "batches drawn in memory, no input pipeline"
    elif rec.outcome.input is not None:
        why = "no batch was taken"
    else:
        why = "stored before train timed the wait"
    return f"input wait unavailable ({why})"


def summary_line(s: Summary) -> str:
    """The set's score in one line: reached runs, MLPerf's score with its CI, the spread of
    samples-to-target and the convergence check (each with the reason where absent)."""
    line = f"{s.reached}/{s.runs} reached the target ({s.diverged} diverged)"
    if s.time_score is not None:
        sc = s.time_score
        line += (f"; time-to-target score {sc.mean:.3g} s (MLPerf: fastest and slowest "
                 f"dropped, {sc.kept} kept; {sc.confidence:.0%} CI {sc.ci_low:.3g}-"
                 f"{sc.ci_high:.3g} s)")
    else:
        line += f"; no MLPerf score ({s.why_no_score})"
    if s.samples_cv is not None:
        line += f"; samples-to-target CV {s.samples_cv:.1%}"
    if s.convergence is not None:
        c = s.convergence
        verdict = ("FASTER than the references allow (MLPerf would reject it)" if c.too_fast
                   else "within what the references allow")
        line += (f"; convergence: mean samples-to-target {c.mean:.0f} (olympic) vs minimum "
                 f"{c.limit.min_mean:.0f} of the reference runs, {verdict}")
    else:
        line += f"; no convergence check ({s.why_no_check})"
    return line
