"""Open, migrate, write and query the results store.

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

import json
import math
import os
import re
import secrets
import socket
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError

from accelbench import jsonout
from accelbench.errors import AccelbenchWarning, ConfigError, StoreError
from accelbench.result import STATUSES, Result
from accelbench.store import schema

ENV_DB = "ACCELBENCH_DB"

MAX_INT64 = 2**63 - 1
"""Largest integer every supported database stores (SQLite INTEGER, PostgreSQL BIGINT)."""

#: Folders of virtual file systems: no database can live there, and reading some of their
#: files blocks forever (``/proc/kmsg``). ``/dev/shm`` (a real tmpfs) is allowed.
VIRTUAL_ROOTS = ("/proc", "/sys", "/dev")

#: Execution option: this transaction takes SQLite's write lock when it begins.
_IMMEDIATE = "accelbench_immediate"

#: Key of the PostgreSQL advisory lock that serialises schema creation and migration.
_PG_SCHEMA_LOCK = 0x61636365_6C62  # "accelb"


def default_db_url() -> str:
    """SQLite file in the user's data directory."""
    import platformdirs

    path = Path(platformdirs.user_data_dir("accelbench", appauthor=False)) / "results.db"
    return f"sqlite:///{path}"


def _check_not_blank(db: str | None) -> None:
    if db is not None and not db.strip():
        raise StoreError(
            "--db must not be empty; give a file path or a database URL, "
            "or leave it out for the default store"
        )


def resolve_db_url(db: str | None) -> str:
    """``--db`` value, else ``ACCELBENCH_DB``, else the default; plain paths mean SQLite.

    Raises:
        StoreError: ``db`` is empty or blank (None, not ``""``, means the default), or a
            path that cannot be resolved.
    """
    _check_not_blank(db)
    value = db or os.environ.get(ENV_DB) or default_db_url()
    if "://" not in value:
        try:
            value = f"sqlite:///{Path(value).expanduser().resolve()}"
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"results store path {value!r} cannot be resolved: {exc}") from exc
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class ResultFilter:
    """Filters of ``accelbench results`` and of the query API; None means any."""

    workload: str | None = None
    device: str | None = None
    precision: str | None = None
    size: str | None = None
    framework: str | None = None
    status: str | None = None
    suite_id: str | None = None
    tag: str | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        # Checked here, not by the database: an out-of-range integer overflows its driver
        # with a traceback, after the query was built.
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int)
            or not 0 <= self.limit <= MAX_INT64
        ):
            raise ConfigError(f"--limit must be an integer from 0 to {MAX_INT64}, "
                              f"got {self.limit!r}")


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # SQLAlchemy's recipe for real transactions on SQLite: the driver emits no BEGIN of
    # its own (it would not around DDL, which is what let concurrent creators race);
    # _sqlite_begin emits it, IMMEDIATE where the caller asked for the write lock.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout = 30000")
    cur.close()


def _sqlite_begin(conn: sa.Connection) -> None:
    immediate = conn.get_execution_options().get(_IMMEDIATE)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _short(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0]


def _why(exc: BaseException) -> str:
    """One line saying why a stored row could not be read back."""
    if isinstance(exc, json.JSONDecodeError):
        why = f"not valid JSON ({exc.msg} at character {exc.pos})"
    elif isinstance(exc, KeyError):
        why = f"missing key {exc.args[0]!r}" if exc.args else "missing key"
    elif isinstance(exc, ConfigError):
        why = f"invalid record: {exc}"
    else:
        why = f"{type(exc).__name__}: {exc}"
    line = (why.splitlines() or [why])[0]
    return line if len(line) <= 200 else line[:197] + "..."


