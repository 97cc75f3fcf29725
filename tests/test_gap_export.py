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


def test_a_parquet_export_reports_the_results_it_wrote(three: Path, tmp_path: Path) -> None:
    """The parquet count comes from the results as they stream by (issue 46: ``n += 1`` ->
    ``n -= 1`` in that counter survived: only csv and json counts were read)."""
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "x.parquet"
    (proc,) = run_cli_many([(("export", "--format", "parquet", "--out", str(out)), {})],
                           db=three)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().startswith(f"exported 3 result(s) to {out}"), proc.stderr
    assert pq.ParquetFile(out).metadata.num_rows == 3


def test_a_filtered_export_reports_what_it_selected(three: Path, tmp_path: Path) -> None:
    out = tmp_path / "ok.csv"
    (proc,) = run_cli_many([(("export", "--format", "csv", "--out", str(out),
                              "--status", "ok"), {})], db=three)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == f"exported 2 result(s) to {out}"


@pytest.mark.parametrize(("batch", "group", "sizes"), [
    (1, 2, [2, 2, 2, 1]),  # a group closes as soon as it holds ``group`` results
    (2, 2, [2, 2, 2, 1]),
    (2, 3, [4, 3]),  # batches of 2 pass 3 at 4: that group is written whole
    (7, 2, [7]),  # fewer results than a batch: one group, written at the end
])
def test_parquet_row_groups_hold_exactly_the_results_asked(
        tmp_path: Path, batch: int, group: int, sizes: list[int]) -> None:
    """Row groups by size (issue 47's bounded export; issue 46: ``>=`` -> ``>`` in the group's
    flush survived, since the only row-group test counted groups where both read the same).
    The expected sizes are worked out by hand from the rule "write once ``group`` results are
    held": 7 results in batches of ``batch``."""
    pq = pytest.importorskip("pyarrow.parquet")
    from accelbench.report.export import write_parquet

    results = [make_result(f"g{i}", finished=f"2026-01-01T00:00:0{i}.000+00:00")
               for i in range(7)]
    cases, samples = write_parquet(iter(results), tmp_path / "g.parquet", batch=batch,
                                   case_group=group, sample_group=group)
    meta = pq.ParquetFile(cases).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == sizes
    per = len(results[0].iteration_times_s) + len(results[0].warmup_times_s)
    assert all(len(r.iteration_times_s) + len(r.warmup_times_s) == per for r in results)
    smeta = pq.ParquetFile(samples).metadata
    assert [smeta.row_group(i).num_rows for i in range(smeta.num_row_groups)] == [
        n * per for n in sizes]
