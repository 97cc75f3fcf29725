"""The ``totarget_runs`` table: runs to a target (``accelbench train``; schema migration 9)."""

from __future__ import annotations

import json
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
