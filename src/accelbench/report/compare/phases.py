"""Per-phase ratios B/A of a matched case whose two results both have ``--phases``: which
phase a change made faster or cheaper.

- time ratio = (direct phase time per sample of B) / (that of A). Its bounds come from the
  two sides' CIs: [low_B / high_A, high_B / low_A], a conservative interval (wider than a
  95% CI of the ratio: the stored records keep the CIs, not the attribution steps). A
  change is called ``faster`` or ``slower`` only when those bounds exclude 1.
- energy ratio = (differential energy per sample of B) / (that of A), only where both
  sides' phase energy is ``measured`` (CI excludes zero); bounds likewise, then widened by
  each side's 95% error bound (``Difference.rel_95``) as worst cases, as compare widens a
  case's energy ratio (:func:`~accelbench.report.compare.stats.widen_by_bounds`; where a
  side has none, the note says the bounds cover timing noise only); ``cheaper`` or
  ``costlier`` only when they exclude 1. A side whose energy is indistinguishable from
  zero, negative or unavailable gives no ratio, and the note says which and why.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from accelbench.phase_summary import energy_status
from accelbench.phases import PHASE_NAMES, Phase
from accelbench.report.compare.stats import widen_by_bounds
from accelbench.result import Result


@dataclass(frozen=True, kw_only=True, slots=True)
class PhaseRatio:
    """One phase of a matched case: both sides' figures and the ratios B/A."""

    phase: str
    a_time_s: float | None
    b_time_s: float | None
    time_ratio: float | None
    time_bounds: tuple[float, float] | None
    time_change: str
    """``faster``, ``slower``, ``no clear change`` or empty (no ratio)."""
    a_energy_j_per_sample: float | None
    b_energy_j_per_sample: float | None
    energy_ratio: float | None
    energy_bounds: tuple[float, float] | None
    energy_change: str
    """``cheaper``, ``costlier``, ``no clear change`` or empty (no ratio)."""
    a_energy_status: str = "unavailable"
    b_energy_status: str = "unavailable"
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for name in ("time_bounds", "energy_bounds"):
            out[name] = list(out[name]) if out[name] else None
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class CasePhases:
    """The phases of one matched case (``available`` False: a side has none, ``note``)."""

    available: bool
    note: str = ""
    ratios: tuple[PhaseRatio, ...] = ()

    def changed(self, kind: str) -> list[str]:
        """Phases whose time (``faster``/``slower``) or energy (``cheaper``/``costlier``)
        changed with bounds excluding 1."""
        return [r.phase for r in self.ratios if kind in (r.time_change, r.energy_change)]

    def to_dict(self) -> dict[str, Any]:
        return {"available": self.available, "note": self.note,
                "ratios": [r.to_dict() for r in self.ratios],
                **{k: self.changed(k) for k in ("faster", "slower", "cheaper", "costlier")}}

    def csv_values(self) -> dict[str, Any]:
        """The phase columns of ``compare --csv`` (:data:`CSV_COLUMNS`)."""
        out: dict[str, Any] = dict.fromkeys(CSV_COLUMNS)
        for r in self.ratios:
            out[f"phase_{r.phase}_time_ratio"] = r.time_ratio
            out[f"phase_{r.phase}_energy_ratio"] = r.energy_ratio
        out["phases_note"] = self.note
        return out


CSV_COLUMNS: tuple[str, ...] = tuple(
    f"phase_{name}_{what}_ratio" for name in PHASE_NAMES for what in ("time", "energy")
) + ("phases_note",)


def _bounds(a: tuple[float, float] | None, b: tuple[float, float] | None
            ) -> tuple[float, float] | None:
    if a is None or b is None or min(a) <= 0 or min(b) <= 0:
        return None
    return (min(b) / max(a), max(b) / min(a))


def _change(bounds: tuple[float, float] | None, lower: str, higher: str) -> str:
    if bounds is None:
        return ""
    if bounds[1] < 1:
        return lower
    return higher if bounds[0] > 1 else "no clear change"


