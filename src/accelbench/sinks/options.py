""":class:`SinkOptions`: where finished cases go beside the store (one field a sink)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from accelbench.errors import ConfigError
from accelbench.options import option, validate_fields

#: ``--mlflow`` given without a URI: MLflow's own default (``MLFLOW_TRACKING_URI``, else
#: its local default store).
MLFLOW_DEFAULT = "default"

#: The module each sink needs, and the exact command that installs it.
EXTRAS = {
    "mllog": ("mlperf_logging", "pip install 'accelbench[mlperf]'"),
    "pushgateway": ("prometheus_client", "pip install 'accelbench[prometheus]'"),
    "mlflow": ("mlflow", "pip install 'accelbench[mlflow]'"),
    "wandb": ("wandb", "pip install 'accelbench[wandb]'"),
}


def _url_problem(value: str) -> str | None:
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"must be an http(s)://HOST[:PORT] URL, got {value!r}"
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return f"has a bad port: {value!r}"
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class SinkOptions:
    """Where each finished case is also sent (all off by default). Each sink reads the
    stored record in the parent, after the case is stored."""

    mllog: str | None = option(
        None, flag="--mllog", nonempty=True, metavar="PATH",
        help="append an MLPerf-format log of every case (mlperf-logging; power_reading "
        "lines where a sensor was sampled)")
    pushgateway: str | None = option(
        None, flag="--pushgateway", nonempty=True, metavar="URL", check=_url_problem,
        help="push each finished case's throughput, CI and energy per sample to this "
        "Prometheus Pushgateway")
    mlflow: str | None = option(
        None, flag="--mlflow", nonempty=True, metavar="URI", const=MLFLOW_DEFAULT,
        help="log each case as an MLflow run at this tracking URI (alone: MLflow's "
        "default, MLFLOW_TRACKING_URI)")
    wandb: bool = option(
        False, flag="--wandb",
        help="log each case as a W&B run (WANDB_MODE=offline keeps it local)")
    wandb_project: str = option(
        "accelbench", flag="--wandb-project", nonempty=True, requires=("wandb",),
        metavar="NAME", help="W&B project of --wandb's runs")

    def __post_init__(self) -> None:
        validate_fields(self)

    def active(self) -> tuple[str, ...]:
        """The sinks turned on, by field name."""
        return tuple(name for name in EXTRAS if getattr(self, name))

    def check_installed(self) -> None:
        """:class:`ConfigError` with the install command where a turned-on sink's package
        is missing (before anything runs)."""
        for name in self.active():
            module, install = EXTRAS[name]
            try:
                importlib.import_module(module)
            except ImportError:
                flag = "--" + name
                raise ConfigError(f"{flag} needs the {module} package, which is not "
                                  f"installed: {install}") from None
