"""Store access for pending restores (``pending_restores``, schema migration 6).

A sweep writes a knob's original value here BEFORE it changes the knob and deletes the
row once the original is back; a row left behind (a sweep killed with SIGKILL) is found
by the next accelbench process on the same host. :func:`host_has_pending` looks without
creating or migrating a store, so that every command can afford it.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

import accelbench.store.schema as schema
from accelbench.store.base import StoreBase, peek, pid_alive, utc_now

_t = schema.pending_restores


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingRestore:
    """One knob changed and not yet put back."""

    id: str
    hostname: str
    device: str
    """The knob's device (``nvidia:0``, ``amd:0``, ``cpu``, ``rapl``)."""
    knob: str
    """The :class:`~accelbench.spec.DeviceSettings` field."""
    original: Any
    """What the knob's ``read()`` returned before the change."""
    owner_pid: int
    created_at: str


def hostname() -> str:
    return socket.gethostname()


def add(store: StoreBase, *, device: str, knob: str, original: Any) -> PendingRestore:
    """Record ``original`` for this host and process (call before changing the knob)."""
    row = PendingRestore(id=uuid.uuid4().hex, hostname=hostname(), device=device, knob=knob,
                         original=original, owner_pid=os.getpid(), created_at=utc_now())
    store.insert(_t, {
        "id": row.id, "hostname": row.hostname, "device": row.device, "knob": row.knob,
        "original": json.dumps(row.original), "owner_pid": row.owner_pid,
        "created_at": row.created_at})
    return row


def remove(store: StoreBase, restore_id: str) -> None:
    """Delete a restore whose original is back."""
    with store.writing() as conn:
        conn.execute(_t.delete().where(_t.c.id == restore_id))


def pending(store: StoreBase, *, host: str | None = None) -> list[PendingRestore]:
    """Pending restores of ``host`` (default: this one), oldest first."""
    stmt = sa.select(_t).where(_t.c.hostname == (host or hostname())).order_by(_t.c.created_at)
    rows = store.mappings(stmt)
    out = []
    for r in rows:
        try:
            original = json.loads(r["original"])
        except ValueError:
            store.skip_row(r["id"], "pending restore with malformed original")
            continue
        out.append(PendingRestore(id=r["id"], hostname=r["hostname"], device=r["device"],
                                  knob=r["knob"], original=original,
                                  owner_pid=int(r["owner_pid"]), created_at=r["created_at"]))
    return out


def orphaned(store: StoreBase) -> list[PendingRestore]:
    """This host's pending restores whose owner process is gone (newest first, so that
    a knob changed twice ends at its oldest original)."""
    return [p for p in reversed(pending(store)) if not pid_alive(p.owner_pid)]


def host_has_pending(db: str | None) -> bool:
    """Whether the store at ``db`` holds a pending restore of this host, cheaply: no store
    is created or migrated (a missing SQLite file, an older schema or an unreachable
    database answer False; the command itself reports those)."""
    with peek(db, "pending_restores") as conn:
        if conn is not None:
            stmt = sa.select(_t.c.id).where(_t.c.hostname == hostname()).limit(1)
            return conn.execute(stmt).first() is not None
    return False
