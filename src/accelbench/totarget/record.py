"""The stored form of one run to a target: recipe, target, outcome, energy and every
evaluation point, as JSON (the ``record_json`` of a ``totarget_runs`` row)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from accelbench.totarget.outcome import EvalPoint, RunOutcome
from accelbench.totarget.recipes import Recipe

#: Bumped when the record's shape changes; older records are upgraded on read.
#: 2: the recipe says how the data was fed (``feed``; version 1 trained in memory).
RECORD_VERSION = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class Energy:
    """An energy figure and what it is: measured, estimated, or unavailable and why."""

    source: str
    """``unavailable``, or how it was obtained (``estimate: --cpu-tdp-w x time``)."""
    boundary: str
    """What it covers (``cpu package``); empty where unavailable."""
    power_w: float | None = None
    """The constant power of an estimate (None where measured or unavailable)."""
    reason: str = ""
    """Why it is unavailable."""
    measured_j: float | None = None
    """Energy the sensors counted over the whole training clock (None: not measured)."""

    def joules(self, time_s: float) -> float | None:
        """Energy over ``time_s`` seconds of the training clock: an estimate's power times
        it, or the measured energy (which covers the whole clock only); None: unavailable."""
        if self.measured_j is not None:
            return self.measured_j
        return None if self.power_w is None else self.power_w * time_s

    def label(self) -> str:
        """How the figure is printed beside its number."""
        if self.power_w is None and self.measured_j is None:
            return f"unavailable ({self.reason})"
        return f"{self.source}, {self.boundary}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToTargetRecord:
    """One seed's run to a target as stored."""

    id: str
    group_id: str
    created_at: str
    framework: str
    recipe: Recipe
    target: float
    eval_every: int
    """Training samples between evaluations (as asked; rounded up to whole batches)."""
    outcome: RunOutcome
    energy: Energy
    version: int = RECORD_VERSION

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types; :meth:`from_dict` reads it back equal."""
        out = dataclasses.asdict(self)
        out["outcome"]["points"] = [dataclasses.asdict(p) for p in self.outcome.points]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToTargetRecord:
        """Read a stored record (``ValueError``/``KeyError``/``TypeError`` if malformed)."""
        if int(data.get("version", 1)) > RECORD_VERSION:
            raise ValueError(f"record version {data['version']} is newer than this accelbench")
        out = dict(data["outcome"])
        recipe = dict(data["recipe"])
        if int(data.get("version", 1)) < 2:  # the first slice drew its batches in memory
            recipe.setdefault("feed", "memory")
        out["points"] = tuple(EvalPoint(**p) for p in out["points"])
        return cls(id=str(data["id"]), group_id=str(data["group_id"]),
                   created_at=str(data["created_at"]), framework=str(data["framework"]),
                   recipe=Recipe(**recipe), target=float(data["target"]),
                   eval_every=int(data["eval_every"]),
                   outcome=RunOutcome(**out), energy=Energy(**data["energy"]),
                   version=int(data.get("version", 1)))

    @property
    def samples_to_target(self) -> int | None:
        """Samples at the evaluation that met the target (None unless reached)."""
        return self.outcome.samples if self.outcome.status == "reached" else None

    @property
    def time_to_target_s(self) -> float | None:
        """Training clock at the evaluation that met the target (None unless reached)."""
        return self.outcome.time_s if self.outcome.status == "reached" else None
