"""What a report reads of its results, gathered in one streamed pass.

A report needs a row per result (its summary table) and the whole records of only a few
(the charts' cases, their repeat groups, the sweeps, the best run per case and rank
count). :class:`Gathered` holds the rows and those few; :func:`gather_store` fills it
from a store in keyset batches (:meth:`Store.iter_query`), so no more than a batch of
whole records is held at once, plus the few kept; :func:`gather` fills it from results
in memory. ``by_id`` answers any result by id: from memory, or for a store by decoding
it again (a small cache of the recently read).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench import jsonout
from accelbench.report.compare.pairing import repeat_group
from accelbench.report.rows import CaseRow, case_row, sort_key
from accelbench.report.scaling import ScalingFold
from accelbench.report.sections import machines
from accelbench.result import Result
from accelbench.store.briefs import ResultBrief, brief_of, load

#: Whole records a store-backed ``by_id`` keeps after decoding them again.
CACHED_RESULTS = 256


class StoredResults(Mapping[str, Result]):
    """The results of a store selection by id: briefs held, records decoded on demand."""

    def __init__(self, store: Any, briefs: Sequence[ResultBrief]) -> None:
        self._store = store
        self._briefs = list(briefs)
        self._by_id = {b.id: b for b in self._briefs}
        self._cache: OrderedDict[str, Result] = OrderedDict()

    def __getitem__(self, rid: str) -> Result:
        found = self._cache.get(rid)
        if found is not None:
            self._cache.move_to_end(rid)
            return found
        brief = self._by_id[rid]
        result = load(self._store, [brief])[0]
        self._cache[rid] = result
        if len(self._cache) > CACHED_RESULTS:
            self._cache.popitem(last=False)
        return result

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def repeat_group(self, chosen: Result) -> list[Result]:
        """:func:`~accelbench.report.compare.pairing.repeat_group` of ``chosen`` among
        these results, found on the briefs: only the group is decoded."""
        brief = self._by_id.get(chosen.id)
        if brief is None:
            return repeat_group(chosen, [chosen])
        return [chosen if b is brief else self[b.id]
                for b in repeat_group(brief, self._briefs)]


def repeat_runs(chosen: Result, by_id: Mapping[str, Result]) -> list[Result]:
    """The ``--repeats`` group of ``chosen`` among ``by_id``'s results (oldest first)."""
    if isinstance(by_id, StoredResults):
        return by_id.repeat_group(chosen)
    return repeat_group(chosen, list(by_id.values()))


class MachineGroups:
    """:func:`~accelbench.report.sections.machines` of results as they stream past."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, Any]] = {}

    def add(self, r: Result) -> None:
        """Count one result in its machine's group."""
        key = jsonout.dumps(r.machine or {}, sort_keys=True, default=str)
        g = self._groups.get(key)
        if g is None:
            self._groups[key] = machines([r])[0]
        else:
            g["runs"].append(r.id[:8])

    def groups(self) -> list[dict[str, Any]]:
        """The groups, in the order their machines first appeared."""
        return list(self._groups.values())


@dataclass(kw_only=True)
class Gathered:
    """What :func:`accelbench.report.html.build_report` reads of its results."""

    rows: list[CaseRow] = field(default_factory=list)
    """A row per result, in :func:`~accelbench.report.rows.case_rows` order."""
    by_id: Mapping[str, Result] = field(default_factory=dict)
    with_phases: set[str] = field(default_factory=set)
    """Ids of the results with phase timings."""
    with_timeline: set[str] = field(default_factory=set)
    """Ids of the results with a power timeline."""
    scaling: list[Result] = field(default_factory=list)
    """The results :func:`~accelbench.report.scaling.scaling_series` chooses among."""
    swept: list[Result] = field(default_factory=list)
    """The results run at device settings (sweeps), in the selection's order."""
    machines: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)


def _fill(results: Iterable[Result], briefs: list[ResultBrief] | None) -> Gathered:
    g = Gathered()
    fold = ScalingFold()
    groups = MachineGroups()
    specs: dict[Any, tuple[Any, str]] = {}  # one spec object and key per distinct spec
    for r in results:
        g.rows.append(case_row(r))
        if briefs is not None:
            spec, key = specs.get(r.spec) or specs.setdefault(r.spec, (r.spec, r.spec.case_key()))
            briefs.append(brief_of(r, spec=spec, case_key=key))
        if r.phases is not None:
            g.with_phases.add(r.id)
        if r.power_timeline:
            g.with_timeline.add(r.id)
        fold.add(r)
        if r.spec.settings.given():
            g.swept.append(r)
        groups.add(r)
    g.rows.sort(key=sort_key)
    g.scaling = fold.results()
    g.machines = groups.groups()
    return g


def gather(results: Sequence[Result]) -> Gathered:
    """:class:`Gathered` of results in memory."""
    g = _fill(results, None)
    g.by_id = {r.id: r for r in results}
    return g


def gather_store(store: Any, flt: Any = None) -> Gathered:
    """:class:`Gathered` of the results ``flt`` selects in ``store``, read in batches:
    whole records are held a batch at a time (and the few the report keeps)."""
    briefs: list[ResultBrief] = []
    g = _fill(store.iter_query(flt), briefs)
    g.by_id = StoredResults(store, briefs)
    return g
