"""A sweep's runs to a target, one group per device setting: each setting's time- and
energy-to-target, the frontier of energy-to-target against time-to-target (the settings no
other setting beats on both), and Zeus's cost at a stated eta."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.totarget.record import ToTargetRecord
from accelbench.totarget.score import zeus_cost

#: Zeus's eta when none is given: energy and time weighted alike.
DEFAULT_ETA = 0.5


@dataclass(frozen=True, kw_only=True, slots=True)
class SettingToTarget:
    """One setting's runs to the target."""

    settings: dict[str, float]
    """The knobs set (DeviceSettings field -> value)."""
    group_id: str
    runs: int
    reached: int
    time_s: float | None
    """Mean time-to-target of the runs that reached it (None: none did)."""
    energy_j: float | None
    """Mean energy-to-target (device boundary) of those runs (None: unavailable)."""
    energy_label: str
    """What the energy is (``counter, package-0 cpu-package``) or why it is unavailable."""
    power_w: float | None
    """Mean power to the target: ``energy_j / time_s``."""
    on_frontier: bool = False
    zeus_cost: float | None = None
    """eta x energy + (1 - eta) x max power x time (J); None without energy."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return {"settings": dict(self.settings), "group_id": self.group_id,
                "runs": self.runs, "reached": self.reached, "time_to_target_s": self.time_s,
                "energy_to_target_j": self.energy_j, "energy": self.energy_label,
                "power_w": self.power_w, "on_frontier": self.on_frontier,
                "zeus_cost": self.zeus_cost}


@dataclass(frozen=True, kw_only=True, slots=True)
class ToTargetFrontier:
    """Every setting of a sweep to a target and what Zeus's cost picks."""

    points: tuple[SettingToTarget, ...]
    eta: float
    max_power_w: float | None
    """The power Zeus's cost weighs time by (None: no energy was measured)."""
    max_power_from: str
    """Where it comes from (the swept power limit's maximum, or the highest mean power)."""

    def best(self) -> SettingToTarget | None:
        """The setting of least Zeus cost (None: no setting has one)."""
        costed = [p for p in self.points if p.zeus_cost is not None]
        return min(costed, key=lambda p: p.zeus_cost or 0.0) if costed else None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        best = self.best()
        return {"eta": self.eta, "max_power_w": self.max_power_w,
                "max_power_from": self.max_power_from,
                "points": [p.to_dict() for p in self.points],
                "zeus_best": None if best is None else dict(best.settings)}


def setting_point(records: Sequence[ToTargetRecord]) -> SettingToTarget:
    """One setting's group of seeds: means over the runs that reached the target."""
    first = records[0]
    reached = [r for r in records if r.time_to_target_s is not None]
    times = [float(r.time_to_target_s) for r in reached if r.time_to_target_s is not None]
    joules = [r.energy.joules(r.outcome.time_s) for r in reached]
    energy = (float(np.mean([j for j in joules if j is not None]))
              if joules and all(j is not None for j in joules) else None)
    time_s = float(np.mean(times)) if times else None
    label = first.energy.label() if reached or first.energy.reason else "no run reached it"
    return SettingToTarget(
        settings=dict(first.settings), group_id=first.group_id, runs=len(records),
        reached=len(reached), time_s=time_s, energy_j=energy, energy_label=label,
        power_w=energy / time_s if energy is not None and time_s else None)


def pareto(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Whether each (time, energy) point is on the frontier: no other point is at most as
    long and as costly and better in one."""
    return [not any(t2 <= t and e2 <= e and (t2 < t or e2 < e) for t2, e2 in points)
            for t, e in points]


def frontier(groups: Sequence[Sequence[ToTargetRecord]], *, eta: float = DEFAULT_ETA,
             max_power_w: float | None = None) -> ToTargetFrontier:
    """The settings' points, the frontier among those with both figures, and Zeus's cost.

    ``max_power_w``: the power Zeus weighs time by (its paper: the GPU's maximum power
    limit); None takes the highest mean power-to-target of the settings.
    """
    points = [setting_point(g) for g in groups if g]
    full = [p for p in points if p.time_s is not None and p.energy_j is not None]
    on = pareto([(p.time_s or 0.0, p.energy_j or 0.0) for p in full])
    frontier_ids = {p.group_id for p, keep in zip(full, on, strict=True) if keep}
    source = "given"
    if max_power_w is None:
        powers = [p.power_w for p in full if p.power_w is not None]
        max_power_w = max(powers) if powers else None
        source = "the highest mean power-to-target of the settings"
    out = []
    for p in points:
        cost = (zeus_cost(energy_j=p.energy_j, time_s=p.time_s, max_power_w=max_power_w,
                          eta=eta)
                if p.energy_j is not None and p.time_s is not None and max_power_w is not None
                else None)
        out.append(dataclasses.replace(p, on_frontier=p.group_id in frontier_ids,
                                       zeus_cost=cost))
    return ToTargetFrontier(points=tuple(out), eta=eta, max_power_w=max_power_w,
                            max_power_from=source)


def frontier_lines(fr: ToTargetFrontier) -> list[str]:
    """One line per setting (``*`` on the frontier), then Zeus's pick."""
    lines = []
    for p in fr.points:
        knobs = ", ".join(f"{k}={v:g}" for k, v in p.settings.items())
        mark = "*" if p.on_frontier else " "
        if p.time_s is None:
            lines.append(f"  {knobs}: {p.reached}/{p.runs} reached the target")
            continue
        energy = (f"energy {p.energy_label}" if p.energy_j is None
                  else f"energy-to-target {p.energy_j:.4g} J ({p.energy_label}), "
                  f"{p.power_w:.4g} W")
        cost = "" if p.zeus_cost is None else f", Zeus cost {p.zeus_cost:.4g} J"
        lines.append(f"{mark} {knobs}: {p.reached}/{p.runs} reached; time-to-target "
                     f"{p.time_s:.3g} s, {energy}{cost}")
    best = fr.best()
    if best is None:
        why = next((p.energy_label for p in fr.points if p.energy_j is None),
                   "no setting reached the target")
        lines.append(f"Zeus cost (eta {fr.eta:g}): none, no setting has an energy-to-target "
                     f"({why})")
    else:
        knobs = ", ".join(f"{k}={v:g}" for k, v in best.settings.items())
        lines.append(f"Zeus cost (eta {fr.eta:g}, max power {fr.max_power_w:.4g} W: "
                     f"{fr.max_power_from}): least at {knobs}")
    return lines
