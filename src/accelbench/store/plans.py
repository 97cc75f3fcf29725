"""The ``suite_plans`` table: a suite's plan, stored when it starts (schema migration 7).

The plan is the suite's name and every option that shapes its cases, as JSON (built and
read by :mod:`accelbench.planning.plan`), with the keys of its cases. ``accelbench suite
resume ID`` runs it again; a suite started by an older accelbench has none.
:func:`peek_plan` reads a plan without creating or migrating a store, so that a command
can check its options against it before it writes anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

import accelbench.store.schema as schema
from accelbench.store.base import StoreBase, peek, utc_now
from accelbench.store.health import refuse_unusable

_t = schema.suite_plans


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredPlan:
    """One row of ``suite_plans``, decoded."""

    suite_id: str
    suite: str
    """The suite's name (``quick``, ``paper`` ...)."""
    plan: dict[str, Any]
    """The plan's options (:meth:`accelbench.planning.plan.SuitePlan.to_dict`)."""
    case_keys: tuple[str, ...]
    created_at: str
    updated_at: str
    accelbench_version: str | None = None


def _decode(row: Any) -> StoredPlan:
    plan = json.loads(row["plan_json"])
    keys = json.loads(row["case_keys"])
    if not isinstance(plan, dict) or not isinstance(keys, list):
        raise ValueError("plan_json must hold an object and case_keys a list")
    return StoredPlan(suite_id=row["suite_id"], suite=row["suite"], plan=plan,
                      case_keys=tuple(str(k) for k in keys), created_at=row["created_at"],
                      updated_at=row["updated_at"],
                      accelbench_version=row["accelbench_version"])


def _read(conn: sa.Connection, suite_id: str) -> StoredPlan | None:
    row = conn.execute(sa.select(_t).where(_t.c.suite_id == suite_id)).mappings().first()
    return None if row is None else _decode(row)


class PlanStore(StoreBase):
    """Queries of ``suite_plans``."""

    def suite_plan(self, suite_id: str) -> StoredPlan | None:
        """The stored plan of ``suite_id``; None for a suite without one (or a malformed
        row, skipped with a warning naming it)."""
        rows = self.mappings(sa.select(_t).where(_t.c.suite_id == suite_id))
        for row in rows:
            try:
                return _decode(row)
            except (ValueError, TypeError, KeyError) as exc:
                self.skip_row(row["suite_id"], f"unreadable plan: {exc}")
        return None

    def save_plan(self, suite_id: str, suite: str, plan: dict[str, Any],
                  case_keys: list[str]) -> None:
        """Store the plan of ``suite_id`` (replacing an earlier one: the caller checked
        that the new plan only extends it).

        Raises:
            StoreError: the store cannot be written.
        """
        from accelbench.version import __version__

        now = utc_now()
        values = {"suite": suite, "plan_json": json.dumps(plan, sort_keys=True),
                  "case_keys": json.dumps(case_keys), "updated_at": now,
                  "accelbench_version": __version__}
        with self.writing(immediate=True) as conn:
            had = conn.execute(sa.select(_t.c.created_at).where(_t.c.suite_id == suite_id)
                               ).first()
            if had is None:
                conn.execute(_t.insert().values(suite_id=suite_id, created_at=now, **values))
            else:
                conn.execute(_t.update().where(_t.c.suite_id == suite_id).values(**values))


def peek_plan(db: str | None, suite_id: str) -> StoredPlan | None:
    """The stored plan of ``suite_id`` in the store at ``db``, read without creating or
    migrating anything: a missing SQLite file, an older schema, an unreachable database
    or a malformed row answer None (the command itself reports a store it cannot use);
    a damaged store, or one of a newer schema, is refused.

    Raises:
        UnusableStoreError: the store exists but is damaged or of a newer schema.
    """
    refuse_unusable(db)
    with peek(db, "suite_plans") as conn:
        if conn is not None:
            return _read(conn, suite_id)
    return None
