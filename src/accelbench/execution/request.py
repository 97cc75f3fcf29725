"""What the parent asks a worker to measure.

The parent starts from a draft :class:`~accelbench.result.Result` (the case's id, spec,
suite, sample unit, start time and version, status ``ok``); the worker fills in what it
measures and sends the finished record as :meth:`Result.to_dict`; the parent reads it back
with :meth:`Result.from_dict`. Nothing in between spells the record's fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.durations import utc_now  # noqa: F401 - the worker and the parent import it from here
from accelbench.result import Result
from accelbench.spec import RunSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseRequest:
    """One case for a worker (or for each rank of a distributed case)."""

    draft: Result
    """The record as the parent knows it before the case runs; the worker completes it."""
    plugins: tuple[str, ...] = ()
    """Plugin modules or files the worker imports to find the workload."""
    flops: dict[str, Any] | None = None
    """The model's cached FLOP count (:data:`accelbench.planning.facts.FLOP_KEYS`); None: the
    worker counts it."""
    parent_pid: int | None = None
    """The worker dies with this process."""
    agent_pid: int | None = None
    """In a rank of a distributed case: the launcher process the rank dies with."""

    @property
    def spec(self) -> RunSpec:
        return self.draft.spec

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON: the spec at the top (the distributed launcher reads it), the
        rest of the draft record beside it."""
        draft = self.draft.to_dict()
        data: dict[str, Any] = {"spec": draft.pop("spec"), "draft": draft,
                                "plugins": list(self.plugins), "flops": self.flops,
                                "parent_pid": self.parent_pid}
        if self.agent_pid is not None:
            data["agent_pid"] = self.agent_pid
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseRequest:
        return cls(
            draft=Result.from_dict({**data["draft"], "spec": data["spec"]}),
            plugins=tuple(data.get("plugins") or ()),
            flops=data.get("flops"),
            parent_pid=data.get("parent_pid"),
            agent_pid=data.get("agent_pid"),
        )
