"""Warm servers kept between accelbench processes: opt-in, with ``ACCELBENCH_WARM_DIR=DIR``.

Each accelbench process starts its own warm server (:mod:`accelbench.isolation.forkserver`)
and pays for its framework's import: torch and TorchDynamo, which the first optimizer
imports, cost about 3.5 s of CPU here, on every command that runs a case, a case refused
by its worker included. A script or a test suite that runs many accelbench commands pays
that each time. With ``ACCELBENCH_WARM_DIR`` set, a *hub* per framework and import-time
environment (``python -m accelbench.isolation.warmhub``) imports the framework once and
listens on a Unix socket in DIR; each connecting process gets a server of its own, forked
from the hub, which serves it exactly as a per-process server would: one fresh isolated
child per case, forked from a process that has imported the framework.

What stays as it is:

* A hub's key is the interpreter, the framework and the whole environment except the
  variables read only when a case runs (accelbench's own ``ACCELBENCH_*``, pytest's
  ``PYTEST_*``): a process whose environment differs in anything a library may read at import
  gets another hub. Each case's child takes its client's whole environment.
* The forked server ends when its client's socket closes, for any reason: the client's
  exit, its crash or a SIGKILL. The server's children die with it (``PR_SET_PDEATHSIG``),
  so a client killed with SIGKILL leaves no case running, as without a hub.
* A hub that cannot start or answer costs nothing but time: the client starts a server
  of its own, as without ``ACCELBENCH_WARM_DIR``.
* Only the same user: the socket is created with mode 0600, and each end checks the
  other's uid (``SO_PEERCRED``) before a request, which carries the whole environment
  (a store URL's password too) and what to run, is sent or served.

A hub exits after :data:`IDLE_S` seconds without a new client (``ACCELBENCH_WARM_IDLE_S``,
as the client that started it had it, sets another time), or once its socket file is gone
or replaced; it never holds a terminal (its own session, stdio on /dev/null).
A hub's key holds the code it imported too (:func:`code_stamp`: accelbench's source files
and the installed frameworks): after an edit or an upgrade the next command gets a new hub,
never the old code, and the old hub exits when idle. The test suite uses one DIR per run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping

from accelbench.isolation.serve import preload, serve_on

#: The environment variable that turns the hubs on: the directory of their sockets.
ENV_WARM_DIR = "ACCELBENCH_WARM_DIR"
#: Seconds a hub waits for a new client before it exits, unless ``ACCELBENCH_WARM_IDLE_S``
#: says otherwise (a hub holds its framework's memory: ~300 MB for torch).
IDLE_S = 600.0
ENV_WARM_IDLE_S = "ACCELBENCH_WARM_IDLE_S"
#: How often an idle hub checks that its socket file is still its own.
_CHECK_S = 20.0
#: Seconds a client waits for a hub it started (or another client started) to listen.
CONNECT_TIMEOUT_S = 30.0
#: Unix socket paths are at most 107 bytes on Linux.
_MAX_PATH = 107


#: Variables read when a case runs, never when a module is imported: the child of a case
#: takes its client's whole environment at its fork, so they pick no other hub (nor
#: replace a per-process server). accelbench's own (the store, the sysfs roots, the
#: caches, the hubs' settings, a plugin's) are read in functions only
#: (``tests/test_warmhub.py`` checks that what a server preloads reads none at import);
#: pytest's (its per-test marker, its xdist worker's name) describe the runner, and no
#: framework reads them at import (the same test checks).
RUN_TIME_ONLY_PREFIXES = ("ACCELBENCH_", "PYTEST_")


def import_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` less the variables only read at run time: what a library could read when a
    server imports it, the environment a hub runs in and part of its key."""
    return {k: v for k, v in env.items() if not k.startswith(RUN_TIME_ONLY_PREFIXES)}


#: Packages besides accelbench and the frameworks' (each backend's ``stack_packages``) that
#: a hub may hold imported: installing another version rewrites their ``__init__.py``.
HELD_PACKAGES = ("numpy",)


def code_stamp() -> list[tuple[str, int, int]]:
    """Path, size and modification time of each of accelbench's source files and of the
    ``__init__.py`` of each installed framework package (every registered backend's
    ``stack_packages``) and :data:`HELD_PACKAGES`, as this process would import them:
    what a hub holds imported and could hold stale after an edit or an upgrade. About
    210 ``stat`` calls (1.7 ms here, once per command) and no framework import."""
    import importlib.util

    from accelbench.frameworks import stack_packages

    files = []
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # accelbench/
    for root, dirs, names in os.walk(package):
        dirs.sort()
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
    for name in (*stack_packages(), *HELD_PACKAGES):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            files.append(spec.origin)
    stamp = []
    for path in files:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            stamp.append((path, st.st_size, st.st_mtime_ns))
    return stamp


