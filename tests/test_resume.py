"""SIGKILL mid-suite, then resume: nothing finished is lost, nothing is run twice."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from accelbench.store import open_store
from tests.conftest import FAULTY_PLUGIN, cli_env, run_cli

SUITE_ARGS = [
    "--plugin", FAULTY_PLUGIN, "-q", "suite", "quick",
    "--workload", "test_mlp", "--workload", "test_error", "--workload", "lstm",
    "--max-time", "0.5", "--suite-id", "killme",
]
EXPECTED_CASES = 6  # 3 workloads x (fp32, amp_bf16)


def _rows(db: Path) -> list[tuple[str, str, str]]:
    if not db.exists():
        return []
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(
            "SELECT id, case_key, status FROM results WHERE suite_id = 'killme'"
        ).fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return []
    finally:
        con.close()


def test_sigkill_then_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench.cli", *SUITE_ARGS],
        env=cli_env(db), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(_rows(db)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _rows(db)
    assert 2 <= len(before) < EXPECTED_CASES, "the kill must land mid-suite"

    done = run_cli(*SUITE_ARGS, db=db)
    assert done.returncode == 0, done.stderr
    after = _rows(db)
    keys = [k for _id, k, _s in after]
    assert len(after) == EXPECTED_CASES
    assert len(set(keys)) == EXPECTED_CASES  # no case twice
    assert set(before) <= set(after)  # finished cases kept as they were

    # A third run has nothing left to do, and says so (-q or not: it is the answer).
    again = run_cli(*SUITE_ARGS, db=db)
    assert again.returncode == 0
    assert len(_rows(db)) == EXPECTED_CASES
    assert (f"nothing left to run: all {EXPECTED_CASES} cases of suite killme are stored"
            in again.stderr), again.stderr


MARKER_PLUGIN = str(Path(__file__).resolve().parent / "plugins" / "marker_mlp.py")


def test_two_concurrent_suites_with_one_id_store_each_case_once(tmp_path: Path) -> None:
    """Two processes started on one suite id split its cases through the store's claims:
    every case is stored exactly once, none twice, and both processes end cleanly."""
    db = tmp_path / "r.db"
    args = ["--plugin", FAULTY_PLUGIN, "-q", "suite", "quick", "--workload", "test_mlp",
            "--workload", "lstm", "--iterations", "12",
            "--no-energy", "--suite-id", "twin", "--json"]
    procs = [subprocess.Popen([sys.executable, "-m", "accelbench.cli", *args],
                              env=cli_env(db), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT case_key FROM results WHERE suite_id = 'twin'").fetchall()
        claims = con.execute("SELECT COUNT(*) FROM claims").fetchone()[0]
    finally:
        con.close()
    keys = [k for (k,) in rows]
    assert len(keys) == 4 and len(set(keys)) == 4  # 2 workloads x (fp32, amp_bf16), once each
    assert claims == 0  # every claim released


def test_read_only_store_is_refused_before_anything_is_measured(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with open_store(str(db)):  # an empty store (`results` never creates one)
        pass
    assert db.is_file()
    marker = tmp_path / "built"
    read_only = f"sqlite:///file:{db}?mode=ro&uri=true"
    for cmd in (["run", "marker_mlp", "--size", "tiny", "--iterations", "3"],
                ["suite", "quick", "--workload", "marker_mlp", "--iterations", "3"]):
        p = run_cli("--plugin", MARKER_PLUGIN, "--db", read_only, *cmd, "--no-energy",
                    ACCELBENCH_TEST_MARKER=str(marker))
        assert p.returncode == 2, p.stderr
        assert p.stderr.count("\n") == 1 and "read-only" in p.stderr, p.stderr
        assert not marker.exists(), f"{cmd[0]}: a model was built before the store was checked"
