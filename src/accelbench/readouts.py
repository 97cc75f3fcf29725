"""Reading the store out, for the CLI and the Python API alike: :func:`export` and
:func:`report` (``accelbench export`` and ``accelbench report`` call them), the result
filters and cost rates they take (one ``option()`` field each: the CLI's flags and the
API's keywords come from the same fields), and what every read command checks first
(the store's name, that a named store exists).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TextIO

from accelbench.errors import ConfigError
from accelbench.keywords import check_keywords, keywords_of
from accelbench.names import fold, tag_problem
from accelbench.options import option, validate_fields
from accelbench.result import STATUSES

FILTERS_TITLE = ("filters (all must match; names are checked as run checks them, in any "
                 "letter case, or as the store holds them)")


@dataclass(frozen=True, kw_only=True, slots=True)
class ResultFilters:
    """Which stored results a command reads (``results``, ``report``, ``compare``,
    ``export``; :func:`accelbench.cli.args.result_filter`)."""

    workload: str | None = option(None, flag="--workload", nonempty=True, help="")
    device: str | None = option(None, flag="--device", nonempty=True,
                                help="device id as run: cpu, cuda:0, mps")
    precision: str | None = option(None, flag="--precision", nonempty=True,
                                   help="fp32, tf32, amp_fp16, amp_bf16")
    size: str | None = option(None, flag="--size", nonempty=True, help="tiny, small or paper")
    framework: str | None = option(None, flag="--framework", nonempty=True,
                                   help="torch or jax")
    status: str | None = option(None, flag="--status", choices=STATUSES, help="")
    suite_id: str | None = option(None, flag="--suite-id", nonempty=True, help="")
    tag: str | None = option(None, flag="--tag", check=tag_problem, help="")
    limit: int | None = option(None, flag="--limit", lo=1, help="only the newest N results")

    def __post_init__(self) -> None:
        validate_fields(self)


COST_HELP = (
    "Cost and carbon: --price-per-hour (machine), --electricity-price (per kWh) and "
    "--carbon-intensity (gCO2/kWh) apply to every device and override the [cost] table of "
    "the config file (default: config.toml in the user config directory, e.g. "
    "~/.config/accelbench/config.toml; per device: [cost.devices.\"cuda:0\"] or "
    "[cost.devices.\"DEVICE NAME\"])."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class CostOptions:
    """Cost and carbon rates of ``report`` and ``recommend``
    (:func:`accelbench.cli.store_args.cost_rates`)."""

    config: str | None = option(None, flag="--config", nonempty=True,
                                help="TOML config file with [cost] rates")
    price_per_hour: float | None = option(None, flag="--price-per-hour", lo=0.0, hi=1e9,
                                          metavar="PRICE",
                                          help="price of the machine per hour")
    electricity_price: float | None = option(None, flag="--electricity-price", lo=0.0,
                                             hi=1e6, metavar="PRICE",
                                             help="price of electricity per kWh")
    carbon_intensity: float | None = option(None, flag="--carbon-intensity", lo=0.0, hi=1e5,
                                            metavar="G_PER_KWH",
                                            help="grid carbon intensity in gCO2 per kWh")
    currency: str | None = option(None, flag="--currency", nonempty=True,
                                  help="label for prices, e.g. USD (no conversion)")

    def __post_init__(self) -> None:
        validate_fields(self)


EXPORT_FORMATS = ("csv", "json", "parquet")


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportOptions:
    """``accelbench export`` (beside the result filters)."""

    format: str = option(flag="--format", choices=EXPORT_FORMATS, required=True, help="")
    out: str | None = option(
        None, flag="--out", metavar="PATH", nonempty=True,
        help="file for csv/json (default: stdout); for parquet (required) the cases file, "
        "with the samples in PATH-stem.samples.parquet beside it")
    force: bool = option(False, flag="--force", help="replace an existing --out file (never "
                         "the results store itself)")
    to_target: bool = option(False, flag="--to-target",
                             help="export the runs to a target (accelbench train) instead: a "
                             "row per run and per evaluation point (docs/totarget.md); "
                             "filters: --workload, --size, --framework")

    def __post_init__(self) -> None:
        validate_fields(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportOptions:
    """``accelbench report`` (beside the result filters and the cost rates)."""

    out: str = option(flag="--out", required=True, nonempty=True, metavar="DIR",
                      help="output directory (new, or empty unless --force)")
    force: bool = option(False, flag="--force",
                         help="write into a directory that is not empty (files of the same "
                         "names are replaced; never the results store)")
    title: str = option("accelbench report", flag="--title", nonempty=True, default_text="",
                        help="page title")
    no_reference: bool = option(False, flag="--no-reference",
                                help="leave out the paper's published results")

    def __post_init__(self) -> None:
        validate_fields(self)


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


def describe_filter(flt: Any) -> str:
    parts = [
        f"{name}={getattr(flt, name)}"
        for name in ("workload", "device", "precision", "size", "status", "suite_id", "tag",
                     "limit")
        if getattr(flt, name) is not None
    ]
    return ", ".join(parts)


#: The filters whose values are names (checked, and accepted in any letter case).
FILTER_NAMES = ("workload", "size", "precision", "framework", "device")


def filter_value(store: Any, name: str, value: str) -> str:
    """The value to filter column ``name`` on: ``value`` as the store holds it (a plugin's
    workload stored earlier, an old device string), else its canonical form as ``run``
    would accept it (``BF16`` -> ``amp_bf16``, ``CUDA`` -> ``cuda:0``).

    Raises:
        ConfigError: a value neither stored nor valid, with the close matches.
    """
    from accelbench.planning.plan import canonical_name
    from accelbench.report.rows import did_you_mean

    held = store.distinct(name)
    for candidate in (value, fold(value)):
        if candidate in held:
            return candidate
    try:
        return canonical_name(name, value)
    except ConfigError as exc:
        hint = "" if "did you mean" in str(exc) else did_you_mean(fold(value), held)
        holds = f" (the store holds: {', '.join(sorted(held)[:12])})" if held else ""
        raise ConfigError(f"--{name}: {exc}{hint}{holds}") from None


# --------------------------------------------------------------------------- the store


def open_read_store(db: str | None) -> Any:
    """The store of a read command: never created when it is named (``--db``, ``db=``
    or ``ACCELBENCH_DB``: a missing file there is a typo, said in one line); the default
    store is created empty on first use."""
    from accelbench.store import open_store

    check_store_names(db)
    return open_store(db, create=not store_named(db))


def store_file_list(db: str | None) -> list[Path]:
    """The results store's file, as a list for an output check's ``protected``; empty
    for a server or an unresolvable name (opening it reports that)."""
    from accelbench.store.base import local_file_of

    path = local_file_of(db)
    return [path] if path is not None else []


def cost_rates(costs: Any) -> Any:
    """The :class:`~accelbench.report.cost.CostRates` of ``costs`` (a
    :class:`CostOptions`, or parsed arguments with its fields) over the config file's."""
    from accelbench.report.cost import CostRates, load_cost_config

    overrides = CostRates(
        price_per_hour=costs.price_per_hour,
        electricity_price_per_kwh=costs.electricity_price,
        carbon_intensity_g_per_kwh=costs.carbon_intensity,
        currency=costs.currency or "",
    )
    return load_cost_config(costs.config, overrides=overrides)


