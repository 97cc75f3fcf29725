"""``accelbench report`` on a store of many results holds a bounded number of rows, not
one per result (issue 47, "at scale"). Counted, not timed: the live
:class:`~accelbench.report.rows.CaseRow` objects are counted (``gc``) while the real CLI
reads a real SQLite store and writes the page and ``summary.md``, with the report's
spill buffer made small so that a store of 1,200 results spills many runs."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

import accelbench.report.sections as sections
import accelbench.report.stored as stored
from accelbench.cli import main
from accelbench.report.rows import CaseRow
from tests.test_store_scale_bounded import _store

RESULTS = 1200
RUN_ROWS = 100
BLOCK_ROWS = 4
#: Live rows allowed at once: a spill buffer, a block of each run being merged, and the
#: folds' rows per case (8 cases here), with room to spare; a row per result is 1,200.
MOST_LIVE = RUN_ROWS + BLOCK_ROWS * (RESULTS // RUN_ROWS) + 100


def _live_rows() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is CaseRow)


def test_report_holds_a_bounded_number_of_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    db = _store(tmp_path / "many.db", RESULTS)
    # (raising=False: the counts, not a missing name, are what this test checks)
    monkeypatch.setattr(stored, "RUN_ROWS", RUN_ROWS, raising=False)
    monkeypatch.setattr(stored, "BLOCK_ROWS", BLOCK_ROWS, raising=False)
    seen: dict[str, list[int]] = {"read": [], "written": []}

    def counting(module: Any, name: str, phase: str) -> None:
        real = getattr(module, name)
        calls = [0]

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] % 60 == 0:
                seen[phase].append(_live_rows())
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counting(stored, "case_row", "read")  # a row per result read from the store
    counting(sections, "summary_row", "written")  # a row per line of the summary table
    out = tmp_path / "rep"
    assert main(["--db", str(db), "report", "--out", str(out), "--no-reference"]) == 0
    capsys.readouterr()
    # Every result was read and every summary row written (twice: page and summary.md).
    assert len(seen["read"]) == RESULTS // 60
    assert len(seen["written"]) == 2 * RESULTS // 60
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert md.count("\n| cpu ") == RESULTS
    assert f"{RESULTS} result(s) (ok: {RESULTS})" in md
    most = max(seen["read"] + seen["written"])
    assert most <= MOST_LIVE, (
        f"{most} rows alive at once for {RESULTS} results: the report holds a row per "
        f"result again (read: {seen['read']}, written: {seen['written']})")
    # What it holds does not grow as the rows stream past: the last counts are no
    # higher than the peak of the first quarter of the read plus a buffer.
    assert max(seen["written"]) <= max(seen["read"][: len(seen["read"]) // 4]) + RUN_ROWS
