from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from accelbench.errors import StoreError
from accelbench.result import EnergyReading, Result
from accelbench.spec import RunSpec
from accelbench.stats import compute_stats
from accelbench.store import ResultFilter, open_store, resolve_db_url, schema


def make_result(rid: str, workload: str = "lstm", *, status: str = "ok", batch: int = 4,
                finished: str = "2026-01-01T00:00:00.000+00:00", suite: str | None = None,
                precision: str = "fp32", energy: tuple[EnergyReading, ...] = ()) -> Result:
    spec = RunSpec(workload=workload, size="tiny", batch_size=batch, precision=precision)  # type: ignore[arg-type]
    times = (0.1, 0.12, 0.11, 0.09, 0.1)
    ok = status == "ok"
    return Result(
        id=rid, spec=spec, status=status, sample_unit="sentence",  # type: ignore[arg-type]
        samples_per_step=batch, param_count=1234,
        stats=compute_stats(times, batch, trim_fraction=0.0, stop_reason="iterations")
        if ok else None,
        iteration_times_s=times if ok else (), error=None if ok else "boom",
        machine={"hostname": "h", "cpu": {"model": "Test CPU"}, "gpus": []},
        suite_id=suite, started_at=finished, finished_at=finished, energy=energy,
    )


def test_round_trip_keeps_everything(tmp_path: Path) -> None:
    energy = (EnergyReading(device="cpu", scope="cpu-package", source="estimate",
                            energy_j=12.5, energy_j_per_sample=0.5, avg_power_w=30.0,
                            note="estimated from TDP"),)
    r = make_result("abc123", energy=energy)
    with open_store(str(tmp_path / "r.db")) as st:
        st.save(r)
        back = st.get("abc")
    assert back is not None
    assert back.to_dict() | {"schema_version": 0} == r.to_dict() | {"schema_version": 0}
    assert back.schema_version == schema.SCHEMA_VERSION
    assert back.iteration_times_s == r.iteration_times_s
    assert back.energy_j_per_sample == 0.5
    # Queryable columns are filled too.
    con = sqlite3.connect(tmp_path / "r.db")
    row = con.execute("SELECT samples_per_s, energy_source, device_name FROM results").fetchone()
    assert row[0] == pytest.approx(r.stats.samples_per_s)  # type: ignore[union-attr]
    assert row[1] == "estimate"
    assert row[2] == "Test CPU"