def select(store: Any, filters: ResultFilters, **fixed: Any) -> Any:
    """The :class:`~accelbench.store.ResultFilter` of ``filters``; ``fixed`` overrides
    them. Each name is checked like ``run`` checks it (:func:`filter_value`) against the
    open ``store``."""
    from accelbench.store import ResultFilter

    values: dict[str, Any] = {f.name: getattr(filters, f.name) for f in fields(filters)}
    for name in FILTER_NAMES:
        if values[name] is not None and name not in fixed:
            values[name] = filter_value(store, name, values[name])
    values.update(fixed)
    return ResultFilter(**values)


def _split(where: str, keywords: Mapping[str, Any], *kinds: type) -> list[Any]:
    """One object of each of ``kinds`` from the API ``keywords`` (each name checked at
    the call, each value by the option's own check)."""
    allowed = {name for kind in kinds for name in keywords_of(kind)}
    check_keywords(where, keywords, allowed)
    return [kind(**{fo.name: keywords[name] for name, fo in keywords_of(kind).items()
                    if keywords.get(name) is not None}) for kind in kinds]


# --------------------------------------------------------------------------- export, report


@dataclass(frozen=True, slots=True)
class WrittenReport:
    """What :func:`report` wrote: its files (``index.html``, ``summary.md``, figures) and
    how many results it shows."""

    files: Any
    """The :class:`~accelbench.report.html.ReportFiles`."""
    results: int


