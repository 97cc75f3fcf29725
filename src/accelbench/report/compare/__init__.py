"""Compare two selections of results: throughput and energy ratios with bootstrap CIs.

Selector syntax (for ``accelbench compare A B``):

- ``KEY=VALUE[,KEY=VALUE...]``: every result matching all pairs. Keys: ``device``,
  ``precision``, ``framework``, ``workload``, ``size``, ``suite`` (suite id), ``tag``,
  ``id`` (prefix), e.g. ``device=cuda:0``, ``precision=amp_bf16,device=cuda:0`` or
  ``framework=jax``.
- ``suite:SUITE_ID`` or ``id:PREFIX``: explicitly a suite or one result.
- a bare word: a suite id if one matches it exactly, else a unique result-id prefix.

Cases of A and B are matched on (workload, size, batch size, device, precision,
framework) minus the compared axes: device is an axis when A and B hold different
sets of devices, precision and framework likewise (``framework=torch
framework=jax`` gives the JAX/torch ratios per workload and precision).

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
  E* = E x mean(t*) / mean(t). The CI thus covers timing variability only, not the
  power sensor's own error. Without energy on both sides there is no ratio; with
  fewer than 3 iterations on a side there is a ratio but no CI, never an invented one.
- phases (``--phases`` on both sides): per-phase ratios of time and energy per sample,
  bounded by both sides' CIs, and which phases a change made faster or cheaper
  (:mod:`~accelbench.report.compare.phases`); a case where one side lacks phases says so.

Modules: :mod:`~accelbench.report.compare.select` (selectors),
:mod:`~accelbench.report.compare.pair` (matching and pairing),
:mod:`~accelbench.report.compare.stats` (ratios and CIs),
:mod:`~accelbench.report.compare.phases` (per-phase ratios),
:mod:`~accelbench.report.compare.render` (CSV and tables).
"""

from __future__ import annotations

from accelbench.report.compare.pair import (
    AXES,
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
from accelbench.report.compare.select import SELECTOR_KEYS, Selector, parse_selector, select
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
from accelbench.store import ResultFilter, Store

__all__ = [
    "AXES", "CANT_TELL_CAPTION", "CSV_COLUMNS", "LEVEL", "MATCH_FIELDS", "MIN_CI_SAMPLES",
    "ONE_RUN_NOTE", "OPTIONAL_MATCH_FIELDS", "RESAMPLES", "SEED", "SELECTOR_KEYS",
    "CaseComparison", "Comparison", "Pairing", "Ratio", "Selector", "SideRate",
    "cannot_tell", "compare",
    "compare_results", "group_ratios", "pair_case", "parse_selector", "ratios",
    "repeat_group", "select", "table", "to_csv",
]


def compare(
    store: Store, a: str, b: str, *, base: ResultFilter | None = None,
    resamples: int = RESAMPLES, exclude_noisy: bool = False,
) -> Comparison:
    """Resolve selectors ``a`` and ``b`` in ``store`` and compare them."""
    ra = select(store, parse_selector(a), base)
    rb = select(store, parse_selector(b), base)
    return compare_results(ra, rb, a_label=a, b_label=b, resamples=resamples,
                           exclude_noisy=exclude_noisy)
