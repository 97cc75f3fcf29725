"""Issue 23, items 1, 2 and 8: outputs never clobber, a damaged store is never written.

Real SQLite files and real ``accelbench`` subprocesses: each test gives the command, its
exit code, and the store's bytes (or files') before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from accelbench.errors import ConfigError, StoreError
from accelbench.report.outputs import atomic_paths, atomic_write_text, check_out_dir
from accelbench.store import check_store, open_store
from tests.conftest import run_cli
from tests.test_store import make_result


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("accelbench: error: "), lines
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "keep.db"
    with open_store(str(db)) as st:
        for i in range(40):
            st.save(make_result(f"r{i:03d}", "lstm" if i % 2 else "transformer",
                                finished=f"2026-01-01T00:00:{i:02d}.000+00:00"))
    return db


def rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM results").fetchone()[0])


# -- item 1: report and roofline never clobber ------------------------------------------

def test_report_refuses_the_store_and_a_nonempty_directory_unless_forced(
    store: Path, tmp_path: Path
) -> None:
    before = sha(store)
    # The store as --out (a file): refused, with or without --force.
    for extra in ((), ("--force",)):
        proc = run_cli("report", "--out", str(store), "--no-reference", *extra, db=store)
        assert proc.returncode == 2
        assert "is the results store" in one_error_line(proc)
    # The store inside --out, at a name the report writes: refused even with --force.
    inside = tmp_path / "site"
    inside.mkdir()
    hidden = inside / "index.html"
    hidden.write_bytes(store.read_bytes())
    proc = run_cli("report", "--out", str(inside), "--no-reference", "--force", db=hidden)
    assert proc.returncode == 2 and "is the results store" in one_error_line(proc)
    assert sha(hidden) == before
    # A directory that holds the user's files: refused without --force, nothing written.
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / "index.html").write_text("<p>my page</p>")
    proc = run_cli("report", "--out", str(out), "--no-reference", db=store)
    assert proc.returncode == 2 and "--force" in one_error_line(proc)
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "notes.txt"]
    assert (out / "index.html").read_text() == "<p>my page</p>"
    # With --force: written into it; the other files kept; no temporary left behind.
    proc = run_cli("report", "--out", str(out), "--no-reference", "--force", db=store)
    assert proc.returncode == 0, proc.stderr
    assert "<html" in (out / "index.html").read_text().lower()
    assert (out / "notes.txt").read_text() == "mine\n"
    leftovers = [p for p in out.rglob("*") if ".tmp" in p.name]
    assert leftovers == []
    assert sha(store) == before and rows(store) == 40


def test_report_into_a_new_or_empty_directory_needs_no_force(store: Path,
                                                             tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (empty, tmp_path / "new" / "deeper"):
        proc = run_cli("report", "--out", str(out), "--no-reference", db=store)
        assert proc.returncode == 0, proc.stderr
        assert (out / "index.html").stat().st_size > 0 and (out / "summary.md").exists()


def test_roofline_refuses_the_store_and_a_nonempty_directory_unless_forced(
    store: Path, tmp_path: Path
) -> None:
    before = sha(store)
    for extra in ((), ("--force",)):
        proc = run_cli("roofline", "--out", str(store), *extra, db=store)
        assert proc.returncode == 2
        line = one_error_line(proc)  # refused as a file, before the store is looked at
        assert "is a file, not a directory" in line or "is the results store" in line
    site = tmp_path / "site"
    site.mkdir()
    hidden = site / "roofline.json"
    hidden.write_bytes(store.read_bytes())
    proc = run_cli("roofline", "--out", str(site), "--force", db=hidden)
    assert proc.returncode == 2 and "is the results store" in one_error_line(proc)
    assert sha(hidden) == before
    out = tmp_path / "chart"
    proc = run_cli("roofline", "--out", str(out), db=store)
    assert proc.returncode == 0, proc.stderr
    first = (out / "roofline.json").read_text()
    (out / "roofline.csv").write_text("edited by hand\n")
    proc = run_cli("roofline", "--out", str(out), db=store)  # again: refused
    assert proc.returncode == 2 and "--force" in one_error_line(proc)
    assert (out / "roofline.csv").read_text() == "edited by hand\n"
    proc = run_cli("roofline", "--out", str(out), "--force", db=store)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "roofline.json").read_text()).keys() == json.loads(first).keys()
    assert (out / "roofline.csv").read_text() != "edited by hand\n"
    assert [p for p in out.iterdir() if ".tmp" in p.name] == []
    assert sha(store) == before


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    old = tmp_path / "figure.png"
    old.write_bytes(b"old figure")
    with pytest.raises(RuntimeError), atomic_paths([old]) as (tmp,):
        assert tmp.parent == old.parent and tmp.suffix == ".png"  # writers go by suffix
        tmp.write_bytes(b"half a")
        raise RuntimeError("the plotting library died")
    assert old.read_bytes() == b"old figure"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png"]
    # A rename that fails (the target became a directory): the text is not half there.
    target = tmp_path / "taken"
    target.mkdir()
    (target / "x").write_text("x")
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png", "taken"]
    # The mode of a replaced file is kept (a temporary file starts private).
    kept = tmp_path / "shared.md"
    kept.write_text("v1")
    kept.chmod(0o644)
    atomic_write_text(kept, "v2")
    assert kept.read_text() == "v2" and (kept.stat().st_mode & 0o777) == 0o644


def test_check_out_dir_sees_the_store_through_links(store: Path, tmp_path: Path) -> None:
    link = tmp_path / "alias.db"
    os.symlink(store, link)
    with pytest.raises(ConfigError, match="is the results store"):
        check_out_dir(link, protected=[store], force=True)
    figures = tmp_path / "out" / "figures"
    figures.mkdir(parents=True)
    inner = figures / "throughput.png"
    inner.write_bytes(store.read_bytes())
    with pytest.raises(ConfigError, match="is inside"):
        check_out_dir(tmp_path / "out", ["index.html", "figures/"], protected=[inner],
                      force=True)


# -- item 2 and item 8: a damaged store is refused for writing, never written ---------

def damage_middle(db: Path) -> None:
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.seek(size // 2)
        f.write(b"\x00garbage\xff" * 1500)


def drop_results(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE results")


RUN = ("run", "lstm", "--size", "tiny", "--iterations", "3", "--max-time", "1")


@pytest.mark.parametrize("how", ["garbage", "dropped"])
def test_run_refuses_a_damaged_store_and_writes_nothing(store: Path, how: str) -> None:
    (damage_middle if how == "garbage" else drop_results)(store)
    before = sha(store)
    proc = run_cli(*RUN, db=store, timeout=300)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc)
    assert "is damaged" in line and "read-only" not in line
    assert "backup" in line and "accelbench store check" in line
    assert ("results missing" in line) if how == "dropped" else ("malformed" in line)
    assert sha(store) == before
    assert not Path(f"{store}-journal").exists() and not Path(f"{store}-wal").exists()
    # store check says the same, exit 2; results still fails to read a garbled store.
    check = run_cli("store", "check", db=store)
    assert check.returncode == 2 and "is damaged" in one_error_line(check)
    assert sha(store) == before


def test_every_writing_command_refuses_a_damaged_store(store: Path, tmp_path: Path) -> None:
    drop_results(store)
    before = sha(store)
    commands = [
        ("suite", "quick", "--workload", "lstm", "--iterations", "3", "--max-time", "1"),
        ("ops", "--size", "tiny", "--op", "matmul", "--precision", "fp32", "--iterations", "3"),
        ("peaks", "--precision", "fp32", "--gemm-sizes", "64"),
        ("roofline", "--model", "lstm", "--repeats", "1", "--out", str(tmp_path / "r")),
    ]
    for argv in commands:
        proc = run_cli(*argv, db=store, timeout=300)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "is damaged (table results missing)" in one_error_line(proc), argv
        assert sha(store) == before, argv


def test_the_api_refuses_a_damaged_store_before_the_first_write(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(make_result("a"))
    damage_middle(db)
    before = sha(db)
    with pytest.raises(StoreError, match="is damaged") as caught, open_store(str(db)) as st:
        st.save(make_result("b"))
    assert "\n" not in str(caught.value)
    assert sha(db) == before


def test_an_old_damaged_store_is_not_migrated(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with open_store(str(db), _target=3) as old:
        old.save(make_result("a"))
    drop_results(db)
    before = sha(db)
    with pytest.raises(StoreError, match="is damaged .*not migrated"):
        open_store(str(db))
    assert sha(db) == before


def test_store_check_on_a_sound_store(store: Path) -> None:
    before = sha(store)
    proc = run_cli("store", "check", db=store)
    assert proc.returncode == 0, proc.stderr
    assert "ok (integrity check passed" in proc.stdout and "40 result(s)" in proc.stdout
    found = json.loads(run_cli("store", "check", "--json", db=store).stdout)
    assert found["results"] == 40 and {"results", "meta", "claims"} <= set(found["tables"])
    assert sha(store) == before
    assert check_store(str(store))["schema_version"] == found["schema_version"]
    missing = run_cli("store", "check", db=store.with_name("nowhere.db"))
    assert missing.returncode == 2 and "does not exist" in one_error_line(missing)
    assert not store.with_name("nowhere.db").exists()


def test_a_sound_store_is_still_written(store: Path) -> None:
    proc = run_cli(*RUN, "--no-energy", db=store, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert rows(store) == 41


def test_the_file_of_a_sqlite_url_in_each_form() -> None:
    """sqlite_path: a plain path, a ``file:`` URI only where ``uri=true`` says so, in-memory
    forms none (issue 46: the URI branch's mutants survived)."""
    from sqlalchemy.engine import make_url

    from accelbench.store.base import sqlite_path

    def of(url: str) -> Path | None:
        return sqlite_path(make_url(url))

    assert of("sqlite:////tmp/s.db") == Path("/tmp/s.db")
    assert of("sqlite:///file:/tmp/s.db?mode=ro&uri=true") == Path("/tmp/s.db")
    assert of("sqlite:///file:/tmp/s.db?uri=1") == Path("/tmp/s.db")
    # Without uri=true SQLite opens a file literally named "file:...".
    assert of("sqlite:///file:/tmp/s.db") == Path("file:/tmp/s.db")
    assert of("sqlite:///s.db?uri=true") == Path("s.db")
    assert of("sqlite:///file:/tmp/s.db?mode=memory&cache=shared&uri=true") is None
    assert of("sqlite:///file:?uri=true") is None
    assert of("sqlite://") is None and of("sqlite:///:memory:") is None
    assert of("postgresql://u@h/db") is None


def test_the_tables_a_schema_version_holds() -> None:
    """Version 0 (no accelbench schema) expects no table; every later version the tables its
    migrations create, the results table among them."""
    from accelbench.store import schema
    from accelbench.store.base import expected_columns, expected_tables

    assert expected_tables(0) == []
    latest = len(schema.MIGRATIONS)
    tables = expected_tables(latest)
    assert "results" in tables and tables == sorted(expected_columns(latest))
    assert {"id", "record_json", "framework"} <= expected_columns(latest)["results"]
    assert set(expected_tables(1)) <= set(tables)


def test_damage_names_the_missing_tables_and_a_damaged_file(tmp_path: Path) -> None:
    """store.base.damage on real SQLite files: sound, one table missing, several missing
    (each named), and pages overwritten (the driver's "malformed" is the answer, not an
    error)."""
    import sqlalchemy as sa

    from accelbench.store.base import damage

    db = tmp_path / "d.db"
    with sqlite3.connect(db) as conn:
        for name in ("a", "b"):
            conn.execute(f"CREATE TABLE {name} (x INTEGER)")
            conn.executemany(f"INSERT INTO {name} VALUES (?)", [(i,) for i in range(2000)])
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            assert damage(conn, ["a", "b"]) is None
            assert damage(conn, ["a", "c"]) == "table c missing"
            assert damage(conn, ["c", "a", "d"]) == "tables c, d missing"
    finally:
        engine.dispose()
    blob = bytearray(db.read_bytes())
    blob[4096 * 2:4096 * 4] = b"\xa5" * (4096 * 2)  # two of the tables' pages
    db.write_bytes(bytes(blob))
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            why = damage(conn, ["a", "b"])
    finally:
        engine.dispose()
    assert why is not None and "malformed" in why, why


def test_damage_raises_what_is_not_damage(tmp_path: Path) -> None:
    """A store another process holds locked is not a damaged one: the error is raised, not
    returned as the store's damage."""
    import sqlalchemy as sa
    from sqlalchemy.exc import OperationalError

    from accelbench.store.base import damage

    db = tmp_path / "locked.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE a (x INTEGER)")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    engine = sa.create_engine(f"sqlite:///{db}", connect_args={"timeout": 0})
    try:
        with engine.connect() as conn, pytest.raises(OperationalError, match="locked"):
            damage(conn, ["a"])
    finally:
        engine.dispose()
        holder.execute("ROLLBACK")
        holder.close()
