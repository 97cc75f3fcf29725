"""What a report reads of its results, gathered in one streamed pass.

A report needs a row per result (its summary table, and the folds that choose the charts'
cases and pairs) and the whole records of only a few (the charts' cases, their repeat
groups, the sweeps, the best run per case and rank count). :func:`gather_store` reads a
store in keyset batches (:meth:`Store.iter_query`), so no more than a batch of whole
records is held at once, and puts each result's :class:`~accelbench.report.rows.CaseRow`
into :class:`SortedRows`: rows in the report's order, spilled to a temporary file in
sorted runs of :data:`RUN_ROWS` once there are more, and read back merged a block at a
time, as often as a section needs them. So the rows held do not grow with the store.
``by_id`` answers any result by id: from memory, or for a store by decoding it again (a
small cache of the recently read); a store's repeat groups are found by one pass over
the rows (:meth:`StoredResults.prepare_groups`).
"""

from __future__ import annotations

import heapq
import pickle
import tempfile
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

from accelbench import jsonout
from accelbench.report.compare.pairing import repeat_group
from accelbench.report.data_view import InputBrief, brief_of
from accelbench.report.rows import CaseRow, case_row, sort_key
from accelbench.report.scaling import ScalingFold
from accelbench.report.sections import machines
from accelbench.report.sharding_view import ShardingFold
from accelbench.result import Result
from accelbench.store.briefs import load_ids

#: Whole records a store-backed ``by_id`` keeps after decoding them again.
CACHED_RESULTS = 256
#: Rows :class:`SortedRows` holds before it sorts them and spills them as one run.
RUN_ROWS = 4096
#: Rows a spilled run is written and read back in (one pickle each).
BLOCK_ROWS = 64


class RowEntry(NamedTuple):
    """A result's row and what else the report's passes read of it."""

    row: CaseRow
    phases: bool
    """The result has phase timings."""
    timeline: bool
    """The result has a power timeline."""
    case_key: str
    """``spec.case_key()`` (repeat groups)."""
    measured: bool
    """It holds step times (repeat groups)."""
    data: InputBrief | None = None
    """Its data source and stall (the data view)."""


def entry_of(r: Result, case_key: str | None = None) -> RowEntry:
    """The :class:`RowEntry` of one result (``case_key``: its spec's, already known)."""
    return RowEntry(case_row(r), r.phases is not None, bool(r.power_timeline),
                    case_key or r.spec.case_key(), bool(r.iteration_times_s), brief_of(r))


def _entry_key(e: RowEntry) -> tuple[Any, ...]:
    return sort_key(e.row)


class SortedRows(Iterable[CaseRow]):
    """Rows in :func:`~accelbench.report.rows.sort_key` order (stable: equal keys in the
    order added), read as often as needed. Up to :data:`RUN_ROWS` rows are held; past
    that each full buffer is sorted and written to a temporary file as a run, and reading
    merges the runs (:func:`heapq.merge` keeps equal keys in run order), a block of each
    at a time: what is held is a buffer, not a row per result."""

    def __init__(self, entries: Iterable[RowEntry] = (), *, run_rows: int | None = None,
                 block_rows: int | None = None) -> None:
        self._run_rows = run_rows or RUN_ROWS
        self._block_rows = block_rows or BLOCK_ROWS
        self._buffer: list[RowEntry] = []
        self._file: IO[bytes] | None = None
        self._runs: list[tuple[int, int]] = []  # (offset, blocks) of each spilled run
        self._n = 0
        for e in entries:
            self.add(e)
        self.finish()

    def add(self, entry: RowEntry) -> None:
        """Add one entry (then :meth:`finish` before reading)."""
        self._buffer.append(entry)
        self._n += 1
        if len(self._buffer) >= self._run_rows:
            self._spill()

    def finish(self) -> None:
        """Sort what is held (or spill it, where runs were spilled already)."""
        if self._file is not None and self._buffer:
            self._spill()
        self._buffer.sort(key=_entry_key)

    def _spill(self) -> None:
        self._buffer.sort(key=_entry_key)
        if self._file is None:
            # Kept open across reads (closed by close() or when collected).
            self._file = tempfile.TemporaryFile(prefix="accelbench-report-")  # noqa: SIM115
        fh = self._file
        fh.seek(0, 2)
        offset, blocks = fh.tell(), 0
        for i in range(0, len(self._buffer), self._block_rows):
            pickle.dump(self._buffer[i:i + self._block_rows], fh,
                        protocol=pickle.HIGHEST_PROTOCOL)
            blocks += 1
        self._runs.append((offset, blocks))
        self._buffer = []

    def _run(self, offset: int, blocks: int) -> Iterator[RowEntry]:
        fh = self._file
        assert fh is not None
        for _ in range(blocks):
            fh.seek(offset)  # every read seeks first: the runs share one file
            block: list[RowEntry] = pickle.load(fh)  # noqa: S301 - our own temporary file
            offset = fh.tell()
            yield from block

    def entries(self) -> Iterator[RowEntry]:
        """Every entry, in order."""
        if self._file is None:
            return iter(self._buffer)
        return heapq.merge(*(self._run(o, b) for o, b in self._runs), key=_entry_key)

    def __iter__(self) -> Iterator[CaseRow]:
        return (e.row for e in self.entries())

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def close(self) -> None:
        """Remove the temporary file (also done when the object is collected)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            self._runs = []
            self._n = 0


class StoredResults(Mapping[str, Result]):
    """The results of a store selection by id (the ids of ``rows``), each decoded again
    on demand (a small cache of the recently read)."""

    def __init__(self, store: Any, rows: SortedRows) -> None:
        self._store = store
        self._rows = rows
        self._cache: OrderedDict[str, Result] = OrderedDict()
        self._groups: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def __getitem__(self, rid: str) -> Result:
        found = self._cache.get(rid)
        if found is not None:
            self._cache.move_to_end(rid)
            return found
        result = load_ids(self._store, [rid])[0]
        self._cache[rid] = result
        if len(self._cache) > CACHED_RESULTS:
            self._cache.popitem(last=False)
        return result

    def __iter__(self) -> Iterator[str]:
        return (row.result_id for row in self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def prepare_groups(self, ids: Iterable[str]) -> None:
        """Find the repeat groups of the results ``ids`` (their suite and case's
        measured ``ok`` runs) in one pass over the rows, for :meth:`repeat_group`."""
        wanted = set(ids)
        keys = {(e.row.suite_id, e.case_key) for e in self._rows.entries()
                if e.row.result_id in wanted and e.row.suite_id is not None}
        groups: dict[tuple[str, str], list[tuple[str, str]]] = {k: [] for k in keys}
        for e in self._rows.entries():
            row = e.row
            if row.status != "ok" or row.suite_id is None or not e.measured:
                continue
            members = groups.get((row.suite_id, e.case_key))
            if members is not None:
                members.append((row.started_at, row.result_id))
        self._groups.update(groups)

    def repeat_group(self, chosen: Result) -> list[Result]:
        """:func:`~accelbench.report.compare.pairing.repeat_group` of ``chosen`` among
        these results, from the groups :meth:`prepare_groups` found: only the group is
        decoded."""
        members = None
        if chosen.suite_id is not None:
            key = (chosen.suite_id, chosen.spec.case_key())
            if key not in self._groups:
                self.prepare_groups([chosen.id])
            members = self._groups.get(key)
        if chosen.status != "ok" or members is None:
            return repeat_group(chosen, [chosen])
        if chosen.id not in {rid for _, rid in members}:
            members = [*members, (chosen.started_at, chosen.id)]
        return [chosen if rid == chosen.id else self[rid] for _, rid in sorted(members)]


def repeat_runs(chosen: Result, by_id: Mapping[str, Result]) -> list[Result]:
    """The ``--repeats`` group of ``chosen`` among ``by_id``'s results (oldest first)."""
    if isinstance(by_id, StoredResults):
        return by_id.repeat_group(chosen)
    return repeat_group(chosen, list(by_id.values()))


