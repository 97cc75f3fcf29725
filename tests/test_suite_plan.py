"""A suite's plan is stored when it starts; ``suite resume ID`` (or ``--suite-id ID``) runs
the rest of it as planned; the printed resume line is complete and shell-quoted;
``--dry-run`` marks stored cases skipped (issue 23, item 4 and item 8's dry run).

Real subprocesses, real SQLite files (and a real PostgreSQL server where installed)."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelbench.errors import ConfigError
from accelbench.planning.plan import SuitePlan, check_suite_id
from accelbench.store import open_store, schema
from tests.conftest import FAULTY_PLUGIN, cli_env, cli_process, run_cli, run_cli_many
from tests.test_store import make_result
from tests.test_store_postgres import pg_url  # noqa: F401 - the PostgreSQL fixture

#: Quotes, spaces and shell redirections: only a quoted line survives a shell.
NASTY_ID = "x <y> \"z\" 'w' $HOME;"
FOUR = ["suite", "quick", "--workload", "lstm", "--workload", "transformer", "--no-energy",
        "--max-time", "1"]


def _rows(db: Path, sid: str) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("SELECT case_key, record_json FROM results WHERE suite_id = ?",
                           (sid,)).fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return []
    finally:
        con.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _as_argv(line: str) -> list[str]:
    """The command after ``resume with: `` as this interpreter runs it."""
    words = shlex.split(line.split("with: ", 1)[1])
    assert words[0] == "accelbench"
    return [sys.executable, "-m", "accelbench.cli", *words[1:]]


def test_a_killed_suite_resumes_as_planned_from_the_printed_line(tmp_path: Path) -> None:
    """The issue's case: ``suite quick --no-energy --max-time 1`` of 4 cases killed after
    some, resumed with the printed command: the other cases run with meters off and
    max_time_s 1.0, and 4 cases in all (not the 18 of a plain ``suite quick``)."""
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench.cli", "--db", str(db), *FOUR, "--suite-id",
         NASTY_ID], env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while not _rows(db, NASTY_ID) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    before = _rows(db, NASTY_ID)
    assert 1 <= len(before) < 4, "the kill must land mid-suite"
    start = next(ln for ln in err.splitlines() if "case(s); resume with: " in ln)
    stop = next(ln for ln in err.splitlines() if "stopped; finished cases are stored" in ln)
    # Both lines print one command: the stored plan by id, the store by absolute path.
    assert _as_argv(start) == _as_argv(stop)
    assert _as_argv(start)[3:] == ["--db", str(db), "suite", "resume", NASTY_ID]

    # The dry run of the resume marks the stored cases skipped and estimates the rest.
    # The printed command, run as the shell would (parsed by shlex), in the warm CLI; the
    # two dry runs side by side.
    resume = _as_argv(stop)[3:]
    dry, dry_text = run_cli_many([((*resume, "--dry-run", "--json"), {}),
                                  ((*resume, "--dry-run"), {})], timeout=120)
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert len(doc["cases"]) == 4 and doc["cases_skipped"] == len(before)
    assert all(c["estimate_s"] is None for c in doc["cases"] if c["skipped"])
    assert doc["plan"]["meters"]["enabled"] is False
    assert doc["plan"]["policy"]["max_time_s"] == 1.0
    text = dry_text.stdout
    assert text.count("skipped (stored)") == len(before)
    assert text.splitlines()[-1].startswith(f"# 4 case(s), {len(before)} stored already")

    done = cli_process(resume, env=cli_env(), timeout=600)
    assert done.returncode == 0, done.stderr
    after = _rows(db, NASTY_ID)
    assert len(after) == 4 and len({k for k, _r in after}) == 4
    assert set(before) <= set(after)  # finished cases kept as they were
    for _key, blob in after:
        spec = json.loads(blob)["spec"]
        assert spec["meters"]["enabled"] is False
        assert spec["policy"]["max_time_s"] == 1.0
    end = next(ln for ln in done.stderr.splitlines() if ln.startswith("resume or extend"))
    assert _as_argv(end) == _as_argv(stop)


def _seed_plan(db: Path, sid: str = "s1") -> SuitePlan:
    plan = SuitePlan.fresh("quick", {
        "workloads": ("--workload", ("transformer", "lstm")),
        "meters.enabled": ("--no-energy", False),
        "policy.max_time_s": ("--max-time", 1.0)})
    with open_store(str(db)) as st:
        st.save_plan(sid, "quick", plan.to_dict(), ["k1", "k2"])
    return plan


def test_resume_takes_the_stored_plan_and_refuses_what_contradicts_it(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    plan = _seed_plan(db)
    assert SuitePlan.from_dict(plan.to_dict()) == plan
    # Both forms take the plan: its 4 cases, its options.
    for argv in (["suite", "resume", "s1"], ["suite", "quick", "--suite-id", "s1"],
                 ["suite", "resume", "s1", "--max-time", "1", "--workload", "lstm",
                  "--workload", "transformer", "--no-energy"]):
        p = run_cli("--db", str(db), *argv, "--dry-run", "--json")
        assert p.returncode == 0, (argv, p.stderr)
        doc = json.loads(p.stdout)
        assert len(doc["cases"]) == 4 and doc["plan"] == plan.to_dict(), argv
    before = _digest(db)
    refused = {
        "--max-time 2.0 contradicts the stored plan": ["resume", "s1", "--max-time", "2"],
        "--workload lstm contradicts": ["quick", "--suite-id", "s1", "--workload", "lstm"],
        "--precision fp32 contradicts": ["resume", "s1", "--precision", "fp32"],
        "--iterations 5 contradicts": ["resume", "s1", "--iterations", "5"],
        "--compile contradicts": ["resume", "s1", "--compile"],
        "is a 'quick' suite, not 'small'": ["small", "--suite-id", "s1"],
        "has no stored plan": ["resume", "nosuch"],
        "usage: accelbench suite resume SUITE_ID": ["resume"],
        "names another suite": ["resume", "s1", "--suite-id", "s2"],
        "--suite-id must be at most 128": ["quick", "--suite-id", "x" * 129],
        "--suite-id must not contain control": ["quick", "--suite-id", "a\nb"],
    }
    for why, argv in refused.items():
        p = run_cli("--db", str(db), "suite", *argv)
        assert p.returncode == 2, (argv, p.stderr)
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("accelbench: error: "), \
            p.stderr
        assert why in p.stderr, p.stderr
        assert _digest(db) == before, f"{argv}: the store changed"
    # Options that only say how a node joins, and more runs of each case, are no
    # contradiction: the plan is extended.
    more = plan.resumed_with({"policy.repeats": ("--repeats", 2)}, "s1")
    assert more.policy.repeats == 2 and not plan.conflicts(more)
    with pytest.raises(ConfigError, match="--repeats"):
        more.resumed_with({"policy.repeats": ("--repeats", 1)}, "s1")


def test_a_suite_without_a_plan_keeps_the_old_resume_with_a_warning(tmp_path: Path) -> None:
    """A suite an older accelbench ran: ``suite resume`` says so; ``--suite-id`` runs
    with the options given (a warning says so) and stores them as its plan from then."""
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(make_result("old1", suite="old"))
    p = run_cli("--db", str(db), "suite", "resume", "old")
    assert p.returncode == 2 and "has no stored plan" in p.stderr
    assert "--suite-id old" in p.stderr
    args = ["--plugin", FAULTY_PLUGIN, "--db", str(db), "suite", "quick", "--workload",
            "test_mlp", "--precision", "fp32", "--iterations", "3", "--no-energy",
            "--suite-id", "old"]
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    warning = [ln for ln in p.stderr.splitlines() if "no stored plan" in ln]
    assert len(warning) == 1 and warning[0].startswith("accelbench: warning: suite 'old' "
                                                       "has no stored plan (started by an "
                                                       "older accelbench)")
    with open_store(str(db)) as st:
        stored = st.suite_plan("old")
    assert stored is not None and stored.plan["workloads"] == ["test_mlp"]
    assert stored.plan["policy"]["iterations"] == 3
    # From now on it resumes by id, with nothing left to run.
    again = run_cli("--plugin", FAULTY_PLUGIN, "--db", str(db), "suite", "resume", "old",
                    "--json")
    assert again.returncode == 0, again.stderr
    assert "no stored plan" not in again.stderr


def test_an_old_store_migrates_and_keeps_its_suites(tmp_path: Path) -> None:
    db = tmp_path / "v6.db"
    with open_store(str(db), _target=6) as old:
        old.save(make_result("r1", suite="s"))
    con = sqlite3.connect(db)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert "suite_plans" not in tables
    with open_store(str(db)) as st:
        assert st.schema_version() == schema.SCHEMA_VERSION >= 7
        assert [r.id for r in st.query()] == ["r1"]
        assert st.suite_plan("s") is None
        st.save_plan("s", "quick", SuitePlan.fresh("quick").to_dict(), [])
        assert st.suite_plan("s") is not None


def test_suite_ids_are_permissive_but_printable() -> None:
    assert check_suite_id(NASTY_ID) == NASTY_ID
    for bad in ("", "  ", "a\tb", "x" * 129, "a\x7fb"):
        with pytest.raises(ConfigError):
            check_suite_id(bad)


def test_an_id_that_looks_like_an_option_resumes_too(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _seed_plan(db, sid="-dash")
    p = run_cli("--db", str(db), "suite", "resume", "--suite-id=-dash", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1].startswith("# 4 case(s)")


def test_max_ranks_outside_scaling_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("suite", "quick", "--max-ranks", "2", "--dry-run", db=db)
    assert p.returncode == 2
    assert "--max-ranks applies to the scaling and sharding suites only" in p.stderr
    assert not db.exists()


def test_a_password_in_the_store_url_is_never_printed(pg_url: str) -> None:  # noqa: F811
    """The resume line names a PostgreSQL store without its password, and says so (the
    server's trust auth ignores the password)."""
    secret = pg_url.replace("postgres@", "postgres:s3cr3t-pw@")
    args = ["--plugin", FAULTY_PLUGIN, "--db", secret, "suite", "quick", "--workload",
            "test_mlp", "--precision", "fp32", "--iterations", "3", "--no-energy",
            "--suite-id", "pg-plan"]
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    assert "s3cr3t" not in p.stderr + p.stdout
    line = next(ln for ln in p.stderr.splitlines() if "resume with" in ln)
    assert "password is hidden" in line and "***" in line
    assert line.endswith("suite resume pg-plan")
    with open_store(pg_url) as st:
        stored = st.suite_plan("pg-plan")
    assert stored is not None and stored.suite == "quick"
    assert stored.plan["policy"]["iterations"] == 3
    again = run_cli("--plugin", FAULTY_PLUGIN, "--db", pg_url, "suite", "resume", "pg-plan",
                    "--dry-run", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["cases_skipped"] == 1


def test_slurm_without_slurm_is_one_line_and_no_store(tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    empty = tmp_path / "bin"
    empty.mkdir()
    db = tmp_path / "fleet.db"
    p = cli_process(["--db", str(db), "suite", "quick", "--workload", "lstm", "--launcher",
                     "slurm"], env={**cli_env(), "PATH": str(empty)}, cwd=tmp_path,
                    timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "sbatch and srun are not on PATH" in p.stderr
    assert "Traceback" not in p.stderr
    assert not db.exists()
    assert not (tmp_path / "accelbench-slurm").exists()


def test_slurm_times_as_slurm_takes_them() -> None:
    from accelbench.launchers.slurm import parse_time_min

    good = {"90": 90, "5:30": 6, "01:30:00": 90, "100:00:00": 6000, "1-0": 1440,
            "2-12": 3600, "1-2:30": 1590, "1-23:59:59": 2880, " 45 ": 45, "0:30": 1}
    assert {v: parse_time_min(v) for v in good} == good
    for bad in ("99:99:99", "1-24", "10:60", "1-2:60", "1-2:3:60", "1:2:3:4", "1-", "0",
                "00:00", "366-00", "", "soon", "-5", "\u0663", "1:", ":5", "1-2-3"):
        with pytest.raises(ConfigError, match="--time"):
            parse_time_min(bad)


def test_a_slurm_time_out_of_range_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("--db", str(db), "suite", "quick", "--launcher", "slurm", "--time", "99:99:99")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "minutes must be below 60" in p.stderr
    assert not db.exists()


def test_slurm_dry_run_refuses_a_relative_store_too(tmp_path: Path) -> None:
    p = cli_process(["--db", "rel.db", "suite", "quick", "--launcher", "slurm", "--dry-run"],
                    cwd=tmp_path, timeout=120,
                    env={k: v for k, v in os.environ.items() if k != "ACCELBENCH_DB"})
    assert p.returncode == 2 and "relative path" in p.stderr
    assert p.stderr.count("\n") == 1
    assert not (tmp_path / "rel.db").exists()
