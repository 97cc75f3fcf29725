"""Creating and migrating a store's schema, and the checks before a SQLite file is opened.

Migration runs one step per transaction under the store's schema lock (SQLite's write
lock, a PostgreSQL advisory lock), re-reading the version under it, so any number of
processes may open one new store at the same moment.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

import accelbench.store.schema as schema
from accelbench.errors import StoreError
from accelbench.store.base import (
    IMMEDIATE,
    RECOVER,
    VIRTUAL_ROOTS,
    UnusableStoreError,
    damage,
    expected_tables,
    read_version,
)

#: Key of the PostgreSQL advisory lock that serialises schema creation and migration.
PG_SCHEMA_LOCK = 0x61636365_6C62  # "accelb"


def lock_schema(conn: sa.Connection) -> None:
    """Hold the lock that serialises schema changes until this transaction ends (SQLite
    already holds its write lock: the transaction began IMMEDIATE)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_SCHEMA_LOCK})


def migrate(engine: sa.Engine, url: str, target: int = schema.SCHEMA_VERSION) -> None:
    # ``url`` is only used in messages (the store's display form).
    """Bring the store to ``target``, one migration per transaction, each under the lock.

    The version is read without the lock first, so opening a current store writes
    nothing (and works on a read-only one); every step re-reads it under the lock, so a
    process that lost the race to a concurrent creator finds the work done.
    """
    with engine.connect() as conn:
        current = read_version(conn, url)
        if 0 < current < target:  # a store about to be migrated is checked first
            why = damage(conn, expected_tables(current))
            if why is not None:
                raise UnusableStoreError(f"results store {url} is damaged ({why}) and is "
                                         f"not migrated: {RECOVER}")
    refuse_newer(current, url)
    while current < target:
        with engine.connect() as conn:
            conn.execution_options(**{IMMEDIATE: True})
            with conn.begin():
                lock_schema(conn)
                current = read_version(conn, url)
                refuse_newer(current, url)
                if current >= target:
                    break
                if current == 0 and not sa.inspect(conn).has_table("meta"):
                    if sa.inspect(conn).get_table_names():
                        raise StoreError(
                            f"results store {url} holds tables but no accelbench schema; "
                            "refusing to touch it: pass another --db"
                        )
                    conn.execute(sa.text(
                        "CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)"
                    ))
                    conn.execute(schema.meta.insert().values(key="schema_version", value="0"))
                schema.MIGRATIONS[current](conn)
                current += 1
                conn.execute(
                    schema.meta.update()
                    .where(schema.meta.c.key == "schema_version")
                    .values(value=str(current))
                )


def refuse_newer(current: int, url: str) -> None:
    if current > schema.SCHEMA_VERSION:
        raise UnusableStoreError(
            f"results store {url} has schema v{current}, newer than this accelbench "
            f"(v{schema.SCHEMA_VERSION}); upgrade accelbench to use it (accelbench store "
            "check lists what else is wrong)"
        )


def check_sqlite_path(path: Path, *, create: bool, read_only: bool) -> None:
    """One-line errors for a path no SQLite database can be at (or created at)."""
    text = str(path)
    if not text.startswith("/dev/shm/") and any(
        text == root or text.startswith(root + "/") for root in VIRTUAL_ROOTS
    ):
        raise StoreError(
            f"results store {path} is under /{text.split('/')[1]}, a virtual file system; "
            "pass a path on a real disk"
        )
    try:
        if path.exists():
            if not path.is_file():
                raise StoreError(f"results store {path} is not a file")
            if not os.access(path, os.R_OK):
                raise StoreError(f"results store {path} is not readable")
            return
        if not create or read_only:
            raise StoreError(f"results store {path} does not exist")
        parent = path.parent
        if parent.exists() and not parent.is_dir():
            raise StoreError(
                f"cannot create results store {path}: {parent} is a file, not a folder"
            )
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create results store {path}: cannot create its folder "
                f"({exc.strerror or exc})"
            ) from exc
        if not os.access(parent, os.W_OK | os.X_OK):
            raise StoreError(
                f"cannot create results store {path}: its folder {parent} is not writable"
            )
    except OSError as exc:  # ENAMETOOLONG, ELOOP, EACCES on a parent ...
        raise StoreError(f"results store {path} cannot be used: {exc.strerror or exc}") from exc