def export(format: str, out: str | Path | None = None, *, force: bool = False,  # noqa: A002
           db: str | None = None, stream: TextIO | None = None, to_target: bool = False,
           **filters: Any) -> tuple[int, list[Path]]:
    """Export the stored results that match ``filters`` (the result filters of
    ``accelbench export`` by name: ``workload``, ``device``, ``precision``, ``size``,
    ``framework``, ``status``, ``suite_id``, ``tag``, ``limit``) as ``csv``, ``json`` or
    ``parquet`` to ``out`` (csv/json without ``out``: to ``stream``, default standard
    output), streamed from the store.

    With ``to_target``, the runs to a target (``accelbench train``) are exported instead
    (:mod:`accelbench.report.totarget_export`), filtered by ``workload``, ``size`` and
    ``framework`` only.

    Returns:
        How many results (runs to a target) were exported, and the files written.

    Raises:
        TypeError: a keyword that is no filter (with the closest names).
        ConfigError: a bad value, a named store that does not exist, an ``out`` that
            exists (without ``force``) or is the store.
    """
    from accelbench.report.export import write_export

    (flt_options,) = _split("export", filters, ResultFilters)
    options = ExportOptions(format=format, out=None if out is None else str(out), force=force,
                            to_target=to_target)
    if options.force and options.out is None:
        raise ConfigError("--force needs --out (standard output is never replaced)")
    if options.to_target:
        return _export_to_target(options, flt_options, db, stream or sys.stdout)
    # Streamed: results are read from the store in batches while they are written, so
    # an export of any size runs in bounded memory (the store stays open until done).
    with open_read_store(db) as st:
        flt = select(st, flt_options)
        store_file = st.local_file()
        return write_export(
            st.iter_query(flt), options.format,
            Path(options.out) if options.out else None, stream=stream or sys.stdout,
            protected=[store_file] if store_file else [], force=options.force)


def _export_to_target(options: ExportOptions, flt: ResultFilters, db: str | None,
                      stream: TextIO) -> tuple[int, list[Path]]:
    """``export --to-target``: the stored runs to a target in ``options.format``."""
    from accelbench.report import totarget_export as tx
    from accelbench.report.outputs import atomic_paths, check_out_files

    other = [fo.opt.flag for name, fo in keywords_of(ResultFilters).items()
             if name not in ("workload", "size", "framework")
             and getattr(flt, fo.name) is not None]
    if other:
        raise ConfigError(f"export --to-target: {other[0]} filters results, not runs to a "
                          "target (these take --workload, --size and --framework)")
    with open_read_store(db) as st:
        store_file = st.local_file()
        wanted = {"workload": flt.workload, "size": flt.size, "framework": flt.framework}
        records = [r for r in st.totarget_runs()
                   if all(v is None or fold(v) == fold(have) for v, have in zip(
                       wanted.values(), (r.recipe.workload, r.recipe.size, r.framework),
                       strict=True))]
    out = Path(options.out) if options.out else None
    protected = [store_file] if store_file else []
    if options.format == "parquet":
        if out is None:
            raise ConfigError("parquet export needs --out FILE.parquet (the evaluation points "
                              "go beside it in FILE.points.parquet)")
        check_out_files(tx.parquet_paths(out), protected=protected, force=options.force)
        return len(records), tx.write_parquet(records, out)
    writer = tx.write_csv if options.format == "csv" else tx.write_json
    if out is None:
        return writer(records, stream), []
    check_out_files([out], protected=protected, force=options.force)
    try:
        with atomic_paths([out]) as (tmp,), open(tmp, "w", encoding="utf-8", newline="") as fh:
            writer(records, fh)
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc}") from None
    return len(records), [out]


def report(out: str | Path, *, title: str = "accelbench report", force: bool = False,
           no_reference: bool = False, db: str | None = None,
           **keywords: Any) -> WrittenReport:
    """Write the HTML report (``out/index.html``, ``summary.md``, ``figures/``) of the
    stored results that match the filters, as ``accelbench report`` does. Keywords: the
    result filters (as :func:`export`'s) and the cost rates (``config``,
    ``price_per_hour``, ``electricity_price``, ``carbon_intensity``, ``currency``).

    Returns:
        What was written (:class:`WrittenReport`: the files, how many results).

    Raises:
        TypeError: a keyword that is no option (with the closest names).
        ConfigError: a bad value, a missing named store, an ``out`` not empty (without
            ``force``) or holding the store.
    """
    from accelbench.report.html import REPORT_FILES, build_report, write_report
    from accelbench.report.outputs import check_out_dir
    from accelbench.report.stored import gather_store

    flt_options, costs = _split("report", keywords, ResultFilters, CostOptions)
    options = ReportOptions(out=str(out), title=title, force=force, no_reference=no_reference)
    rates = cost_rates(costs)
    out_dir = Path(options.out)
    check_out_dir(out_dir, REPORT_FILES, protected=store_file_list(db), force=options.force)
    with open_read_store(db) as st:
        flt = select(st, flt_options)
        results = gather_store(st, flt)  # a row per result, whole records a batch at a time
        if not results and flt_options.workload:
            check_store_workload(st, flt_options.workload)
        data = build_report(
            results, title=options.title, store=st, store_url=st.where,
            filters=describe_filter(flt), costs=rates,
            include_reference=not options.no_reference, result_filter=flt)
    return WrittenReport(files=write_report(data, out_dir), results=data.n_results)
