"""What a suite says about the cases it has left and those it flagged: `suite status`
after a kill lists the planned cases no process started, `suite resume` of a finished
suite says that nothing was left to run (then prints the table), and the flagged cases'
summary is wrapped to the terminal, one case a line."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from accelbench.cli.suite_left import FLAGGED_LISTED, noise_summary
from accelbench.result import Result
from accelbench.spec import RunSpec
from tests.conftest import FAULTY_PLUGIN, cli_env, run_cli


def _stalling_plugin(tmp_path: Path) -> str:
    """The test workloads and ``test_stall``, which never finishes a step and is planned
    after ``test_mlp`` (cases run in name order): a kill while it runs lands mid-suite,
    always."""
    plugin = tmp_path / "stall.py"
    plugin.write_text(Path(FAULTY_PLUGIN).read_text() + '''

@register_workload
class Stalls(_TinyMLP):
    name = "test_stall"

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        time.sleep(3600)
        raise AssertionError("unreachable")
''')
    return str(plugin)


def _stored(db: Path, sid: str) -> int:
    if not db.exists():
        return 0
    con = sqlite3.connect(db, timeout=30)
    try:
        return int(con.execute("SELECT count(*) FROM results WHERE suite_id = ?",
                               (sid,)).fetchone()[0])
    except sqlite3.OperationalError:  # schema not created yet
        return 0
    finally:
        con.close()


def test_status_after_a_kill_lists_the_planned_cases_left_to_run(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    plugin = _stalling_plugin(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench.cli", "--plugin", plugin, "-q", "suite", "quick",
         "--workload", "test_mlp", "--workload", "test_stall", "--iterations", "3",
         "--no-energy", "--suite-id", "cut"],
        env=cli_env(db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _stored(db, "cut") < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert _stored(db, "cut") == 2  # test_mlp's two; test_stall fp32 was running

    shown = run_cli("--plugin", plugin, "suite", "status", "cut", db=db, COLUMNS="200")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    # test_stall fp32 was running when the suite was killed, amp_bf16 never started: both
    # are left to run.
    assert any("test_stall tiny bs8 amp_bf16 torch" in x and "to run" in x
               for x in lines), shown.stdout
    assert sum("test_mlp tiny" in x and "done" in x for x in lines) == 2, shown.stdout
    assert lines[-1] == "0 queued, 0 running, 2 done, 0 failed, 2 to run", shown.stdout

    as_json = run_cli("--plugin", plugin, "suite", "status", "cut", "--json", db=db)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    states = {c["label"]: c["state"] for c in data["cases"]}
    assert len(states) == 4  # every planned case, each once
    assert states["test_stall tiny bs8 amp_bf16 torch"] == "to run"
    assert data["counts"] == {"queued": 0, "running": 0, "done": 2, "failed": 0, "to run": 2}

    # Without the plugin the plan cannot be listed: said, and the stored cases still shown.
    bare = run_cli("suite", "status", "cut", db=db, COLUMNS="200")
    assert bare.returncode == 0, bare.stderr
    assert "planned cases cannot be listed here" in bare.stderr
    assert "--plugin options it was started with" in bare.stderr
    assert "to run" not in bare.stdout


def test_status_of_a_suite_killed_before_any_case_ended_lists_its_plan(
        tmp_path: Path) -> None:
    """Killed while its first case ran: no result, no live claim, but a stored plan; the
    status listed nothing ("no cases ... in this store") and now lists the plan."""
    db = tmp_path / "r.db"
    plugin = _stalling_plugin(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench.cli", "--plugin", plugin, "-q", "suite", "quick",
         "--workload", "test_stall", "--no-energy", "--suite-id", "early"],
        env=cli_env(db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and not _claimed(db):
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert _claimed(db) and _stored(db, "early") == 0
    shown = run_cli("--plugin", plugin, "suite", "status", "early", "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [c["label"] for c in data["cases"]] == ["test_stall tiny bs8 fp32 torch",
                                                   "test_stall tiny bs8 amp_bf16 torch"]
    assert data["counts"]["to run"] == 2


def _claimed(db: Path) -> bool:
    """Whether a suite process has claimed a case (its plan is stored by then)."""
    if not db.exists():
        return False
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("SELECT count(*) FROM claims").fetchone()[0] > 0
    except sqlite3.OperationalError:  # schema not created yet
        return False
    finally:
        con.close()


def test_resume_of_a_finished_suite_says_nothing_was_left(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    args = ["--plugin", FAULTY_PLUGIN, "suite", "quick", "--workload", "test_mlp",
            "--iterations", "3", "--no-energy", "--suite-id", "whole"]
    first = run_cli(*args, db=db)
    assert first.returncode == 0, first.stderr
    assert "nothing left to run" not in first.stderr
    again = run_cli("--plugin", FAULTY_PLUGIN, "suite", "resume", "whole", db=db,
                    COLUMNS="200")
    assert again.returncode == 0, again.stderr
    assert "nothing left to run: all 2 cases of suite whole are stored" in again.stderr
    assert "suite whole" in again.stdout and again.stdout.count("test_mlp") == 2
    assert _stored(db, "whole") == 2


def _flagged(rid: str, kinds: list[str], notes: bool = False) -> Result:
    noise: dict[str, Any] = {"flagged": bool(kinds), "kinds": kinds,
                             "by_kind": {k: ["why"] for k in kinds},
                             "reasons": ["why"] if kinds else []}
    if notes:
        noise["measure_notes"] = ["past --max-time"]
    return Result(id=rid, spec=RunSpec(workload="lstm", size="tiny", batch_size=4),
                  status="ok", sample_unit="sequence", samples_per_step=4, noise=noise)


def test_the_flagged_summary_is_wrapped_one_case_a_line() -> None:
    """The summary was one line of 480 characters: now a warning wrapped to the width,
    each flagged case on its own line, and the command that shows one in full on its own
    line, never cut."""
    results = [_flagged("aaaa11112222", ["contention"], notes=True),
               _flagged("bbbb11112222", ["contention", "unstable"]),
               _flagged("cccc11112222", ["unstable"]), _flagged("dddd11112222", [])]
    details = "accelbench --db /a/very/long/path/to/the/store/results.db results show aaaa11112222"
    lines = noise_summary(results, details, width=80)
    assert lines[0].startswith("accelbench: warning: 3 of 4 case(s) flagged: 2 measured on")
    text = " ".join(x.strip() for x in lines)
    assert "1 with step times that vary" not in text  # 2 vary: b and c
    assert "2 with step times that vary" in text
    assert "rerun them when the machine is quiet" in text
    assert "1 case(s) have notes" in text
    cases = [x for x in lines if x.startswith("  ") and "lstm tiny bs=4" in x]
    assert cases == ["  aaaa1111  lstm tiny bs=4 fp32 cpu: busy machine",
                     "  bbbb1111  lstm tiny bs=4 fp32 cpu: busy machine, step times vary",
                     "  cccc1111  lstm tiny bs=4 fp32 cpu: step times vary"]
    assert lines[-1] == f"    {details}"  # whole, on its own line, however wide
    assert all(len(x) <= 80 for x in lines[:-1])
    narrow = noise_summary(results, details, width=60)
    assert all(len(x) <= 60 for x in narrow[:-1]) and narrow[-1] == f"    {details}"
    at = narrow.index("  bbbb1111  lstm tiny bs=4 fp32 cpu: busy machine, step")
    assert narrow[at + 1] == "      times vary"  # a case's second line hangs under it
    note = noise_summary([_flagged("n1", [], notes=True)], "x")
    assert note[0].startswith("accelbench: note: 1 case(s) have notes")
    assert note[-1].endswith("see them with --verbose")
    assert noise_summary([_flagged("q1", [])], "x") == []
    many = noise_summary([_flagged(f"{i:012d}", ["unstable"]) for i in range(25)], "x")
    assert sum("lstm tiny" in x for x in many) == FLAGGED_LISTED
    assert f"  ... and {25 - FLAGGED_LISTED} more" in many
