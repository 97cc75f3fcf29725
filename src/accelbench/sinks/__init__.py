"""Results where people already look: each sink is one module reading the stored
:class:`~accelbench.result.Result` of a finished case, run in the parent after the case is
stored (never inside the measured window).

- :mod:`~accelbench.sinks.mllog`: an MLPerf-format log (``--mllog PATH``).
- :mod:`~accelbench.sinks.prometheus`: a Pushgateway push per case (``--pushgateway URL``)
  and live power gauges for ``accelbench power --prometheus HOST:PORT``.
- :mod:`~accelbench.sinks.mlflow_sink`: an MLflow run per case (``--mlflow [URI]``).
- :mod:`~accelbench.sinks.wandb_sink`: a W&B run per case (``--wandb``).

:class:`~accelbench.sinks.options.SinkOptions` holds every sink option (one field each);
:func:`~accelbench.sinks.factory.open_sinks` checks the extras and targets before anything
runs and returns the callback the runners call with each stored result.
"""

from accelbench.sinks.base import SinkSet, store_label
from accelbench.sinks.factory import open_sinks
from accelbench.sinks.options import SinkOptions

__all__ = ["SinkOptions", "SinkSet", "open_sinks", "store_label"]
