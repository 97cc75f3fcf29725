"""What the report's sections read of every row, folded in one pass.

:func:`tally` goes once over a report's rows (in the summary table's order) and keeps,
besides counts and flags, a row per case (the newest runs the charts, pairs and the
reference section use; the newest with phases) and the first rows with a power
timeline: nothing per result, so a report of a large store holds its sections' input
in memory whatever the store's size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from accelbench.report.data_view import DataFold, InputBrief
from accelbench.report.rows import CaseRow, NewestFold

#: Power timelines a report draws at most.
MAX_POWER_CHARTS = 60


@dataclass(kw_only=True)
class RowTally:
    """Counts, flags and per-case picks of a report's rows (see :func:`tally`)."""

    n: int = 0
    status_counts: Counter[str] = field(default_factory=Counter)
    currencies: set[str] = field(default_factory=set)
    """The currencies of the rows' costs."""
    frameworks: set[str] = field(default_factory=set)
    devices: set[str] = field(default_factory=set)
    workloads: set[str] = field(default_factory=set)
    ok: int = 0
    noisy: int = 0
    left_out: int = 0
    """``insufficient`` and ``diverged`` runs (:func:`~accelbench.report.pairs.left_out_count`)."""
    mfu_known: bool = False
    energy_known: bool = False
    """Some row has an energy per sample."""
    ci_scope: bool = False
    """Some row has a CI scope (the CI legend's first line)."""
    ci_unreliable: bool = False
    fast_paths: bool = False
    latest: NewestFold = field(default_factory=lambda: NewestFold(prefer_quiet=True))
    """The charts' runs: the newest ``ok`` run of each case, a quiet one where there is."""
    newest: NewestFold = field(default_factory=NewestFold)
    """The newest ``ok`` run of each case (the reference section's)."""
    phased: NewestFold = field(default_factory=lambda: NewestFold(prefer_quiet=True))
    """As ``latest``, among the runs with phase timings."""
    data: DataFold = field(default_factory=DataFold)
    """The newest run of each case and data source (the data view)."""
    timelines: list[CaseRow] = field(default_factory=list)
    """The first :data:`MAX_POWER_CHARTS` rows with a power timeline."""
    n_timelines: int = 0

    def add(self, row: CaseRow, *, phases: bool, timeline: bool,
            cost_of: Callable[[CaseRow], Any], data: InputBrief | None = None) -> None:
        """Fold one row in (``phases``, ``timeline``, ``data``: what its result holds)."""
        self.n += 1
        self.status_counts[row.status] += 1
        cost = cost_of(row)
        if cost is not None:
            self.currencies.add(cost.currency)
        self.frameworks.add(row.framework)
        self.devices.add(row.device)
        self.workloads.add(row.workload)
        self.ok += row.status == "ok"
        self.noisy += bool(row.noisy)
        self.left_out += row.status in ("insufficient", "diverged")
        self.mfu_known = self.mfu_known or row.mfu is not None
        self.energy_known = self.energy_known or row.energy_j_per_sample is not None
        self.ci_scope = self.ci_scope or bool(row.ci_scope)
        self.ci_unreliable = self.ci_unreliable or bool(row.ci_unreliable)
        self.fast_paths = self.fast_paths or bool("+".join(row.fast_paths))
        self.latest.add(row)
        self.newest.add(row)
        if phases:
            self.phased.add(row)
        if data is not None:
            self.data.add(row, data)
        if timeline:
            self.n_timelines += 1
            if len(self.timelines) < MAX_POWER_CHARTS:
                self.timelines.append(row)


def tally(entries: Iterable[Any], cost_of: Callable[[CaseRow], Any]) -> RowTally:
    """:class:`RowTally` of ``entries`` (:class:`~accelbench.report.stored.RowEntry`, in
    the summary table's order: the picks keep the first of equals, as the sections'
    own functions do on that order)."""
    t = RowTally()
    for e in entries:
        t.add(e.row, phases=e.phases, timeline=e.timeline, cost_of=cost_of, data=e.data)
    return t
