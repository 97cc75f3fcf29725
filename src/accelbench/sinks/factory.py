"""Opening the sinks a run or suite asked for (:func:`open_sinks`): each sink's module is
imported only when its option is on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from accelbench.sinks.base import Sink, SinkSet, store_files_of
from accelbench.sinks.options import MLFLOW_DEFAULT, SinkOptions


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


@contextmanager
def open_sinks(options: SinkOptions | None, *, store_label: str | None = None
               ) -> Iterator[SinkSet]:
    """:func:`build_sinks`, closed after the block (an empty set where none is on)."""
    sinks = build_sinks(options, store_label=store_label) if options else SinkSet([])
    try:
        yield sinks
    finally:
        sinks.close()
