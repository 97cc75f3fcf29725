"""The phases of a record (:class:`accelbench.phases.Phases`) as flat figures: what
``run --json``'s summary, the exports and the tables read.

Energy per phase is stored per step (joules inside the record's energy boundary); here it
is also given per sample (divided by the record's samples per step, all ranks' samples
for a data-parallel case), the unit of every other energy figure accelbench shows. The
share of a phase is its direct time over the measured step time the record checks the
phases against. Plain Python: no I/O, no framework.
"""

from __future__ import annotations

import math
from typing import Any

from accelbench.phases import PHASE_NAMES, Difference, Phase, Phases

#: Export columns per phase, in :data:`PHASE_NAMES` order: the direct time per step (s),
#: the differential energy per step (J), that energy's status and its 95% relative error
#: bound from the sensors (null where it has none).
PHASE_EXPORT_COLUMNS: tuple[str, ...] = tuple(
    f"phase_{name}_{what}" for name in PHASE_NAMES
    for what in ("s", "energy_j", "energy_status", "energy_rel_u95")
) + ("phases_sum_rel_diff",)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _pair(pair: tuple[float, float] | None, scale: float = 1.0) -> list[float | None] | None:
    if pair is None:
        return None
    low, high = _num(pair[0]), _num(pair[1])
    return [low / scale if low is not None else None, high / scale if high is not None else None]


def step_time(phases: Phases, fallback: float | None = None) -> float | None:
    """The step time the phases are shares of: the record's, else ``fallback``."""
    value = _num(phases.step_time_s)
    return value if value else _num(fallback)


def share(phase: Phase, phases: Phases) -> float | None:
    """The phase's part of the in-step phases' summed direct time (shares add up to 1;
    how that sum compares with the measured step is the record's ``sum_rel_diff``). None
    for a phase outside the step or without a time."""
    t = _num(phase.time_s)
    times = [_num(p.time_s) for p in phases.phases if p.in_step]
    if t is None or not phase.in_step or any(x is None for x in times):
        return None
    total = sum(x for x in times if x is not None)
    return t / total if total > 0 else None


def energy_status(phase: Phase) -> str:
    """``measured``, ``indistinguishable``, ``negative`` or ``unavailable``."""
    return phase.energy.status if phase.energy is not None else "unavailable"


def energy_reason(phase: Phase, phases: Phases) -> str:
    """Why a phase's energy is what its status says (its own note, else the record's)."""
    own = phase.energy.note if phase.energy is not None else ""
    return own or phases.energy_note


def _diff(d: Difference | None, scale: float = 1.0) -> dict[str, Any]:
    if d is None:
        return {"value": None, "ci95": None, "status": "unavailable"}
    value = _num(d.value)
    return {"value": value / scale if value is not None else None,
            "ci95": _pair(d.ci95, scale), "status": d.status}


def flat(phases: Phases, samples_per_step: int) -> dict[str, dict[str, Any]]:
    """One flat object per phase, keyed by the phase's name, in the record's order."""
    per = max(1, samples_per_step)
    out: dict[str, dict[str, Any]] = {}
    for p in phases.phases:
        dt, ej = _diff(p.diff_time), _diff(p.energy)
        es = _diff(p.energy, per)
        out[p.name] = {
            "time_s": _num(p.time_s),
            "time_ci95_s": _pair(p.time_ci95_s),
            "share": share(p, phases),
            "in_step": p.in_step,
            "diff_time_s": dt["value"],
            "diff_time_ci95_s": dt["ci95"],
            "diff_time_status": dt["status"],
            "agrees": p.agrees,
            "energy_j": ej["value"],
            "energy_ci95_j": ej["ci95"],
            "energy_j_per_sample": es["value"],
            "energy_ci95_j_per_sample": es["ci95"],
            "energy_status": energy_status(p),
            "energy_rel_u95": _num(p.energy.rel_95) if p.energy is not None else None,
            "energy_note": energy_reason(p, phases) if energy_status(p) != "measured"
            else (p.energy.note if p.energy is not None else ""),
            "note": p.note,
        }
    return out


def summary_entries(phases: Phases | None, samples_per_step: int) -> dict[str, Any]:
    """The ``phases`` entries of ``Result.summary()``: the flat per-phase object (None
    where not asked), the sum check and the record's notes."""
    if phases is None:
        return {"phases": None, "phases_sum_rel_diff": None, "phases_notes": []}
    return {"phases": flat(phases, samples_per_step),
            "phases_sum_rel_diff": _num(phases.sum_rel_diff),
            "phases_notes": list(phases.notes)}


def export_values(phases: Phases | None) -> dict[str, Any]:
    """The :data:`PHASE_EXPORT_COLUMNS` of a record (all None where it has no phases;
    a phase the case does not have is None too)."""
    out: dict[str, Any] = dict.fromkeys(PHASE_EXPORT_COLUMNS)
    if phases is None:
        return out
    for p in phases.phases:
        out[f"phase_{p.name}_s"] = _num(p.time_s)
        out[f"phase_{p.name}_energy_j"] = _num(p.energy.value) if p.energy is not None \
            else None
        out[f"phase_{p.name}_energy_status"] = energy_status(p)
        out[f"phase_{p.name}_energy_rel_u95"] = _num(p.energy.rel_95) if p.energy is not None \
            else None
    out["phases_sum_rel_diff"] = _num(phases.sum_rel_diff)
    return out
