"""The parent's side of every isolated child process: the case worker (``run``, ``suite``) and
:mod:`accelbench.isolation.isolate` (``list``, ``ops``, ``peaks``, ``roofline --model``).

:func:`spawn` a ``python -m MODULE`` child in its own session with its stderr
in a temporary log, :func:`read_messages` of its private channel on a thread,
:func:`kill_group` at the timeout, :func:`tail` / :func:`last_line` / :func:`how_it_died`
for the one-line reason when it dies without answering. The child's side is
:mod:`accelbench.isolation.channel`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import IO, Any, Protocol

from accelbench.errors import AccelbenchError
from accelbench.isolation import forkserver

#: Lines the profiler and similar libraries print on their own: never the reason of a failure.
NOISE_PREFIXES = ("USDT:", "STAGE:", "[W ", "WARNING: Logging before InitGoogleLogging")

Messages = queue.Queue[dict[str, Any] | None]


class ChildProcess(Protocol):
    """What the parent uses of a child: ``subprocess.Popen`` or a
    :class:`~accelbench.isolation.forkserver.ForkedChild`."""

    pid: int
    returncode: int | None

    @property
    def stdin(self) -> IO[str] | None: ...

    @property
    def stdout(self) -> IO[str] | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


# --------------------------------------------------------------------------- parent side


def spawn(module: str, *, log_prefix: str, env: Mapping[str, str] | None = None,
          warm: str | None = None) -> tuple[ChildProcess, str]:
    """Start ``python -m module`` in a new session; returns the process and its stderr log
    path (the caller removes the log when done).

    ``warm``: a framework whose warm server (:mod:`accelbench.isolation.forkserver`)
    forks the child instead, running ``module``'s ``main()``, with the same isolation;
    a fresh ``python -m`` where no server can run (or ``env`` asks for other variables).
    """
    child_env = forkserver.child_env(env)
    with tempfile.NamedTemporaryFile(
        "w+", prefix=log_prefix, suffix=".log", delete=False
    ) as errlog:
        if warm is not None and not env:
            forked = forkserver.spawn(warm, f"{module}:main", [], errlog.fileno())
            if forked is not None:
                return forked, errlog.name
        proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog,
            text=True, env=child_env, start_new_session=True,
        )
    return proc, errlog.name


def send_request(proc: ChildProcess, text: str, *, close: bool = True) -> None:
    """Write the request on the child's stdin and close it (``close=False``: keep it open
    for a further line); a child already dead is fine: its exit status tells the rest."""
    assert proc.stdin is not None  # noqa: S101 - Popen contract
    with contextlib.suppress(BrokenPipeError, ValueError):
        proc.stdin.write(text)
        proc.stdin.flush()
        if close:
            proc.stdin.close()


def read_messages(stream: IO[str], q: Messages) -> None:
    """Thread body: every JSON object line of ``stream`` into ``q``, then None at its end."""
    for line in stream:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue  # not ours: the channel is private, so this is noise
        if isinstance(msg, dict):
            q.put(msg)
    q.put(None)


def kill_group(proc: ChildProcess) -> None:
    """SIGKILL the child and everything it started (its session's process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def reap(proc: ChildProcess, grace_s: float) -> None:
    """Wait up to ``grace_s`` for a child that is exiting, then kill its group."""
    if proc.poll() is not None:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.wait()


def remove_log(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def tail(path: str, chars: int = 4000) -> str:
    """The last ``chars`` characters of a log file ("" when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - chars))
            return f.read().strip()
    except OSError:
        return ""


def last_line(text: str) -> str:
    """The last meaningful line of a stderr tail (profiler chatter skipped)."""
    for ln in reversed(text.splitlines()):
        ln = ln.strip()
        if ln and not ln.startswith(NOISE_PREFIXES):
            return ln
    return ""


def how_it_died(code: int | None) -> str:
    """``killed by signal SIGSEGV`` or ``exited with code 3``."""
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def accelbench_error(module: str, name: str) -> type[AccelbenchError] | None:
    """The accelbench error class a child named as raised (its module and class name), to
    raise again in the parent; None for any other class."""
    cls: Any = None
    if module.startswith("accelbench."):
        with contextlib.suppress(Exception):
            cls = getattr(importlib.import_module(module), name)
    return cls if isinstance(cls, type) and issubclass(cls, AccelbenchError) else None
