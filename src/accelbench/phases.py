"""Where a training step's time and energy go: the record of ``--phases``.

A case run with ``--phases`` stores, beside its headline throughput, a :class:`Phases`:
the step split into :data:`PHASE_NAMES` (forward, backward, optimizer update, and where
they exist gradient communication and input), each phase with

- its **time per step** measured directly inside the real step (an attribution pass after
  the measured window: host timers with a device synchronisation between the phases, CUDA
  events, or the compiled pieces' own timings in JAX), and
- its **time and energy per step from differential steady-state loops** (forward only,
  forward + backward, the full step, and for a data-parallel case the step without
  gradient communication): phase = difference of the loops' per-iteration figures, with a
  bootstrap CI over repeated trials. A difference whose CI includes zero, or that is
  negative, is stored as it came out and labelled (:data:`ENERGY_STATUSES`), never clipped.

Everything here is plain data (no framework, no I/O): the worker fills it in
(:mod:`accelbench.execution.phases`), the store keeps it inside the record, and the
tables, ``compare``, the report and the exports read it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args

PhaseName = Literal["input", "forward", "backward", "optimizer", "communication"]
PHASE_NAMES: tuple[str, ...] = get_args(PhaseName)
"""In the order of a step: the batch arrives, forward, backward, gradients are
all-reduced (DDP overlaps this with the backward), the optimizer updates."""

PHASE_MEANING: dict[str, str] = {
    "input": "host-to-device copy of one batch (outside the measured step: the headline "
             "step trains on a batch already on its device); with --data, the step's "
             "measured wait for its next batch (inside the step)",
    "forward": "forward pass and loss, building the autograd graph as training does "
               "(and zeroing the gradients, which torch does by setting them to None)",
    "backward": "gradients of the loss (backward pass), without their all-reduce",
    "optimizer": "the optimizer update (with the loss scaler's unscale, check and update "
                 "where used)",
    "communication": "all-reduce of the gradients between ranks (data-parallel cases); on "
                     "a JAX mesh, XLA's collectives inside the other phases' pieces (no "
                     "figure of its own)",
}

#: Collective kinds a sharded case's ``--phases`` times per rank (:attr:`Phases.collectives`).
COLLECTIVE_KINDS: tuple[str, ...] = ("all_gather", "reduce_scatter", "all_reduce")

DifferenceStatus = Literal["measured", "indistinguishable", "negative", "unavailable"]
ENERGY_STATUSES: tuple[str, ...] = get_args(DifferenceStatus)
"""``measured``: the CI excludes zero; ``indistinguishable``: the CI includes zero;
``negative``: the estimate and its CI are below zero (the loops did not add up, e.g. a
busy machine); ``unavailable``: no figure (no sensor, an estimate, too few trials), with
the reason in ``note``."""

#: Sum of the in-step phases' direct times vs the measured step: beyond this the record
#: says why (fusion across the phase boundaries lost, synchronisation cost).
SUM_TOLERANCE_REL = 0.10


def _pair(value: Any) -> tuple[float, float] | None:
    return (float(value[0]), float(value[1])) if value is not None else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Difference:
    """One phase's figure from the differential loops: a point estimate per step and its
    bootstrap CI95 over trials, labelled by what the CI allows one to say."""

    value: float | None
    """Per step (seconds or joules); None when ``status`` is ``unavailable``."""
    ci95: tuple[float, float] | None = None
    status: DifferenceStatus = "unavailable"
    note: str = ""
    """Why unavailable, or what the label means for this phase."""
    rel_95: float | None = None
    """An energy difference's 95% error bound from its sensors (issue 44): the loops'
    half-widths per iteration added (worst case, as a reading's own terms are) over
    ``|value|``; None where a reading has no bound (``bound_note`` says why) or the
    figure is a time. Absent from records stored before bounds (and from time figures)."""
    bound_note: str = ""
    """Why ``rel_95`` is None for a measured energy (``error bound unavailable: ...``)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value,
                               "ci95": list(self.ci95) if self.ci95 else None,
                               "status": self.status, "note": self.note}
        if self.rel_95 is not None:  # a record without bounds keeps its bytes
            out["rel_95"] = self.rel_95
        if self.bound_note:
            out["bound_note"] = self.bound_note
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Difference:
        rel = data.get("rel_95")
        return cls(value=data.get("value"), ci95=_pair(data.get("ci95")),
                   status=data.get("status") or "unavailable", note=data.get("note") or "",
                   rel_95=float(rel) if isinstance(rel, (int, float)) else None,
                   bound_note=str(data.get("bound_note") or ""))


