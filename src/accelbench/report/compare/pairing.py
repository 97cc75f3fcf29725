"""Pairing: which one result (or repeat group) of each side a matched case compares.

Rules are in :mod:`accelbench.report.compare`: one suite where both sides have results
(the newest such), else the two results closest in time; ``ok`` results first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from accelbench.report.rows import parse_time, short_time
from accelbench.result import Result
from accelbench.store.briefs import ResultBrief

#: What pairing chooses among: whole results, or their briefs (the same fields).
Cand = TypeVar("Cand", Result, ResultBrief)


def _case_key(r: Result | ResultBrief) -> str:
    return r.case_key if isinstance(r, ResultBrief) else r.spec.case_key()


def _measured(r: Result | ResultBrief) -> bool:
    return r.measured if isinstance(r, ResultBrief) else bool(r.iteration_times_s)


def repeat_group(chosen: Cand, candidates: Sequence[Cand]) -> list[Cand]:
    """The ``ok`` runs of ``chosen``'s case in its suite (its ``--repeats`` group; one
    suite id and case key), oldest first; ``[chosen]`` when it has no suite."""
    if chosen.suite_id is None or chosen.status != "ok":
        return [chosen]
    key = _case_key(chosen)
    group = [r for r in candidates if r.status == "ok" and r.suite_id == chosen.suite_id
             and _case_key(r) == key and _measured(r)]
    if chosen not in group:
        group.append(chosen)
    return sorted(group, key=lambda r: (r.started_at, r.id))


@dataclass(frozen=True, kw_only=True, slots=True)
class Pairing:
    """How the two results of a case were chosen, so a reader can judge the pair."""

    method: Literal["same_suite", "closest_in_time", "only"]
    """``same_suite``: both from one suite; ``closest_in_time``: the closest of several
    candidates (no common suite); ``only``: each side had one candidate."""
    a_suite_id: str | None
    b_suite_id: str | None
    a_started_at: str
    b_started_at: str
    time_apart_s: float | None
    """Seconds between the two results' starts, where both timestamps parse."""

    @property
    def text(self) -> str:
        """``same suite`` or ``5.2 h apart`` (narrow tables)."""
        if self.method == "same_suite":
            return "same suite"
        return f"{_fmt_apart(self.time_apart_s)} apart" if self.time_apart_s is not None \
            else "times unknown"

    @property
    def detail(self) -> str:
        """Suite ids and start times of both sides (wide tables)."""
        if self.method == "same_suite":
            return f"suite {self.a_suite_id}; A {short_time(self.a_started_at)}, " \
                f"B {short_time(self.b_started_at)}"
        how = "closest in time" if self.method == "closest_in_time" else "only runs"
        return (f"{how}: A {short_time(self.a_started_at)} ({self.a_suite_id or 'no suite'}), "
                f"B {short_time(self.b_started_at)} ({self.b_suite_id or 'no suite'})")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return dataclasses.asdict(self)


