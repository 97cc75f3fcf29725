"""``suite --data`` and the ``data`` suite (issue 41): a suite's cases read a dataset, and
the ``data`` suite measures each workload that reads one with synthetic and with generated
data (or the user's PATH) side by side. Real suites at tiny size, real stores."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from accelbench.planning.plan import SuitePlan
from tests.conftest import run_cli, run_cli_many, seed_store

FAST = ("--iterations", "3", "--no-energy", "--loader-workers", "0")


def _records(db: Path) -> list[dict]:
    with sqlite3.connect(db) as con:
        return [json.loads(j) for (j,) in con.execute("select record_json from results")]


def _plans(db: Path) -> list[dict]:
    with sqlite3.connect(db) as con:
        return [json.loads(j) for (j,) in con.execute("select plan_json from suite_plans")]


def test_the_data_suite_measures_synthetic_and_generated_side_by_side(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    env = {"ACCELBENCH_DATA_DIR": str(tmp_path / "data")}
    p = run_cli("suite", "data", "--workload", "lstm", "--workload", "resnet50", *FAST,
                "--suite-id", "d1", db=db, timeout=600, **env)
    assert p.returncode == 0, p.stderr[-3000:]
    # Written before the cases, with progress, once per layout.
    assert "generating resnet50 tiny data" in p.stderr and "generating lstm tiny" in p.stderr
    records = _records(db)
    got = sorted((r["spec"]["workload"], r["spec"].get("data", "synthetic")) for r in records)
    assert got == [("lstm", "generated"), ("lstm", "synthetic"),
                   ("resnet50", "generated"), ("resnet50", "synthetic")]
    for r in records:
        assert r["status"] == "ok" and r["suite_id"] == "d1"
        if r["spec"].get("data") is None:
            # A synthetic case's record is as before: no data fields, no input section.
            assert "loader_workers" not in r["spec"] and "input" not in r
        else:
            assert r["spec"]["loader_workers"] == 0
            assert r["input"]["source"] == "generated" and len(r["input"]["wait_s"]) == 3
    # The results table tells the two apart: a data column with the stall share.
    assert "generated" in p.stdout and "synthetic" in p.stdout and "stall" in p.stdout
    [plan] = _plans(db)
    assert plan["name"] == "data" and plan["loader_workers"] == 0 and "data" not in plan
    # Resumed as planned: every case stored, nothing runs again; a contradicting --data
    # is refused in one line.
    again = run_cli("suite", "resume", "d1", db=db, **env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(_records(db)) == 4
    other = run_cli("suite", "data", "--suite-id", "d1", "--loader-workers", "1", db=db,
                    **env)
    assert other.returncode == 2 and other.stderr.count("\n") == 1
    assert "contradicts the stored plan" in other.stderr


def test_suite_data_generated_runs_every_case_with_data(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    env = {"ACCELBENCH_DATA_DIR": str(tmp_path / "data")}
    p = run_cli("suite", "quick", "--workload", "llm", "--precision", "fp32", "--data",
                "generated", *FAST, "--json", db=db, timeout=600, **env)
    assert p.returncode == 0, p.stderr[-3000:]
    [summary] = json.loads(p.stdout)["results"]
    assert summary["input_source"] == "generated" and summary["loader_workers"] == 0
    [r] = _records(db)
    assert r["spec"]["data"] == "generated" and r["input"]["layout"] == "token_shards"
    [plan] = _plans(db)
    assert plan["data"] == "generated" and plan["loader_workers"] == 0


def test_the_api_runs_the_data_suite_on_a_users_path(tmp_path: Path) -> None:
    """The user's PATH takes the generated side's place; the plan stores it absolute."""
    import accelbench

    toks = tmp_path / "toks"
    toks.mkdir()
    np.random.default_rng(0).integers(0, 100, 4000).astype("<u2").tofile(toks / "a.bin")
    db = tmp_path / "r.db"
    sid, results = accelbench.suite("data", workloads=["lstm"], data=str(toks),
                                    loader_workers=0, iterations=3, energy=False,
                                    store=str(db))
    assert sorted(r.spec.data for r in results) == sorted(["synthetic", str(toks)])
    real = next(r for r in results if r.spec.data != "synthetic")
    assert real.input is not None and real.input.source == "path"
    assert real.input.path == str(toks)
    plan = accelbench.api.suite_plan("data", data="toks", loader_workers=0)
    assert plan.data == str(Path("toks").absolute())


def test_a_synthetic_suites_plan_is_stored_as_before() -> None:
    plan = SuitePlan.fresh("quick")
    assert "data" not in plan.to_dict() and "loader_workers" not in plan.to_dict()
    assert SuitePlan.from_dict(plan.to_dict()) == plan
    data = SuitePlan.fresh("quick", {"data": ("--data", "generated")})
    assert data.to_dict()["data"] == "generated" and data.loader_workers is not None
    assert SuitePlan.from_dict(data.to_dict()) == data


@pytest.mark.parametrize(("argv", "said"), [
    (("suite", "quick", "--loader-workers", "2"), "--loader-workers needs --data"),
    (("suite", "quick", "--workload", "lstm", "--data", "/nonexistent/x"),
     "no such file or directory"),
])
def test_suite_data_refusals_are_one_line_and_write_nothing(
        tmp_path: Path, argv: tuple[str, ...], said: str) -> None:
    db = tmp_path / "r.db"
    seed_store(db)
    before = db.read_bytes()
    [p] = run_cli_many([(argv, {"ACCELBENCH_DATA_DIR": str(tmp_path / "data")})], db=db)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[-1], lines
    assert db.read_bytes() == before and not (tmp_path / "data").exists()
