"""SIGKILL mid-suite, then resume: nothing finished is lost, nothing is run twice."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

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

    # A third run has nothing left to do.
    again = run_cli(*SUITE_ARGS, db=db)
    assert again.returncode == 0
    assert len(_rows(db)) == EXPECTED_CASES
