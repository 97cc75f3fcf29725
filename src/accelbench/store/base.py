"""What every part of the store shares: the URL, the engine, one-line errors, reads and writes.

:class:`StoreBase` holds the engine; the tables' own queries are methods of the classes
built on it (:mod:`~accelbench.store.results`, :mod:`~accelbench.store.claims`,
:mod:`~accelbench.store.opbench`, :mod:`~accelbench.store.jobs`), which
:class:`~accelbench.store.db.Store` joins into one interface. Nothing outside
``accelbench.store`` sees the engine or SQL.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import socket
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlparse

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, SQLAlchemyError

import accelbench.store.schema as schema
from accelbench.durations import utc_now  # noqa: F401 - the stores import it from here
from accelbench.errors import AccelbenchWarning, ConfigError, StoreError

T = TypeVar("T")

ENV_DB = "ACCELBENCH_DB"

MAX_INT64 = 2**63 - 1
"""Largest integer every supported database stores (SQLite INTEGER, PostgreSQL BIGINT)."""

#: Folders of virtual file systems: no database can live there, and reading some of their
#: files blocks forever (``/proc/kmsg``). ``/dev/shm`` (a real tmpfs) is allowed.
VIRTUAL_ROOTS = ("/proc", "/sys", "/dev")

IMMEDIATE = "accelbench_immediate"
"""Execution option: this transaction takes SQLite's write lock when it begins."""


def default_db_url() -> str:
    """SQLite file in the user's data directory."""
    import platformdirs

    path = Path(platformdirs.user_data_dir("accelbench", appauthor=False)) / "results.db"
    return f"sqlite:///{path}"


def resolve_db_url(db: str | None) -> str:
    """``--db`` value, else ``ACCELBENCH_DB``, else the default; plain paths mean SQLite.

    Raises:
        StoreError: ``db`` is empty or blank (None, not ``""``, means the default), or a
            path that cannot be resolved.
    """
    if db is not None and not db.strip():
        raise StoreError(
            "--db must not be empty; give a file path or a database URL, "
            "or leave it out for the default store"
        )
    value = db or os.environ.get(ENV_DB) or default_db_url()
    if "://" not in value:
        try:
            value = f"sqlite:///{Path(value).expanduser().resolve()}"
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"results store path {value!r} cannot be resolved: {exc}") from exc
    return value


def local_file_of(db: str | None) -> Path | None:
    """The SQLite file ``db`` (as ``--db`` takes it) names, without opening it; None for a
    server, an in-memory store, or a name that cannot be resolved (opening it says why)."""
    try:
        return sqlite_path(make_url(resolve_db_url(db)))
    except Exception:  # noqa: BLE001 - a bad name: opening the store reports it
        return None