def _fmt_apart(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _start(r: Result | ResultBrief) -> Any:
    return parse_time(r.started_at) or parse_time(r.finished_at)


def _apart_s(a: Result | ResultBrief, b: Result | ResultBrief) -> float | None:
    ta, tb = _start(a), _start(b)
    return abs((ta - tb).total_seconds()) if ta is not None and tb is not None else None


#: Above this many candidate pairs a case is paired without listing every pair (same
#: choice, found through the suites and a time-sorted side: a store of 20,000 results
#: held thousands of candidates a side).
BRUTE_FORCE_PAIRS = 4096


def pair_case(cands_a: Sequence[Cand], cands_b: Sequence[Cand]
              ) -> tuple[Cand, Cand, Pairing]:
    """Choose one result per side for a case (rules in the module docstring)."""
    pool_a = [r for r in cands_a if r.status == "ok"] or list(cands_a)
    pool_b = [r for r in cands_b if r.status == "ok"] or list(cands_b)
    method: Literal["same_suite", "closest_in_time", "only"]
    if len(pool_a) * len(pool_b) <= BRUTE_FORCE_PAIRS:
        ra, rb, same_suite = choose_by_listing(pool_a, pool_b)
    else:
        ra, rb, same_suite = choose_fast(pool_a, pool_b)
    if same_suite:
        method = "same_suite"
    else:
        method = "only" if len(pool_a) == 1 and len(pool_b) == 1 else "closest_in_time"
    return ra, rb, Pairing(
        method=method, a_suite_id=ra.suite_id, b_suite_id=rb.suite_id,
        a_started_at=ra.started_at, b_started_at=rb.started_at, time_apart_s=_apart_s(ra, rb),
    )


def _newest_key(p: tuple[Any, Any]) -> tuple[Any, ...]:
    return (max(p[0].finished_at, p[1].finished_at), p[0].id, p[1].id)


def _closeness(p: tuple[Any, Any]) -> tuple[Any, ...]:
    apart = _apart_s(*p)
    newest = max(p[0].finished_at, p[1].finished_at)
    return (apart is None, apart or 0.0, _neg(newest), p[0].id, p[1].id)


def choose_by_listing(pool_a: Sequence[Cand], pool_b: Sequence[Cand]
                       ) -> tuple[Cand, Cand, bool]:
    """The pair of the rules, from every pair listed (a result never pairs with itself
    unless it is all there is)."""
    pairs = [(ra, rb) for ra in pool_a for rb in pool_b if ra.id != rb.id] \
        or [(ra, rb) for ra in pool_a for rb in pool_b]
    same = [(ra, rb) for ra, rb in pairs
            if ra.suite_id is not None and ra.suite_id == rb.suite_id]
    if same:
        ra, rb = max(same, key=_newest_key)
        return ra, rb, True
    ra, rb = min(pairs, key=_closeness)
    return ra, rb, False


def choose_fast(pool_a: Sequence[Cand], pool_b: Sequence[Cand]
                 ) -> tuple[Cand, Cand, bool]:
    """:func:`choose_by_listing`'s choice without listing every pair: the suites both
    sides share (pairs within a suite are few), then per A result its nearest B results
    in time (a binary search), and only the pairs at the smallest distance compared."""
    import bisect
    from collections import defaultdict

    by_suite: dict[str, list[Cand]] = defaultdict(list)
    for rb in pool_b:
        if rb.suite_id is not None:
            by_suite[rb.suite_id].append(rb)
    same = [(ra, rb) for ra in pool_a if ra.suite_id in by_suite
            for rb in by_suite[ra.suite_id or ""] if ra.id != rb.id]
    if same:
        ra, rb = max(same, key=_newest_key)
        return ra, rb, True
    timed_b = sorted(((t, rb) for rb in pool_b if (t := _start(rb)) is not None),
                     key=lambda x: x[0])
    times = [t for t, _ in timed_b]
    at_time: dict[Any, list[Cand]] = defaultdict(list)
    for t, rb in timed_b:
        at_time[t].append(rb)
    best: Any = None
    near: list[tuple[Cand, Any]] = []
    for ra in pool_a:
        ta = _start(ra)
        if ta is None or not times:
            continue
        i = bisect.bisect_left(times, ta)
        for j in range(max(0, i - 2), min(len(times), i + 2)):
            if timed_b[j][1].id == ra.id:
                continue
            d = abs(times[j] - ta)
            if best is None or d < best:
                best = d
        near.append((ra, ta))
    if best is not None:
        pairs = [(ra, rb) for ra, ta in near for t in {ta - best, ta + best}
                 for rb in at_time.get(t, ()) if rb.id != ra.id]
        if pairs:
            ra, rb = min(pairs, key=_closeness)
            return ra, rb, False
    # No pair with both times: the rules' order among the pairs without a distance.
    first, second, _ = choose_by_listing(pool_a, pool_b)
    return first, second, False


def _neg(stamp: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in stamp)