def test_query_filters_and_newest_first(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as st:
        st.save(make_result("a1", "lstm", finished="2026-01-01T00:00:01.000+00:00"))
        st.save(make_result("a2", "transformer", finished="2026-01-01T00:00:03.000+00:00"))
        st.save(make_result("a3", "lstm", status="oom", finished="2026-01-01T00:00:02.000+00:00",
                            suite="s1"))
        assert [r.id for r in st.query()] == ["a2", "a3", "a1"]
        assert [r.id for r in st.query(ResultFilter(workload="lstm"))] == ["a3", "a1"]
        assert [r.id for r in st.query(ResultFilter(status="oom"))] == ["a3"]
        assert [r.id for r in st.query(ResultFilter(limit=1))] == ["a2"]
        assert st.case_keys("s1") == {make_result("x", "lstm").spec.case_key()}
        assert st.get("zzz") is None


def test_each_save_is_committed_at_once(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    st = open_store(str(path))
    st.save(make_result("c1"))
    # Another connection sees it before the store is closed.
    assert sqlite3.connect(path).execute("SELECT count(*) FROM results").fetchone() == (1,)
    st.close()


def test_migration_from_v1_keeps_rows_and_adds_energy_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = open_store(str(path), _target=1)
    assert old.schema_version() == 1
    rec = make_result("old1").to_dict()
    rec.pop("energy")
    rec["schema_version"] = 1
    with old.engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO results (id, status, workload, size, batch_size, precision, device,"
            " framework, started_at, finished_at, record_json) VALUES ('old1', 'ok', 'lstm',"
            " 'tiny', 4, 'fp32', 'cpu', 'pytorch', 't', 't', :rec)"), {"rec": json.dumps(rec)})
    old.close()
    cols = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(results)")}
    assert "energy_source" not in cols
    with open_store(str(path)) as st:
        assert st.schema_version() == schema.SCHEMA_VERSION
        back = st.get("old1")
        assert back is not None and back.energy == () and back.energy_j_per_sample is None
        st.save(make_result("new1"))
        assert {r.id for r in st.query()} == {"old1", "new1"}
    cols = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(results)")}
    assert {"energy_source", "avg_power_w", "energy_j_per_sample"} <= cols


def test_migration_v4_renames_pytorch_and_keeps_resume_keys_consistent(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    old = open_store(str(path), _target=3)
    rec = make_result("old2", "lstm").to_dict()
    rec["spec"]["framework"] = "pytorch"  # how 0.1 wrote it
    with old.engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO results (id, suite_id, case_key, status, workload, size, batch_size,"
            " precision, device, framework, started_at, finished_at, record_json) VALUES"
            " ('old2', 's0', 'stale', 'ok', 'lstm', 'tiny', 4, 'fp32', 'cpu', 'pytorch', 't', 't',"
            " :rec)"), {"rec": json.dumps(rec)})
    old.close()
    with open_store(str(path)) as st:
        back = st.get("old2")
        assert back is not None and back.spec.framework == "torch"
        # A resumed suite recognises the old case under the new name.
        assert st.case_keys("s0") == {back.spec.case_key()}
        assert [r.id for r in st.query(ResultFilter(framework="torch"))] == ["old2"]
        assert st.query(ResultFilter(framework="jax")) == []
    row = sqlite3.connect(path).execute("SELECT framework FROM results").fetchone()
    assert row == ("torch",)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    open_store(str(path)).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="newer than this accelbench"):
        open_store(str(path))


def test_corrupt_file_is_an_error_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    payload = b"this is not a database at all" * 100
    path.write_bytes(payload)
    with pytest.raises(StoreError, match="not a database"):
        open_store(str(path))
    assert path.read_bytes() == payload


def test_foreign_database_is_not_touched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="no accelbench schema"):
        open_store(str(path))
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert tables == {"customers"}


def test_directory_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a file"):
        open_store(str(tmp_path))
    with pytest.raises(StoreError, match="does not exist"):
        open_store(str(tmp_path / "nope.db"), create=False)
    assert not (tmp_path / "nope.db").exists()


def test_url_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "env.db"))
    assert resolve_db_url(None) == f"sqlite:///{tmp_path / 'env.db'}"
    assert resolve_db_url("postgresql://u@h/db") == "postgresql://u@h/db"
    monkeypatch.delenv("ACCELBENCH_DB")
    assert resolve_db_url(None).endswith("results.db")
    with pytest.raises(StoreError):
        open_store("nosuchdialect://x/y")


def test_the_results_row_is_derived_from_the_result_fields() -> None:
    """Each column named like a field of Result or RunSpec holds that field, the rest are
    the derived figures, and record_json is the whole record: a field is spelled once."""
    import dataclasses

    from accelbench.store.results import DERIVED_COLUMNS, result_row

    r = make_result("row1", suite="s1")
    row = result_row(r)
    assert set(row) == {c.name for c in schema.results.columns}
    copied = set(row) - DERIVED_COLUMNS
    result_fields = {f.name for f in dataclasses.fields(Result)}
    spec_fields = {f.name for f in dataclasses.fields(RunSpec)}
    assert copied <= result_fields | spec_fields
    for name in copied:
        source = r if name in result_fields else r.spec
        assert row[name] == getattr(source, name), name
    assert row["case_key"] == r.spec.case_key()
    assert r.stats is not None and row["samples_per_s"] == r.stats.samples_per_s
    back = Result.from_dict(json.loads(row["record_json"]))
    assert dataclasses.replace(back, schema_version=r.schema_version) == r


