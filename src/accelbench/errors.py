"""The project's exception hierarchy.

Vendor and framework errors are translated into these where they enter the
project, with messages that say how to fix the problem. The CLI maps
:class:`AccelbenchError` subclasses to a one-line message and exit code 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AccelbenchError(Exception):
    """Base class of every error accelbench raises on purpose."""


class ConfigError(AccelbenchError, ValueError):
    """Bad user input: unknown workload, invalid batch size, bad option value."""


class UnsupportedError(AccelbenchError):
    """A device, precision or framework that is not available on this machine."""


class StoreError(AccelbenchError):
    """The results store cannot be opened, read or written."""


class MeterError(AccelbenchError):
    """A power or energy sensor failed in a way the caller must know about."""


class WorkerError(AccelbenchError):
    """A benchmark worker process failed outside the measured case."""


class AccelbenchWarning(UserWarning):
    """Something the user must know that does not stop the command (a malformed store row
    skipped, a noisy input compared). The CLI prints each as one ``accelbench: warning:``
    line on stderr."""


def unknown_name(what: str, name: str, known: Iterable[str], tail: str = "") -> ConfigError:
    """The error for a name no registry holds, with the closest registered names.

    Args:
        what: The kind of thing (``workload``, ``meter``).
        name: What the user typed.
        known: The registered names.
        tail: A last remark in parentheses (``see 'accelbench list'``).
    """
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return ConfigError(f"unknown {what} {name!r}{hint}" + (f" ({tail})" if tail else ""))