class Store:
    """A results store at a SQLAlchemy URL. Use :func:`open_store` to get one."""

    def __init__(self, url: str, engine: sa.Engine) -> None:
        self.url = url
        self.engine = engine
        self.where = _display(url)
        """The store as messages name it: a SQLite file's path, else the URL without
        its password."""
        self.skipped_rows: list[tuple[str, str]] = []
        """(id, why) of every malformed row reads skipped, once each."""
        self._token = secrets.token_hex(8)
        self._hostname = socket.gethostname()

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        with self._guard("read"), self.engine.connect() as conn:
            return _read_version(conn, self.where)

    def check_writable(self) -> None:
        """Refuse a store that cannot be written, before anything is measured.

        A write that fails after a case ran loses the measurement; this finds out
        first, cheaply and without a trace: for a SQLite file, whether the file and
        its folder (where SQLite creates its journal) are writable, then on every
        database a real write to ``meta`` and ``results`` inside a transaction that
        is rolled back (which catches a read-only URL, a read-only file system and a
        PostgreSQL user without write rights).

        Raises:
            StoreError: the store is read-only (or cannot be written at all).
        """
        path = _sqlite_path(make_url(self.url))
        if path is not None and path.exists():
            if not os.access(path, os.W_OK):
                raise self._read_only(f"the file {path} is not writable")
            if not os.access(path.parent, os.W_OK | os.X_OK):
                raise self._read_only(
                    f"its folder {path.parent} is not writable, so SQLite cannot create "
                    "its journal there"
                )
        probe_id = f"writable-probe-{self._token}"
        try:
            with self.engine.connect() as conn:
                conn.execution_options(**{_IMMEDIATE: True})
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
            why = _short(exc)
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

    # -- writes --------------------------------------------------------------------

    def save(self, result: Result) -> None:
        """Insert one result in its own transaction."""
        row = _to_row(result)
        with self._guard("write to"), self.engine.begin() as conn:
            conn.execute(schema.results.insert().values(**row))

    # -- suite case claims ---------------------------------------------------------

    @property
    def claim_owner(self) -> str:
        """Who this store's claims belong to: ``host:pid:token`` (the token tells two
        stores of one process apart)."""
        return f"{self._hostname}:{os.getpid()}:{self._token}"

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
        with self._guard("write to"), self.engine.connect() as conn:
            # SQLite: the write lock for the whole check-and-insert. PostgreSQL: the
            # primary key decides between concurrent inserts.
            conn.execution_options(**{_IMMEDIATE: True})
            with conn.begin() as tx:
                held = conn.execute(
                    sa.select(c.c.owner, c.c.hostname, c.c.pid, c.c.claimed_at_s, c.c.ttl_s)
                    .where(key)
                ).first()
                if held is not None and held.owner != me:
                    if not self._stale(held, now_s):
                        return False
                    conn.execute(c.delete().where(key & (c.c.owner == held.owner)))
                    held = None
                values = {
                    "owner": me, "hostname": self._hostname, "pid": os.getpid(),
                    "claimed_at_s": now_s, "ttl_s": float(ttl_s),
                }
                if held is not None:  # ours: renew
                    conn.execute(c.update().where(key & (c.c.owner == me)).values(**values))
                elif not _insert_if_absent(
                    conn, c, {"suite_id": suite_id, "case_key": case_key, **values}
                ):
                    tx.rollback()
                    return False
                # Checked after the insert: a process that stored the case and released
                # its claim between our look and our insert is seen now.
                if not force and self._stored(conn, suite_id, case_key):
                    tx.rollback()
                    return False
        return True

    def release_case(self, suite_id: str, case_key: str) -> None:
        """Give up this store's claim of a case (after its result was saved, or not)."""
        c = schema.claims
        with self._guard("write to"), self.engine.begin() as conn:
            conn.execute(c.delete().where(
                (c.c.suite_id == suite_id) & (c.c.case_key == case_key)
                & (c.c.owner == self.claim_owner)
            ))

    def _stale(self, held: Any, now_s: float) -> bool:
        try:
            expires_s = float(held.claimed_at_s) + float(held.ttl_s)
        except (TypeError, ValueError):
            return True  # a damaged claim protects nothing
        if not now_s < expires_s:
            return True
        if held.hostname == self._hostname:
            return not _pid_alive(int(held.pid))
        return False

    @staticmethod
    def _stored(conn: sa.Connection, suite_id: str, case_key: str) -> bool:
        t = schema.results
        return conn.execute(
            sa.select(t.c.id).where((t.c.suite_id == suite_id) & (t.c.case_key == case_key))
            .limit(1)
        ).first() is not None

    # -- reads ---------------------------------------------------------------------

    def get(self, result_id: str) -> Result | None:
        """The result with ``result_id`` (a unique prefix is enough), or None.

        A malformed row is skipped with a warning (so None)."""
        t = schema.results
        rows = self._rows(
            sa.select(t.c.id, t.c.record_json)
            .where(t.c.id.startswith(result_id, autoescape=True)).limit(2)
        )
        if len(rows) != 1:
            return None
        return self._decode(rows[0][0], rows[0][1])

    def query(self, flt: ResultFilter | None = None) -> list[Result]:
        """Results matching ``flt``, newest first (malformed rows skipped with a warning)."""
        return list(self.iter_query(flt))

    def iter_query(self, flt: ResultFilter | None = None) -> Iterator[Result]:
        t = schema.results
        flt = flt or ResultFilter()
        stmt = sa.select(t.c.id, t.c.record_json)
        for name in ("workload", "device", "precision", "size", "framework", "status",
                     "suite_id", "tag"):
            value = getattr(flt, name)
            if value is not None:
                stmt = stmt.where(t.c[name] == value)
        stmt = stmt.order_by(t.c.finished_at.desc(), t.c.id.desc())
        if flt.limit is not None:
            stmt = stmt.limit(flt.limit)
        for rid, blob in self._rows(stmt):
            result = self._decode(rid, blob)
            if result is not None:
                yield result

    def case_keys(self, suite_id: str) -> set[str]:
        """Case keys already stored for ``suite_id`` (what a resume skips)."""
        t = schema.results
        rows = self._rows(sa.select(t.c.case_key).where(t.c.suite_id == suite_id))
        return {r[0] for r in rows}

    def case_key_counts(self, suite_id: str) -> dict[str, int]:
        """Results stored per case key of ``suite_id`` (a case with ``--repeats R`` is done
        when R are stored: resume counts them)."""
        t = schema.results
        rows = self._rows(
            sa.select(t.c.case_key, sa.func.count()).where(t.c.suite_id == suite_id)
            .group_by(t.c.case_key)
        )
        return {r[0]: int(r[1]) for r in rows}

    def skip_row(self, row_id: object, why: str) -> None:
        """Warn that a malformed row was skipped and remember it in :attr:`skipped_rows`."""
        rid = str(row_id)
        warnings.warn(f"skipped malformed row {rid}: {why}", AccelbenchWarning, stacklevel=3)
        if (rid, why) not in self.skipped_rows:
            self.skipped_rows.append((rid, why))

    def _decode(self, rid: object, blob: object) -> Result | None:
        try:
            # Result.from_dict tolerates records of older schema versions (missing keys).
            if not isinstance(blob, str):
                raise TypeError(f"record_json is {type(blob).__name__}, not text")
            data = json.loads(blob)
            if not isinstance(data, dict):
                raise TypeError(f"record is a JSON {type(data).__name__}, not an object")
            result = Result.from_dict(data)
            _check_result(result)
        except Exception as exc:  # noqa: BLE001 - any failure is the row's, never the command's
            self.skip_row(rid, _why(exc))
            return None
        return result

    def _rows(self, stmt: sa.Select[Any]) -> list[Any]:
        with self._guard("read"), self.engine.connect() as conn:
            return list(conn.execute(stmt).all())

    def _guard(self, verb: str) -> _Guard:
        return _Guard(self.where, verb)


