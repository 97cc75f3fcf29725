"""Runs of one recipe to its target over several seeds, and what they add up to.

The framework backend trains one seed (:func:`accelbench.backends.torch.totarget.
train_to_target`); here the seeds are run, each outcome becomes a stored record with its
energy figure, and the set is scored the way MLPerf scores it (:mod:`accelbench.totarget.
score`).
"""

from __future__ import annotations

import importlib
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.durations import utc_now
from accelbench.errors import ConfigError
from accelbench.frameworks import DEFAULT_FRAMEWORK
from accelbench.totarget.outcome import Limits, RunOutcome
from accelbench.totarget.recipes import Recipe
from accelbench.totarget.record import Energy, ToTargetRecord
from accelbench.totarget.score import ConvergenceCheck, Score, mlperf_score, rcp_check

#: The framework backends ``train`` runs on: framework -> module with ``train_to_target``.
TRAINERS: dict[str, str] = {DEFAULT_FRAMEWORK: "accelbench.backends.torch.totarget"}

NO_SENSOR = ("no CPU energy counter (RAPL) is readable here; --cpu-tdp-w W gives an "
             "estimate")


def trainer(framework: str) -> Callable[..., RunOutcome]:
    """The ``train_to_target`` of ``framework``'s backend, or a one-line refusal."""
    module = TRAINERS.get(framework)
    if module is None:
        raise ConfigError(f"accelbench train --framework {framework}: not implemented yet "
                          f"(train runs on: {', '.join(TRAINERS)})")
    fn: Callable[..., RunOutcome] = importlib.import_module(module).train_to_target
    return fn


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


def run_seeds(recipe: Recipe, limits: Limits, *, seeds: int, cpu_tdp_w: float | None,
              framework: str = DEFAULT_FRAMEWORK, threads: int = 1, first_seed: int = 0,
              on_run: Callable[[ToTargetRecord], None] | None = None) -> list[ToTargetRecord]:
    """Train seeds ``first_seed`` .. ``first_seed + seeds - 1`` to the target on the CPU
    with ``framework``'s backend, one record each."""
    train_to_target = trainer(framework)

    group = secrets.token_hex(8)
    out = []
    for seed in range(first_seed, first_seed + seeds):
        meter = _Window()
        outcome = train_to_target(recipe, seed=seed, limits=limits, threads=threads,
                                  clock=meter.clock)
        energy = meter.energy() or energy_of(cpu_tdp_w)
        rec = ToTargetRecord(id=secrets.token_hex(8), group_id=group, created_at=utc_now(),
                             framework=framework, recipe=recipe, target=limits.target,
                             eval_every=limits.eval_every,
                             outcome=outcome, energy=energy)
        out.append(rec)
        if on_run is not None:
            on_run(rec)
    return out


class _Window:
    """The CPU's energy sensors (RAPL) over the training clock, where readable."""

    def __init__(self) -> None:
        from accelbench.meters.session import open_session

        self.session = open_session(["cpu"], idle_s=0)
        self.readings: tuple[Any, ...] = ()

    def clock(self, running: bool) -> None:
        if running:
            self.session.start()
        else:
            self.readings, _ = self.session.stop(samples=0)
            self.session.close()

    def energy(self) -> Energy | None:
        """The measured energy, or None where no sensor counted it."""
        got = [r for r in self.readings if r.energy_j is not None and str(r.source) != "estimate"]
        if not got:
            return None
        return Energy(source=", ".join(sorted({str(r.source) for r in got})),
                      boundary=", ".join(f"{r.device} {r.scope}" for r in got),
                      measured_j=sum(float(r.energy_j) for r in got))


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
    ref, why = reference_for(first.recipe, eval_every=first.eval_every, target=first.target)
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


def describe(rec: ToTargetRecord) -> str:
    """One line per seed: status, what it took, the best metric, energy."""
    o: RunOutcome = rec.outcome
    best = o.best(lower_is_better=rec.recipe.lower_is_better)
    best_s = "none (no evaluation)" if best is None else f"{best:.4g}"
    joules = rec.energy.joules(o.time_s)
    energy = (f"energy {rec.energy.label()}" if joules is None
              else f"energy {joules:.4g} J ({rec.energy.label()})")
    return (f"seed {o.seed}: {o.status} after {o.samples} samples, {o.time_s:.2f} s "
            f"(evaluation {o.eval_s:.2f} s; start-up {o.startup_s:.2f} s apart), best "
            f"{rec.recipe.metric} {best_s}, {energy}; {o.reason}")
