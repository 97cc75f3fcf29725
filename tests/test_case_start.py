"""How a case's worker starts: forked by a warm server that imported the framework before
any request, isolated all the same, with no probe process on ``run``'s path (issue 25)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from accelbench import api
from accelbench.errors import UnsupportedError
from accelbench.isolation import forkserver
from tests.conftest import FAULTY_PLUGIN, TESTS, cli_env, run_cli

SPY_PLUGIN = str(TESTS / "plugins" / "warm_spy.py")
# The per-process warm server, as by default (tests/test_warmhub.py: the hubs).
pytestmark = pytest.mark.usefixtures("no_warm_hubs")


def _spied(path: Path) -> list[dict[str, object]]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_run_worker_is_forked_from_a_server_that_had_imported_torch(tmp_path: Path) -> None:
    spy = tmp_path / "spy.jsonl"
    p = run_cli("--plugin", SPY_PLUGIN, "run", "warm_spy", "--size", "tiny", "--iterations",
                "3", "--no-store", "--json", ACCELBENCH_TEST_WARM_SPY=str(spy))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "ok"
    seen, *again = _spied(spy)  # again: the worker counting the model's FLOPs
    assert all(a["pid"] == seen["pid"] for a in again)
    # torch was in the worker before its plugin loaded: it came from the server's import.
    assert seen["torch_before_plugin"] is True
    # Its own session (a timeout kills its group), not the CLI's, nor the server's.
    assert seen["sid"] == seen["pid"]
    assert "accelbench.isolation.serve torch" in str(seen["parent"])


def test_a_crash_costs_its_case_only_and_the_server_forks_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = tmp_path / "spy.jsonl"
    monkeypatch.setenv("ACCELBENCH_TEST_WARM_SPY", str(spy))
    plugins = [FAULTY_PLUGIN, SPY_PLUGIN]
    first = api.run("warm_spy", size="tiny", iterations=3, store=False, plugins=plugins)
    server = forkserver.server("torch")
    assert server is not None and server.alive
    crashed = api.run("test_segfault", size="tiny", iterations=3, store=False, plugins=plugins)
    died = api.run("warm_dies", size="tiny", iterations=3, store=False, plugins=plugins)
    hung = api.run("test_hang", size="tiny", iterations=3, store=False, plugins=plugins,
                   timeout=3)
    after = api.run("warm_spy", size="tiny", iterations=3, store=False, plugins=plugins)
    assert first.status == "ok" and after.status == "ok"
    assert crashed.status == "error" and "SIGSEGV" in (crashed.error or "")
    # The child's stderr (its log file, passed to the fork) reaches the record.
    assert died.status == "error" and "exited with code 3" in (died.error or "")
    assert "warm_dies: last words" in (died.error or "")
    assert "last words" in (died.machine or {}).get("worker_stderr_tail", "")
    assert hung.status == "timeout"
    # The same server (still alive) forked the case after the crash and the kill.
    assert forkserver.server("torch") is server and server.alive
    spied = _spied(spy)
    assert {s["ppid"] for s in spied} == {server.proc.pid}
    assert "accelbench.isolation.serve" in _cmdline(server.proc.pid)
    assert spied[0]["pid"] != spied[-1]["pid"]  # one fresh process per case


def test_a_new_store_keeps_the_server_and_reaches_the_child_other_variables_replace_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = tmp_path / "spy.jsonl"
    monkeypatch.setenv("ACCELBENCH_TEST_WARM_SPY", str(spy))
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "a.db"))

    def spied_run() -> None:
        r = api.run("warm_spy", size="tiny", iterations=3, store=False, plugins=[SPY_PLUGIN])
        assert r.status == "ok", r.error

    spied_run()
    server = forkserver.server("torch")
    assert server is not None
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "b.db"))  # read at run time only
    spied_run()
    assert forkserver.server("torch") is server and server.alive
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # read at import: a server of its own
    spied_run()
    replaced = forkserver.server("torch")
    assert replaced is not None and replaced is not server
    first, second, third = {s["pid"]: s for s in _spied(spy)}.values()  # a line a worker
    assert first["db"] == str(tmp_path / "a.db") and second["db"] == str(tmp_path / "b.db")
    assert first["ppid"] == second["ppid"] == server.proc.pid
    assert third["ppid"] == replaced.proc.pid


def test_the_worker_refuses_a_missing_device_before_anything_is_opened(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with pytest.raises(UnsupportedError, match=r"^device cuda:0 is unavailable: torch sees"):
        api.run("lstm", size="tiny", device="cuda:0", iterations=3, store=str(db))
    with pytest.raises(UnsupportedError, match=r"^precision tf32 is not supported on cpu "):
        api.run("lstm", size="tiny", precision="tf32", iterations=3, store=str(db))
    assert not db.exists()


def test_run_starts_no_probe_process(tmp_path: Path) -> None:
    """Every process ``accelbench run`` starts, seen by an audit hook in the CLI process:
    the warm server only (its worker is the server's fork), no ``isolation.ask``."""
    script = textwrap.dedent("""
        import json, sys
        started = []
        def hook(event, args):
            if event == "subprocess.Popen":
                started.append(" ".join(map(str, args[1])))
        sys.addaudithook(hook)
        from accelbench.cli import main
        code = main(["run", "lstm", "--size", "tiny", "--iterations", "3", "--no-store",
                     "--quiet"])
        print(json.dumps({"code": code, "started": started}), file=sys.stderr)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=cli_env(tmp_path / "r.db"), timeout=300, check=False)
    seen = json.loads(p.stderr.strip().splitlines()[-1])
    assert seen["code"] == 0, p.stderr
    assert not any("isolation.ask" in s for s in seen["started"]), seen
    assert [s for s in seen["started"] if "accelbench" in s] == [
        s for s in seen["started"] if "accelbench.isolation.serve torch" in s], seen


def test_min_time_keeps_measuring_past_the_ci_target(tmp_path: Path) -> None:
    """A CI target of 90% is met after the first check; --min-time keeps the loop going."""
    quick = api.run("test_mlp", size="tiny", plugins=[FAULTY_PLUGIN], store=False,
                    target_ci=0.9, max_time=30, idle_s=0)
    held = api.run("test_mlp", size="tiny", plugins=[FAULTY_PLUGIN], store=False,
                   target_ci=0.9, min_time=0.6, max_time=30, idle_s=0,
                   max_iterations=1_000_000)  # a quiet machine steps it 1,000 times in 0.6 s
    assert quick.stats is not None and held.stats is not None
    assert quick.stats.stop_reason == held.stats.stop_reason == "target_ci"
    assert quick.stats.n == 10
    # Step times sum to less than the loop's elapsed time; half the minimum is a margin
    # for what runs between the steps on a busy machine.
    assert sum(held.iteration_times_s) >= 0.3
    assert held.stats.n > quick.stats.n


def test_quick_suite_measures_about_two_seconds_a_case() -> None:
    policy = api.get_suite("quick").policy
    assert policy.min_time_s == 2.0 and policy.max_time_s >= policy.min_time_s
    assert policy.max_iterations >= 100_000  # sub-millisecond steps still reach 2 s


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux fork server")
def test_jax_server_imports_jax_without_starting_a_backend() -> None:
    pytest.importorskip("jax")
    code = textwrap.dedent("""
        from accelbench.backends.startup import preload
        loaded = preload("jax")
        from jax._src import xla_bridge
        assert "jax" in loaded and not xla_bridge._backends, xla_bridge._backends
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ}, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
