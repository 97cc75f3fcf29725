"""Briefs: what choosing among many results reads of each, without its step times.

``compare``, ``recommend`` and the report choose a few results out of many (the pair of
each case, the newest run of each option). A :class:`ResultBrief` holds what the choice
reads of a result (its spec, status, suite, times, noise flag, device name) and nothing
it does not (the step times, energy readings and machine record that make a record
~15 KB), so choosing among a store of 200,000 results holds a few hundred bytes per
result, read in keyset batches, and only the chosen results are decoded whole
(:func:`load`). On SQLite the fields are taken out of ``record_json`` by the database
(``json_extract``); elsewhere each batch's records are parsed and dropped.

A record whose brief cannot be taken (not JSON, a field of the wrong type) is decoded
whole, which refuses it as damage just as a full read would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

import accelbench.store.schema as schema
from accelbench.result import STATUSES, Result
from accelbench.spec import RunSpec
from accelbench.store.base import StoreBase
from accelbench.store.health import damaged
from accelbench.store.results import BATCH_ROWS, ResultFilter, where_filter


@dataclass(frozen=True, slots=True, eq=False)
class ResultBrief:
    """What choosing among results reads of one (see the module docstring)."""

    rid: str
    """The row's id (the key :func:`load` reads the whole record by)."""
    id: str
    spec: RunSpec
    case_key: str
    """``spec.case_key()``, computed once per distinct spec."""
    status: str
    suite_id: str | None
    started_at: str
    finished_at: str
    noisy: bool
    """The record's noise verdict flagged it (:attr:`Result.noisy`)."""
    measured: bool
    """It holds step times (``Result.iteration_times_s`` is not empty)."""
    has_stats: bool
    """It has statistics (``Result.stats`` is not None)."""
    device_name: str
    """:func:`accelbench.report.rows.device_name` of the result."""


def device_name_of(machine: Any, device: str) -> str:
    """The model name of ``device`` from a machine record (a GPU's name, the CPU's model),
    else ``device`` itself."""
    machine = machine if isinstance(machine, dict) else {}
    for gpu in machine.get("gpus") or []:
        if isinstance(gpu, dict) and gpu.get("device") == device and gpu.get("name"):
            return str(gpu["name"])
    if device == "cpu":
        model = (machine.get("cpu") or {}).get("model")
        if model:
            return str(model)
    return device


class _Interner:
    """One RunSpec (and case key) per distinct spec text, one string per device name."""

    def __init__(self) -> None:
        self.specs: dict[str, tuple[RunSpec, str]] = {}
        self.names: dict[tuple[str | None, Any, str], str] = {}

    def spec(self, text: str) -> tuple[RunSpec, str]:
        found = self.specs.get(text)
        if found is None:
            spec = RunSpec.from_dict(json.loads(text))
            found = self.specs[text] = (spec, spec.case_key())
        return found

    def name(self, gpus: str | None, cpu: Any, device: str) -> str:
        key = (gpus, cpu, device)
        found = self.names.get(key)
        if found is None:
            machine = {"gpus": json.loads(gpus) if gpus else None, "cpu": {"model": cpu}}
            found = self.names[key] = device_name_of(machine, device)
        return found


def brief_of(result: Result, rid: str | None = None, *, spec: RunSpec | None = None,
             case_key: str | None = None) -> ResultBrief:
    """The brief of a decoded result (``spec`` and ``case_key``: an equal spec and its key
    already held, so that many briefs share one)."""
    spec = spec or result.spec
    return ResultBrief(
        rid=rid or result.id, id=result.id, spec=spec, case_key=case_key or spec.case_key(),
        status=result.status, suite_id=result.suite_id, started_at=result.started_at,
        finished_at=result.finished_at, noisy=result.noisy,
        measured=bool(result.iteration_times_s), has_stats=result.stats is not None,
        device_name=device_name_of(result.machine, result.spec.device),
    )


_FIELDS = ("id", "spec", "status", "suite_id", "started_at", "finished_at", "noise.flagged",
           "iteration_times_s[0]", "stats.median_s", "machine.gpus", "machine.cpu.model")


def _sqlite_columns() -> list[Any]:
    rec = schema.results.c.record_json
    valid = sa.func.json_valid(rec)
    cols: list[Any] = [valid]
    for path in _FIELDS:
        fn = sa.func.json_type if path in ("iteration_times_s[0]", "stats.median_s") \
            else sa.func.json_extract  # (an object comes back as its JSON text)
        # Only a valid record is taken apart: SQLite raises on one that is not, and the
        # whole decode should say which record it is.
        cols.append(sa.case((valid == 1, fn(rec, f"$.{path}")), else_=None))
    return cols


def _dig(data: Any, path: str) -> Any:
    for part in path.replace("[0]", ".0").split("."):
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and part == "0":
            data = data[0] if data else None
        else:
            return None
    return data