def short_error(exc: BaseException, url: str = "") -> str:
    """The first line of a database error (the driver's own message where there is one),
    with the secrets of ``url`` masked (:func:`hide_secrets`): a driver may quote the URL
    it could not parse."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    line = (text.splitlines() or [type(exc).__name__])[0]
    return hide_secrets(line, url) if url else line


def unreadable_why(exc: BaseException) -> str:
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


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is running (someone else's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid <= 2**22  # someone else's process, alive; an absurd pid is not
    return True


#: Query parameters that carry a secret (libpq's and the common drivers' names).
SECRET_PARAMS = ("password", "passwd", "pwd", "sslpassword", "secret", "token")
_USERINFO = re.compile(r"(://[^:/@?#]*):.*@", re.DOTALL)
_BARE_USERINFO = re.compile(r":[^:@]*@(?=[^@]*$)", re.DOTALL)
_SECRET_PARAM = re.compile(r"([?&;](?:" + "|".join(SECRET_PARAMS) + r")=)[^&;#]*", re.I)


def display_url(url: str) -> str:
    """THE way a store is named for people (messages, log lines, reports, JSON, printed
    commands): a SQLite file by its path, any other URL with its password and any secret
    query parameter (``?password=``) shown as ``***``. Masked on the text as given, up to
    the last ``@`` (a password may hold ``@``, ``/`` or ``?``), so that nothing a driver
    would read as a password survives, parsable or not."""
    try:
        path = sqlite_path(make_url(url))
    except (ArgumentError, ValueError):
        path = None
    if path is not None:
        return str(path)
    if "://" not in url:  # a mistyped URL (postgresql:/u:pw@h/db, u:pw@h/db): masked too
        url = _BARE_USERINFO.sub(":***@", url)
    return _SECRET_PARAM.sub(r"\1***", _USERINFO.sub(r"\1:***@", url, count=1))


#: A URL inside free text (a command line, a message): scheme, ``://``, up to a space.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*")


def mask_urls(text: str) -> str:
    """``text`` with every URL in it shown as :func:`display_url` (password and secret
    query parameters as ``***``): for text that may quote a store nobody named here, such
    as a command line handed to a tracker (W&B keeps ``sys.argv``)."""
    return _URL_IN_TEXT.sub(lambda m: display_url(m.group(0)), text)


def url_secrets(url: str) -> list[str]:
    """The secrets written in ``url``: its password (as given and as parsed) and the values
    of secret query parameters (:data:`SECRET_PARAMS`)."""
    found = []
    match = _USERINFO.search(url)
    if match:
        found.append(match.group(0)[len(match.group(1)) + 1:-1])
    elif "://" not in url:
        found += [m.group(0)[1:-1] for m in _BARE_USERINFO.finditer(url)]
    found += [m.group(0)[len(m.group(1)):] for m in _SECRET_PARAM.finditer(url)]
    try:
        parsed = make_url(url)
        found.append(parsed.password or "")
        found += [str(v) for k, v in parsed.query.items() if k.lower() in SECRET_PARAMS]
    except (ArgumentError, ValueError):
        pass
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def hide_secrets(text: str, url: str) -> str:
    """``text`` with ``url`` shown as :func:`display_url` and each of its secrets as
    ``***`` (for messages quoting a driver, which may echo what it was given)."""
    text = text.replace(url, display_url(url))
    for secret in url_secrets(url):
        text = text.replace(secret, "***")
    return text


def sqlite_path(parsed: sa.URL) -> Path | None:
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
        # mode=memory reaches SQLite as the URL's own query (SQLAlchemy passes it on).
        if "mode=memory" in uri.query or parsed.query.get("mode") == "memory" \
                or not uri.path:
            return None
        return Path(uri.path)
    return Path(database)


#: What a damaged store's refusal tells the user to do.
RECOVER = ("restore it from a backup, or pass another --db (accelbench store check "
           "says what is wrong)")

#: Driver messages of a SQLite file whose pages are damaged (not a lock or a missing file).
DAMAGE_WORDS = ("malformed", "not a database", "corrupt", "disk image")


class UnusableStoreError(StoreError):
    """The store exists but cannot be used: damaged, or of a newer schema. Never written
    to; a read refuses it (unlike a missing store, which some reads take as empty)."""


def read_version(conn: sa.Connection, url: str) -> int:
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
        raise UnusableStoreError(
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
        raise UnusableStoreError(
            f"results store {url} has an unreadable schema version {shown}; it is damaged "
            "or not an accelbench store: restore it from a backup or pass another --db"
        ) from None
    return version


@functools.cache
def expected_columns(version: int) -> dict[str, frozenset[str]]:
    """The columns of each table a store at schema ``version`` holds: what migrations
    1..``version`` create, found by running them on an empty in-memory database (so a new
    migration's column is expected with no list to keep)."""
    engine = sa.create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, "
                                 "value TEXT NOT NULL)")
            for migration in schema.MIGRATIONS[:max(0, version)]:
                migration(conn)
            insp = sa.inspect(conn)
            return {t: frozenset(c["name"] for c in insp.get_columns(t))
                    for t in insp.get_table_names()}
    finally:
        engine.dispose()


def expected_tables(version: int) -> list[str]:
    """The tables a store at schema ``version`` holds (those of :func:`expected_columns`)."""
    return sorted(expected_columns(version)) if version > 0 else []


def damage(conn: sa.Connection, tables: Sequence[str]) -> str | None:
    """What is wrong with the store behind ``conn``, or None when it is sound: SQLite's
    ``PRAGMA quick_check`` (the file's pages and indexes, linear in its size, no full
    cross-check of the indexes' contents) and the presence of ``tables``.

    A damaged SQLite file may fail the check itself with "malformed": that is the answer;
    any other database error (locked, unreachable) is raised.
    """
    try:
        if conn.dialect.name == "sqlite":
            rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check").all()]
            if rows != ["ok"]:
                more = f" (+{len(rows) - 1} more problem(s))" if len(rows) > 1 else ""
                return f"integrity check failed: {(rows or ['no answer'])[0]}{more}"
        held = set(sa.inspect(conn).get_table_names())
    except DatabaseError as exc:
        why = short_error(exc)
        if any(word in why.lower() for word in DAMAGE_WORDS):
            return why
        raise
    missing = [t for t in tables if t not in held]
    if missing:
        return f"table{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing"
    return None


@contextmanager
def peek(db: str | None, table: str) -> Iterator[sa.Connection | None]:
    """A connection to the store at ``db`` when it exists and holds ``table``, else None,
    without creating or migrating anything: a missing SQLite file, an older schema, an
    unreachable database or a failed read in the block all answer as no store (the
    command itself reports a store it cannot use)."""
    try:
        url = resolve_db_url(db)
        path = sqlite_path(make_url(url))
        engine = None if path is not None and not path.is_file() else sa.create_engine(url)
    except Exception:  # noqa: BLE001 - a bad URL is the command's to report
        engine = None
    if engine is None:
        yield None
        return
    try:
        conn = engine.connect()
    except SQLAlchemyError:
        engine.dispose()
        yield None
        return
    try:
        with conn:
            try:
                held = sa.inspect(conn).has_table(table)
            except SQLAlchemyError:
                held = False
            yield conn if held else None
    except (SQLAlchemyError, OSError, ValueError, TypeError, KeyError):
        pass  # the caller's read failed: as if there were none
    finally:
        engine.dispose()


