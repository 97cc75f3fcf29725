"""The stored form of one run to a target: recipe, target, outcome, energy and every
evaluation point, as JSON (the ``record_json`` of a ``totarget_runs`` row)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from accelbench.input_stats import InputStats
from accelbench.totarget.outcome import EvalPoint, RunOutcome
from accelbench.totarget.recipes import Recipe

#: Bumped when the record's shape changes; older records are upgraded on read
#: (:func:`upgrade`). 2: every sensor read over the window, the idle baseline, energy at
#: each evaluation point, the sweep and device settings of ``sweep --to-target``. 3: the
#: recipe says how the data was fed (``feed``; versions 1 and 2 trained in memory).
RECORD_VERSION = 3
#: Keys added within version 3, each optional and read with ``.get``: the record's
#: ``device`` (the device trained on; absent: ``cpu``, where every run trained before it
#: was stated) and the outcome's ``input`` (the step's wait for its batches read from
#: disk, as ``run --data`` measures it; absent: unavailable, the reason said where read).

#: What a sensor's energy covers: the device trained on, the host beside it (the CPU's
#: packages and DRAM when the run trains on an accelerator), the whole node.
BOUNDARIES = ("device", "host", "node")


@dataclass(frozen=True, kw_only=True, slots=True)
class SensorEnergy:
    """One sensor's energy over the training clock, split into idle and dynamic."""

    device: str
    """The reading's device (``cpu``, ``package-0``, ``cuda:0``, ``node``)."""
    scope: str
    """What the sensor covers (``cpu-package``, ``dram``, ``gpu``, ``node``)."""
    boundary: str
    """``device``, ``host`` or ``node`` (:data:`BOUNDARIES`)."""
    source: str
    """``counter`` or ``integrated_samples``."""
    energy_j: float
    """Energy over the whole training clock."""
    window_s: float
    """The window the energy covers (the training clock and the edges' reads)."""
    idle_power_w: float | None = None
    """Mean power of this sensor over the idle baseline before the runs (None: none)."""
    points_j: tuple[float, ...] = ()
    """Energy from the clock's start to each evaluation point (the outcome's order),
    interpolated between the sensor's timed samples."""
    samples: int = 0
    """Timed samples the per-point energy is interpolated between (the window's edges
    included)."""
    rel_95: float | None = None
    """95% relative error bound of ``energy_j`` (the reading's
    ``details["uncertainty"]["rel_95"]``, :mod:`accelbench.meters.uncertainty`); None:
    recorded before bounds, or a sensor too little is known of (read with ``.get``)."""
    idle_rel_95: float | None = None
    """95% relative error bound of the idle baseline's energy (so of ``idle_power_w``);
    None: no baseline, or none bounded."""
    points_gap_j: tuple[float, ...] = ()
    """At each evaluation point, the energy between the two timed samples around it (the
    most the interpolated ``points_j`` can be off: the cumulative energy never decreases
    between them); absent from records stored before point bounds."""

    @property
    def half_j(self) -> float | None:
        """Half-width of the 95% interval of ``energy_j`` (None: no bound)."""
        return None if self.rel_95 is None else self.rel_95 * self.energy_j

    @property
    def dynamic_half_j(self) -> float | None:
        """Half-width of the 95% interval of :attr:`dynamic_j`: the energy's plus the idle
        baseline's over the window, added as worst cases (None where either has none)."""
        half, idle = self.half_j, self.idle_j
        if half is None or idle is None or self.idle_rel_95 is None:
            return None
        return half + self.idle_rel_95 * idle

    @property
    def idle_j(self) -> float | None:
        """The idle baseline's power over the window (None without a baseline)."""
        return None if self.idle_power_w is None else self.idle_power_w * self.window_s

    @property
    def dynamic_j(self) -> float | None:
        """The energy above the idle baseline (None without a baseline)."""
        idle = self.idle_j
        return None if idle is None else self.energy_j - idle


def _sum(values: list[float | None]) -> float | None:
    """The sum, or None when any is None or there are none."""
    if not values or any(v is None for v in values):
        return None
    return float(sum(v for v in values if v is not None))


