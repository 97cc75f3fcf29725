"""Is a store usable? The cheap check every open makes, and the full one of ``store check``.

A damaged store (a missing table or column, a record that does not parse, a truncated or
corrupt SQLite file) and a store of a schema newer than this accelbench are
:class:`UnusableStoreError`: every read refuses them with one line naming the problem and
pointing to ``accelbench store check`` (exit 2, the code of an unusable store), and
nothing ever writes to them.

- :func:`shape_problems`: the tables and columns the store's schema version needs, read
  from the database's catalogue (milliseconds, whatever the store's size); run by
  ``open_store`` after migrating, so every command sees it.
- :func:`full_check`: everything any command needs (SQLite's ``PRAGMA quick_check``, the
  schema version, every table and column, every result record's JSON and required
  fields, read in batches), as a list of problems (``accelbench store check``).
"""

from __future__ import annotations

import sqlite3
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.exc import DatabaseError

import accelbench.store.schema as schema
from accelbench.errors import StoreError
from accelbench.store.base import (
    DAMAGE_WORDS,
    RECOVER,
    UnusableStoreError,
    expected_columns,
    local_file_of,
    read_version,
    short_error,
)
from accelbench.store.migrate import refuse_newer
from accelbench.store.records import read_record

#: Problems :func:`full_check` lists before it only counts the rest.
MAX_LISTED = 20

#: Rows of ``results`` one read of :func:`record_problems` fetches.
CHECK_BATCH = 500


def damaged(where: str, why: str) -> UnusableStoreError:
    """The one-line refusal of a damaged store at ``where`` (its display form)."""
    return UnusableStoreError(f"results store {where} is damaged ({why}): {RECOVER}")


def is_damage(exc: BaseException) -> bool:
    """Whether a database error says the file itself is damaged (not locked, not missing)."""
    return any(word in short_error(exc).lower() for word in DAMAGE_WORDS)


def shape_problems(conn: sa.Connection, version: int) -> list[str]:
    """The tables and columns schema ``version`` needs that the store lacks (an extra
    column or table is no problem)."""
    insp = sa.inspect(conn)
    held = set(insp.get_table_names())
    problems = []
    for table, columns in sorted(expected_columns(version).items()):
        if table not in held:
            problems.append(f"table {table} missing")
            continue
        have = {c["name"] for c in insp.get_columns(table)}
        missing = sorted(columns - have)
        if missing:
            problems.append(f"column{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(missing)} of table {table} missing")
    return problems


def record_problems(conn: sa.Connection) -> tuple[list[str], int]:
    """Problems of every result record (at most :data:`MAX_LISTED` + 1 kept) and the
    count of records read, in batches of :data:`CHECK_BATCH` (keyset on ``id``)."""
    t = schema.results
    problems: list[str] = []
    count = 0
    after: str | None = None
    while True:
        stmt = sa.select(t.c.id, t.c.record_json).order_by(t.c.id).limit(CHECK_BATCH)
        if after is not None:
            stmt = stmt.where(t.c.id > after)
        rows = conn.execute(stmt).all()
        for rid, blob in rows:
            why = read_record(rid, blob)[1]
            if why is not None:
                problems.append(why)
        count += len(rows)
        if len(rows) < CHECK_BATCH:
            return problems, count
        after = rows[-1][0]


def full_check(conn: sa.Connection, where: str) -> dict[str, Any]:
    """Everything any command needs of the store behind ``conn``: the file's pages
    (SQLite's ``PRAGMA quick_check``), a known schema version, every table and column it
    needs and every result record readable.

    Returns:
        ``{"schema_version", "tables", "results", "problems"}``; ``problems`` is empty
        for a sound store.
    """
    problems: list[str] = []
    version, tables, count = 0, [], 0
    try:
        if conn.dialect.name == "sqlite":
            rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check").all()]
            if rows != ["ok"]:
                problems += [f"integrity check: {r}" for r in rows or ["no answer"]]
        try:
            version = read_version(conn, where)
        except StoreError as exc:
            problems.append(str(exc).split(";")[0])
            return {"schema_version": None, "tables": [], "results": 0, "problems": problems}
        if version == 0:
            problems.append("no accelbench schema (an empty or foreign database)")
        elif version > schema.SCHEMA_VERSION:
            problems.append(f"schema v{version} is newer than this accelbench "
                            f"(v{schema.SCHEMA_VERSION}): upgrade accelbench to use it")
        known = min(version, schema.SCHEMA_VERSION)
        tables = sorted(expected_columns(known)) if known > 0 else []
        problems += shape_problems(conn, known) if known > 0 else []
        insp = sa.inspect(conn)
        if insp.has_table("results") and {"id", "record_json"} <= {
                c["name"] for c in insp.get_columns("results")}:
            found, count = record_problems(conn)
            problems += found
    except DatabaseError as exc:
        if not is_damage(exc):
            raise
        problems.append(short_error(exc))
    return {"schema_version": version, "tables": tables, "results": count,
            "problems": problems}


def refuse_unusable(db: str | None) -> None:
    """Refuse the SQLite store at ``db`` when it exists and is unusable (damaged, of a newer
    schema), without creating, migrating or writing anything: for the reads that look
    into a store without opening it (``suite resume --dry-run``), which would otherwise
    take a damaged store for one that holds nothing. A missing file, a server store or a
    name that cannot be resolved pass (the command reports them as it always did).

    Raises:
        UnusableStoreError: one line naming the problem.
    """
    path = local_file_of(db)
    if path is None or not path.is_file():
        return
    where = str(path)
    uri = f"file:{quote(str(path))}?mode=ro"  # read-only: nothing can be written
    engine = sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True))
    try:
        with engine.connect() as conn:
            version = read_version(conn, where)
            refuse_newer(version, where)
            problems = shape_problems(conn, version) if version > 0 else []
    except DatabaseError as exc:
        if is_damage(exc):
            raise damaged(where, short_error(exc)) from exc
        return  # locked, unreadable: the command reports it
    finally:
        engine.dispose()
    if problems:
        raise damaged(where, "; ".join(problems))