@dataclass(frozen=True, kw_only=True, slots=True)
class Phase:
    """One phase of the step."""

    name: PhaseName
    time_s: float | None
    """Direct time per step (median over the attribution pass's steps); None where the
    method cannot separate this phase (``note`` says why)."""
    time_ci95_s: tuple[float, float] | None = None
    """CI95 of the direct time's median (bootstrap over the attribution steps)."""
    diff_time: Difference | None = None
    """Time per step from the differential loops (seconds)."""
    energy: Difference | None = None
    """Energy per step from the differential loops (joules, inside the record's energy
    boundary); ``status`` ``unavailable`` with the reason where energy is not measured."""
    in_step: bool = True
    """False for a phase not part of the sum checked against the step time: outside the
    measured step (input on a case with synthetic data already on its device), or inside
    the other phases (a JAX mesh's communication: its collectives run inside the
    forward, backward and optimizer pieces; no time of its own, ``note`` says so)."""
    agrees: bool | None = None
    """Whether the direct and the differential time agree within their CIs (None where
    one of them is missing)."""
    note: str = ""

    @property
    def energy_j(self) -> float | None:
        return self.energy.value if self.energy is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "time_s": self.time_s,
            "time_ci95_s": list(self.time_ci95_s) if self.time_ci95_s else None,
            "diff_time": self.diff_time.to_dict() if self.diff_time else None,
            "energy": self.energy.to_dict() if self.energy else None,
            "in_step": self.in_step, "agrees": self.agrees, "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Phase:
        diff, energy = data.get("diff_time"), data.get("energy")
        return cls(
            name=data["name"], time_s=data.get("time_s"),
            time_ci95_s=_pair(data.get("time_ci95_s")),
            diff_time=Difference.from_dict(diff) if diff else None,
            energy=Difference.from_dict(energy) if energy else None,
            in_step=bool(data.get("in_step", True)), agrees=data.get("agrees"),
            note=data.get("note") or "",
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Loop:
    """One differential loop as it ran: its trials' per-iteration time and energy."""

    name: str
    """``forward``, ``forward_backward``, ``step``, ``step_no_sync``."""
    iterations: tuple[int, ...]
    """Iterations of each trial."""
    time_s: tuple[float, ...]
    """Seconds per iteration of each trial."""
    energy_j: tuple[float | None, ...] = ()
    """Joules per iteration of each trial (inside the energy boundary); empty where not
    measured."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "iterations": list(self.iterations),
                "time_s": list(self.time_s), "energy_j": list(self.energy_j)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Loop:
        return cls(name=str(data["name"]), iterations=tuple(data.get("iterations") or ()),
                   time_s=tuple(data.get("time_s") or ()),
                   energy_j=tuple(data.get("energy_j") or ()))


@dataclass(frozen=True, kw_only=True, slots=True)
class Phases:
    """The phases of one case (``Result.phases``; None where ``--phases`` was not asked)."""

    phases: tuple[Phase, ...]
    """In :data:`PHASE_NAMES` order; only the phases the case has."""
    method: str
    """How the direct times were taken, in words."""
    attribution_steps: int
    """Steps of the attribution pass (after the measured window)."""
    step_time_s: float | None
    """The measured step time the phases are checked against (the record's median)."""
    sum_rel_diff: float | None
    """(sum of the in-step phases' direct times - ``step_time_s``) / ``step_time_s``."""
    loops: tuple[Loop, ...] = ()
    energy_source: str = "unavailable"
    """The energy source of the loops (``counter``, ``integrated_samples``) or
    ``unavailable``."""
    energy_note: str = ""
    """Why the energy phases are unavailable, or what bounds them (sensor, trials)."""
    notes: tuple[str, ...] = ()
    """What a reader must know: a sum outside :data:`SUM_TOLERANCE_REL` and why, direct
    and differential times that disagree, phases the case does not have."""
    collectives: tuple[dict[str, Any], ...] = ()
    """A sharded case (``--parallel`` fsdp/tp/fsdp+tp): per rank, in rank order, seconds
    per step in each collective kind (:data:`COLLECTIVE_KINDS`) and the calls per step,
    ``{"rank": 0, "all_gather_s": ..., "reduce_scatter_s": ..., "all_reduce_s": ...,
    "calls": {...}, "exposed_s": ...}``, from the profiler's events
    (``collectives_method``); ``exposed_s`` is the part of the collectives' time no compute
    overlapped (None with ``exposed_note`` saying why; absent from records stored before
    it existed); empty elsewhere (and then absent from the record, whose bytes stay as they
    were)."""
    collectives_method: str = ""
    """How ``collectives`` were timed and what they overlap with, in words."""

    def get(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    @property
    def sum_within_tolerance(self) -> bool | None:
        if self.sum_rel_diff is None:
            return None
        return abs(self.sum_rel_diff) <= SUM_TOLERANCE_REL

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["phases"] = [p.to_dict() for p in self.phases]
        out["loops"] = [lp.to_dict() for lp in self.loops]
        out["notes"] = list(self.notes)
        if self.collectives:
            out["collectives"] = [dict(c) for c in self.collectives]
        else:  # an unsharded record keeps its bytes
            del out["collectives"], out["collectives_method"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Phases:
        return cls(
            phases=tuple(Phase.from_dict(p) for p in data.get("phases") or ()),
            method=str(data.get("method") or ""),
            attribution_steps=int(data.get("attribution_steps") or 0),
            step_time_s=data.get("step_time_s"),
            sum_rel_diff=data.get("sum_rel_diff"),
            loops=tuple(Loop.from_dict(lp) for lp in data.get("loops") or ()),
            energy_source=str(data.get("energy_source") or "unavailable"),
            energy_note=str(data.get("energy_note") or ""),
            notes=tuple(str(n) for n in data.get("notes") or ()),
            collectives=tuple(dict(c) for c in data.get("collectives") or ()),
            collectives_method=str(data.get("collectives_method") or ""),
        )


@dataclass(frozen=True, slots=True)
class PhasePlan:
    """How long the phase pass runs (the worker's defaults; tests pass shorter ones): read
    by the worker's pass (:mod:`accelbench.execution.phases`) and by the time estimate."""

    trials: int = 5
    """Trials of each differential loop (at least 3)."""
    trial_s: float = 0.2
    """Length of a trial without a power sensor."""
    trial_min_iterations: int = 5
    attribution_min_s: float = 0.5
    attribution_min_steps: int = 10
    attribution_max_steps: int = 200
    attribution_max_s: float = 10.0
    """After this long the attribution pass stops once it has 3 steps."""
    resamples: int = 2000

    def __post_init__(self) -> None:
        if self.trials < 3:
            raise ValueError(f"phases need at least 3 trials per loop, got {self.trials}")
