"""The ``results`` table: one row per measured case, its full record as JSON.

The row is derived from :class:`~accelbench.result.Result`: every column named like a
field of the result or of its :class:`~accelbench.spec.RunSpec` takes that field's value
(:func:`result_row`), the rest are figures computed from it (:data:`DERIVED_COLUMNS`), and
``record_json`` holds ``Result.to_dict()``, so a new field reaches the record without a
second spelling. Reading back goes through ``Result.from_dict``, which upgrades records
of older schema versions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

import accelbench.store.schema as schema
from accelbench import jsonout
from accelbench.errors import ConfigError
from accelbench.result import Result
from accelbench.spec import RunSpec
from accelbench.store.base import MAX_INT64, StoreBase
from accelbench.store.health import damaged
from accelbench.store.records import read_record

RESULT_FIELDS = frozenset(f.name for f in dataclasses.fields(Result))
SPEC_FIELDS = frozenset(f.name for f in dataclasses.fields(RunSpec))

DERIVED_COLUMNS = frozenset({
    "case_key", "device_name", "hostname", "samples_per_s", "ci_low", "ci_high",
    "step_time_s", "iterations", "record_json", "energy_j_per_sample", "avg_power_w",
    "energy_source", *schema.PHASE_TIME_COLUMNS.values(),
})
"""Columns of ``results`` computed from a result, not copied from a field of the same name."""


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
    """At most this many results (the newest); None: all."""
    offset: int | None = None
    """Skip this many of the newest matching results first (paging); None: none."""

    def __post_init__(self) -> None:
        # Checked here, not by the database: an out-of-range integer overflows its driver
        # with a traceback, after the query was built.
        for name in ("limit", "offset"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int)
                or not 0 <= value <= MAX_INT64
            ):
                raise ConfigError(f"--{name} must be an integer from 0 to {MAX_INT64}, "
                                  f"got {value!r}")


FILTER_COLUMNS = tuple(f.name for f in dataclasses.fields(ResultFilter)
                       if f.name not in ("limit", "offset"))

BATCH_ROWS = 200
"""Rows one read of :meth:`ResultStore.iter_query` fetches: what a streamed listing holds
in memory at once, whatever the store's size."""


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def derived_values(result: Result) -> dict[str, Any]:
    """The values of :data:`DERIVED_COLUMNS` for ``result``."""
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
        "case_key": spec.case_key(),
        "device_name": device_name,
        "hostname": result.machine.get("hostname"),
        "samples_per_s": _finite(st.samples_per_s) if st else None,
        # No CI (fewer than 3 iterations, an insufficient case): NULL, not a guess.
        "ci_low": _finite(ci[0]) if ci is not None else None,
        "ci_high": _finite(ci[1]) if ci is not None else None,
        "step_time_s": _finite(st.median_s) if st else None,
        "iterations": st.n if st else 0,
        # Strict JSON: NaN/Inf (a diverged loss) are stored as null, readable anywhere.
        "record_json": jsonout.dumps(record),
        "energy_j_per_sample": _finite(summary["energy_j_per_sample"]),
        "avg_power_w": _finite(summary["avg_power_w"]),
        "energy_source": summary["energy_source"],
        **schema.phase_time_values(result.phases),
    }


def result_row(result: Result) -> dict[str, Any]:
    """The ``results`` row of ``result``: each column named like a field of the result
    (or of its spec) holds that field; the others are :func:`derived_values`.

    Raises:
        TypeError: a column is neither a field nor derived (a schema change without its
            source).
    """
    derived = derived_values(result)
    row: dict[str, Any] = {}
    for column in schema.results.columns:
        name = column.name
        if name in derived:
            row[name] = derived[name]
        elif name in RESULT_FIELDS:
            row[name] = getattr(result, name)
        elif name in SPEC_FIELDS:
            row[name] = getattr(result.spec, name)
        else:
            raise TypeError(f"results column {name!r} is neither a field of Result or "
                            "RunSpec nor derived")
    return row


