"""SIGTERM as an exception, so that a suite killed by its scheduler ends as on Ctrl-C
(finished cases stored, the resume command printed)."""

from __future__ import annotations

from typing import Any


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that a suite ends as on Ctrl-C."""


def on_sigterm(_signum: int, _frame: Any) -> None:
    """The SIGTERM handler :func:`accelbench.cli.main` installs."""
    raise Terminated
