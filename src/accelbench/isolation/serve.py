"""The warm server's side: import a framework once, then fork one isolated child per request.

``python -m accelbench.isolation.serve FRAMEWORK SOCKET_FD PARENT_PID`` is the server a
process starts for itself (:class:`~accelbench.isolation.forkserver.WarmServer`, the parent's
side); :func:`serve_on` is its loop, which a hub (:mod:`accelbench.isolation.warmhub`) runs
too in each server it forks. What a child of the server is, and why, is said in
:mod:`accelbench.isolation.forkserver`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from accelbench.backends import startup
from accelbench.isolation import channel

#: Largest message on a server's socket (a request carries the whole environment).
MAX_MSG = 1 << 20

#: What the children of a warm server run, imported before the first fork: the case's
#: worker and what it imports when a case runs. Named, not imported here: they are the
#: layer above, which starts children of this one by module name too.
WORKER_MODULES = ("accelbench.execution.worker", "accelbench.execution.measure",
                  "accelbench.execution.noise", "accelbench.stats",
                  "accelbench.meters.registry")


def preload(framework: str) -> list[str]:
    """Import what a child of ``framework``'s server imports: :data:`WORKER_MODULES`, then
    the framework (:func:`accelbench.backends.startup.preload`, which starts nothing).
    Returns the top-level framework modules now imported."""
    for name in WORKER_MODULES:
        importlib.import_module(name)
    return startup.preload(framework)


def _exit_code(status: int) -> int:
    return os.waitstatus_to_exitcode(status)


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        with contextlib.suppress(OSError):
            sock.send(json.dumps({"exit": pid, "code": _exit_code(status)}).encode())


def _run_child(request: dict[str, Any], fds: list[int], closing: Sequence[int],
               server_pid: int) -> None:
    """In the forked child: become an isolated process running the request; never returns."""
    code: Any = 1
    try:
        os.setsid()
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        for fd in closing:
            with contextlib.suppress(OSError):
                os.close(fd)
        for i, fd in enumerate(fds[:3]):
            os.dup2(fd, i)
            os.close(fd)
        channel.forked_from(server_pid)
        channel.die_with_parent(server_pid)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        module, _, name = request["target"].partition(":")
        sys.argv = [module, *request.get("argv", ())]
        sys.path[0] = request["cwd"]  # as `python -m` started there would have it
        code = getattr(importlib.import_module(module), name)()
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - the child's last word goes to its stderr log
        with contextlib.suppress(Exception):
            traceback.print_exc()
        code = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr, flush=True)
        code = 1
    os._exit(code)


def serve(framework: str, sock_fd: int, parent_pid: int) -> int:
    """Server side: preload ``framework``, then fork a child per request until the
    parent closes the socket (or dies: then this process is killed with it)."""
    channel.die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=sock_fd)
    return serve_on(sock, preload(framework))


def serve_on(sock: socket.socket, preloaded: list[str]) -> int:
    """Fork a child per request on ``sock`` (the framework already imported) until its
    other end closes: the parent's exit, or its death for any reason."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sock.send(json.dumps({"ready": os.getpid(), "preloaded": preloaded}).encode())
    me = os.getpid()
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 512)
            _reap(sock)
        if sock.fileno() not in readable:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MSG, 3)
        except OSError:
            data, fds = b"", []
        if not data:
            break
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            _run_child(request, fds, (sock.fileno(), wake_r, wake_w), me)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"id": request["id"], "pid": pid}).encode())
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return serve(args[0], int(args[1]), int(args[2]))


if __name__ == "__main__":
    sys.exit(main())
