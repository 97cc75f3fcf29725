"""The ``accelbench`` command: parse, build the call, print. Logic lives in the API.

One module per subcommand (:data:`COMMAND_MODULES`), each with ``register(subparsers)``
adding its parser with ``set_defaults(handler=fn)``, where ``fn(args, out, err) -> int``.
Options of the spec dataclasses are generated from their fields (:mod:`.args`). Modules
must stay light at import time: heavy imports happen inside the handlers.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rich.console import Console

from accelbench.cli.args import nonempty
from accelbench.cli.signals import Terminated, on_sigterm
from accelbench.errors import AccelbenchError, AccelbenchWarning
from accelbench.version import __version__

EXIT_BAD_INPUT = 2
EXIT_SIGTERM = 128 + 15

#: The subcommand modules, in the order ``--help`` lists them.
COMMAND_MODULES: tuple[str, ...] = tuple(f"accelbench.cli.{m}" for m in (
    "list", "devices", "run", "suite", "power", "results", "report", "compare", "recommend",
    "export", "reference", "ops", "peaks", "roofline", "doctor", "sweep", "store",
))


class OneLineParser(argparse.ArgumentParser):
    """argparse with errors as ONE line and exit 2 (no multi-line usage dump): scripts
    and people both read the first line only. ``--help`` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        first = message.splitlines()[0] if message else "invalid arguments"
        self.exit(EXIT_BAD_INPUT, f"accelbench: error: {first} (see {self.prog} --help)\n")




#: Options of the top-level parser that may also follow the subcommand
#: (``accelbench results --db x.db``); given twice, the later one wins.
def _add_global_args(p: argparse.ArgumentParser, *, sub: bool) -> None:
    suffix = "_sub" if sub else ""
    # After the subcommand the defaults are suppressed, so that an option given only
    # before it is not reset by the subparser (argparse copies its namespace over).
    db_default: Any = argparse.SUPPRESS if sub else None
    plugin_default: Any = argparse.SUPPRESS if sub else []
    flag_default: Any = argparse.SUPPRESS if sub else False
    p.add_argument("--db", dest=f"db{suffix}", type=nonempty, default=db_default,
                   help="results store: SQLAlchemy URL or SQLite path "
                   "(default: $ACCELBENCH_DB or the user data directory)")
    p.add_argument("--plugin", dest=f"plugin{suffix}", action="append", type=nonempty,
                   default=plugin_default,
                   help="module or .py file that registers workloads (repeatable; also "
                   "$ACCELBENCH_PLUGINS, separated by ':')")
    p.add_argument("--debug", dest=f"debug{suffix}", action="store_true",
                   default=flag_default, help="show tracebacks")
    p.add_argument("-q", "--quiet", dest=f"quiet{suffix}", action="store_true",
                   default=flag_default, help="no progress output")


def _merge_globals(args: argparse.Namespace) -> None:
    if hasattr(args, "db_sub"):
        args.db = args.db_sub
    args.plugin = [*args.plugin, *getattr(args, "plugin_sub", [])]
    args.debug = args.debug or getattr(args, "debug_sub", False)
    args.quiet = args.quiet or getattr(args, "quiet_sub", False)

Callable[[argparse.Namespace, Console, Console], int]

Handler = Callable[[argparse.Namespace, Console, Console], int]


