"""Importing a plugin in a checked way: a plugin's module is a user's code, run at import.

Two ways an import could end accelbench without a word are turned into a reported failure:

- ``os._exit(code)`` while the plugin is imported (no ``finally``, no ``atexit``, no
  message: the command would end with the plugin's code, 0 included). During the import
  :func:`no_hard_exit` replaces ``os._exit`` in this process (a process forked meanwhile
  still exits for real) with one that raises :class:`PluginExit`, which
  :func:`accelbench.workloads.registry.load_plugin` reports as a :class:`ConfigError`.
  (``sys.exit`` raises ``SystemExit``, which ``load_plugin`` catches already.)
- An import that never ends (a loop, a wait on a network share): :func:`watchdog` ends
  the process after ``limit_s`` with one line naming the plugin and exit 2. The CLI
  bounds every plugin import this way (``ACCELBENCH_PLUGIN_TIMEOUT_S``,
  :data:`DEFAULT_TIMEOUT_S` by default); the Python API does not (a library never ends
  its caller's process).
"""

from __future__ import annotations

import faulthandler
import math
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from accelbench.errors import ConfigError

#: The variable that bounds a plugin's import in the CLI, in seconds.
ENV_TIMEOUT = "ACCELBENCH_PLUGIN_TIMEOUT_S"
#: Its default: generous, as a plugin may import torch or JAX on a busy machine.
DEFAULT_TIMEOUT_S = 120.0
#: Exit code of an import that did not end in time (bad input, as any refused plugin).
EXIT_PLUGIN_HANG = 2

_REAL_EXIT = os._exit


class PluginExit(BaseException):
    """``os._exit`` was called while a plugin was imported."""

    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


@contextmanager
def no_hard_exit() -> Iterator[None]:
    """While the block runs, ``os._exit`` in this process raises :class:`PluginExit`."""
    pid = os.getpid()
    previous = os._exit

    def refuse(code: int) -> None:
        if os.getpid() != pid:  # a child forked by the plugin: exit as asked
            _REAL_EXIT(code)
        raise PluginExit(code)

    os._exit = refuse  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = previous


def timeout_s() -> float:
    """``ACCELBENCH_PLUGIN_TIMEOUT_S``, or :data:`DEFAULT_TIMEOUT_S` when unset or empty.

    Raises:
        ConfigError: not a positive finite number.
    """
    text = os.environ.get(ENV_TIMEOUT, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text) if text.isascii() else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{ENV_TIMEOUT} must be a positive number of seconds, got {text!r}")
    return value


@contextmanager
def watchdog(origin: str, limit_s: float, *, debug: bool = False) -> Iterator[None]:
    """End the process (one line on stderr, exit :data:`EXIT_PLUGIN_HANG`) if the block
    (importing plugin ``origin``) has not ended after ``limit_s``; ``debug``: print where
    it is stuck first."""
    done = threading.Event()

    def watch() -> None:
        if done.wait(limit_s):
            return
        if debug:
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        line = (f"accelbench: error: plugin {origin!r} did not finish importing within "
                f"{limit_s:g} s (a loop or a wait at import?); {ENV_TIMEOUT} sets the "
                "bound\n")
        try:
            os.write(2, line.encode("utf-8", "backslashreplace"))
        finally:
            _REAL_EXIT(EXIT_PLUGIN_HANG)

    thread = threading.Thread(target=watch, name="accelbench-plugin-watchdog", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