def _values_of(blob: Any) -> list[Any] | None:
    """The :data:`_FIELDS` of a record parsed here (not SQLite), as SQLite gives them."""
    try:
        data = json.loads(blob)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    out: list[Any] = [1]
    for path in _FIELDS:
        value = _dig(data, path)
        if path in ("spec", "machine.gpus"):
            value = json.dumps(value) if value is not None else None
        elif path in ("iteration_times_s[0]", "stats.median_s"):
            value = None if value is None else "real"
        out.append(value)
    return out


def _brief(rid: str, values: Sequence[Any], interner: _Interner) -> ResultBrief | None:
    """The brief of one row's extracted values; None where they are not a sound record's."""
    (valid, jid, spec_text, status, suite_id, started, finished, flagged, first_time,
     median, gpus, cpu) = values
    if not valid or not isinstance(jid, str) or not jid or status not in STATUSES \
            or not isinstance(spec_text, str) or not isinstance(started, str) \
            or not isinstance(finished, str) \
            or (suite_id is not None and not isinstance(suite_id, str)):
        return None
    try:
        spec, key = interner.spec(spec_text)
        name = interner.name(gpus if isinstance(gpus, str) else None,
                             cpu, spec.device)
    except Exception:  # noqa: BLE001 - the whole decode says what is wrong
        return None
    return ResultBrief(
        rid=rid, id=jid if jid != rid else rid, spec=spec, case_key=key, status=status,
        suite_id=suite_id, started_at=started, finished_at=finished, noisy=bool(flagged),
        measured=first_time is not None, has_stats=median is not None, device_name=name)


def iter_briefs(store: StoreBase, flt: ResultFilter | None = None, *,
                batch: int = BATCH_ROWS) -> Iterator[ResultBrief]:
    """The briefs of the results matching ``flt``, in :meth:`ResultStore.iter_query`'s
    order (newest first), read in keyset batches of ``batch`` rows (``flt.limit`` and
    ``flt.offset`` are not applied: choosing reads every match).

    Raises:
        UnusableStoreError: a record cannot be read back (the store is damaged).
    """
    t = schema.results
    flt = flt or ResultFilter()
    sqlite = store.dialect == "sqlite"
    extra = _sqlite_columns() if sqlite else [t.c.record_json]
    # The page is chosen on the narrow columns (a sort never computes the extraction for
    # rows it drops), then its briefs are taken by id, as iter_query does.
    base = where_filter(sa.select(t.c.id, t.c.finished_at), flt, in_time_order=True)
    interner = _Interner()
    after: tuple[str, str] | None = None
    while True:
        stmt = base
        if after is not None:
            f, i = after
            # (finished_at, id) < (f, i), spelled so that the finished_at index serves it
            # as one range read in order (an OR of two ranges sorts every older row
            # again for each page: quadratic in the store's size).
            stmt = stmt.where(sa.and_(t.c.finished_at <= f,
                                      sa.or_(t.c.finished_at < f, t.c.id < i)))
        rows = store.rows(stmt.order_by(t.c.finished_at.desc(), t.c.id.desc()).limit(batch))
        ids = [r[0] for r in rows]
        found = {r[0]: r[1:] for r in store.rows(sa.select(t.c.id, *extra)
                                                 .where(t.c.id.in_(ids)))}
        for rid in ids:
            if rid not in found:  # (one deleted between the two reads is gone)
                continue
            values = found[rid] if sqlite else _values_of(found[rid][0])
            brief = _brief(str(rid), values, interner) if values is not None else None
            if brief is None:  # decoded whole: refused as damage, or a sound odd record
                brief = brief_of(_decode_one(store, str(rid)), str(rid))
            yield brief
        if len(rows) < batch:
            return
        after = (rows[-1][1], rows[-1][0])


def _decode_one(store: Any, rid: str) -> Result:
    t = schema.results
    rows = store.rows(sa.select(t.c.id, t.c.record_json).where(t.c.id == rid))
    if not rows:  # pragma: no cover - deleted between the two reads
        raise damaged(store.where, f"record {rid} vanished while read")
    return store.decode(rows[0][0], rows[0][1])


def load(store: Any, briefs: Sequence[ResultBrief]) -> list[Result]:
    """The whole results of ``briefs``, in their order (one read per 200 ids)."""
    return load_ids(store, [b.rid for b in briefs])


def load_ids(store: Any, ids: Sequence[str]) -> list[Result]:
    """The whole results of the row ids ``ids``, in their order (one read per 200 ids)."""
    t = schema.results
    blobs: dict[str, Any] = {}
    rids = list(dict.fromkeys(ids))
    for i in range(0, len(rids), BATCH_ROWS):
        part = rids[i:i + BATCH_ROWS]
        blobs.update(store.rows(sa.select(t.c.id, t.c.record_json).where(t.c.id.in_(part))))
    cache: dict[str, Result] = {}
    out = []
    for rid in ids:
        if rid not in cache:
            if rid not in blobs:  # pragma: no cover - deleted between the reads
                cache[rid] = _decode_one(store, rid)
            else:
                cache[rid] = store.decode(rid, blobs[rid])
        out.append(cache[rid])
    return out
