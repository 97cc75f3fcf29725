"""Comparison a case at a time: :func:`compare_results`' output in memory that does not
grow with the store.

The axes, the matched fields and the unpaired reasons read only the distinct specs of
each side (:func:`accelbench.store.brief_groups.spec_counts`); each case's results are
then read ordered by case (:func:`~accelbench.store.brief_groups.iter_ranked_briefs`),
so one case's briefs are held at a time, paired and dropped. The rules are
:func:`~accelbench.report.compare.pair.compare_results`' own (its functions choose).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from accelbench.report.compare.axes import (
    Unpaired,
    choose_axes,
    sorted_keys,
    spec_value,
    why_unpaired,
)
from accelbench.report.compare.pair import (
    MATCH_FIELDS,
    OPTIONAL_MATCH_FIELDS,
    CaseComparison,
    Comparison,
    compare_case,
    warn_inputs,
)
from accelbench.result import Result
from accelbench.spec import RunSpec
from accelbench.store import ResultFilter, Store
from accelbench.store.brief_groups import iter_ranked_briefs
from accelbench.store.briefs import ResultBrief, iter_briefs, load

#: The most briefs held at once by the last :func:`compare_grouped` (a test's probe).
PEAK = {"briefs": 0}


@dataclass(frozen=True, slots=True)
class _View:
    """A spec as the axis rules read it (they read ``.spec`` only)."""

    spec: RunSpec


Counts = list[tuple[Any, Any, int]]


def compare_grouped(
    store: Store, side_a: tuple[ResultFilter, Counts], side_b: tuple[ResultFilter, Counts], *,
    a_label: str, b_label: str, resamples: int, exclude_noisy: bool,
    named: Mapping[str, tuple[str | None, str | None]],
) -> Comparison | None:
    """:func:`compare_results` of the selections ``side_a`` and ``side_b`` (a filter and
    its distinct specs each; None: a spec does not parse, the caller reads the briefs
    whole)."""
    (fa, counts_a), (fb, counts_b) = side_a, side_b
    try:
        specs = {t: RunSpec.from_dict(json.loads(t)) for t, _, _ in (*counts_a, *counts_b)}
    except Exception:  # noqa: BLE001 - the whole read says what is wrong
        return None
    inc_a = {t for t, flag, n in counts_a if n and not (exclude_noisy and flag)}
    inc_b = {t for t, flag, n in counts_b if n and not (exclude_noisy and flag)}
    notes: list[str] = []
    excluded: list[str] = []
    if exclude_noisy and any(flag for _, flag, n in (*counts_a, *counts_b) if n):
        excluded = [r.id for f in (fa, fb) for r in iter_briefs(store, f) if r.noisy]
        if excluded:
            notes.append(f"--exclude-noisy: left out {len(excluded)} noisy result(s)")
    views_a = [_View(specs[t]) for t in sorted(inc_a)]
    views_b = [_View(specs[t]) for t in sorted(inc_b)]
    axes, axis_detail = choose_axes(views_a, views_b, named)  # type: ignore[arg-type]
    match_on = tuple(f for f in MATCH_FIELDS if f not in axes) + tuple(
        f for f in OPTIONAL_MATCH_FIELDS
        if any(spec_value(r, f) for r in (*views_a, *views_b)))  # type: ignore[arg-type]
    notes += [d["note"] for d in axis_detail if d["how"] == "matched"]
    key_of = {t: tuple(spec_value(_View(s), f) for f in match_on)  # type: ignore[arg-type]
              for t, s in specs.items()}
    order = sorted_keys({key_of[t] for t in inc_a | inc_b})
    rank_of = {k: i for i, k in enumerate(order)}
    if not axes and _same_ids(store, fa, fb, exclude_noisy):
        notes.append("A and B select the same results")
    cases: list[CaseComparison] = []
    held: dict[str, list[tuple[dict[str, Any], tuple[str, ...]]]] = {"A": [], "B": []}
    ignored = 0
    for rank, ga, gb in _merged(
            _groups(iter_ranked_briefs(store, fa, {t: rank_of[key_of[t]] for t in inc_a}),
                    exclude_noisy),
            _groups(iter_ranked_briefs(store, fb, {t: rank_of[key_of[t]] for t in inc_b}),
                    exclude_noisy)):
        PEAK["briefs"] = max(PEAK["briefs"], len(ga) + len(gb))
        key = dict(zip(match_on, order[rank], strict=True))
        if ga and gb:
            case = compare_case(key, ga, gb, resamples, _loader(store))
            cases.append(case)
            used = {*case.a_runs, *case.b_runs}
            ignored += sum(r.id not in used for r in (*ga, *gb))
        else:
            side, group = ("A", ga) if ga else ("B", gb)
            held[side].append((key, tuple(r.id for r in group)))
    if ignored:
        same = sum(1 for c in cases if c.pairing.method == "same_suite")
        notes.append(
            f"{ignored} other result(s) of the matched cases not used: {same} of {len(cases)} "
            "case(s) paired within one suite, the rest by closest start time (see 'paired')"
        )
    unpaired = tuple(
        Unpaired(side="A", key=key, result_ids=ids,
                 reason=why_unpaired(key, views_b, match_on, "B"))  # type: ignore[arg-type]
        for key, ids in held["A"]
    ) + tuple(
        Unpaired(side="B", key=key, result_ids=ids,
                 reason=why_unpaired(key, views_a, match_on, "A"))  # type: ignore[arg-type]
        for key, ids in held["B"]
    )
    if not cases:
        notes.append("no case appears on both sides (matched on " + ", ".join(match_on) + ")")
    warn_inputs(cases)
    return Comparison(
        a_label=a_label, b_label=b_label, axes=axes, match_on=match_on, cases=tuple(cases),
        only_a=tuple(k for k, _ in held["A"]), only_b=tuple(k for k, _ in held["B"]),
        notes=tuple(notes), excluded_noisy=tuple(excluded), axis_detail=tuple(axis_detail),
        unpaired=unpaired,
    )


def _loader(store: Store) -> Any:
    decoded: dict[str, Result] = {}

    def loader(cands: Sequence[ResultBrief]) -> list[Result]:
        missing = [c for c in cands if c.rid not in decoded]
        for c, r in zip(missing, load(store, missing), strict=True):
            decoded[c.rid] = r
        return [decoded[c.rid] for c in cands]

    return loader


def _same_ids(store: Store, fa: ResultFilter, fb: ResultFilter, exclude_noisy: bool) -> bool:
    """Whether the two selections hold the same results (read side by side, in order)."""
    if fa == fb:
        return True
    ia = (r.id for r in iter_briefs(store, fa) if not (exclude_noisy and r.noisy))
    ib = (r.id for r in iter_briefs(store, fb) if not (exclude_noisy and r.noisy))
    return all(x == y for x, y in zip_longest(ia, ib))


def _groups(ranked: Iterator[tuple[int, ResultBrief]], exclude_noisy: bool
            ) -> Iterator[tuple[int, list[ResultBrief]]]:
    rank, group = -1, list[ResultBrief]()
    for r, brief in ranked:
        if exclude_noisy and brief.noisy:
            continue
        if r != rank and group:
            yield rank, group
            group = []
        rank = r
        group.append(brief)
    if group:
        yield rank, group


def _merged(ga: Iterator[tuple[int, list[ResultBrief]]],
            gb: Iterator[tuple[int, list[ResultBrief]]]
            ) -> Iterator[tuple[int, list[ResultBrief], list[ResultBrief]]]:
    """The two sides' groups by rank: (rank, A's group or [], B's group or [])."""
    na, nb = next(ga, None), next(gb, None)
    while na is not None or nb is not None:
        if nb is None or (na is not None and na[0] < nb[0]):
            assert na is not None
            yield na[0], na[1], []
            na = next(ga, None)
        elif na is None or nb[0] < na[0]:
            yield nb[0], [], nb[1]
            nb = next(gb, None)
        else:
            yield na[0], na[1], nb[1]
            na, nb = next(ga, None), next(gb, None)
