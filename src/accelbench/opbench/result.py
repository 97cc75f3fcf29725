"""The record of one operator measurement, :class:`OpResult` (SI units in field names)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from accelbench.frameworks import DEFAULT_FRAMEWORK
from accelbench.opbench.cases import OpCase

OpStatus = Literal["ok", "oom", "error", "timeout"]
"""``timeout``: the case ran past its worker's timeout and was killed."""


@dataclass(frozen=True, kw_only=True)
class OpResult:
    """One operator case measured on one device."""

    id: str
    case: OpCase
    device: str
    """``cpu`` or ``cuda:N``."""
    device_name: str | None = None
    """Model name of the device (CPU model or GPU name)."""
    framework: str = DEFAULT_FRAMEWORK
    """The backend that ran the operator."""
    hostname: str = ""
    status: OpStatus = "ok"
    error: str | None = None
    times_s: tuple[float, ...] = ()
    """Raw measured iteration times."""
    warmup_times_s: tuple[float, ...] = ()
    stop_reason: str | None = None
    median_s: float | None = None
    ci_low_s: float | None = None
    """Lower end of the 95% bootstrap CI of the median time."""
    ci_high_s: float | None = None
    achieved_flop_per_s: float | None = None
    """FLOPs of the case divided by the median time."""
    pct_measured_peak: float | None = None
    """Achieved FLOP/s as a percentage of the measured GEMM peak of this precision."""
    pct_theoretical_peak: float | None = None
    """Achieved FLOP/s as a percentage of the device's theoretical peak, where known."""
    threads: int | None = None
    tag: str = ""
    machine: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    """UTC ISO-8601 timestamp."""

    @property
    def flops(self) -> int:
        return self.case.flops

    @property
    def min_bytes(self) -> int:
        return self.case.min_bytes

    @property
    def intensity_flop_per_byte(self) -> float:
        return self.case.intensity_flop_per_byte

    def summary(self) -> dict[str, Any]:
        """Flat JSON-ready form (what ``accelbench ops --json`` prints)."""
        return {
            "id": self.id,
            "op": self.case.op,
            "label": self.case.label,
            "shape": dict(self.case.shape),
            "precision": self.case.precision,
            "pass": self.case.pass_,
            "device": self.device,
            "device_name": self.device_name,
            "framework": self.framework,
            "status": self.status,
            "error": self.error,
            "flops": self.flops,
            "min_bytes": self.min_bytes,
            "intensity_flop_per_byte": self.intensity_flop_per_byte,
            "iterations": len(self.times_s),
            "stop_reason": self.stop_reason,
            "median_s": self.median_s,
            "ci95_s": [self.ci_low_s, self.ci_high_s] if self.median_s is not None else None,
            "achieved_flop_per_s": self.achieved_flop_per_s,
            "pct_measured_peak": self.pct_measured_peak,
            "pct_theoretical_peak": self.pct_theoretical_peak,
            "threads": self.threads,
            "tag": self.tag,
            "created_at": self.created_at,
        }

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (how a record crosses from an isolated worker)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        c = self.case
        out["case"] = {"op": c.op, "shape": dict(c.shape), "precision": c.precision,
                       "pass_": c.pass_}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OpResult:
        """Inverse of :meth:`to_dict`."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["case"] = OpCase(**data["case"])
        for key in ("times_s", "warmup_times_s"):
            kwargs[key] = tuple(kwargs.get(key) or ())
        return cls(**kwargs)
