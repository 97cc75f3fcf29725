"""Opening the sinks a run or suite asked for, and handing each stored result to them."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from accelbench.errors import AccelbenchWarning
from accelbench.result import Result
from accelbench.sinks.options import MLFLOW_DEFAULT, SinkOptions


def epoch_ms(stamp: str | None) -> int | None:
    """A record's ISO time stamp as milliseconds since the epoch (None if unreadable)."""
    try:
        return int(datetime.fromisoformat(stamp).timestamp() * 1000)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


class Sink(Protocol):
    """One destination of finished cases."""

    name: str
    """Its flag, for messages (``--mllog``)."""

    def write(self, result: Result) -> None:
        """Send one stored result."""

    def close(self) -> None:
        """Flush and let go (after the last case)."""


class SinkSet:
    """The open sinks of one command: :meth:`emit` sends a stored result to each. A sink
    that fails says so in one warning line; the result stays stored and the other sinks
    and cases go on."""

    def __init__(self, sinks: list[Sink]) -> None:
        self.sinks = sinks

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def emit(self, result: Result) -> None:
        for sink in self.sinks:
            try:
                sink.write(result)
            except Exception as exc:  # noqa: BLE001 - a sink never ends a suite
                warnings.warn(f"{sink.name}: case {result.id[:8]} not sent: "
                              f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
                              AccelbenchWarning, stacklevel=2)

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001
                warnings.warn(f"{sink.name}: {type(exc).__name__}: {exc}", AccelbenchWarning,
                              stacklevel=2)


def build_sinks(options: SinkOptions, *, store_label: str | None = None) -> SinkSet:
    """The sinks ``options`` turn on, opened (files created, targets checked) before any
    case runs. ``store_label``: the store as people see it (``display_url``), for tags;
    a SQLite store's file, which no sink may write into
    (:func:`~accelbench.report.outputs.check_target`).

    Raises:
        ConfigError: a sink's package is missing (the install command), or its target
            cannot be used (a log file in a missing directory).
    """
    protected = store_files_of(store_label)
    if options.mlflow:  # before MLflow is imported: its import writes files of its own
        from accelbench.sinks.mlflow_sink import check_tracking_target

        check_tracking_target(None if options.mlflow == MLFLOW_DEFAULT else options.mlflow,
                              protected)
    options.check_installed()
    sinks: list[Sink] = []
    try:
        if options.mllog:
            from accelbench.sinks.mllog import MllogSink

            sinks.append(MllogSink(options.mllog, protected=protected))
        if options.pushgateway:
            from accelbench.sinks.prometheus import PushgatewaySink

            sinks.append(PushgatewaySink(options.pushgateway))
        if options.mlflow:
            from accelbench.sinks.mlflow_sink import MlflowSink

            sinks.append(MlflowSink(options.mlflow, store_label=store_label,
                                    protected=protected))
        if options.wandb:
            from accelbench.sinks.wandb_sink import WandbSink

            sinks.append(WandbSink(options.wandb_project, store_label=store_label,
                                   protected=protected))
    except BaseException:
        SinkSet(sinks).close()
        raise
    return SinkSet(sinks)


def store_files_of(label: str | None) -> list[Path]:
    """The results store's file that ``label`` (:func:`store_label`: a SQLite store shows
    as its path, a server as a URL) names, as a write check's ``protected``."""
    if not label or "://" in label:
        return []
    return [Path(label)]


def store_label(store: Any, db: str | None = None) -> str | None:
    """The store an API call's ``store=``/``db=`` name as people see it (``display_url``:
    never a password), or None where nothing is stored."""
    from accelbench.errors import StoreError
    from accelbench.store import Store
    from accelbench.store.base import display_url, resolve_db_url

    if isinstance(store, Store):
        return display_url(store.url)
    if store is False or store is None:
        return None
    try:
        return display_url(resolve_db_url(store if isinstance(store, str) else db))
    except StoreError:
        return None


@contextmanager
def open_sinks(options: SinkOptions | None, *, store_label: str | None = None
               ) -> Iterator[SinkSet]:
    """:func:`build_sinks`, closed after the block (an empty set where none is on)."""
    sinks = build_sinks(options, store_label=store_label) if options else SinkSet([])
    try:
        yield sinks
    finally:
        sinks.close()