@dataclass(frozen=True, kw_only=True, slots=True)
class Energy:
    """An energy figure and what it is: measured, estimated, or unavailable and why.

    The figure (``measured_j``, or an estimate's ``power_w``) is the device boundary's;
    ``sensors`` holds every sensor read over the window (device, host, node) with its idle
    baseline and its energy at each evaluation point."""

    source: str
    """``unavailable``, or how it was obtained (``counter``, ``estimate: --cpu-tdp-w x
    time``)."""
    boundary: str
    """What it covers (``cpu package``); empty where unavailable."""
    power_w: float | None = None
    """The constant power of an estimate (None where measured or unavailable)."""
    reason: str = ""
    """Why it is unavailable."""
    measured_j: float | None = None
    """Energy the device boundary's sensors counted over the whole training clock (None:
    not measured)."""
    sensors: tuple[SensorEnergy, ...] = ()
    """Every sensor read over the window, whatever its boundary."""
    idle_s: float = 0.0
    """Seconds of idle baseline measured before the runs (0: none)."""
    idle_note: str = ""
    """Why there is no idle baseline (no sensor, ``--idle-s 0``), what to know about it (a
    baseline shorter than ``run`` allows), or ``""``."""
    note: str = ""
    """What to know about the figure (a window shorter than ``run`` allows), or ``""``."""

    def joules(self, time_s: float) -> float | None:
        """Energy over ``time_s`` seconds of the training clock: an estimate's power times
        it, or the measured energy (which covers the whole clock only); None: unavailable."""
        if self.measured_j is not None:
            return self.measured_j
        return None if self.power_w is None else self.power_w * time_s

    def of(self, boundary: str) -> tuple[SensorEnergy, ...]:
        """The sensors of ``boundary``."""
        return tuple(s for s in self.sensors if s.boundary == boundary)

    def total_j(self, boundary: str) -> float | None:
        """The measured energy of ``boundary`` (None: no sensor of it)."""
        return _sum([s.energy_j for s in self.of(boundary)])

    def idle_j(self, boundary: str = "device") -> float | None:
        """The idle part of ``boundary``'s energy (None: not measured, or no baseline)."""
        return _sum([s.idle_j for s in self.of(boundary)])

    def dynamic_j(self, boundary: str = "device") -> float | None:
        """The part of ``boundary``'s energy above idle (None: as :meth:`idle_j`)."""
        return _sum([s.dynamic_j for s in self.of(boundary)])

    def rel_95(self, boundary: str = "device", *, dynamic: bool = False) -> float | None:
        """95% relative error bound of ``boundary``'s energy (or of its dynamic part), its
        sensors' half-widths added over their sum; a TDP estimate's stated model error;
        None where a sensor has no bound or the figure is unavailable."""
        parts = self.of(boundary)
        if not parts:
            if boundary == "device" and self.measured_j is None and self.power_w is not None:
                from accelbench.meters.uncertainty import ESTIMATE_MODEL_REL

                return ESTIMATE_MODEL_REL
            return None
        half = _sum([s.dynamic_half_j if dynamic else s.half_j for s in parts])
        total = self.dynamic_j(boundary) if dynamic else self.total_j(boundary)
        return None if half is None or not total or total <= 0 else half / total

    def point_rel_95(self, index: int, boundary: str = "device") -> float | None:
        """95% relative error bound of :meth:`point_j`: each sensor's whole-window
        half-width (its edges, resolution, sampling and coverage terms sized for the whole
        window, never smaller for a prefix of it) plus the energy between the samples
        around the point (the interpolation's worst case), added over the point's energy.
        The absolute edge term does not shrink with the prefix, so the share grows for an
        early point. A TDP estimate's stated model error; None where a sensor has no bound
        or no gap recorded (stored before point bounds), or the point has no energy."""
        parts = self.of(boundary)
        if not parts:
            if boundary == "device" and self.measured_j is None and self.power_w is not None:
                from accelbench.meters.uncertainty import ESTIMATE_MODEL_REL

                return ESTIMATE_MODEL_REL
            return None
        joules = self.point_j(index, boundary)
        halves = [None if s.half_j is None or len(s.points_gap_j) <= index
                  else s.half_j + s.points_gap_j[index] for s in parts]
        half = _sum(halves)
        return None if half is None or not joules or joules <= 0 else half / joules

    def point_j(self, index: int, boundary: str = "device") -> float | None:
        """Energy of ``boundary`` from the clock's start to evaluation point ``index``."""
        parts = self.of(boundary)
        if not parts or any(len(s.points_j) <= index for s in parts):
            return None
        return float(sum(s.points_j[index] for s in parts))

    def label(self) -> str:
        """How the figure is printed beside its number."""
        if self.power_w is None and self.measured_j is None:
            return f"unavailable ({self.reason})"
        return f"{self.source}, {self.boundary}"


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A stored record's dict in the current shape.

    Version 1 had one energy figure over the whole clock and no energy per point: its
    points gain ``energy_j`` where the figure was an estimate (its power x the point's
    clock, as version 1 documented), else None; its energy gains no sensors. Versions 1
    and 2 trained on batches drawn in memory: their recipe gains ``feed="memory"``."""
    version = int(data.get("version", 1))
    if version > RECORD_VERSION:
        raise ValueError(f"record version {version} is newer than this accelbench")
    if version == 1:
        power = data["energy"].get("power_w")
        data = {**data, "version": 2, "outcome": {**data["outcome"], "points": [
            {**p, "energy_j": None if power is None else float(power) * float(p["time_s"])}
            for p in data["outcome"]["points"]]}}
    if int(data["version"]) == 2:
        # Version 3 states how the data was fed; before it, batches were drawn in memory.
        data = {**data, "version": 3, "recipe": {"feed": "memory", **data["recipe"]}}
    return data


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
    sweep_id: str = ""
    """The sweep (``accelbench sweep --to-target``) the run belongs to, or ``""``."""
    settings: dict[str, float] = dataclasses.field(default_factory=dict)
    """The device settings the sweep set for the run (DeviceSettings field -> value)."""
    device: str = "cpu"
    """The device trained on (``cpu``, ``cuda:0``, ``mps``, ``tpu:0``)."""
    version: int = RECORD_VERSION

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types; :meth:`from_dict` reads it back equal. The outcome's ``input``
        is written only where measured (in its own JSON form)."""
        out = dataclasses.asdict(self)
        out["outcome"]["points"] = [dataclasses.asdict(p) for p in self.outcome.points]
        for sensor in out["energy"]["sensors"]:  # optional keys: absent where unknown
            for key in ("rel_95", "idle_rel_95"):
                if sensor.get(key) is None:
                    sensor.pop(key, None)
            if not sensor.get("points_gap_j"):
                sensor.pop("points_gap_j", None)
            else:
                sensor["points_gap_j"] = list(sensor["points_gap_j"])
        for point in out["outcome"]["points"]:
            if point.get("energy_rel_95") is None:
                point.pop("energy_rel_95", None)
        del out["outcome"]["input"]
        if self.outcome.input is not None:
            out["outcome"]["input"] = self.outcome.input.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToTargetRecord:
        """Read a stored record (``ValueError``/``KeyError``/``TypeError`` if malformed)."""
        data = upgrade(data)
        out = dict(data["outcome"])
        recipe = dict(data["recipe"])
        out["points"] = tuple(EvalPoint(**p) for p in out["points"])
        waited = out.pop("input", None)
        out["input"] = InputStats.from_dict(waited) if waited else None
        energy = dict(data["energy"])
        energy["sensors"] = tuple(SensorEnergy(**{**s, "points_j": tuple(s["points_j"]),
                                                  "points_gap_j": tuple(s.get("points_gap_j")
                                                                        or ())})
                                  for s in energy.get("sensors", ()))
        return cls(id=str(data["id"]), group_id=str(data["group_id"]),
                   created_at=str(data["created_at"]), framework=str(data["framework"]),
                   recipe=Recipe(**recipe), target=float(data["target"]),
                   eval_every=int(data["eval_every"]),
                   outcome=RunOutcome(**out), energy=Energy(**energy),
                   sweep_id=str(data.get("sweep_id", "")),
                   settings=dict(data.get("settings", {})),
                   device=str(data.get("device", "cpu")),
                   version=int(data["version"]))

    @property
    def samples_to_target(self) -> int | None:
        """Samples at the evaluation that met the target (None unless reached)."""
        return self.outcome.samples if self.outcome.status == "reached" else None

    @property
    def time_to_target_s(self) -> float | None:
        """Training clock at the evaluation that met the target (None unless reached)."""
        return self.outcome.time_s if self.outcome.status == "reached" else None
