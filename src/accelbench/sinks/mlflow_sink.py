"""``--mlflow [URI]``: each stored case as one MLflow run in experiment ``accelbench``
(``MLFLOW_EXPERIMENT_NAME`` overrides).

Params: the spec, flattened (``policy.target_ci``, ``meters.boundary`` ...). Metrics: the
throughput with its CI ends, the CI's relative half-width, the median step time, energy per
sample and average power inside the energy boundary, MFU, peak memory, compile time.
Tags: ``accelbench.suite_id``, ``accelbench.noisy`` and ``accelbench.noise_reasons``, the
status, the result id, the CI's scope, the energy boundary and source, and the store it
was saved in (its display name: never a password). Artifacts: ``step_times.json`` (the raw
warm-up and measured step times), ``power_timeline.json`` (where a sensor was sampled) and
``record.json`` (the full stored record).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelbench import jsonout
from accelbench.errors import ConfigError
from accelbench.result import Result
from accelbench.sinks.base import case_metrics, case_tags, epoch_ms
from accelbench.sinks.options import MLFLOW_DEFAULT
from accelbench.store.base import display_url

EXPERIMENT = "accelbench"


def flat_params(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested spec fields as MLflow params (``policy.target_ci``: ``0.02``)."""
    out: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flat_params(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = "" if value is None else str(value)
    return out


def check_tracking_target(uri: str | None, protected: Sequence[Path]) -> None:
    """Refuse a tracking store (``uri``, else ``MLFLOW_TRACKING_URI``) that is the results
    store, or is no regular file or folder: a ``sqlite:`` URL's file, a file store's
    folder (a plain path or ``file:`` URL), through
    :func:`~accelbench.report.outputs.check_target`.

    Raises:
        ConfigError: one line naming ``--mlflow`` and the store, never its password.
    """
    from urllib.parse import unquote, urlsplit

    from accelbench.report.outputs import check_target, store_of_uri

    given = uri or os.environ.get("MLFLOW_TRACKING_URI") or ""
    if not given:
        return
    flag = "--mlflow" if uri else "MLFLOW_TRACKING_URI"
    if given.lower().startswith("sqlite:"):
        path = store_of_uri(given)
        if path is not None:
            check_target(path, protected=protected, flag=flag)
            if path.is_dir():  # SQLite cannot open a folder; MLflow retries for minutes
                raise ConfigError(f"{flag} {display_url(given)}: {path} is a folder, not a "
                                  "database file; name a file, e.g. sqlite:///mlflow.db")
    elif given.lower().startswith("file:"):
        check_target(Path(unquote(urlsplit(given).path)), protected=protected, flag=flag,
                     folder=True)
    elif "://" not in given:
        check_target(Path(given).expanduser(), protected=protected, flag=flag, folder=True)


class MlflowSink:
    """Logs each case as one MLflow run through an explicit client (no global state)."""

    name = "--mlflow"

    def __init__(self, uri: str, *, store_label: str | None = None,
                 protected: Sequence[Path] = ()) -> None:
        # Checked before MLflow is imported: its import already writes files of its own.
        check_tracking_target(None if uri == MLFLOW_DEFAULT else uri, protected)
        from mlflow.tracking import MlflowClient

        for noisy in ("mlflow", "alembic"):  # their INFO lines are no accelbench output
            logging.getLogger(noisy).setLevel(logging.ERROR)
        self.uri = None if uri == MLFLOW_DEFAULT else uri
        self.store_label = store_label
        self.shown = display_url(self.uri or os.environ.get("MLFLOW_TRACKING_URI") or "default")
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT
        try:
            self.client = MlflowClient(tracking_uri=self.uri)
            found = self.client.get_experiment_by_name(name)
            self.experiment_id = found.experiment_id if found is not None else \
                self.client.create_experiment(name, artifact_location=self._artifacts())
        except Exception as exc:  # noqa: BLE001 - any failure of the target: one line
            raise ConfigError(f"--mlflow {self.shown}: cannot use the tracking store: "
                              f"{self._clean(exc)}") from None

    def _artifacts(self) -> str | None:
        """Artifacts of a SQLite tracking store beside its file (MLflow's own default is
        ./mlruns in whatever directory the command ran in)."""
        uri = self.uri or os.environ.get("MLFLOW_TRACKING_URI") or ""
        if uri.startswith("sqlite:///"):
            return (Path(uri[len("sqlite:///"):]).resolve().parent / "mlartifacts").as_uri()
        return None

    def _clean(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split())[:300]
        return text.replace(self.uri, self.shown) if self.uri else text

    def close(self) -> None:
        pass

    def write(self, result: Result) -> None:
        from mlflow.entities import Metric, Param

        spec = result.spec
        name = (f"{spec.workload} {spec.size} bs{spec.batch_size} {spec.precision} "
                f"{spec.device} {spec.framework}")
        start = epoch_ms(result.started_at)
        end = epoch_ms(result.finished_at) or start
        try:
            run = self.client.create_run(self.experiment_id, start_time=start, run_name=name,
                                         tags=case_tags(result, self.store_label))
            rid = run.info.run_id
            stamp = end or 0
            self.client.log_batch(
                rid,
                metrics=[Metric(k, v, stamp, 0) for k, v in case_metrics(result).items()],
                params=[Param(k, v[:6000]) for k, v in flat_params(spec.to_dict()).items()])
            self.client.log_dict(rid, jsonout.jsonable({
                "sample_unit": result.sample_unit, "samples_per_step": result.samples_per_step,
                "warmup_times_s": list(result.warmup_times_s),
                "iteration_times_s": list(result.iteration_times_s)}), "step_times.json")
            if result.power_timeline:
                self.client.log_dict(rid, jsonout.jsonable(result.power_timeline),
                                     "power_timeline.json")
            self.client.log_dict(rid, jsonout.jsonable(result.to_dict()), "record.json")
            self.client.set_terminated(rid, "FINISHED" if result.status == "ok" else "FAILED",
                                       end_time=end)
        except Exception as exc:  # noqa: BLE001 - reworded without the URI's password
            raise RuntimeError(self._clean(exc)) from None
