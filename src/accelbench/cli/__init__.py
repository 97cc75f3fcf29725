"""The ``accelbench`` command: parse, build the call, print. Logic lives in the API.

One module per subcommand (:data:`COMMAND_MODULES`), each with ``register(subparsers)``
adding its parser with ``set_defaults(handler=fn)``, where ``fn(args, out, err) -> int``.
Every option of a subcommand is an ``option()`` field of a dataclass (the spec's, or the
subcommand's own) and its argument is generated from it (:func:`.args.add_options`);
only the global options below are added by hand. Modules must stay light at import time:
heavy imports happen inside the handlers.
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

from accelbench.cli.args import canonical_options, check_option_rules, nonempty
from accelbench.cli.signals import Terminated, on_sigterm
from accelbench.errors import AccelbenchError, AccelbenchWarning
from accelbench.names import text_problem
from accelbench.version import __version__

EXIT_BAD_INPUT = 2
EXIT_SIGTERM = 128 + 15

#: The subcommand modules, in the order ``--help`` lists them.
COMMAND_MODULES: tuple[str, ...] = tuple(f"accelbench.cli.{m}" for m in (
    "list", "devices", "run", "suite", "power", "results", "report", "compare", "recommend",
    "export", "reference", "ops", "peaks", "roofline", "doctor", "sweep", "store", "data",
    "train",
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


#: Options whose value is a path (or holds one, as a SQLite URL does): each component is
#: checked against the file system's limit on a name before anything runs.
PATH_OPTIONS = ("--db", "--plugin", "--out", "--mllog", "--slurm-folder", "--config")
#: The most bytes of one path component (NAME_MAX of Linux and macOS file systems).
NAME_MAX = 255


def path_problem(value: str) -> str | None:
    """What makes ``value`` unusable as a path on any file system, or None."""
    for part in value.split("/"):
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            return (f"has a path component of {size} bytes (at most {NAME_MAX}): "
                    f"{ascii(part[:40])[1:-1]}...")
    return None


def argv_problem(argv: Sequence[str]) -> str | None:
    """The first argument no command accepts, whatever the command, as a message naming
    it: text that is not UTF-8 or holds a control character (a newline, a terminal
    escape, a zero-width or bidirectional character; :func:`names.text_problem`), or a
    path option with a component too long for any file system."""
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        if eq:
            name = flag
        elif i and argv[i - 1].startswith("-") and "=" not in argv[i - 1]:
            name = argv[i - 1]
        else:
            name = "argument"
        problem = text_problem(value if eq else arg)
        if problem is None and name in PATH_OPTIONS:
            problem = path_problem(value)
        if problem:
            return f"{name} {problem}"
    return None


class OutputError(Exception):
    """Standard output cannot be written (a full device, a closed file)."""


class _GuardedStdout:
    """``sys.stdout`` while a command runs: a write or flush that fails (other than a
    reader gone away, which stays :class:`BrokenPipeError`) raises :class:`OutputError`,
    so that every way a command prints (rich, ``print``, ``csv``) ends in one line."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc.strerror or str(exc)) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc.strerror or str(exc)) from exc

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that what is still buffered (flushed at
    exit) cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file (an embedding caller)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    given = [*(sys.argv[1:] if argv is None else argv)]  # (`list` is a subcommand module here)
    problem = argv_problem(given)
    if problem:
        print(f"accelbench: error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    parser = build_parser()
    args = parser.parse_args(given)
    _merge_globals(args)
    real_stdout = sys.stdout
    sys.stdout = _GuardedStdout(real_stdout)
    try:
        return _run(args)
    except OutputError as exc:
        print(f"accelbench: error: cannot write to standard output: {exc}", file=sys.stderr)
        sys.stdout = real_stdout
        _silence_stdout()
        return EXIT_BAD_INPUT
    finally:
        sys.stdout = real_stdout


def _run(args: argparse.Namespace) -> int:
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
            from accelbench.cli.store_args import check_store_names

            check_environment()
            check_option_rules(args)  # options given where they would do nothing
            check_store_names(args.db)  # '-' and in-memory stores: nothing would be kept
            _load_plugins(args.plugin, debug=args.debug)  # and $ACCELBENCH_PLUGINS
            canonical_options(args)  # --framework's registry key (a plugin's too)
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
            _silence_stdout()
            return 0
        finally:
            warnings.showwarning = previous_show
            if previous_term is not None:
                signal.signal(signal.SIGTERM, previous_term)


#: The environment variables read, each validated like an option before anything runs.
ENV_VARIABLES = ("ACCELBENCH_DB", "ACCELBENCH_PLUGINS", "ACCELBENCH_CACHE_DIR",
                 "ACCELBENCH_COUNT_TIMEOUT_S", "ACCELBENCH_POWERCAP_ROOT",
                 "ACCELBENCH_CPUFREQ_ROOT", "ACCELBENCH_WARM_DIR", "ACCELBENCH_WARM_IDLE_S",
                 "ACCELBENCH_PLUGIN_TIMEOUT_S")
#: The variables among them that hold paths.
PATH_VARIABLES = ("ACCELBENCH_DB", "ACCELBENCH_PLUGINS", "ACCELBENCH_CACHE_DIR",
                  "ACCELBENCH_POWERCAP_ROOT", "ACCELBENCH_CPUFREQ_ROOT", "ACCELBENCH_WARM_DIR")


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

    for var in ENV_VARIABLES:
        value = os.environ.get(var)
        problem = value and (text_problem(value) or (
            path_problem(value) if var in PATH_VARIABLES else None))
        if problem:
            raise ConfigError(f"{var} {problem}")
    count_timeout_s()
    cache_dir()
    from accelbench.workloads.plugin_guard import timeout_s

    timeout_s()
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
    from accelbench.isolation.warmhub import idle_seconds

    idle_seconds(os.environ.get("ACCELBENCH_WARM_IDLE_S"))
    warm = os.environ.get("ACCELBENCH_WARM_DIR")
    if warm and not (os.path.isdir(warm) and os.access(warm, os.W_OK | os.X_OK)):
        raise ConfigError("ACCELBENCH_WARM_DIR must name a directory this user can write "
                          f"(where warm servers listen; unset it for none), got {warm!r}")


def _load_plugins(given: Sequence[str], *, debug: bool) -> None:
    """Import ``$ACCELBENCH_PLUGINS`` then ``--plugin``, for every command, each bounded in
    time (:mod:`accelbench.workloads.plugin_guard`): a plugin that hangs at import ends
    the command in one line and exit 2; one that exits at import is refused."""
    from accelbench.api import ENV_PLUGINS
    from accelbench.workloads.plugin_guard import timeout_s, watchdog
    from accelbench.workloads.registry import load_plugin

    limit = timeout_s()
    env = [p for p in os.environ.get(ENV_PLUGINS, "").split(os.pathsep) if p]
    for origin in [*env, *given]:
        with watchdog(origin, limit, debug=debug):
            load_plugin(origin)


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
