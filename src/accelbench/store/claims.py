"""The ``claims`` table: which process runs which case of a suite right now.

Two processes running one suite id split its cases instead of both running each: only
the one that wins a case's claim runs it (schema migration 5).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

import accelbench.store.schema as schema
from accelbench.errors import ConfigError
from accelbench.store.base import IMMEDIATE, StoreBase, pid_alive


def insert_if_absent(conn: sa.Connection, table: sa.Table, values: dict[str, Any]) -> bool:
    """Insert ``values`` unless its primary key exists; True if this call inserted it."""
    name = conn.dialect.name
    if name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        res = conn.execute(sqlite_insert(table).values(**values).on_conflict_do_nothing())
        return bool(res.rowcount == 1)
    if name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        # RETURNING, not rowcount: the driver's rowcount of this insert is not reliable.
        first = list(table.primary_key.columns)[0]
        stmt = pg_insert(table).values(**values).on_conflict_do_nothing().returning(first)
        return conn.execute(stmt).first() is not None
    try:
        with conn.begin_nested():
            conn.execute(table.insert().values(**values))
    except IntegrityError:
        return False
    return True


def claim_live(row: Any, now_s: float, hostname: str) -> bool:
    """Whether a ``claims`` row still holds: within its ttl, and (on ``hostname``, this
    host) of a live pid. A damaged claim protects nothing."""
    try:
        if not now_s < float(row["claimed_at_s"]) + float(row["ttl_s"]):
            return False
        if row["hostname"] == hostname:
            return pid_alive(int(row["pid"]))
    except (TypeError, ValueError):
        return False
    return True


class ClaimStore(StoreBase):
    """Claims of suite cases."""

    @property
    def claim_owner(self) -> str:
        """Who this store's claims belong to: ``host:pid:token`` (the token tells two
        stores of one process apart)."""
        return f"{self.hostname}:{os.getpid()}:{self.token}"

    def claim_case(
        self, suite_id: str, case_key: str, *, ttl_s: float, force: bool = False
    ) -> bool:
        """Claim case ``case_key`` of suite ``suite_id`` for this process, atomically.

        Two processes running one suite id then split its cases instead of both
        running each: only the one that wins the claim runs the case. A claim of a
        process that is gone (same host, pid no longer running) or older than its
        ``ttl_s`` is stale and taken over. Claiming again what this store already
        holds renews it.

        Args:
            ttl_s: How long the claim holds without renewal (longer than the case can
                take); what other hosts go by, since they cannot see the pid.
            force: Claim a case even if the suite already stores it (``suite --force``
                measures it again); a live other owner still wins.

        Returns:
            True if this process now holds the claim; False if another live process
            holds it or the case is already stored in the suite.

        Raises:
            ConfigError: ``ttl_s`` is not a positive finite number.
            StoreError: the store cannot be written.
        """
        if (isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float))
                or not math.isfinite(ttl_s) or ttl_s <= 0):
            raise ConfigError(f"claim ttl must be a positive number of seconds, got {ttl_s!r}")
        c = schema.claims
        me = self.claim_owner
        now_s = time.time()
        key = (c.c.suite_id == suite_id) & (c.c.case_key == case_key)
        self.check_sound()
        # SQLite: the write lock for the whole check-and-insert. PostgreSQL: the primary
        # key decides between concurrent inserts.
        with self.guard("write to"), self.engine.connect() as conn:
            conn.execution_options(**{IMMEDIATE: True})
            with conn.begin() as tx:
                held = conn.execute(
                    sa.select(c.c.owner, c.c.hostname, c.c.pid, c.c.claimed_at_s, c.c.ttl_s)
                    .where(key)
                ).mappings().first()
                if held is not None and held["owner"] != me:
                    if claim_live(held, now_s, self.hostname):
                        return False
                    conn.execute(c.delete().where(key & (c.c.owner == held["owner"])))
                    held = None
                values = {
                    "owner": me, "hostname": self.hostname, "pid": os.getpid(),
                    "claimed_at_s": now_s, "ttl_s": float(ttl_s),
                }
                if held is not None:  # ours: renew
                    conn.execute(c.update().where(key & (c.c.owner == me)).values(**values))
                elif not insert_if_absent(
                    conn, c, {"suite_id": suite_id, "case_key": case_key, **values}
                ):
                    tx.rollback()
                    return False
                # Checked after the insert: a process that stored the case and released
                # its claim between our look and our insert is seen now.
                if not force and _stored(conn, suite_id, case_key):
                    tx.rollback()
                    return False
        return True

    def release_case(self, suite_id: str, case_key: str) -> None:
        """Give up this store's claim of a case (after its result was saved, or not)."""
        c = schema.claims
        with self.guard("write to"), self.engine.begin() as conn:
            conn.execute(c.delete().where(
                (c.c.suite_id == suite_id) & (c.c.case_key == case_key)
                & (c.c.owner == self.claim_owner)
            ))

    def live_claims(self, suite_id: str) -> dict[str, str]:
        """Case keys of ``suite_id`` a live claim holds (repeat suffixes ``#N`` dropped),
        each with the host that holds it."""
        c = schema.claims
        now_s = time.time()
        out: dict[str, str] = {}
        for row in self.mappings(sa.select(c).where(c.c.suite_id == suite_id)):
            if claim_live(row, now_s, self.hostname):
                out[str(row["case_key"]).split("#", 1)[0]] = row["hostname"]
        return out


def _stored(conn: sa.Connection, suite_id: str, case_key: str) -> bool:
    t = schema.results
    return conn.execute(
        sa.select(t.c.id).where((t.c.suite_id == suite_id) & (t.c.case_key == case_key))
        .limit(1)
    ).first() is not None
