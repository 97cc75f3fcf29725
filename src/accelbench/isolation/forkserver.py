"""A warm start for isolated children: a server that has imported the framework forks one
fresh child per case.

Starting ``python -m accelbench.execution.worker`` costs the interpreter's start and the
framework's import (torch: about 1.4 s on a small CPU) for every case. Here one server
process per framework (``python -m accelbench.isolation.serve FRAMEWORK``, the server's
side: :mod:`accelbench.isolation.serve`) imports the framework and accelbench's worker
modules once, without starting anything (no thread pool, no device, no JAX backend), and
then forks a child per request. Each child
is as isolated as a fresh worker:

* it calls ``setsid`` at once (its own session and process group: the parent's timeout
  kills the group, grandchildren too; the terminal's Ctrl-C never reaches it);
* it dies with the server (``PR_SET_PDEATHSIG``), which dies with the parent, so a
  parent killed with SIGKILL leaves nothing behind;
* its stdin, stdout and stderr are the parent's pipes and log file (passed over a Unix
  socket), and it takes the parent's working directory and environment;
* a crash, an OOM kill or a hang costs that child only: the server reports its exit
  status (``-SIGSEGV`` ...) and goes on serving.

:func:`spawn` returns a :class:`ForkedChild`, which has the part of ``subprocess.Popen``
that :mod:`accelbench.isolation.child` and :mod:`accelbench.execution.process` use, or
None when no server can start here (the caller then starts a fresh ``python -m``).
A server is kept per framework for the life of the process and replaced when the
parent's environment changes (what a library reads at import must be what the child
would have read). With ``ACCELBENCH_WARM_DIR`` set, the server is forked for this process
by a hub that outlives it (:mod:`accelbench.isolation.warmhub`), so the framework's import
is paid once for many accelbench processes.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO

from accelbench.isolation import warmhub
from accelbench.isolation.serve import MAX_MSG

#: Seconds a server may take to import its framework before the caller gives up on it.
READY_TIMEOUT_S = 300.0


class ForkedChild:
    """The parent's handle of a child forked by a :class:`WarmServer` (Popen's surface:
    ``pid``, ``stdin``, ``stdout``, ``returncode``, ``poll``, ``wait``, ``kill``)."""

    def __init__(self, pid: int, stdin: IO[str], stdout: IO[str]) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        self._done = threading.Event()

    def exited(self, code: int) -> None:
        self.returncode = code
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0.0)
        assert self.returncode is not None  # noqa: S101 - set with the event
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)


class WarmServer:
    """One server process for ``framework`` (parent side)."""

    def __init__(self, framework: str, env: Mapping[str, str],
                 hub: socket.socket | None = None) -> None:
        self.framework = framework
        self.env = dict(env)
        self.pid: int | None = None
        """The server's pid, once it is ready."""
        self._lock = threading.Lock()
        self._next_id = 0
        self._waiting: dict[int, tuple[threading.Event, list[int]]] = {}
        self._children: dict[int, ForkedChild] = {}
        # Exits reported before the forking thread registered the child (a child that
        # dies at once): kept here until it does.
        self._early: dict[int, int] = {}
        self._ready = threading.Event()
        self.alive = True
        self.preloaded: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        """The server process this process started; None for one forked by a hub
        (:mod:`accelbench.isolation.warmhub`), which ends when ``hub`` closes."""
        if hub is not None:
            self._sock = hub
        else:
            self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "accelbench.isolation.serve", framework,
                 str(theirs.fileno()), str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=self.env, pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
            theirs.close()
        threading.Thread(target=self._read, daemon=True).start()

    # ------------------------------------------------------------------ the reader thread

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(MAX_MSG)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            if "ready" in msg:
                self.pid = int(msg["ready"])
                self.preloaded = list(msg.get("preloaded") or ())
                self._ready.set()
            elif "pid" in msg:
                event, out = self._waiting[msg["id"]]
                out.append(int(msg["pid"]))
                event.set()
            elif "exit" in msg:
                with self._lock:
                    proc = self._children.pop(int(msg["exit"]), None)
                    if proc is None:
                        self._early[int(msg["exit"])] = int(msg["code"])
                if proc is not None:
                    proc.exited(int(msg["code"]))
        # The server is gone: its children died with it (PR_SET_PDEATHSIG).
        self.alive = False
        self._ready.set()
        with self._lock:
            orphans, self._children = list(self._children.values()), {}
            waiting = list(self._waiting.values())
        for proc in orphans:
            proc.exited(-signal.SIGKILL)
        for event, _out in waiting:
            event.set()

    # ------------------------------------------------------------------ requests

    def ready(self, timeout_s: float = READY_TIMEOUT_S) -> bool:
        return self._ready.wait(timeout_s) and self.alive

    def fork(self, target: str, argv: Sequence[str], stderr_fd: int) -> ForkedChild | None:
        """A child running ``target`` (``module:function``) with ``sys.argv[1:]`` =
        ``argv``, or None when the server is gone."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        event: threading.Event = threading.Event()
        got: list[int] = []
        with self._lock:
            self._next_id += 1
            rid = self._next_id
            self._waiting[rid] = (event, got)
        request = {"id": rid, "target": target, "argv": list(argv), "cwd": os.getcwd(),
                   "env": child_env()}  # this moment's (it differs only in run-time keys)
        try:
            socket.send_fds(self._sock, [json.dumps(request).encode()],
                            [in_r, out_w, stderr_fd])
            sent = True
        except OSError:
            sent = False
        finally:
            os.close(in_r)
            os.close(out_w)
        if sent:
            event.wait(60.0)
        with self._lock:
            self._waiting.pop(rid, None)
        if not got:
            os.close(in_w)
            os.close(out_r)
            return None
        proc = ForkedChild(got[0], os.fdopen(in_w, "w", encoding="utf-8"),
                           os.fdopen(out_r, "r", encoding="utf-8"))
        with self._lock:
            early = self._early.pop(proc.pid, None)
            if early is None and self.alive:
                self._children[proc.pid] = proc
        if early is not None:
            proc.exited(early)
        elif not self.alive:
            proc.exited(-signal.SIGKILL)
        return proc

    def close(self) -> None:
        """Stop the server: it exits when its socket closes (killed if still importing)."""
        self.alive = False
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=2.0 if self._ready.is_set() else 0.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_SERVERS: dict[str, WarmServer] = {}
_EnvKey = tuple[str, tuple[tuple[str, str], ...]]
_BROKEN: set[_EnvKey] = set()
_SERVERS_LOCK = threading.Lock()


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an isolated child: this process's, unbuffered, plus ``extra``."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env


def _server_key(env: Mapping[str, str]) -> dict[str, str]:
    """What a library could read when the server imports it
    (:func:`accelbench.isolation.warmhub.import_env`), and where the server comes from (a
    hub directory or none): a change in anything else does not replace the server."""
    return {**warmhub.import_env(env), warmhub.ENV_WARM_DIR: env.get(warmhub.ENV_WARM_DIR, "")}


def server(framework: str, *, wait: bool = True) -> WarmServer | None:
    """The warm server of ``framework`` (started now if needed; a running one whose
    environment differs from this process's is replaced), or None where none can run."""
    if not hasattr(socket, "send_fds") or not sys.platform.startswith("linux"):
        return None
    env = child_env()
    with _SERVERS_LOCK:
        srv = _SERVERS.get(framework)
        if srv is not None and (not srv.alive or _server_key(srv.env) != _server_key(env)):
            srv.close()
            srv = None
        if srv is None:
            if (framework, tuple(sorted(env.items()))) in _BROKEN:
                return None
            srv = _SERVERS[framework] = WarmServer(framework, env, _hub(framework, env))
    if wait and not srv.ready():
        with _SERVERS_LOCK:
            _BROKEN.add((framework, tuple(sorted(env.items()))))
            if _SERVERS.get(framework) is srv:
                del _SERVERS[framework]
        srv.close()
        return None
    return srv


def _hub(framework: str, env: Mapping[str, str]) -> socket.socket | None:
    """A connection to ``framework``'s hub where ``ACCELBENCH_WARM_DIR`` turns hubs on
    (:mod:`accelbench.isolation.warmhub`), else None (this process starts its own)."""
    if not env.get(warmhub.ENV_WARM_DIR):
        return None
    return warmhub.connect(framework, env)


def spawn(framework: str, target: str, argv: Sequence[str], stderr_fd: int
          ) -> ForkedChild | None:
    """A child forked by ``framework``'s warm server, or None (no server here)."""
    try:
        srv = server(framework)
    except OSError:
        return None
    return srv.fork(target, argv, stderr_fd) if srv is not None else None


@atexit.register
def shutdown() -> None:
    """Stop every server this process started."""
    with _SERVERS_LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for srv in servers:
        srv.close()
