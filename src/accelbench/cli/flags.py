"""Options several subcommands share, each declared once as an ``option()`` field (the
generator, :func:`accelbench.cli.args.add_options`, turns them into arguments). The result
filters and cost rates, which the API takes too, are in :mod:`accelbench.readouts`."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.options import option


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkloadArg:
    """The workload a command measures or ranks (``run``, ``sweep``, ``recommend``)."""

    workload: str = option(flag="workload", nonempty=True, fold=True, help="")