class _Guard:
    """Turns database errors (and driver overflows) into one-line :class:`StoreError`."""

    def __init__(self, url: str, verb: str) -> None:
        self.url = url
        self.verb = verb

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 _tb: object) -> Literal[False]:
        if exc is None or not isinstance(exc, (SQLAlchemyError, OverflowError)):
            return False
        raise StoreError(f"cannot {self.verb} results store {self.url}: {_short(exc)}") from exc


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid <= 2**22  # someone else's process, alive; an absurd pid is not
    return True


def _insert_if_absent(conn: sa.Connection, table: sa.Table, values: dict[str, Any]) -> bool:
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


def _is_num(value: object, *, optional: bool = True) -> bool:
    if value is None:
        return optional
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_result(r: Result) -> None:
    """Types of what readers compute with; ``from_dict`` builds whatever it is given.

    Raises:
        TypeError, ValueError: the record's field named in the message is wrong.
    """
    if not isinstance(r.id, str) or not r.id:
        raise TypeError("id is not a non-empty string")
    if r.status not in STATUSES:
        raise ValueError(f"unknown status {r.status!r}")
    if not isinstance(r.sample_unit, str):
        raise TypeError("sample_unit is not a string")
    if isinstance(r.samples_per_step, bool) or not isinstance(r.samples_per_step, int):
        raise TypeError(f"samples_per_step is not an integer: {r.samples_per_step!r}")
    for name in ("param_count",):
        value = getattr(r, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} is not an integer: {value!r}")
    for name in ("build_time_s", "compile_s", "final_loss", "forward_flop_per_sample",
                 "flop_per_sample", "peak_flop_per_s"):
        if not _is_num(getattr(r, name)):
            raise TypeError(f"{name} is not a number: {getattr(r, name)!r}")
    for name in ("iteration_times_s", "warmup_times_s"):
        if not all(_is_num(v, optional=False) for v in getattr(r, name)):
            raise TypeError(f"{name} holds a value that is not a number")
    for name in ("machine", "noise", "backend_extra", "power_timeline"):
        if not isinstance(getattr(r, name), dict):
            raise TypeError(f"{name} is not an object")
    for name in ("started_at", "finished_at"):
        if not isinstance(getattr(r, name), str):
            raise TypeError(f"{name} is not a string")
    if r.suite_id is not None and not isinstance(r.suite_id, str):
        raise TypeError("suite_id is not a string")
    st = r.stats
    if st is not None:
        for name in ("median_s", "mean_s", "trimmed_mean_s", "trim_fraction", "std_s",
                     "min_s", "max_s", "samples_per_s"):
            if not _is_num(getattr(st, name), optional=False):
                raise TypeError(f"stats.{name} is not a number: {getattr(st, name)!r}")
        if isinstance(st.n, bool) or not isinstance(st.n, int):
            raise TypeError(f"stats.n is not an integer: {st.n!r}")
        ci = st.samples_per_s_ci95
        if ci is not None and (len(ci) != 2 or not all(_is_num(v, optional=False) for v in ci)):
            raise TypeError("stats.samples_per_s_ci95 is not a pair of numbers")
        if not _is_num(st.ci_rel_halfwidth):
            raise TypeError("stats.ci_rel_halfwidth is not a number")
    for e in r.energy:
        for name in ("energy_j", "avg_power_w", "peak_power_w", "energy_j_per_sample",
                     "window_s", "idle_power_w", "dynamic_energy_j_per_sample",
                     "cross_check_rel_diff"):
            if not _is_num(getattr(e, name)):
                raise TypeError(f"energy.{name} is not a number: {getattr(e, name)!r}")
        if not isinstance(e.source, str) or not isinstance(e.device, str):
            raise TypeError("energy source or device is not a string")