def build_parser() -> argparse.ArgumentParser:
    """The ``accelbench`` parser with every subcommand."""
    parser = OneLineParser(
        prog="accelbench",
        description="Benchmark deep-learning training: throughput and energy, stored and compared.",
    )
    parser.add_argument("--version", action="version", version=f"accelbench {__version__}")
    _add_global_args(parser, sub=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    for choice in sub.choices.values():
        _add_global_args(choice, sub=True)
    return parser


def _console(*, stderr: bool) -> Console:
    probe = Console(stderr=stderr)
    # Scripts and pipes get full-width tables, not rich's 80-column default.
    return probe if probe.is_terminal else Console(stderr=stderr, width=200)


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: Any = None, line: str | None = None) -> None:
    text = " ".join(str(message).split())
    if issubclass(category, AccelbenchWarning):
        print(f"accelbench: warning: {text}", file=sys.stderr)
    else:  # a library's warning: one line too, not a source excerpt
        print(f"accelbench: warning: {category.__name__}: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _merge_globals(args)
    out = _console(stderr=False)
    err = _console(stderr=True)
    previous_term = signal.getsignal(signal.SIGTERM)
    previous_show = warnings.showwarning
    warnings.showwarning = _show_warning
    with warnings.catch_warnings():
        warnings.simplefilter("always", AccelbenchWarning)
        try:
            signal.signal(signal.SIGTERM, on_sigterm)
        except ValueError:  # not the main thread (an embedding caller): leave it
            previous_term = None
        try:
            from accelbench.api import load_plugins

            check_environment()
            load_plugins(args.plugin)  # and $ACCELBENCH_PLUGINS, for every command
            _restore_left_settings(args.db)
            handler: Handler = args.handler
            return handler(args, out, err)
        except AccelbenchError as exc:
            if args.debug:  # the traceback, then the same line and the same exit code
                traceback.print_exc()
            print(f"accelbench: error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt:
            print("accelbench: interrupted", file=sys.stderr)
            return 130
        except Terminated:
            print("accelbench: terminated (SIGTERM)", file=sys.stderr)
            return EXIT_SIGTERM
        except BrokenPipeError:
            # The reader went away (`accelbench results --json | head`): not an error of ours.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0
        finally:
            warnings.showwarning = previous_show
            if previous_term is not None:
                signal.signal(signal.SIGTERM, previous_term)


#: The environment variables read, each validated like an option before anything runs.
ENV_VARIABLES = ("ACCELBENCH_DB", "ACCELBENCH_PLUGINS", "ACCELBENCH_CACHE_DIR",
                 "ACCELBENCH_COUNT_TIMEOUT_S", "ACCELBENCH_POWERCAP_ROOT",
                 "ACCELBENCH_CPUFREQ_ROOT", "ACCELBENCH_WARM_DIR", "ACCELBENCH_WARM_IDLE_S")


def check_environment() -> None:
    """Refuse a bad ``ACCELBENCH_*`` variable in one line naming it (empty means unset),
    before any command reads it, rather than ignore it where it is read.

    Raises:
        ConfigError: a blank store, a cache directory that is a file, a count timeout that
            is no positive number, a sysfs root that is a file, a warm-server directory
            that is not a writable directory, a hub idle time that is no positive number.
    """
    from accelbench.errors import ConfigError
    from accelbench.planning.facts import cache_dir, count_timeout_s

    count_timeout_s()
    cache_dir()
    for var in ("ACCELBENCH_DB", "ACCELBENCH_PLUGINS"):
        value = os.environ.get(var)
        if value and not value.strip():
            raise ConfigError(f"{var} must not be blank (unset it for the default), got "
                              f"{value!r}")
    for var in ("ACCELBENCH_POWERCAP_ROOT", "ACCELBENCH_CPUFREQ_ROOT"):
        value = os.environ.get(var)
        if value and (not value.strip() or os.path.isfile(value)):
            raise ConfigError(f"{var} must name a directory (a sysfs root; a missing one "
                              f"has no zones), got {value!r}")
    from accelbench.execution.warmhub import idle_seconds

    idle_seconds(os.environ.get("ACCELBENCH_WARM_IDLE_S"))
    warm = os.environ.get("ACCELBENCH_WARM_DIR")
    if warm and not (os.path.isdir(warm) and os.access(warm, os.W_OK | os.X_OK)):
        raise ConfigError("ACCELBENCH_WARM_DIR must name a directory this user can write "
                          f"(where warm servers listen; unset it for none), got {warm!r}")


def _restore_left_settings(db: str | None) -> None:
    """Put back device settings a killed ``sweep`` on this host left changed (cheap when
    the store has none pending); a failure is a warning, never the command's end."""
    from accelbench.tuning.guard import restore_at_startup

    try:
        restore_at_startup(db)
    except AccelbenchError as exc:
        print(f"accelbench: warning: pending device-setting restores not done: "
              f"{_one_line(exc)}", file=sys.stderr)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