def _energy(p: Phase, per: int) -> tuple[float | None, tuple[float, float] | None]:
    e = p.energy
    if e is None or e.value is None:
        return None, None
    ci = (e.ci95[0] / per, e.ci95[1] / per) if e.ci95 else None
    return e.value / per, ci


_STATUS_WORDS = {"indistinguishable": "indistinguishable from 0", "negative": "negative",
                 "unavailable": "unavailable"}


def phase_ratio(pa: Phase, pb: Phase, per_a: int, per_b: int) -> PhaseRatio:
    """The ratios B/A of one phase (``per_*``: samples per step of each side)."""
    ta = pa.time_s / per_a if pa.time_s else None
    tb = pb.time_s / per_b if pb.time_s else None
    t_ratio = tb / ta if ta and tb is not None else None
    t_bounds = _bounds(
        (pa.time_ci95_s[0] / per_a, pa.time_ci95_s[1] / per_a) if pa.time_ci95_s else None,
        (pb.time_ci95_s[0] / per_b, pb.time_ci95_s[1] / per_b) if pb.time_ci95_s else None,
    ) if t_ratio is not None else None
    ea, ea_ci = _energy(pa, per_a)
    eb, eb_ci = _energy(pb, per_b)
    notes = []
    e_ratio = e_bounds = None
    sa, sb = energy_status(pa), energy_status(pb)
    if sa == sb == "measured" and ea and eb is not None:
        e_ratio = eb / ea
        e_bounds = _bounds(ea_ci, eb_ci)
        ua = pa.energy.rel_95 if pa.energy is not None else None
        ub = pb.energy.rel_95 if pb.energy is not None else None
        if e_bounds is not None and ua is not None and ub is not None:
            e_bounds = widen_by_bounds(e_bounds, ua, ub)
        elif e_bounds is not None:
            missing = " and ".join(side for side, u in (("A", ua), ("B", ub)) if u is None)
            notes.append(f"energy error bound unavailable on {missing}: the energy bounds "
                         "cover timing noise only")
    elif sa == sb:
        notes.append(f"energy {_STATUS_WORDS[sa]} on both sides")
    else:
        notes += [f"{side}'s energy {_STATUS_WORDS[s]}" for side, s in (("A", sa), ("B", sb))
                  if s != "measured"]
    if t_ratio is None:
        notes.insert(0, "no direct time on " + " and ".join(
            side for side, t in (("A", ta), ("B", tb)) if not t))
    return PhaseRatio(
        phase=pa.name, a_time_s=pa.time_s, b_time_s=pb.time_s, time_ratio=t_ratio,
        time_bounds=t_bounds, time_change=_change(t_bounds, "faster", "slower"),
        a_energy_j_per_sample=ea, b_energy_j_per_sample=eb, energy_ratio=e_ratio,
        energy_bounds=e_bounds, energy_change=_change(e_bounds, "cheaper", "costlier"),
        a_energy_status=sa, b_energy_status=sb, note="; ".join(notes),
    )


def compare_phases(a: Result, b: Result) -> CasePhases | None:
    """The phases of a pair: None where neither side has phases; not ``available`` (with
    the reason) where one side lacks them or a side is not ``ok``."""
    if a.phases is None and b.phases is None:
        return None
    missing = [side for side, r in (("A", a), ("B", b)) if r.phases is None]
    if missing:
        return CasePhases(available=False, note=f"{' and '.join(missing)} has no phases "
                          "(measure it with --phases): no per-phase ratio")
    if a.status != "ok" or b.status != "ok":
        return CasePhases(available=False, note="a side is not ok: no per-phase ratio")
    assert a.phases is not None and b.phases is not None
    ratios, only = [], []
    for name in PHASE_NAMES:
        pa, pb = a.phases.get(name), b.phases.get(name)
        if pa is not None and pb is not None:
            ratios.append(phase_ratio(pa, pb, max(1, a.samples_per_step),
                                      max(1, b.samples_per_step)))
        elif pa is not None or pb is not None:
            only.append(f"{name} only in {'A' if pa is not None else 'B'}")
    return CasePhases(available=True, note="; ".join(only), ratios=tuple(ratios))
