"""Open a results store: :class:`Store`, one interface to every table's queries.

Every result is committed in its own transaction the moment it is saved, so
a suite killed with SIGKILL loses nothing that had finished.

Faults of the store are :class:`~accelbench.errors.StoreError` with one line
that says what to do, never a traceback: a path that cannot hold a database,
a file that is not one, an unreadable schema version, a read-only store
(:meth:`Store.check_writable`, called before anything is measured). One
malformed row is skipped with an :class:`~accelbench.errors.AccelbenchWarning`
naming its id (and kept in :attr:`Store.skipped_rows`); it never takes the
whole store down.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

import accelbench.store.schema as schema
from accelbench.errors import StoreError
from accelbench.store.base import (
    ENV_DB,
    IMMEDIATE,
    MAX_INT64,
    default_db_url,
    display_url,
    resolve_db_url,
    short_error,
    sqlite_path,
)
from accelbench.store.health import damaged, full_check, is_damage, shape_problems
from accelbench.store.jobs import JobStore
from accelbench.store.migrate import check_sqlite_path, migrate, read_version
from accelbench.store.opbench import OpBenchStore
from accelbench.store.plans import PlanStore
from accelbench.store.results import ResultFilter, ResultStore
from accelbench.store.totarget import ToTargetStore

__all__ = ["ENV_DB", "MAX_INT64", "ResultFilter", "Store", "check_store", "default_db_url",
           "open_store", "resolve_db_url"]


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # SQLAlchemy's recipe for real transactions on SQLite: the driver emits no BEGIN of
    # its own (it would not around DDL, which is what let concurrent creators race);
    # _sqlite_begin emits it, IMMEDIATE where the caller asked for the write lock.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout = 30000")
    cur.close()


def _sqlite_begin(conn: sa.Connection) -> None:
    immediate = conn.get_execution_options().get(IMMEDIATE)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


class Store(ResultStore, JobStore, OpBenchStore, PlanStore, ToTargetStore):
    """A results store at a SQLAlchemy URL. Use :func:`open_store` to get one.

    Its methods are every query the commands and reports make: results
    (:class:`~accelbench.store.results.ResultStore`), suite claims and scheduler jobs
    (:class:`~accelbench.store.jobs.JobStore`), operator results and measured peaks
    (:class:`~accelbench.store.opbench.OpBenchStore`).
    """

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        with self.guard("read"), self.engine.connect() as conn:
            return read_version(conn, self.where)

    def check_writable(self) -> None:
        """Refuse a store that cannot be written, before anything is measured.

        A write that fails after a case ran loses the measurement; this finds out
        first, cheaply and without a trace: for a SQLite file, whether the file and
        its folder (where SQLite creates its journal) are writable, then on every
        database a real write to ``meta`` and ``results`` inside a transaction that
        is rolled back (which catches a read-only URL, a read-only file system and a
        PostgreSQL user without write rights).

        Before that, :meth:`check_sound`: a damaged store (a failed integrity check, a
        table missing) is refused, never written into.

        Raises:
            StoreError: the store is damaged, read-only (or cannot be written at all).
        """
        self.check_sound()
        path = sqlite_path(make_url(self.url))
        if path is not None and path.exists():
            if not os.access(path, os.W_OK):
                raise self._read_only(f"the file {path} is not writable")
            if not os.access(path.parent, os.W_OK | os.X_OK):
                raise self._read_only(
                    f"its folder {path.parent} is not writable, so SQLite cannot create "
                    "its journal there"
                )
        probe_id = f"writable-probe-{self.token}"
        try:
            with self.engine.connect() as conn:
                conn.execution_options(**{IMMEDIATE: True})
                tx = conn.begin()
                try:
                    m = schema.meta
                    conn.execute(
                        m.update().where(m.c.key == "schema_version").values(value=m.c.value)
                    )
                    conn.execute(schema.results.insert().values(
                        id=probe_id[:32], status="ok", workload="probe", size="", batch_size=0,
                        precision="", device="", framework="", started_at="", finished_at="",
                        record_json="{}",
                    ))
                finally:
                    tx.rollback()
        except SQLAlchemyError as exc:
            why = short_error(exc, self.url)
            lowered = why.lower()
            if "locked" in lowered or "busy" in lowered:
                raise StoreError(
                    f"results store {self.where} cannot be written: {why} (another process "
                    "holds its write lock); try again when it has finished"
                ) from exc
            raise self._read_only(why) from exc

    def _read_only(self, why: str) -> StoreError:
        return StoreError(
            f"results store {self.where} is read-only: {why}; make it writable "
            "or pass another --db"
        )


def _engine(db: str | None, *, create: bool,
            read_only: bool | None = None) -> tuple[str, str, sa.URL, sa.Engine]:
    """The URL, its name in messages, the parsed URL and an engine for the store at ``db``
    (a SQLite path checked first: :func:`~accelbench.store.migrate.check_sqlite_path`;
    ``read_only`` None: as the URL says).

    Raises:
        StoreError: the URL is invalid, or the path cannot hold (or hold no) database.
    """
    url = resolve_db_url(db)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(f"invalid database URL {display_url(url)!r}: "
                         f"{short_error(exc, url)}") from exc
    where = display_url(url)
    path = sqlite_path(parsed)
    if path is not None:
        if read_only is None:
            read_only = (parsed.query.get("mode") == "ro"
                         or "mode=ro" in (parsed.database or ""))
        check_sqlite_path(path, create=create, read_only=read_only)
    try:
        engine = sa.create_engine(url)
    except (ArgumentError, ImportError, SQLAlchemyError, ValueError, TypeError) as exc:
        raise StoreError(f"cannot open results store {where}: {short_error(exc, url)}") from exc
    return url, where, parsed, engine


def open_store(db: str | None = None, *, create: bool = True, _target: int | None = None) -> Store:
    """Open (and create or migrate) the store at ``db`` (URL or path; see :func:`resolve_db_url`).

    Safe when many processes open one new store at the same moment: creation and
    migration are serialised and re-checked (see :func:`~accelbench.store.migrate.migrate`).

    Args:
        db: SQLAlchemy URL or file path; None for ``ACCELBENCH_DB`` or the default. An
            empty or blank string is refused.
        create: When False, a SQLite file that does not exist is an error, not created.

    Raises:
        StoreError: the URL is empty or invalid, the path cannot hold a database, the file
            is not a database, unreadable, has an unreadable or newer schema.
    """
    url, where, parsed, engine = _engine(db, create=create)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
    try:
        migrate(engine, where, schema.SCHEMA_VERSION if _target is None else _target)
        with engine.connect() as conn:  # the catalogue only: milliseconds at any size
            problems = shape_problems(conn, read_version(conn, where))
        if problems:
            raise damaged(where, "; ".join(problems))
    except (SQLAlchemyError, OverflowError) as exc:
        engine.dispose()
        if isinstance(exc, SQLAlchemyError) and is_damage(exc):
            raise damaged(where, short_error(exc, url)) from exc
        raise StoreError(f"cannot open results store {where}: {short_error(exc, url)}") from exc
    except StoreError:
        engine.dispose()
        raise
    return Store(url, engine)


def check_store(db: str | None = None) -> dict[str, Any]:
    """Check the store at ``db`` without creating, migrating or writing it: everything
    any command needs (:func:`~accelbench.store.health.full_check`: integrity, a known
    schema version, every table and column, every result record readable), for
    ``accelbench store check``.

    Returns:
        ``{"store", "schema_version", "tables", "results", "problems"}``; ``problems``
        (one line each) is empty for a sound store.

    Raises:
        StoreError: the store does not exist or cannot be reached at all.
    """
    url, where, _parsed, engine = _engine(db, create=False, read_only=True)
    try:
        with engine.connect() as conn:
            found = full_check(conn, where)
    except SQLAlchemyError as exc:
        if not is_damage(exc):
            raise StoreError(f"cannot check results store {where}: "
                             f"{short_error(exc, url)}") from exc
        found = {"schema_version": None, "tables": [], "results": 0,
                 "problems": [short_error(exc, url)]}
    finally:
        engine.dispose()
    return {"store": where, **found}