class RunIds(Sequence[str]):
    """The short ids of a machine's runs, held as text (a few bytes each, not a string
    object per run): the machines section lists every run, in the order added."""

    _SEP = "\x00"
    _CHUNK = 4096

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._chunks: list[str] = []
        self._open: list[str] = []
        self._n = 0
        for rid in ids:
            self.append(rid)

    def append(self, rid: str) -> None:
        """Add one run's short id."""
        self._open.append(rid)
        self._n += 1
        if len(self._open) >= self._CHUNK:
            self._chunks.append(self._SEP.join(self._open))
            self._open = []

    def __iter__(self) -> Iterator[str]:
        for chunk in self._chunks:
            yield from chunk.split(self._SEP)
        yield from list(self._open)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        return list(self)[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (RunIds, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class MachineGroups:
    """:func:`~accelbench.report.sections.machines` of results as they stream past."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, Any]] = {}

    def add(self, r: Result) -> None:
        """Count one result in its machine's group."""
        key = jsonout.dumps(r.machine or {}, sort_keys=True, default=str)
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = machines([r])[0]
            g["runs"] = RunIds(g["runs"])
        else:
            g["runs"].append(r.id[:8])

    def groups(self) -> list[dict[str, Any]]:
        """The groups, in the order their machines first appeared."""
        return list(self._groups.values())


@dataclass(kw_only=True)
class Gathered:
    """What :func:`accelbench.report.html.build_report` reads of its results."""

    rows: SortedRows = field(default_factory=SortedRows)
    """A row per result, in :func:`~accelbench.report.rows.case_rows` order (read back
    from a temporary file where there are many)."""
    by_id: Mapping[str, Result] = field(default_factory=dict)
    scaling: list[Result] = field(default_factory=list)
    """The results :func:`~accelbench.report.scaling.scaling_series` chooses among."""
    sharding: list[Result] = field(default_factory=list)
    """The results :func:`~accelbench.report.sharding_view.mode_rows` chooses among."""
    swept: list[Result] = field(default_factory=list)
    """The results run at device settings (sweeps), in the selection's order."""
    machines: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)


def _fill(results: Iterable[Result]) -> Gathered:
    g = Gathered()
    rows = SortedRows()
    fold = ScalingFold()
    modes = ShardingFold()
    groups = MachineGroups()
    keys: dict[Any, str] = {}  # the case key of each distinct spec, computed once
    for r in results:
        key = keys.get(r.spec)
        if key is None:
            key = keys[r.spec] = r.spec.case_key()
        rows.add(entry_of(r, key))
        fold.add(r)
        modes.add(r)
        if r.spec.settings.given():
            g.swept.append(r)
        groups.add(r)
    rows.finish()
    g.rows = rows
    g.scaling = fold.results()
    g.sharding = modes.results()
    g.machines = groups.groups()
    return g


def gather(results: Sequence[Result]) -> Gathered:
    """:class:`Gathered` of results in memory."""
    g = _fill(results)
    g.by_id = {r.id: r for r in results}
    return g


def gather_store(store: Any, flt: Any = None) -> Gathered:
    """:class:`Gathered` of the results ``flt`` selects in ``store``, read in batches:
    whole records are held a batch at a time (and the few the report keeps), rows a
    buffer at a time (:class:`SortedRows`)."""
    g = _fill(store.iter_query(flt))
    g.by_id = StoredResults(store, g.rows)
    return g
