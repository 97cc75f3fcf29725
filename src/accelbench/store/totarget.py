"""The ``totarget_runs`` table: runs to a target (``accelbench train``; schema migration 9)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

import accelbench.store.schema as schema
from accelbench.store.base import StoreBase
from accelbench.totarget.record import ToTargetRecord

_t = schema.totarget_runs


def _decode(row: Any) -> ToTargetRecord:
    return ToTargetRecord.from_dict(json.loads(row["record_json"]))


class ToTargetStore(StoreBase):
    """Queries of ``totarget_runs``."""

    def save_totarget(self, records: list[ToTargetRecord]) -> None:
        """Store the seeds of one ``train`` command in one transaction.

        Raises:
            StoreError: the store cannot be written.
        """
        with self.writing() as conn:
            for rec in records:
                o = rec.outcome
                conn.execute(_t.insert().values(
                    id=rec.id, group_id=rec.group_id, workload=rec.recipe.workload,
                    size=rec.recipe.size, framework=rec.framework, seed=o.seed,
                    status=o.status, created_at=rec.created_at,
                    record_json=json.dumps(rec.to_dict(), sort_keys=True, allow_nan=False)))

    def totarget_runs(self, *, group_id: str | None = None,
                      workload: str | None = None) -> list[ToTargetRecord]:
        """Stored runs to a target, oldest first, by group or workload; a malformed row is
        skipped with a warning naming it."""
        stmt = sa.select(_t).order_by(_t.c.created_at, _t.c.seed)
        if group_id is not None:
            stmt = stmt.where(_t.c.group_id == group_id)
        if workload is not None:
            stmt = stmt.where(_t.c.workload == workload)
        return self.decoded(self.mappings(stmt), _decode)

    def totarget_groups(self) -> list[TargetGroupRow]:
        """Every group of runs to a target (one ``train`` command each), newest first:
        its id, workload, size, framework, runs, reached runs and first run's time."""
        reached = sa.func.sum(sa.case((_t.c.status == "reached", 1), else_=0))
        stmt = (sa.select(_t.c.group_id, _t.c.workload, _t.c.size, _t.c.framework,
                          sa.func.count().label("runs"), reached.label("reached"),
                          sa.func.min(_t.c.created_at).label("created_at"))
                .group_by(_t.c.group_id, _t.c.workload, _t.c.size, _t.c.framework)
                .order_by(sa.desc("created_at"), _t.c.group_id))
        return [TargetGroupRow(group_id=r["group_id"], workload=r["workload"],
                               size=r["size"], framework=r["framework"], runs=int(r["runs"]),
                               reached=int(r["reached"] or 0), created_at=r["created_at"])
                for r in self.mappings(stmt)]

    def totarget_group_ids(self, prefix: str) -> list[str]:
        """The group ids that start with ``prefix`` (sorted; at most three, enough to tell
        one from ambiguous)."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        stmt = (sa.select(_t.c.group_id).distinct()
                .where(_t.c.group_id.like(escaped + "%", escape="\\"))
                .order_by(_t.c.group_id).limit(3))
        return [r["group_id"] for r in self.mappings(stmt)]


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetGroupRow:
    """One group of ``totarget_runs`` as listed (:meth:`ToTargetStore.totarget_groups`)."""

    group_id: str
    workload: str
    size: str
    framework: str
    runs: int
    reached: int
    created_at: str
