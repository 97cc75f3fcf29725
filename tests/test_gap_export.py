"""The count ``accelbench export --out`` reports (issue 46: ``n += 1`` -> ``n += 2`` in
write_csv and write_json survived; the line "exported N result(s) to PATH" was never
read). A real store of three saved results, the real command, each format."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from accelbench.store import open_store
from tests.conftest import run_cli_many
from tests.test_compare import make_result


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("gap_export") / "three.db"
    with open_store(str(db)) as st:
        for i, status in enumerate(("ok", "ok", "oom")):
            st.save(make_result(f"r{i}", status=status,
                                finished=f"2020-01-01T00:00:0{i}+00:00"))
    return db


def test_export_reports_the_results_it_wrote(three: Path, tmp_path: Path) -> None:
    outs = {fmt: tmp_path / f"x.{fmt}" for fmt in ("csv", "json")}
    procs = run_cli_many([(("export", "--format", fmt, "--out", str(out)), {})
                          for fmt, out in outs.items()], db=three)
    for (fmt, out), proc in zip(outs.items(), procs, strict=True):
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.strip() == f"exported 3 result(s) to {out}", (fmt, proc.stderr)
    with open(outs["csv"], newline="") as fh:
        assert [row["result_id"] for row in csv.DictReader(fh)] == ["r2", "r1", "r0"]
    doc = json.loads(outs["json"].read_text())
    assert [c["result_id"] for c in doc["cases"]] == ["r2", "r1", "r0"]
    assert [r["id"] for r in doc["records"]] == ["r2", "r1", "r0"]


def test_a_filtered_export_reports_what_it_selected(three: Path, tmp_path: Path) -> None:
    out = tmp_path / "ok.csv"
    (proc,) = run_cli_many([(("export", "--format", "csv", "--out", str(out),
                              "--status", "ok"), {})], db=three)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == f"exported 2 result(s) to {out}"
