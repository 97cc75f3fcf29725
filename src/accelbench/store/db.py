"""Open, migrate, write and query the results store.

Every result is committed in its own transaction the moment it is saved, so
a suite killed with SIGKILL loses nothing that had finished.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from accelbench.errors import StoreError
from accelbench.result import Result
from accelbench.store import schema

ENV_DB = "ACCELBENCH_DB"


def default_db_url() -> str:
    """SQLite file in the user's data directory."""
    import platformdirs

    path = Path(platformdirs.user_data_dir("accelbench", appauthor=False)) / "results.db"
    return f"sqlite:///{path}"


def resolve_db_url(db: str | None) -> str:
    """``--db`` value, else ``ACCELBENCH_DB``, else the default; plain paths mean SQLite."""
    value = db or os.environ.get(ENV_DB) or default_db_url()
    if "://" not in value:
        value = f"sqlite:///{Path(value).expanduser().resolve()}"
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


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout = 30000")
    cur.close()


class Store:
    """A results store at a SQLAlchemy URL. Use :func:`open_store` to get one."""

    def __init__(self, url: str, engine: sa.Engine) -> None:
        self.url = url
        self.engine = engine

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            return _read_version(conn)

    # -- writes --------------------------------------------------------------------

    def save(self, result: Result) -> None:
        """Insert one result in its own transaction."""
        row = _to_row(result)
        try:
            with self.engine.begin() as conn:
                conn.execute(schema.results.insert().values(**row))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot write to results store {self.url}: {_short(exc)}") from exc

    # -- reads ---------------------------------------------------------------------

    def get(self, result_id: str) -> Result | None:
        """The result with ``result_id`` (a unique prefix is enough), or None."""
        t = schema.results
        with self._connect() as conn:
            rows = conn.execute(
                sa.select(t.c.record_json).where(t.c.id.like(f"{result_id}%")).limit(2)
            ).all()
        if len(rows) != 1:
            return None
        return _from_json(rows[0][0])

    def query(self, flt: ResultFilter | None = None) -> list[Result]:
        """Results matching ``flt``, newest first."""
        return list(self.iter_query(flt))

    def iter_query(self, flt: ResultFilter | None = None) -> Iterator[Result]:
        t = schema.results
        flt = flt or ResultFilter()
        stmt = sa.select(t.c.record_json)
        for name in ("workload", "device", "precision", "size", "framework", "status",
                     "suite_id", "tag"):
            value = getattr(flt, name)
            if value is not None:
                stmt = stmt.where(t.c[name] == value)
        stmt = stmt.order_by(t.c.finished_at.desc(), t.c.id.desc())
        if flt.limit is not None:
            stmt = stmt.limit(flt.limit)
        with self._connect() as conn:
            rows = conn.execute(stmt).all()
        for (blob,) in rows:
            yield _from_json(blob)

    def case_keys(self, suite_id: str) -> set[str]:
        """Case keys already stored for ``suite_id`` (what a resume skips)."""
        t = schema.results
        with self._connect() as conn:
            rows = conn.execute(sa.select(t.c.case_key).where(t.c.suite_id == suite_id)).all()
        return {r[0] for r in rows}

    def _connect(self) -> sa.Connection:
        try:
            return self.engine.connect()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read results store {self.url}: {_short(exc)}") from exc


def _short(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc).splitlines()[0]


def _to_row(result: Result) -> dict[str, Any]:
    spec = result.spec
    st = result.stats
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
        "samples_per_s": st.samples_per_s if st else None,
        "ci_low": st.samples_per_s_ci95[0] if st else None,
        "ci_high": st.samples_per_s_ci95[1] if st else None,
        "step_time_s": st.median_s if st else None,
        "iterations": st.n if st else 0,
        "param_count": result.param_count,
        "error": result.error,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "accelbench_version": result.accelbench_version,
        "record_json": json.dumps(record),
        "energy_j_per_sample": summary["energy_j_per_sample"],
        "avg_power_w": summary["avg_power_w"],
        "energy_source": summary["energy_source"],
    }


def _from_json(blob: str) -> Result:
    # Result.from_dict tolerates records of older schema versions (missing keys).
    return Result.from_dict(json.loads(blob))


def _read_version(conn: sa.Connection) -> int:
    insp = sa.inspect(conn)
    if not insp.has_table("meta"):
        return 0
    row = conn.execute(
        sa.select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
    ).first()
    return int(row[0]) if row else 0


def _migrate(engine: sa.Engine, url: str, target: int = schema.SCHEMA_VERSION) -> None:
    with engine.begin() as conn:
        current = _read_version(conn)
        if current == 0:
            if sa.inspect(conn).get_table_names():
                raise StoreError(
                    f"{url} holds tables but no accelbench schema; refusing to touch it"
                )
            conn.execute(
                sa.text("CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)")
            )
            conn.execute(schema.meta.insert().values(key="schema_version", value="0"))
    if current > schema.SCHEMA_VERSION:
        raise StoreError(
            f"results store {url} has schema v{current}, newer than this accelbench "
            f"(v{schema.SCHEMA_VERSION}); upgrade accelbench to use it"
        )
    for version in range(current + 1, target + 1):
        with engine.begin() as conn:
            schema.MIGRATIONS[version - 1](conn)
            conn.execute(
                schema.meta.update()
                .where(schema.meta.c.key == "schema_version")
                .values(value=str(version))
            )


def open_store(db: str | None = None, *, create: bool = True, _target: int | None = None) -> Store:
    """Open (and create or migrate) the store at ``db`` (URL or path; see :func:`resolve_db_url`).

    Args:
        db: SQLAlchemy URL or file path; None for ``ACCELBENCH_DB`` or the default.
        create: When False, a SQLite file that does not exist is an error, not created.

    Raises:
        StoreError: the URL is invalid, the file is not a database, unreadable, or newer.
    """
    url = resolve_db_url(db)
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"invalid database URL {url!r}: {exc}") from exc
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database or "")
        if path.exists() and not path.is_file():
            raise StoreError(f"results store {path} is not a file")
        if not path.exists():
            if not create:
                raise StoreError(f"results store {path} does not exist")
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not os.access(path, os.R_OK):
            raise StoreError(f"results store {path} is not readable")
    try:
        engine = sa.create_engine(url)
    except (ArgumentError, ImportError, SQLAlchemyError) as exc:
        raise StoreError(f"cannot open results store {url}: {_short(exc)}") from exc
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    try:
        _migrate(engine, url, schema.SCHEMA_VERSION if _target is None else _target)
    except SQLAlchemyError as exc:
        engine.dispose()
        raise StoreError(f"cannot open results store {url}: {_short(exc)}") from exc
    except StoreError:
        engine.dispose()
        raise
    return Store(url, engine)
