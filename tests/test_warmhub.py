"""Warm servers kept between accelbench processes (``ACCELBENCH_WARM_DIR``,
``isolation/warmhub.py``): real CLI processes, a real hub, real forks and kills."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.isolation.warmhub import stop_hubs
from tests.conftest import FAULTY_PLUGIN, TESTS, cli_env, run_cli

SPY_PLUGIN = str(TESTS / "plugins" / "warm_spy.py")
TOYFW = str(TESTS / "plugins" / "toyfw.py")


@pytest.fixture
def warm_dir() -> Iterator[Path]:
    """A directory of hubs for this test only (short: a socket path has 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="abw-", dir="/tmp"))
    yield path
    stop_hubs(str(path))
    shutil.rmtree(path, ignore_errors=True)


def _procs() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, command line) of every process now."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().split(")")[-1].split()
        except (OSError, ValueError):
            continue
        if fields and fields[0] != "Z":
            out[int(entry.name)] = (int(fields[1]), cmd)
    return out


def _hubs(directory: Path) -> list[int]:
    """The hubs listening in ``directory`` (not the servers they forked, which have their
    command line)."""
    tag = str(directory).encode()
    procs = _procs()
    ours = {pid for pid, (_pp, cmd) in procs.items()
            if b"accelbench.isolation.warmhub" in cmd and tag in cmd}
    return [pid for pid in ours if procs[pid][0] not in ours]


def _below(root: int) -> list[int]:
    """Every live descendant of ``root``."""
    procs = _procs()
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        kids = [pid for pid, (pp, _c) in procs.items() if pp == parent]
        found += kids
        frontier += kids
    return found


def test_commands_share_a_hub_per_environment_and_each_case_is_a_fresh_child(
        tmp_path: Path, warm_dir: Path) -> None:
    spy = tmp_path / "spy.jsonl"
    dbs = [tmp_path / "a.db", tmp_path / "b.db"]
    for db in dbs:
        p = run_cli("--plugin", SPY_PLUGIN, "run", "warm_spy", "--size", "tiny",
                    "--iterations", "3", "--json", db=db, ACCELBENCH_WARM_DIR=str(warm_dir),
                    ACCELBENCH_TEST_WARM_SPY=str(spy))
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["status"] == "ok"
    seen = [json.loads(line) for line in spy.read_text().splitlines()]
    # The worker of each run (and the FLOP count's) was forked by a server the hub forked:
    # torch was imported before the plugin, once, in the hub.
    assert all(s["torch_before_plugin"] for s in seen)
    assert all("accelbench.isolation.warmhub torch" in s["parent"] for s in seen)
    assert all(s["sid"] == s["pid"] for s in seen)  # its own session, as ever
    # Each run's own store reached its worker, a fresh process each run.
    pids = {db: {s["pid"] for s in seen if s["db"] == str(db)} for db in dbs}
    assert all(pids.values()) and not pids[dbs[0]] & pids[dbs[1]], seen
    (sock,) = warm_dir.glob("torch-*.sock")
    assert len(_hubs(warm_dir)) == 1
    assert stat.S_IMODE(sock.stat().st_mode) & 0o077 == 0  # only this user connects
    # accelbench's own variables are read when a case runs: another value shares the hub,
    # and the case's child has it (this spy writes where its variable says).
    spy2 = tmp_path / "spy2.jsonl"
    p = run_cli("--plugin", SPY_PLUGIN, "run", "warm_spy", "--size", "tiny", "--iterations",
                "3", "--no-store", ACCELBENCH_WARM_DIR=str(warm_dir),
                ACCELBENCH_TEST_WARM_SPY=str(spy2), ACCELBENCH_POWERCAP_ROOT=str(tmp_path))
    assert p.returncode == 0, p.stderr
    (late,) = [json.loads(line) for line in spy2.read_text().splitlines()]
    assert "accelbench.isolation.warmhub torch" in late["parent"]
    assert len(_hubs(warm_dir)) == 1
    # Another environment (a variable a library could read at import): another hub.
    p = run_cli("--plugin", SPY_PLUGIN, "run", "warm_spy", "--size", "tiny", "--iterations",
                "3", "--no-store", ACCELBENCH_WARM_DIR=str(warm_dir),
                ACCELBENCH_TEST_WARM_SPY=str(spy), ABW_TEST_LIBRARY_SETTING="1")
    assert p.returncode == 0, p.stderr
    assert len(_hubs(warm_dir)) == 2 and len(list(warm_dir.glob("torch-*.sock"))) == 2


