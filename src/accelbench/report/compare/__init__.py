"""Compare two selections of results: throughput and energy ratios with bootstrap CIs.

Selector syntax (for ``accelbench compare A B``):

- ``KEY=VALUE[,KEY=VALUE...]``: every result matching all pairs. Keys: ``device``,
  ``precision``, ``framework``, ``workload``, ``size``, ``suite`` (suite id), ``tag``,
  ``id`` (prefix), e.g. ``device=cuda:0``, ``precision=amp_bf16,device=cuda:0`` or
  ``framework=jax``.
- ``suite:SUITE_ID`` or ``id:PREFIX``: explicitly a suite or one result.
- a bare word: a suite id if one matches it exactly, else a unique result-id prefix.

Like with like: cases of A and B are matched on workload, size, batch size, device,
precision and framework (and fast paths and device settings where any result has them)
minus the compared axes (:mod:`~accelbench.report.compare.axes`):

- an axis (device, precision, framework) is compared across when both selectors name
  it with different values: ``framework=torch framework=jax`` gives the JAX/torch ratio
  per workload, size, batch size, device and precision (JAX fp32 over torch fp32, never
  over torch amp_bf16);
- an axis the selectors do not name is compared across only where each side holds
  exactly one value of it and the two differ (two suites run on two devices, or two
  result ids); otherwise it is matched on, and a note says how to compare across it.

Nothing is crossed silently: the output names the compared axes and why, and lists
each case left unpaired with the reason (``B has no result with
precision=amp_bf16``) in the table's footer, the JSON (``unpaired``) and the CSV
(rows with ``unpaired_side`` and ``unpaired_reason``).

Pairing like with like: when a side holds several results of one case, the pair is
taken from one suite where both sides have results from one (the newest such
suite), otherwise the two results closest in time (measured under the most similar
conditions); ``ok`` results are preferred. Each case says how it was paired (suite
ids, start times, time apart). A ``diverged`` or ``insufficient`` result never gets a
ratio. A noisy input (see :attr:`accelbench.result.Result.noisy`) raises an
:class:`~accelbench.errors.AccelbenchWarning`; ``exclude_noisy`` leaves noisy results
out before pairing.

Methods (``B / A``; a throughput ratio above 1 means B is faster, an energy ratio
below 1 means B needs less energy per sample):

- throughput ratio = (spsB / median tB) / (spsA / median tA), with a 95% percentile
  bootstrap CI from resampling each side's raw iteration times independently
  (fixed seed, 2000 resamples).
- repeated runs: the runs of one case (``--repeats``; one suite id and case key) form a
  group. When both sides have R >= 2 runs, the ratio is of the groups' headlines
  (samples per step / mean of the runs' median step times) and its CI a two-level
  bootstrap of each side (runs, then iterations: :func:`accelbench.stats.group_stats`),
  which covers the variation between workers; significant when that CI excludes 1.
  When a side has one run, the CI covers within-run noise only: step times move between
  workers by far more than one run's CI, so ``significant`` is None ("cannot tell") with
  a note saying so, whatever the CI.
- energy ratio = EB / EA of the stored energies per sample. Energy per sample is
  average power x step time / samples per step, so its CI resamples the iteration
  times of each side (the unit of resampling) with the average power held fixed:
  E* = E x mean(t*) / mean(t). That CI is then widened by each side's 95% error bound
  (``Result.energy_rel_u95``, docs/energy.md) as worst cases, the way the bound's own
  terms are added: ``(low x (1 - uB) / (1 + uA), high x (1 + uB) / (1 - uA))``
  (:func:`~accelbench.report.compare.stats.widen_by_bounds`); a group's bound is its
  runs' half-widths added over their sum. Where a side has no bound (stored before
  bounds existed) the CI covers timing variability only, and its note says so. Without
  energy on both sides there is no ratio; with fewer than 3 iterations on a side there
  is a ratio but no CI, never an invented one.
- phases (``--phases`` on both sides): per-phase ratios of time and energy per sample,
  bounded by both sides' CIs, and which phases a change made faster or cheaper
  (:mod:`~accelbench.report.compare.phases`); a case where one side lacks phases says so.

Modules: :mod:`~accelbench.report.compare.select` (selectors),
:mod:`~accelbench.report.compare.axes` (compared axes, unpaired reasons),
:mod:`~accelbench.report.compare.pair` (matching),
:mod:`~accelbench.report.compare.pairing` (which result of each side a case compares),
:mod:`~accelbench.report.compare.stats` (ratios and CIs),
:mod:`~accelbench.report.compare.phases` (per-phase ratios),
:mod:`~accelbench.report.compare.render` (CSV and tables).
"""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.report.compare.axes import AXES, Unpaired, choose_axes, why_unpaired
from accelbench.report.compare.grouped import compare_grouped
from accelbench.report.compare.pair import (
    MATCH_FIELDS,
    OPTIONAL_MATCH_FIELDS,
    CaseComparison,
    Comparison,
    Pairing,
    SideRate,
    compare_results,
    pair_case,
    repeat_group,
)
from accelbench.report.compare.render import CANT_TELL_CAPTION, CSV_COLUMNS, table, to_csv
from accelbench.report.compare.select import (
    SELECTOR_KEYS,
    Selector,
    parse_selector,
    select,
    select_briefs,
    select_filter,
)
from accelbench.report.compare.stats import (
    LEVEL,
    MIN_CI_SAMPLES,
    ONE_RUN_NOTE,
    RESAMPLES,
    SEED,
    Ratio,
    cannot_tell,
    group_ratios,
    ratios,
)
from accelbench.result import Result
from accelbench.store import ResultFilter, Store
from accelbench.store.briefs import ResultBrief, load