#: Filter columns with few distinct values (a quarter of a store may be one workload):
#: a page read newest first filters them as it walks the finished_at index, rather than
#: letting the database pick their own index and sort every match again for each page.
UNSELECTIVE = frozenset({"workload", "device", "precision", "size", "framework", "status",
                         "tag"})


def where_filter(stmt: sa.Select[Any], flt: ResultFilter, *,
                 in_time_order: bool = False) -> sa.Select[Any]:
    """``stmt`` narrowed to the results ``flt``'s filter columns match (``in_time_order``:
    for a page read in ``finished_at`` order, the :data:`UNSELECTIVE` columns are
    compared as ``column || ''``, which no index serves, so that the ``finished_at``
    index is the one used)."""
    t = schema.results
    for name in FILTER_COLUMNS:
        value = getattr(flt, name)
        if value is not None:
            column: Any = t.c[name]
            if in_time_order and name in UNSELECTIVE:
                column = column.op("||")("")
            stmt = stmt.where(column == value)
    return stmt


class ResultStore(StoreBase):
    """Queries of the ``results`` table."""

    def save(self, result: Result) -> None:
        """Insert one result in its own transaction (NULL phase columns are left unnamed,
        so a result without phases is written the same way into a store of any version)."""
        row = result_row(result)
        for column in schema.PHASE_TIME_COLUMNS.values():
            if row[column] is None:
                del row[column]
        self.insert(schema.results, row)

    def save_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert prepared ``results`` rows (:func:`result_row` of a result, perhaps
        edited) in one transaction: the bulk path that fills a large store quickly
        (``benchmarks/store_scale.py``). Each row must be what :func:`result_row` gives;
        the store does not re-derive it."""
        if rows:
            with self.writing() as conn:
                conn.execute(schema.results.insert(), list(rows))

    def get(self, result_id: str) -> Result | None:
        """The result with ``result_id`` (a unique prefix is enough), or None (a record
        that cannot be read back refuses the read)."""
        t = schema.results
        rows = self.rows(
            sa.select(t.c.id, t.c.record_json)
            .where(t.c.id.startswith(result_id, autoescape=True)).limit(2)
        )
        if len(rows) != 1:
            return None
        return self.decode(rows[0][0], rows[0][1])

    def ids_with_prefix(self, prefix: str, limit: int = 3) -> list[str]:
        """Up to ``limit`` result ids that start with ``prefix`` (``%`` and ``_`` in it
        mean themselves)."""
        t = schema.results
        rows = self.rows(
            sa.select(t.c.id).where(t.c.id.startswith(prefix, autoescape=True)).limit(limit)
        )
        return [str(r[0]) for r in rows]

    def workloads(self) -> set[str]:
        """Names of the workloads the store holds results of."""
        return self.distinct("workload")

    def distinct(self, column: str) -> set[str]:
        """The values a filter column (:data:`FILTER_COLUMNS`) holds, NULL left out."""
        if column not in FILTER_COLUMNS:
            raise ValueError(f"{column!r} is not a filter column")
        c = schema.results.c[column]
        return {str(r[0]) for r in self.rows(sa.select(c).distinct()) if r[0] is not None}

    def query(self, flt: ResultFilter | None = None) -> list[Result]:
        """Results matching ``flt``, newest first, ``flt.limit`` at most after skipping
        ``flt.offset`` (a record that cannot be read back refuses the read: the store is
        damaged). Holds them all: for a whole store use :meth:`iter_query`."""
        return list(self.iter_query(flt))

    def count(self, flt: ResultFilter | None = None) -> int:
        """How many results match ``flt``'s filters (its ``limit`` and ``offset`` ignored),
        in one ``COUNT`` without reading a record."""
        t = schema.results
        stmt = where_filter(sa.select(sa.func.count()).select_from(t), flt or ResultFilter())
        return int(self.rows(stmt)[0][0])

    def iter_query(self, flt: ResultFilter | None = None, *,
                   batch: int = BATCH_ROWS) -> Iterator[Result]:
        """:meth:`query`, streamed: newest first, ``batch`` rows per read, each read its
        own short query resuming after the last row seen (keyset paging on
        ``finished_at, id``, which the index serves), so memory stays bounded by
        ``batch`` whatever the store's size and no read lock is held between batches
        (a result stored meanwhile, newer than the page, is not listed)."""
        t = schema.results
        flt = flt or ResultFilter()
        if batch < 1:
            raise ValueError("batch must be at least 1")
        left = flt.limit
        offset = flt.offset or 0
        after: tuple[str, str] | None = None
        # The page is chosen on the narrow columns (a sort never carries the records);
        # its records are then read by id.
        base = where_filter(sa.select(t.c.id, t.c.finished_at), flt, in_time_order=True)
        while left is None or left > 0:
            stmt = base
            if after is not None:
                f, i = after
                # (finished_at, id) < (f, i), spelled so that the finished_at index serves it
                # as one range read in order (an OR of two ranges sorts every older row
                # again for each page: quadratic in the store's size).
                stmt = stmt.where(sa.and_(t.c.finished_at <= f,
                                          sa.or_(t.c.finished_at < f, t.c.id < i)))
            size = batch if left is None else min(batch, left)
            stmt = stmt.order_by(t.c.finished_at.desc(), t.c.id.desc()).limit(size)
            if offset:
                stmt = stmt.offset(offset)
                offset = 0
            rows = self.rows(stmt)
            ids = [r[0] for r in rows]
            blobs = dict(self.rows(sa.select(t.c.id, t.c.record_json).where(t.c.id.in_(ids))))
            for rid in ids:
                if rid in blobs:  # (one deleted between the two reads is gone)
                    yield self.decode(rid, blobs[rid])
            if left is not None:
                left -= len(rows)
            if len(rows) < size:
                return
            after = (rows[-1][1], rows[-1][0])

    def case_keys(self, suite_id: str) -> set[str]:
        """Case keys already stored for ``suite_id`` (what a resume skips)."""
        t = schema.results
        rows = self.rows(sa.select(t.c.case_key).where(t.c.suite_id == suite_id))
        return {r[0] for r in rows}

    def case_rates(self, case_key: str, hostname: str | None, *,
                   exclude: Sequence[str] = ()) -> list[float]:
        """Throughputs of the ``ok`` results of one case (``case_key``) on one host, but
        ``exclude`` (one query; ``[]`` without a hostname)."""
        if not hostname:
            return []
        t = schema.results
        stmt = sa.select(t.c.samples_per_s).where(
            (t.c.case_key == case_key) & (t.c.hostname == hostname) & (t.c.status == "ok")
            & t.c.samples_per_s.is_not(None))
        if exclude:
            stmt = stmt.where(t.c.id.not_in(list(exclude)))
        return [float(r[0]) for r in self.rows(stmt)]

    def case_key_counts(self, suite_id: str) -> dict[str, int]:
        """Results stored per case key of ``suite_id`` (a case with ``--repeats R`` is done
        when R are stored: resume counts them)."""
        t = schema.results
        rows = self.rows(
            sa.select(t.c.case_key, sa.func.count()).where(t.c.suite_id == suite_id)
            .group_by(t.c.case_key)
        )
        return {r[0]: int(r[1]) for r in rows}

    def decode(self, rid: object, blob: object) -> Result:
        """The result stored as ``blob`` (its ``record_json``).

        Raises:
            UnusableStoreError: the record cannot be read back (not JSON, a required
                field missing or of the wrong type): the store is damaged, and a read
                that silently left the record out would answer wrong (one line naming
                the record, pointing to ``accelbench store check``).
        """
        result, why = read_record(rid, blob)
        if result is None:
            raise damaged(self.where, str(why))
        return result