def socket_path(directory: str, framework: str, env: Mapping[str, str]) -> str:
    """The hub socket of ``framework`` for this interpreter, ``env``'s import-time part
    (:func:`import_env`) and the code a hub would import (:func:`code_stamp`)."""
    key = json.dumps([sys.executable, framework, sorted(import_env(env).items()),
                      code_stamp()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return os.path.join(directory, f"{framework}-{digest}.sock")


def connect(framework: str, env: Mapping[str, str]) -> socket.socket | None:
    """A connection to ``framework``'s hub for ``env`` (started now when none listens), or
    None when hubs are off, the directory cannot hold one, or none answers in time. A hub
    started now keeps ``env``'s idle time (:data:`ENV_WARM_IDLE_S`) for all its clients."""
    directory = env.get(ENV_WARM_DIR, "")
    if not directory or not os.path.isdir(directory):
        return None
    path = socket_path(os.path.abspath(directory), framework, env)
    if len(os.fsencode(path)) > _MAX_PATH:
        return None
    started: subprocess.Popen[bytes] | None = None
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(path)
            if same_user(sock):
                return sock
            sock.close()  # another user's socket: never send it this environment
            return None
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
        except OSError:
            sock.close()
            return None
        if started is None:
            hub_env = import_env(env)  # and the idle time: a hub reads it, no server does
            if ENV_WARM_IDLE_S in env:
                hub_env[ENV_WARM_IDLE_S] = env[ENV_WARM_IDLE_S]
            try:
                started = subprocess.Popen(
                    [sys.executable, "-m", "accelbench.isolation.warmhub", framework, path],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True, env=hub_env)
            except OSError:
                return None
        elif started.poll() not in (None, 0):  # it failed (0: another hub holds the path)
            return None
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def same_user(sock: socket.socket) -> bool:
    """Whether the process at the other end of a connected Unix socket runs as this user
    (a request carries the whole environment, secrets included, and what to run)."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                struct.calcsize("3i"))
    except OSError:
        return False
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _bind(path: str) -> socket.socket | None:
    """The hub's listening socket, or None when a live hub already holds ``path``. Only
    this user may connect to it (mode 0600)."""
    umask = os.umask(0o077)  # the file bind creates; the servers' children keep the user's
    try:
        return _bind_listening(path)
    finally:
        os.umask(umask)


def _bind_listening(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.bind(path)
    except OSError:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            probe.connect(path)
            live = True
        except OSError:
            live = False
        finally:
            probe.close()
        if live:
            sock.close()
            return None
        with contextlib.suppress(OSError):
            os.unlink(path)  # a dead hub's file
        try:
            sock.bind(path)
        except OSError:
            sock.close()
            return None
    sock.listen(64)
    return sock


def hub(framework: str, path: str) -> int:
    """The hub: listen on ``path``, preload ``framework``, then fork a server per client."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = _bind(path)
    if listener is None:
        return 0
    inode = os.stat(path).st_ino
    try:
        preloaded = preload(framework)
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the servers
        idle_s = idle_seconds(os.environ.get(ENV_WARM_IDLE_S))
        listener.settimeout(min(_CHECK_S, idle_s))
        last = time.monotonic()
        while time.monotonic() - last < idle_s:
            try:
                conn, _addr = listener.accept()
            except TimeoutError:
                if not _still_ours(path, inode):
                    break
                continue
            if not same_user(conn):
                conn.close()
                continue
            last = time.monotonic()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    listener.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    conn.settimeout(None)
                    code = serve_on(conn, preloaded)
                finally:
                    os._exit(code)
            conn.close()
    finally:
        if _still_ours(path, inode):
            with contextlib.suppress(OSError):
                os.unlink(path)
    return 0


def idle_seconds(value: str | None) -> float:
    """``ACCELBENCH_WARM_IDLE_S`` as seconds (:data:`IDLE_S` when unset or empty).

    Raises:
        ConfigError: not a number of seconds above 0 (at most a day).
    """
    from accelbench.errors import ConfigError

    if not value:
        return IDLE_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= 86_400:  # NaN too
        raise ConfigError(f"{ENV_WARM_IDLE_S} must be a number of seconds above 0 (at most "
                          f"86400), got {value!r}")
    return seconds


def stop_hubs(directory: str) -> None:
    """SIGTERM the hubs listening in ``directory`` and the servers they forked (Linux: by
    their command line). A server whose client is still connected ends with the hub's
    signal too; use it once the commands are done (a test run's end, an upgrade)."""
    tag = os.fsencode(os.path.abspath(directory))
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"accelbench.isolation.warmhub" in cmd and tag in cmd:
            with contextlib.suppress(OSError):
                os.kill(int(name), signal.SIGTERM)


def _still_ours(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(hub(sys.argv[1], sys.argv[2]))