def _to_row(result: Result) -> dict[str, Any]:
    spec = result.spec
    st = result.stats
    ci = st.samples_per_s_ci95 if st is not None else None
    summary = result.summary()
    gpus = result.machine.get("gpus") or []
    device_name = next(
        (g.get("name") for g in gpus if g.get("device") == spec.device), None
    ) or (result.machine.get("cpu") or {}).get("model")
    record = result.to_dict()
    record["schema_version"] = schema.SCHEMA_VERSION
    return {
        "id": result.id,
        "suite_id": result.suite_id,
        "case_key": spec.case_key(),
        "status": result.status,
        "workload": spec.workload,
        "size": spec.size,
        "batch_size": spec.batch_size,
        "precision": spec.precision,
        "device": spec.device,
        "device_name": device_name,
        "framework": spec.framework,
        "tag": spec.tag,
        "hostname": result.machine.get("hostname"),
        "sample_unit": result.sample_unit,
        "samples_per_s": _finite(st.samples_per_s) if st else None,
        # No CI (fewer than 3 iterations, an insufficient case): NULL, not a guess.
        "ci_low": _finite(ci[0]) if ci is not None else None,
        "ci_high": _finite(ci[1]) if ci is not None else None,
        "step_time_s": _finite(st.median_s) if st else None,
        "iterations": st.n if st else 0,
        "param_count": result.param_count,
        "error": result.error,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "accelbench_version": result.accelbench_version,
        # Strict JSON: NaN/Inf (a diverged loss) are stored as null, readable anywhere.
        "record_json": jsonout.dumps(record),
        "energy_j_per_sample": _finite(summary["energy_j_per_sample"]),
        "avg_power_w": _finite(summary["avg_power_w"]),
        "energy_source": summary["energy_source"],
    }


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def _read_version(conn: sa.Connection, url: str) -> int:
    """The store's schema version; 0 for an empty database (no ``meta`` table).

    Raises:
        StoreError: ``meta`` holds no version, or one that is not a non-negative integer.
    """
    if not sa.inspect(conn).has_table("meta"):
        return 0
    row = conn.execute(
        sa.select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
    ).first()
    if row is None:
        raise StoreError(
            f"results store {url} has a meta table but no schema version; it is damaged "
            "or not an accelbench store: restore it from a backup or pass another --db"
        )
    raw = row[0]
    try:
        version = int(str(raw).strip())
        if version < 0:
            raise ValueError(raw)
    except (TypeError, ValueError):
        shown = repr(str(raw)) if len(str(raw)) <= 40 else repr(str(raw)[:37] + "...")
        raise StoreError(
            f"results store {url} has an unreadable schema version {shown}; it is damaged "
            "or not an accelbench store: restore it from a backup or pass another --db"
        ) from None
    return version


