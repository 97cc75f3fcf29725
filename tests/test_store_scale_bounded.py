"""compare, recommend and report on a growing store: what they decode whole does not grow
with the store (issue 47, "at scale"). Counted, not timed: each whole-record decode goes
through ``ResultStore.decode``, which the tests count on real SQLite stores of 50 and 500
results read by the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.cli import main
from accelbench.result import Result
from accelbench.spec import RunSpec
from accelbench.stats import compute_stats
from accelbench.store import open_store
from accelbench.store.results import BATCH_ROWS, ResultStore, result_row

COMBOS = [(w, p, f) for w in ("lstm", "resnet50") for p in ("fp32", "amp_bf16")
          for f in ("torch", "jax")]


def _store(path: Path, n: int) -> Path:
    """``n`` results of 8 cases, in suites of 8 (one of each case), one a second."""
    rows = []
    for i in range(n):
        w, p, f = COMBOS[i % len(COMBOS)]
        times = tuple(0.01 * (1 + 0.01 * ((i + k) % 7)) for k in range(12))
        stamp = f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000+00:00"
        spec = RunSpec(workload=w, size="tiny", batch_size=4, precision=p,  # type: ignore[arg-type]
                       framework=f)  # type: ignore[arg-type]
        rows.append(result_row(Result(
            id=f"b{i:07d}", spec=spec, status="ok", sample_unit="sample", samples_per_step=4,
            stats=compute_stats(times, 4, trim_fraction=0.0, stop_reason="iterations"),
            iteration_times_s=times, machine={"hostname": "h", "cpu": {"model": "CPU"}},
            suite_id=f"s{i // len(COMBOS):05d}", started_at=stamp, finished_at=stamp)))
    with open_store(str(path)) as st:
        st.save_rows(rows)
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("bounded")
    return {n: _store(folder / f"s{n}.db", n) for n in (50, 500)}


def _decodes(monkeypatch: pytest.MonkeyPatch, argv: list[str],
             capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """(whole records decoded, standard output) of ``accelbench ARGV``."""
    calls = []
    real = ResultStore.decode

    def counted(self: ResultStore, rid: object, blob: object) -> Result:
        calls.append(rid)
        return real(self, rid, blob)

    with monkeypatch.context() as m:
        m.setattr(ResultStore, "decode", counted)
        code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    return len(calls), out


@pytest.mark.parametrize("argv", [
    ["compare", "precision=fp32", "precision=amp_bf16"],
    ["compare", "framework=torch", "framework=jax", "--json"],
    ["recommend", "lstm", "--json"],
    ["recommend", "resnet50"],
])
def test_compare_and_recommend_decode_the_same_few_records_whatever_the_store(
        stores: dict[int, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    small, small_out = _decodes(monkeypatch, ["--db", str(stores[50]), *argv], capsys)
    large, large_out = _decodes(monkeypatch, ["--db", str(stores[500]), *argv], capsys)
    # The pairs (same suite, newest) and options (newest per case) are of 8 cases on
    # both stores: the same number of records, whatever else the store holds.
    assert small == large
    assert 0 < large <= 2 * len(COMBOS)
    assert small_out != "" and large_out != ""


@pytest.mark.parametrize("a,b", [("precision=fp32", "precision=amp_bf16"),
                                 ("framework=torch", "framework=jax"),
                                 ("workload=lstm", "s00061")])
def test_compare_on_briefs_is_compare_on_whole_results(stores: dict[int, Path], a: str,
                                                       b: str) -> None:
    """Pairing on briefs chooses what pairing on the whole results chooses."""
    from accelbench.report.compare import (
        AXES,
        compare,
        compare_results,
        parse_selector,
        select,
    )

    with open_store(str(stores[500])) as st:
        brief = compare(st, a, b).to_dict()
        sa, sb = parse_selector(a), parse_selector(b)
        named = {ax: (dict(sa.pairs).get(ax), dict(sb.pairs).get(ax)) for ax in AXES}
        whole = compare_results(select(st, sa), select(st, sb), a_label=a, b_label=b,
                                named=named).to_dict()
    assert brief == whole
    assert brief["cases"]
    if "=" in b:  # both sides in every suite: each case pairs within the newest one
        assert {c["pairing"] for c in brief["cases"]} == {"same_suite"}
        assert {c["a_suite_id"] for c in brief["cases"]} == {"s00061", "s00062"}


def test_report_decodes_each_record_once_a_batch_at_a_time(
        stores: dict[int, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Its summary has a row per result, so each record is decoded (once, a batch at a
    time); beyond that it decodes again only the few its charts need."""
    extra = {}
    for n, db in stores.items():
        decoded, _ = _decodes(monkeypatch, ["--db", str(db), "report", "--out",
                                            str(tmp_path / f"r{n}")], capsys)
        extra[n] = decoded - n
        assert (tmp_path / f"r{n}" / "index.html").is_file()
    # The charts' pairs of 8 cases: a few records, whatever the store's size (the newest
    # suites differ in what they hold, so the two counts may differ a little).
    assert all(0 < e <= 2 * len(COMBOS) for e in extra.values()), extra
    assert 2 * len(COMBOS) < 50 < BATCH_ROWS


