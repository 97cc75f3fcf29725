"""Briefs read a group at a time: what ``compare`` pairs, in bounded memory.

``compare`` pairs the results of each case (a group of specs) and nothing across
cases, so it need not hold every selected result: :func:`spec_counts` tells it the
distinct specs a selection holds (one row per spec text and noise flag, counted by the
database), and :func:`iter_ranked_briefs` streams the briefs ordered by the rank it
gives each spec text (its case's place), newest first within a rank, sorted by the
database (SQLite's sorter spills to a temporary file), so that one case's results are
held at a time. SQLite only (the spec is taken out of ``record_json`` by the database);
other stores read the briefs as :mod:`accelbench.store.briefs` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import sqlalchemy as sa

import accelbench.store.schema as schema
from accelbench.result import STATUSES
from accelbench.spec import RunSpec
from accelbench.store.base import StoreBase
from accelbench.store.briefs import ResultBrief, brief_of, device_name_of
from accelbench.store.results import ResultFilter, where_filter

_FIELDS = ("id", "status", "suite_id", "started_at", "finished_at", "noise.flagged",
           "iteration_times_s[0]", "stats.median_s", "machine.gpus", "machine.cpu.model")


def _spec_text() -> Any:
    rec = schema.results.c.record_json
    return sa.case((sa.func.json_valid(rec) == 1, sa.func.json_extract(rec, "$.spec")),
                   else_=None)


def spec_counts(store: StoreBase, flt: ResultFilter) -> list[tuple[Any, Any, int]]:
    """(spec text, raw noise flag, count) per distinct pair among the results ``flt``
    matches (``limit``/``offset`` not applied); the spec text is None for a record that
    is not valid JSON."""
    rec = schema.results.c.record_json
    spec = _spec_text()
    flag = sa.case((sa.func.json_valid(rec) == 1,
                    sa.func.json_extract(rec, "$.noise.flagged")), else_=None)
    stmt = where_filter(sa.select(spec, flag, sa.func.count()), flt).group_by(spec, flag)
    return [(r[0], r[1], int(r[2])) for r in store.rows(stmt)]


def iter_ranked_briefs(store: StoreBase, flt: ResultFilter,
                       ranks: Mapping[str, int]) -> Iterator[tuple[int, ResultBrief]]:
    """(rank, brief) of the results ``flt`` matches whose spec text ``ranks`` ranks,
    ordered by rank, then newest first (``iter_briefs``' order), streamed from one
    query."""
    t = schema.results
    rec = t.c.record_json
    spec = _spec_text()
    if not ranks:
        return
    # CASE spec WHEN ...: the spec is taken out once a row, not once a WHEN
    rank = sa.case(dict(ranks), value=spec, else_=None)
    cols: list[Any] = []
    for path in _FIELDS:
        fn = sa.func.json_type if path in ("iteration_times_s[0]", "stats.median_s") \
            else sa.func.json_extract
        cols.append(fn(rec, f"$.{path}"))
    ranked = where_filter(sa.select(t.c.id, rank.label("rank"), spec, *cols,
                                    t.c.finished_at.label("fin"))
                          .where(sa.func.json_valid(rec) == 1), flt).subquery()
    stmt = sa.select(*list(ranked.c)[:-1]).where(ranked.c.rank.is_not(None)).order_by(
        ranked.c.rank, ranked.c.fin.desc(), ranked.c.id.desc())
    specs: dict[str, RunSpec] = {}
    keys: dict[str, str] = {}
    names: dict[tuple[Any, ...], str] = {}
    with store.guard("read"), store.engine.connect() as conn:
        for row in conn.execute(stmt):
            rid, value, text = str(row[0]), int(row[1]), row[2]
            brief = _brief(rid, text, row[3:], specs, keys, names)
            if brief is None:  # decoded whole: refused as damage, or a sound odd record
                rows = store.rows(sa.select(t.c.id, rec).where(t.c.id == rid))
                if not rows:  # pragma: no cover - deleted between the two reads
                    continue
                decode: Any = getattr(store, "decode")  # noqa: B009 - a ResultStore's
                brief = brief_of(decode(rows[0][0], rows[0][1]), rid)
            yield value, brief


def _brief(rid: str, text: str, values: Any, specs: dict[str, RunSpec],
           keys: dict[str, str], names: dict[tuple[Any, ...], str]) -> ResultBrief | None:
    (jid, status, suite_id, started, finished, flagged, first_time, median, gpus,
     cpu) = values
    if not isinstance(jid, str) or not jid or status not in STATUSES \
            or not isinstance(started, str) or not isinstance(finished, str) \
            or (suite_id is not None and not isinstance(suite_id, str)):
        return None
    try:
        spec = specs.get(text)
        if spec is None:
            spec = specs[text] = RunSpec.from_dict(json.loads(text))
            keys[text] = spec.case_key()
        gpus = gpus if isinstance(gpus, str) else None
        nkey = (gpus, cpu, spec.device)
        name = names.get(nkey)
        if name is None:
            machine = {"gpus": json.loads(gpus) if gpus else None, "cpu": {"model": cpu}}
            name = names[nkey] = device_name_of(machine, spec.device)
    except Exception:  # noqa: BLE001 - the whole decode says what is wrong
        return None
    return ResultBrief(
        rid=rid, id=jid if jid != rid else rid, spec=spec, case_key=keys[text],
        status=status, suite_id=suite_id, started_at=started, finished_at=finished,
        noisy=bool(flagged), measured=first_time is not None, has_stats=median is not None,
        device_name=name)
