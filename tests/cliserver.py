"""A warm start for the CLI in tests: one process that has imported accelbench forks a
fresh child per invocation.

Each ``accelbench ...`` a test runs is still its own process, with its own argv,
environment, working directory, stdin (``/dev/null``), stdout and stderr and exit code,
exactly as ``python -m accelbench.cli`` would give it; only the interpreter start and the
imports (about 0.7 s of CPU each, several hundred times per test run) are shared, done
once per pytest worker before any child is forked. Nothing in accelbench reads the
environment at import time (the child's ``os.environ`` is replaced before ``main`` runs),
and the server imports neither torch nor jax: a case's worker is a process of its own as
always. A test whose invocations import a framework package before they answer (``train``
plans its trainer before it checks its options: about 2.4 s of CPU each) may ask for a
server that has also imported it (``warm_cli(preload=...)``, a server of its own).

Protocol (a Unix socket, one connection per invocation): the client sends one JSON line
``{"argv", "env", "cwd", "out", "err"}`` (``out``/``err``: files the child writes its
stdout and stderr to), the server answers ``pid\\n`` once forked and ``status\\n`` (the
exit code, negative for a signal, as :mod:`subprocess` reports it) when the child ends.

    python tests/cliserver.py SOCKET [MODULE ...]

The client half (:func:`warm_cli`) is what tests/conftest.py ``cli_process`` uses.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def _child(req: dict) -> None:  # type: ignore[type-arg]
    """In the forked child: become the invocation, run the CLI, never return."""
    code = 1
    try:
        os.setpgid(0, 0)
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, target in ((null, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stdin
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115 - line-buffered, as ever
        sys.argv = ["accelbench", *req["argv"]]
        from accelbench.cli import main

        try:
            code = main(req["argv"])
        except SystemExit as exc:  # argparse and friends
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # a crash: the traceback, as the interpreter would print it
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


def serve(path: str, preload: tuple[str, ...] = ()) -> None:  # noqa: C901, PLR0915
    # What the invocations import anyway, imported once (no torch, no jax unless PRELOAD
    # names them): the parser with every subcommand, the API, the store, the workloads and
    # the planning.
    import importlib

    import accelbench.cli

    accelbench.cli.build_parser()
    for name in ("accelbench.api", "accelbench.store.db", "accelbench.workloads",
                 "accelbench.planning.cases", "accelbench.planning.estimate",
                 "accelbench.render", "accelbench.progress", "sqlalchemy.dialects.sqlite",
                 "sqlite3", "statistics", "platformdirs", "shlex", *preload):
        importlib.import_module(name)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the pytest worker ends us
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}
    buffers: dict[socket.socket, bytes] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    parent = os.getppid()
    while os.getppid() == parent:  # the pytest worker that started us is gone: so are we
        for key, _ in sel.select(timeout=0.02):
            sock = key.fileobj
            if sock is listener:
                conn, _addr = listener.accept()
                buffers[conn] = b""
                sel.register(conn, selectors.EVENT_READ)
                continue
            assert isinstance(sock, socket.socket)
            data = sock.recv(65536)
            if not data:  # the client went away before asking
                sel.unregister(sock)
                buffers.pop(sock, None)
                sock.close()
                continue
            buffers[sock] += data
            if not buffers[sock].endswith(b"\n"):
                continue
            req = json.loads(buffers.pop(sock))
            sel.unregister(sock)
            pid = os.fork()
            if pid == 0:  # the other invocations' connections are not this child's
                for other in (listener, sock, *waiting.values(), *buffers):
                    other.close()
                _child(req)
            sock.sendall(f"{pid}\n".encode())
            waiting[pid] = sock
        while waiting:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            sock = waiting.pop(pid, None)  # type: ignore[assignment]
            if sock is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                sock.sendall(f"{code}\n".encode())
            sock.close()


# -- the client (tests/conftest.py cli_process) ---------------------------------------


class _WarmCli:
    """The client of one tests/cliserver.py process (started on first use)."""

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        self._dir = tempfile.mkdtemp(prefix="accelbench-cli-")
        self.socket = os.path.join(self._dir, "s")
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), self.socket, *preload],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the CLI server did not start: {line!r}")
        self._count = 0
        self._lock = threading.Lock()

    def run(self, argv: list[str], *, env: dict[str, str], cwd: str,
            timeout: float) -> subprocess.CompletedProcess[str]:
        with self._lock:
            self._count += 1
            n = self._count
        out, err = (os.path.join(self._dir, f"{n}.{k}") for k in ("out", "err"))
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.socket)
        try:
            conn.sendall(json.dumps({"argv": argv, "env": env, "cwd": cwd, "out": out,
                                     "err": err}).encode() + b"\n")
            reader = conn.makefile("r")
            pid = int(reader.readline())
            deadline = time.monotonic() + timeout
            conn.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                line = reader.readline()
            except TimeoutError:
                line = ""
            if not line:  # timed out: kill it as subprocess.run would
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(["accelbench", *argv], timeout,
                                                _read(out), _read(err))
            code = int(line)
        finally:
            conn.close()
        result = subprocess.CompletedProcess(["accelbench", *argv], code, _read(out),
                                             _read(err))
        for path in (out, err):
            with contextlib.suppress(OSError):
                os.unlink(path)
        return result

    def close(self) -> None:
        self._proc.kill()
        self._proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


_WARM: dict[tuple[str, ...], _WarmCli] = {}
_WARM_LOCK = threading.Lock()


def warm_cli(preload: tuple[str, ...] = ()) -> _WarmCli:
    """This pytest worker's server, started on first use; one per PRELOAD (modules the
    server imports besides accelbench's own before it forks)."""
    with _WARM_LOCK:
        if preload not in _WARM:
            _WARM[preload] = _WarmCli(preload)
        return _WARM[preload]


def close_warm_cli() -> None:
    with _WARM_LOCK:
        while _WARM:
            _WARM.popitem()[1].close()


if __name__ == "__main__":
    serve(sys.argv[1], tuple(sys.argv[2:]))
