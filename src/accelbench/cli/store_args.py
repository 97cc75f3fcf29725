"""What the store-reading subcommands share (``report``, ``compare``, ``recommend``,
``export``, ``reference``): cost options, the store, filter descriptions. Bad input
raises :class:`~accelbench.errors.ConfigError` (one line, exit 2); heavy modules
(matplotlib, jinja2, numpy) are imported inside the handlers.
"""


from __future__ import annotations

import argparse
import os
import re
from typing import Any

from accelbench.cli.args import finite, nonempty
from accelbench.errors import ConfigError

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
    "CI holds each side's average power fixed and resamples its step times, so it covers "
    "timing variability only; without energy on both sides there is no energy ratio."
)



COST_HELP = (
    "Cost and carbon: --price-per-hour (machine), --electricity-price (per kWh) and "
    "--carbon-intensity (gCO2/kWh) apply to every device and override the [cost] table of "
    "the config file (default: config.toml in the user config directory, e.g. "
    "~/.config/accelbench/config.toml; per device: [cost.devices.\"cuda:0\"] or "
    "[cost.devices.\"DEVICE NAME\"])."
)



def add_cost_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cost and carbon", COST_HELP)
    g.add_argument("--config", type=nonempty, help="TOML config file with [cost] rates")
    g.add_argument("--price-per-hour", type=finite(0.0, 1e9), metavar="PRICE",
                   help="price of the machine per hour")
    g.add_argument("--electricity-price", type=finite(0.0, 1e6), metavar="PRICE",
                   help="price of electricity per kWh")
    g.add_argument("--carbon-intensity", type=finite(0.0, 1e5), metavar="G_PER_KWH",
                   help="grid carbon intensity in gCO2 per kWh")
    g.add_argument("--currency", type=nonempty,
                   help="label for prices, e.g. USD (no conversion)")



def describe_filter(flt: Any) -> str:
    parts = [
        f"{name}={getattr(flt, name)}"
        for name in ("workload", "device", "precision", "size", "status", "suite_id", "tag",
                     "limit")
        if getattr(flt, name) is not None
    ]
    return ", ".join(parts)



#: A store URL typed without ``//`` (``postgresql:/u:pw@h/db``, ``postgresql:u:pw@h``) or
#: without a scheme (``u:pw@h/db``): a colon before any ``/``, then an ``@``. Read as a
#: path it would name a file, password and all.
_MISTYPED_URL = re.compile(r"[^/@]*:[^@]*@")


def check_store_name(value: str | None, origin: str = "--db") -> None:
    """Refuse a store name no command can keep results in: ``-`` (not standard input or
    output: it would be a file named ``-``) and an in-memory SQLite database
    (``sqlite://``, ``:memory:``, ``mode=memory``: what is stored is gone at exit).
    ``origin``: ``--db`` or ``ACCELBENCH_DB``, named in the message.

    Raises:
        ConfigError: one line naming ``origin`` and the value.
    """
    if value is None or not value.strip():
        return  # blank values are refused where they are read, with their own words
    text = value.strip()
    if text == "-":
        raise ConfigError(f"{origin} '-': a results store is a file or a database URL, "
                          "not standard input or output; give a path such as results.db")
    lowered = text.lower()
    if lowered.startswith("sqlite:"):
        rest = lowered.split(":", 1)[1].lstrip("/")
        if rest in ("", ":memory:") or rest.startswith(":memory:") or "mode=memory" in rest \
                or rest.startswith("?"):
            raise ConfigError(f"{origin} {text!r} is an in-memory database: what a command "
                              "stores there is lost when it ends; give a file path or a "
                              "server URL")
    elif text == ":memory:":
        raise ConfigError(f"{origin} ':memory:' would be a file named ':memory:', not an "
                          "in-memory database; give a file path or a server URL")
    elif "://" not in text and _MISTYPED_URL.match(text):
        from accelbench.store.base import display_url

        # Never a file name anyone means, and its password would be shown as a path.
        raise ConfigError(f"{origin} {display_url(text)!r} looks like a database URL without "
                          "its '//': write DIALECT://USER:PASSWORD@HOST/DB (e.g. "
                          "postgresql+psycopg://...), or a file path")


def check_store_names(db: str | None) -> None:
    """:func:`check_store_name` of ``--db`` (when given) and of ``ACCELBENCH_DB``."""
    from accelbench.store.base import ENV_DB

    check_store_name(db)
    if db is None:
        check_store_name(os.environ.get(ENV_DB), ENV_DB)


def store_named(db: str | None) -> bool:
    """Whether the store is one the user named (``--db`` or ``ACCELBENCH_DB``), not the
    default one."""
    from accelbench.store.base import ENV_DB

    return bool(db) or bool((os.environ.get(ENV_DB) or "").strip())


def open_results_store(args: argparse.Namespace) -> Any:
    """The store of a read command: never created when it is named (``--db`` or
    ``ACCELBENCH_DB``: a missing file there is a typo, said in one line, exit 2); the
    default store is created empty on first use."""
    from accelbench.store import open_store

    check_store_names(args.db)
    return open_store(args.db, create=not store_named(args.db))



def store_files(args: argparse.Namespace) -> list[Any]:
    """The results store's file (the one ``--db`` or the default names), as a list for
    an output check's ``protected``; empty for a server or an unresolvable name (opening
    it reports that)."""
    from accelbench.store.base import local_file_of

    path = local_file_of(args.db)
    return [path] if path is not None else []



def cost_rates(args: argparse.Namespace) -> Any:
    from accelbench.report.cost import CostRates, load_cost_config

    overrides = CostRates(
        price_per_hour=args.price_per_hour,
        electricity_price_per_kwh=args.electricity_price,
        carbon_intensity_g_per_kwh=args.carbon_intensity,
        currency=args.currency or "",
    )
    return load_cost_config(args.config, overrides=overrides)



def check_store_workload(st: Any, workload: str) -> None:
    """A one-line ConfigError when the store holds no results of ``workload``, with the
    close matches (a typo) or the workloads it does hold."""
    from accelbench.report.rows import did_you_mean, known_workloads

    held = st.workloads()
    if workload in held:
        return
    known = known_workloads(extra=held)
    hint = "" if workload in known else did_you_mean(workload, known)
    if not hint:
        hint = f"; it holds: {', '.join(sorted(held))}" if held else "; it is empty"
    raise ConfigError(f"no results for workload {workload!r} in {st.where}{hint}")

