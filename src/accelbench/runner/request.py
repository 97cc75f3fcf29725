"""What the parent asks a worker to measure, and how a worker's record is finished.

The parent starts from a draft :class:`~accelbench.result.Result` (the case's id, spec,
suite, sample unit, start time and version, status ``ok``); the worker fills in what it
measures and sends the finished record as :meth:`Result.to_dict`; the parent reads it back
with :meth:`Result.from_dict`. Nothing in between spells the record's fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from accelbench.result import Result, Status
from accelbench.spec import RunSpec


def utc_now() -> str:
    """The current UTC time as a record stores it (ISO 8601, milliseconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseRequest:
    """One case for a worker (or for each rank of a distributed case)."""

    draft: Result
    """The record as the parent knows it before the case runs; the worker completes it."""
    plugins: tuple[str, ...] = ()
    """Plugin modules or files the worker imports to find the workload."""
    flops: dict[str, Any] | None = None
    """The model's cached FLOP count (:data:`accelbench.runner.facts.FLOP_KEYS`); None: the
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


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it (``raise ... from``, or raised while handling)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 16:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def is_oom(framework: str, exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it: a model may wrap the allocator's error) is an
    out-of-memory condition, as the backend of ``framework`` classifies it."""
    chain = exception_chain(exc)
    if any(isinstance(e, MemoryError) for e in chain):
        return True
    try:
        from accelbench.backends import get_backend

        backend = get_backend(framework)
        return any(backend.is_oom(e) for e in chain)
    except Exception:  # no backend to ask (not installed): not an OOM we can tell
        return False


def failure(framework: str, exc: BaseException) -> tuple[Status, str]:
    """The status (``oom`` or ``error``) and the one-line reason of a case that raised."""
    status: Status = "oom" if is_oom(framework, exc) else "error"
    return status, f"{type(exc).__name__}: {exc}".strip()


def finish(result: Result) -> Result:
    """Stamp the end time and the machine on a finished case's record."""
    try:
        from accelbench.devices import machine_info

        machine: dict[str, Any] = machine_info(result.spec.framework)
    except Exception as exc:  # machine info must never hide the measurement
        machine = {"error": f"machine info unavailable: {exc}"}
    return dataclasses.replace(result, finished_at=utc_now(), machine=machine)
