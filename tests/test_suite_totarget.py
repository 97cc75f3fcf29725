"""``accelbench suite NAME --to-target``: the suite's workloads that have a to-target recipe
trained to their target (a real tiny run), tagged with the suite id, resumed by it; a suite
with none refused; options that do not apply refused in one line, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.cli import main
from accelbench.store import open_store


def test_suite_to_target_trains_stores_and_resumes(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    args = ["--db", db, "suite", "quick", "--to-target", "--workload", "transformer",
            "--suite-id", "tt-suite", "--idle-s", "0"]
    assert main(args) == 0
    cap = capsys.readouterr()
    assert "transformer (torch) seed 0: reached" in cap.out
    with open_store(db, create=False) as st:
        (rec,) = st.totarget_runs()
    assert rec.sweep_id == "tt-suite" and rec.recipe.workload == "transformer"
    assert rec.outcome.status == "reached"
    # Resumed under the same id: stored, so nothing is trained again.
    assert main(args) == 0
    assert "stored under tt-suite, skipped" in capsys.readouterr().err
    with open_store(db, create=False) as st:
        assert len(st.totarget_runs()) == 1


@pytest.mark.parametrize(("argv", "said"), [
    (["--precision", "fp32"], "--precision does not apply to suite --to-target"),
    (["--workload", "resnet50", "--size", "small"],
     "no workload of it has a to-target recipe at size small (resnet50 (torch)"),
    (["--json"], "--json does not apply to suite --to-target"),
])
def test_suite_to_target_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  argv: list[str], said: str) -> None:
    db = tmp_path / "r.db"
    assert main(["--db", str(db), "suite", "quick", "--to-target", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1
    assert not db.exists()


def test_seeds_without_to_target_is_refused(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    assert main(["--db", str(db), "suite", "quick", "--seeds", "3"]) == 2
    assert "--seeds applies with --to-target only" in capsys.readouterr().err
    assert not db.exists()


def test_dry_run_lists_the_groups_and_writes_nothing(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ACCELBENCH_DATA_DIR", str(tmp_path / "data"))
    db = tmp_path / "r.db"
    assert main(["--db", str(db), "suite", "quick", "--to-target", "--workload", "lstm",
                 "--seeds", "3", "--dry-run"]) == 0
    assert "lstm tiny (torch): 3 seed(s) to held-out loss 0.9367" in capsys.readouterr().out
    assert not db.exists() and not (tmp_path / "data").exists()