__all__ = [
    "AXES", "CANT_TELL_CAPTION", "CSV_COLUMNS", "LEVEL", "MATCH_FIELDS", "MIN_CI_SAMPLES",
    "ONE_RUN_NOTE", "OPTIONAL_MATCH_FIELDS", "RESAMPLES", "SEED", "SELECTOR_KEYS",
    "CaseComparison", "Comparison", "Pairing", "Ratio", "Selector", "SideRate", "Unpaired",
    "cannot_tell", "choose_axes", "compare", "why_unpaired",
    "compare_results", "group_ratios", "pair_case", "parse_selector", "ratios",
    "repeat_group", "select", "table", "to_csv",
]


def compare(
    store: Store, a: str, b: str, *, base: ResultFilter | None = None,
    resamples: int = RESAMPLES, exclude_noisy: bool = False,
) -> Comparison:
    """Resolve selectors ``a`` and ``b`` in ``store`` and compare them: the selections
    are read as briefs (:mod:`accelbench.store.briefs`) and only the results a case
    compares are decoded whole. On a SQLite store the briefs are read ordered by case
    and paired a case at a time (:mod:`~accelbench.report.compare.grouped`), so memory
    holds one case's briefs and the decoded records of the cases, whatever the store's
    size; otherwise a few hundred bytes per selected result."""
    sa, sb = parse_selector(a), parse_selector(b)
    named = {ax: (dict(sa.pairs).get(ax), dict(sb.pairs).get(ax)) for ax in AXES}
    # A case at a time where both sides are filters of a SQLite store (the usual case);
    # else (an id, another database, a damaged record) the briefs of both, held whole.
    fa = select_filter(store, sa, base)
    fb = select_filter(store, sb, base) if fa is not None else None
    if fa is not None and fb is not None:
        found = compare_grouped(store, fa, fb, a_label=a, b_label=b,
                                resamples=resamples, exclude_noisy=exclude_noisy,
                                named=named)
        if found is not None:
            return found
    ra = select_briefs(store, sa, base)
    rb = select_briefs(store, sb, base)
    decoded: dict[str, Result] = {}

    def loader(cands: Sequence[ResultBrief]) -> list[Result]:
        missing = [c for c in cands if c.rid not in decoded]
        for c, r in zip(missing, load(store, missing), strict=True):
            decoded[c.rid] = r
        return [decoded[c.rid] for c in cands]

    return compare_results(ra, rb, a_label=a, b_label=b, resamples=resamples,
                           exclude_noisy=exclude_noisy, named=named, load=loader)