def _lock_schema(conn: sa.Connection) -> None:
    """Hold the lock that serialises schema changes until this transaction ends (SQLite
    already holds its write lock: the transaction began IMMEDIATE)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_SCHEMA_LOCK})


def _migrate(engine: sa.Engine, url: str, target: int = schema.SCHEMA_VERSION) -> None:
    # ``url`` is only used in messages (the store's display form).
    """Bring the store to ``target``, one migration per transaction, each under the lock.

    The version is read without the lock first, so opening a current store writes
    nothing (and works on a read-only one); every step re-reads it under the lock, so a
    process that lost the race to a concurrent creator finds the work done.
    """
    with engine.connect() as conn:
        current = _read_version(conn, url)
    _refuse_newer(current, url)
    while current < target:
        with engine.connect() as conn:
            conn.execution_options(**{_IMMEDIATE: True})
            with conn.begin():
                _lock_schema(conn)
                current = _read_version(conn, url)
                _refuse_newer(current, url)
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


def _refuse_newer(current: int, url: str) -> None:
    if current > schema.SCHEMA_VERSION:
        raise StoreError(
            f"results store {url} has schema v{current}, newer than this accelbench "
            f"(v{schema.SCHEMA_VERSION}); upgrade accelbench to use it"
        )


def _display(url: str) -> str:
    """How messages name a store: a SQLite file by its path, any other URL without its
    password (messages end up in logs)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)
    path = _sqlite_path(parsed)
    if path is not None:
        return str(path)
    return parsed.render_as_string(hide_password=True)


def _sqlite_path(parsed: sa.URL) -> Path | None:
    """The file of a SQLite URL (plain or ``file:`` URI form), None if in memory or not
    SQLite."""
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:"):
        return None
    if database.startswith("file:") and str(parsed.query.get("uri", "")).lower() in (
        "true", "1", "yes"
    ):
        uri = urlparse(database)
        if "mode=memory" in uri.query or not uri.path:
            return None
        return Path(uri.path)
    return Path(database)


def _check_sqlite_path(path: Path, *, create: bool, read_only: bool) -> None:
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


def open_store(db: str | None = None, *, create: bool = True, _target: int | None = None) -> Store:
    """Open (and create or migrate) the store at ``db`` (URL or path; see :func:`resolve_db_url`).

    Safe when many processes open one new store at the same moment: creation and
    migration are serialised and re-checked (see :func:`_migrate`).

    Args:
        db: SQLAlchemy URL or file path; None for ``ACCELBENCH_DB`` or the default. An
            empty or blank string is refused.
        create: When False, a SQLite file that does not exist is an error, not created.

    Raises:
        StoreError: the URL is empty or invalid, the path cannot hold a database, the file
            is not a database, unreadable, has an unreadable or newer schema.
    """
    url = resolve_db_url(db)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(f"invalid database URL {_display(url)!r}: {_short(exc)}") from exc
    where = _display(url)
    path = _sqlite_path(parsed)
    if path is not None:
        read_only = parsed.query.get("mode") == "ro" or "mode=ro" in (parsed.database or "")
        _check_sqlite_path(path, create=create, read_only=read_only)
    try:
        engine = sa.create_engine(url)
    except (ArgumentError, ImportError, SQLAlchemyError, ValueError, TypeError) as exc:
        raise StoreError(f"cannot open results store {where}: {_short(exc)}") from exc
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
    try:
        _migrate(engine, where, schema.SCHEMA_VERSION if _target is None else _target)
    except (SQLAlchemyError, OverflowError) as exc:
        engine.dispose()
        raise StoreError(f"cannot open results store {where}: {_short(exc)}") from exc
    except StoreError:
        engine.dispose()
        raise
    return Store(url, engine)