def test_briefs_read_alike_by_sqlite_and_by_python(stores: dict[int, Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite takes the fields out of the records; another database's records are parsed
    here: the briefs are the same, and each is the brief of its whole result."""
    import dataclasses

    from accelbench.store.base import StoreBase
    from accelbench.store.briefs import ResultBrief, brief_of, iter_briefs

    def fields(b: ResultBrief) -> tuple[object, ...]:
        return tuple(getattr(b, f.name) for f in dataclasses.fields(ResultBrief))

    with open_store(str(stores[50])) as st:
        by_sql = [fields(b) for b in iter_briefs(st)]
        whole = [fields(brief_of(r)) for r in st.query()]
        monkeypatch.setattr(StoreBase, "dialect", property(lambda self: "postgresql"))
        by_python = [fields(b) for b in iter_briefs(st, batch=7)]
    assert len(by_sql) == 50
    assert by_sql == by_python == whole


def test_parquet_export_row_groups_do_not_grow_with_the_store(
        stores: dict[int, Path], tmp_path: Path) -> None:
    """The Parquet writer keeps each row group's metadata until the file closes: the
    number of row groups (what grows in memory) stays 1 from 50 to 500 results, where
    the samples would otherwise take one group per 100 results."""
    pq = pytest.importorskip("pyarrow.parquet")
    groups = {}
    for n, db in stores.items():
        out = tmp_path / f"x{n}.parquet"
        assert main(["--db", str(db), "export", "--format", "parquet", "--out", str(out)]) == 0
        cases, samples = pq.ParquetFile(out), pq.ParquetFile(tmp_path / f"x{n}.samples.parquet")
        assert cases.metadata.num_rows == n
        groups[n] = (cases.metadata.num_row_groups, samples.metadata.num_row_groups)
    assert groups[50] == groups[500] == (1, 1)


def test_report_summary_rows_are_made_as_the_page_is_written(
        stores: dict[int, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's summary table (a row per result) is formatted row by row as the page
    and ``summary.md`` are written: the formatted rows alive at once stay a handful from 50
    to 500 results (a list of them all held n)."""
    from accelbench.report import sections

    real = sections.summary_row
    live = {"now": 0, "most": 0, "made": 0}

    class Counted(dict):  # type: ignore[type-arg]
        def __del__(self) -> None:
            live["now"] -= 1

    def counted(*args: object) -> dict[str, object]:
        live["now"] += 1
        live["made"] += 1
        live["most"] = max(live["most"], live["now"])
        return Counted(real(*args))  # type: ignore[arg-type]

    monkeypatch.setattr(sections, "summary_row", counted)
    most = {}
    for n, db in stores.items():
        live.update(now=0, most=0, made=0)
        out = tmp_path / f"r{n}"
        assert main(["--db", str(db), "report", "--out", str(out), "--no-reference"]) == 0
        assert live["made"] >= 2 * n  # every row, in the page and in summary.md
        assert (out / "summary.md").read_text().count("\n| ") >= n
        most[n] = live["most"]
    assert most[50] == most[500] <= 4


@pytest.mark.parametrize("n", [50, 500])
def test_compare_holds_one_case_of_briefs_at_a_time(stores: dict[int, Path], n: int) -> None:
    """compare reads the selections ordered by case and pairs a case at a time: the
    briefs held at once are one case's (both sides), not the selections' (``n``)."""
    from accelbench.report.compare import compare
    from accelbench.report.compare.grouped import PEAK

    PEAK["briefs"] = 0
    with open_store(str(stores[n])) as st:
        cmp = compare(st, "precision=fp32", "precision=amp_bf16")
    assert len(cmp.cases) == 4  # (workload, framework), precision compared across
    one_case = -(-n // len(COMBOS))  # results of one combination, rounded up
    assert 0 < PEAK["briefs"] <= 2 * one_case
    assert PEAK["briefs"] < n // 3
