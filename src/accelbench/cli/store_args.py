"""What the store-reading subcommands share (``report``, ``compare``, ``recommend``,
``export``, ``reference``): cost options, the store, filter descriptions. Bad input
raises :class:`~accelbench.errors.ConfigError` (one line, exit 2); heavy modules
(matplotlib, jinja2, numpy) are imported inside the handlers.
"""


from __future__ import annotations

import argparse
from typing import Any

from accelbench.cli.args import add_options
from accelbench.readouts import (  # noqa: F401 - the read commands' helpers, here too
    COST_HELP,
    CostOptions,
    check_store_name,
    check_store_names,
    check_store_workload,
    describe_filter,
    open_read_store,
    store_file_list,
    store_named,
)
from accelbench.readouts import cost_rates as rates_of

#: Kept here, not in accelbench.report.compare, so that building the parser stays light.
SELECTOR_HELP = (
    "A and B are selectors: KEY=VALUE[,KEY=VALUE...] with keys device, precision, workload, "
    "size, suite, tag, id (e.g. device=cuda:0, precision=amp_bf16,device=cuda:0); "
    "suite:SUITE_ID; id:PREFIX; or a bare suite id or result-id prefix. Cases match on "
    "workload, size, batch size and whichever of device/precision is not being compared; "
    "where a side has several runs of a case, the pair comes from one suite when both "
    "sides have results from one (the newest), else the two runs closest in time, and "
    "the 'paired' column says which. Noisy inputs (marked !) raise a warning; "
    "--exclude-noisy leaves them out. Diverged and insufficient runs get no ratio. "
    "Ratios are B/A: throughput >1 means B is faster, energy <1 means B uses less energy "
    "per sample. CIs: 95% percentile bootstrap from the raw iteration times (2000 "
    "resamples of each side, fixed seed). Runs of one case in one suite (--repeats) form "
    "a group: when both sides have R >= 2 runs the CI is a two-level bootstrap (runs, "
    "then iterations) and 'significant' means it excludes 1; with R = 1 on a side the CI "
    "covers within-run noise only, so significance is '?' (cannot tell). The energy "
    "CI holds each side's average power fixed and resamples its step times, then is "
    "widened by each side's 95% error bound as worst cases (docs/energy.md; a side "
    "stored without a bound leaves timing variability only, and says so); without energy "
    "on both sides there is no energy ratio."
)



def add_cost_args(p: argparse.ArgumentParser) -> None:
    """The cost and carbon options (:class:`accelbench.readouts.CostOptions`)."""
    add_options(p, CostOptions, title="cost and carbon", description=COST_HELP, filled=True)



def open_results_store(args: argparse.Namespace) -> Any:
    """The store of a read command (:func:`accelbench.readouts.open_read_store`)."""
    return open_read_store(args.db)


def store_files(args: argparse.Namespace) -> list[Any]:
    """The results store's file, as a list for an output check's ``protected``."""
    return store_file_list(args.db)


def cost_rates(args: argparse.Namespace) -> Any:
    """The cost rates of the :func:`add_cost_args` options."""
    return rates_of(args)