def test_a_column_without_a_source_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.store import results as results_mod

    columns = [sa.Column(c.name, c.type) for c in schema.results.columns]
    table = sa.Table("results", sa.MetaData(), *columns, sa.Column("brand_new_column", sa.Text))
    monkeypatch.setattr(results_mod.schema, "results", table)
    with pytest.raises(TypeError, match="brand_new_column"):
        results_mod.result_row(make_result("row2"))


def test_only_the_store_touches_sql_and_the_store_never_asks_a_launcher() -> None:
    """The store is the one door to the database: no module outside accelbench.store
    imports SQLAlchemy or reaches for an engine, and the store imports no launcher (the
    scheduler's state comes to it)."""
    import ast

    import accelbench

    root = Path(accelbench.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        in_store = rel.startswith("store/")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Attribute) and node.attr == "engine" and not in_store:
                offenders.append(f"{rel}:{node.lineno} .engine")
            for name in names:
                if not in_store and name.split(".")[0] == "sqlalchemy":
                    offenders.append(f"{rel}:{node.lineno} imports {name}")
                if in_store and name.startswith("accelbench.launchers"):
                    offenders.append(f"{rel}:{node.lineno} imports {name}")
    assert offenders == []


def test_phase_time_columns_are_filled_on_insert(tmp_path: Path) -> None:
    from tests.phase_records import make_phases, with_phases

    path = tmp_path / "r.db"
    with open_store(str(path)) as st:
        st.save(with_phases(make_result("ph1"), make_phases(communication_s=0.012)))
        st.save(make_result("plain"))
        back = st.get("ph1")
    assert back is not None and back.phases == make_phases(communication_s=0.012)
    con = sqlite3.connect(path)
    rows = dict((r[0], r[1:]) for r in con.execute(
        "SELECT id, phase_forward_s, phase_backward_s, phase_optimizer_s, "
        "phase_communication_s, phase_input_s FROM results"))
    assert rows["ph1"] == pytest.approx((0.030, 0.060, 0.008, 0.012, 0.004))
    assert rows["plain"] == (None, None, None, None, None)
    # The columns sort and filter in SQL: the slowest backward first.
    order = [r[0] for r in con.execute(
        "SELECT id FROM results WHERE phase_backward_s IS NOT NULL "
        "ORDER BY phase_backward_s DESC")]
    assert order == ["ph1"]


def test_migration_v8_backfills_phase_columns_from_stored_records(tmp_path: Path) -> None:
    """A v7 store holding records with phases (written before the columns existed), a
    record with ``"phases": null`` and one from before phases: all read back, and only the
    first gets its columns filled."""
    from tests.phase_records import make_phases, with_phases

    path = tmp_path / "v7.db"
    old = open_store(str(path), _target=7)
    records = {
        "withph": with_phases(make_result("withph"), make_phases(input_s=None)).to_dict(),
        "nullph": make_result("nullph").to_dict(),
        "oldrec": {k: v for k, v in make_result("oldrec").to_dict().items() if k != "phases"},
    }
    with old.engine.begin() as conn:
        for rid, rec in records.items():
            conn.execute(sa.text(
                "INSERT INTO results (id, status, workload, size, batch_size, precision, device,"
                " framework, started_at, finished_at, record_json) VALUES (:id, 'ok', 'lstm',"
                " 'tiny', 4, 'fp32', 'cpu', 'torch', 't', 't', :rec)"),
                {"id": rid, "rec": json.dumps(rec)})
    old.close()
    with open_store(str(path)) as st:
        assert st.schema_version() == schema.SCHEMA_VERSION >= 8
        withph, nullph, oldrec = (st.get(i) for i in records)
        assert withph is not None and withph.phases == make_phases(input_s=None)
        assert nullph is not None and nullph.phases is None
        assert oldrec is not None and oldrec.phases is None
    rows = dict((r[0], r[1:]) for r in sqlite3.connect(path).execute(
        "SELECT id, phase_forward_s, phase_backward_s, phase_optimizer_s, "
        "phase_communication_s, phase_input_s FROM results"))
    assert rows["withph"] == pytest.approx((0.030, 0.060, 0.008, None, None))
    assert rows["nullph"] == rows["oldrec"] == (None,) * 5