#: Run in a fresh interpreter: what a hub imports before it forks, with every read of the
#: environment recorded; prints the run-time-only names read (``ACCELBENCH_*``,
#: ``PYTEST_*``).
_RECORD_READS = """
import json, os, sys
read = set()
class Recording(type(os.environ)):
    def __getitem__(self, key):
        read.add(key)
        return super().__getitem__(key)
    def __contains__(self, key):
        read.add(key)
        return super().__contains__(key)
os.environ.__class__ = Recording
from accelbench.isolation import forkserver, warmhub
from accelbench.isolation.serve import preload
preload(sys.argv[1])
before = sorted(k for k in read if k.startswith(warmhub.RUN_TIME_ONLY_PREFIXES))
os.environ.get("ACCELBENCH_PROBE")  # the recorder itself works
print(json.dumps([before, "ACCELBENCH_PROBE" in read]))
"""


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_what_a_hub_preloads_reads_no_run_time_variable(framework: str,
                                                         tmp_path: Path) -> None:
    """Hubs share one key across accelbench's and pytest's variables (warmhub.import_env):
    that holds only while none of them is read at import, by accelbench or a framework."""
    env = cli_env(None, ACCELBENCH_POWERCAP_ROOT=str(tmp_path),
                  ACCELBENCH_CPUFREQ_ROOT=str(tmp_path), ACCELBENCH_PLUGINS=FAULTY_PLUGIN,
                  ACCELBENCH_CACHE_DIR=str(tmp_path / "cache"), ACCELBENCH_DB="x.db",
                  PYTEST_XDIST_WORKER="gw7", PYTEST_CURRENT_TEST="t.py::t (call)")
    p = subprocess.run([sys.executable, "-c", _RECORD_READS, framework], env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    read_at_import, recorder_works = json.loads(p.stdout.splitlines()[-1])
    assert recorder_works
    assert read_at_import == []


def test_a_command_killed_with_sigkill_leaves_no_case_running(warm_dir: Path,
                                                              tmp_path: Path) -> None:
    env = cli_env(tmp_path / "r.db", ACCELBENCH_WARM_DIR=str(warm_dir))
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench.cli", "--plugin", FAULTY_PLUGIN, "run",
         "test_hang", "--size", "tiny", "--iterations", "3", "--timeout", "300"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        running: list[int] = []
        while time.monotonic() < deadline and not running:
            time.sleep(0.1)
            hubs = _hubs(warm_dir)
            # hub -> the command's server -> the case's worker (hanging in its step)
            running = [pid for hub in hubs for pid in _below(hub)]
            if len(running) < 2:
                running = []
        assert running, "the hanging case never started under the hub"
        (hub,) = _hubs(warm_dir)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _below(hub) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _below(hub), "the killed command's server or case is still running"
        assert hub in _hubs(warm_dir)  # the hub itself stays, for the next command
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_code_edited_after_a_hub_started_gets_a_new_hub(tmp_path: Path,
                                                         warm_dir: Path) -> None:
    """accelbench edited (or upgraded) while a hub idles: the next command's hub imported
    the new code; no server forked from the old one runs it (warmhub.code_stamp)."""
    import accelbench

    pkg = tmp_path / "pkg"  # an installed copy of accelbench, found first on the path
    shutil.copytree(Path(accelbench.__file__).parent, pkg / "accelbench",
                    ignore=shutil.ignore_patterns("__pycache__"))

    def run() -> None:
        p = run_cli("--plugin", TOYFW, "run", "toy_regression", "--framework", "toyfw",
                    "--size", "tiny", "--iterations", "3", "--no-store",
                    ACCELBENCH_WARM_DIR=str(warm_dir), PYTHONPATH=str(pkg))
        assert p.returncode == 0, p.stderr

    run()
    run()  # the same code: the same hub
    (old,) = _hubs(warm_dir)
    # The copy's worker module, edited: it now notes each process that imports it.
    mark = tmp_path / "imported"
    worker = pkg / "accelbench" / "execution" / "worker.py"
    worker.write_text(worker.read_text() + f"\nopen({str(mark)!r}, 'a').write("
                      "str(__import__('os').getpid()) + '\\n')\n")
    run()
    hubs = _hubs(warm_dir)
    assert old in hubs and len(hubs) == 2, hubs
    (new,) = set(hubs) - {old}
    assert str(new) in mark.read_text().split()  # the new hub preloaded the edited module
    assert len(list(warm_dir.glob("toyfw-*.sock"))) == 2


def test_a_hub_without_clients_exits_after_its_idle_time(warm_dir: Path) -> None:
    p = run_cli("--plugin", SPY_PLUGIN, "run", "warm_spy", "--size", "tiny", "--iterations",
                "3", "--no-store", ACCELBENCH_WARM_DIR=str(warm_dir),
                ACCELBENCH_WARM_IDLE_S="1")
    assert p.returncode == 0, p.stderr
    deadline = time.monotonic() + 60
    while _hubs(warm_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _hubs(warm_dir), "the hub outlived its idle time"
    assert not list(warm_dir.glob("*.sock"))  # and took its socket file with it


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to listen as another user")
def test_a_socket_of_another_user_gets_no_request(warm_dir: Path) -> None:
    """A hub path someone else listens on (a shared directory): the command does not send
    its environment there; it starts a server of its own (connect gives None)."""
    from accelbench.isolation import warmhub

    env = {**os.environ, "ACCELBENCH_WARM_DIR": str(warm_dir)}
    path = warmhub.socket_path(str(warm_dir), "torch", env)
    os.chmod(warm_dir, 0o777)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the other user: listen, then wait to be killed (only os calls here)
        try:
            os.close(ready_r)
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.bind(path)
            s.listen(8)
            os.write(ready_w, b"1")
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"1"
        assert Path(path).stat().st_uid == 65534
        assert warmhub.connect("torch", env) is None
    finally:
        os.close(ready_r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