class Guard:
    """Turns database errors (and driver overflows) into one-line :class:`StoreError`."""

    def __init__(self, url: str, verb: str, secret_url: str = "") -> None:
        self.url = url
        self.verb = verb
        self.secret_url = secret_url

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 _tb: object) -> Literal[False]:
        if exc is None or not isinstance(exc, (SQLAlchemyError, OverflowError)):
            return False
        why = short_error(exc, self.secret_url)
        if any(word in why.lower() for word in DAMAGE_WORDS):  # a page met mid-read
            raise StoreError(f"results store {self.url} is damaged ({why}): {RECOVER}") from exc
        raise StoreError(f"cannot {self.verb} results store {self.url}: {why}") from exc


class StoreBase:
    """A results store's engine and the reads and writes every table's queries use."""

    def __init__(self, url: str, engine: sa.Engine) -> None:
        self.url = url
        self.engine = engine
        self.where = display_url(url)
        """The store as messages name it: a SQLite file's path, else the URL without
        its password."""
        self.skipped_rows: list[tuple[str, str]] = []
        """(id, why) of every malformed row reads skipped, once each."""
        self.token = secrets.token_hex(8)
        """Tells two stores of one process apart (in claim owners and probes)."""
        self.hostname = socket.gethostname()
        self.sound = False
        """Whether :meth:`check_sound` found the store sound (checked once a process)."""

    # -- lifecycle -----------------------------------------------------------------

    def local_file(self) -> Path | None:
        """The SQLite file this store lives in, or None (a server, or in memory)."""
        return sqlite_path(sa.make_url(self.url))

    def close(self) -> None:
        self.engine.dispose()

    @property
    def dialect(self) -> str:
        """The database's kind: ``sqlite``, ``postgresql`` ..."""
        return str(self.engine.dialect.name)

    def skip_row(self, row_id: object, why: str) -> None:
        """Warn that a malformed row was skipped and remember it in :attr:`skipped_rows`."""
        rid = str(row_id)
        warnings.warn(f"skipped malformed row {rid}: {why}", AccelbenchWarning, stacklevel=3)
        if (rid, why) not in self.skipped_rows:
            self.skipped_rows.append((rid, why))

    def check_sound(self) -> None:
        """Refuse to write into a damaged store: run before the first write of this
        store object (:meth:`writing`, :meth:`insert`, claims, ``check_writable``), once.

        Raises:
            StoreError: one line saying what is wrong and how to recover.
        """
        if self.sound:
            return
        with self.guard("check"), self.engine.connect() as conn:
            try:
                version = read_version(conn, self.where)
            except DatabaseError as exc:  # the version's own page may be damaged
                why: str | None = short_error(exc, self.url)
                if not any(word in str(why).lower() for word in DAMAGE_WORDS):
                    raise
            else:
                why = damage(conn, expected_tables(version))
        if why is not None:
            raise StoreError(f"results store {self.where} is damaged ({why}) and is not "
                             f"written to: {RECOVER}")
        self.sound = True

    # -- plumbing of the tables' queries ---------------------------------------------

    def guard(self, verb: str) -> Guard:
        """Database errors inside as one-line :class:`StoreError` (``cannot VERB ...``)."""
        return Guard(self.where, verb, self.url)

    @contextmanager
    def writing(self, *, immediate: bool = False) -> Iterator[sa.Connection]:
        """A connection in one transaction, committed at the end; with ``immediate``,
        SQLite's write lock is taken when it begins (read-then-write)."""
        self.check_sound()
        with self.guard("write to"), self.engine.connect() as conn:
            if immediate:
                conn.execution_options(**{IMMEDIATE: True})
            with conn.begin():
                yield conn

    def rows(self, stmt: sa.Select[Any]) -> list[Any]:
        """The rows of ``stmt`` as tuples."""
        with self.guard("read"), self.engine.connect() as conn:
            return list(conn.execute(stmt).all())

    def mappings(self, stmt: sa.Select[Any]) -> list[Any]:
        """The rows of ``stmt`` as mappings (by column name)."""
        with self.guard("read"), self.engine.connect() as conn:
            return list(conn.execute(stmt).mappings().all())

    def insert(self, table: sa.Table, row: dict[str, Any]) -> None:
        """Insert one row in its own transaction."""
        self.check_sound()
        with self.guard("write to"), self.engine.begin() as conn:
            conn.execute(table.insert().values(**row))

    def decoded(self, rows: list[Any], decode: Callable[[Any], T]) -> list[T]:
        """``decode`` of each row; a malformed row is skipped with a warning naming its id
        (:meth:`skip_row`), so one bad row never takes a whole listing down."""
        out: list[T] = []
        for row in rows:
            try:
                out.append(decode(row))
            except Exception as exc:  # noqa: BLE001 - any failure is the row's, never the command's
                self.skip_row(row["id"], unreadable_why(exc))
        return out
