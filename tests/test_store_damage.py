"""Damaged stores (issue 47): every read says the store is damaged in one line and exits 2
(an unusable store), ``store check`` lists every problem, and nothing writes to the store.

A real store with a real result (``test_mlp`` measured through the API), copied and
damaged five ways: a schema version from the future (v999), a dropped column, a record
whose JSON does not parse, a file cut in half and a page overwritten; then each read
command runs as a real ``accelbench`` process and the store's bytes are compared before
and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from accelbench import api
from tests.conftest import FAULTY_PLUGIN, run_cli_many


def _v999(db: Path) -> None:
    with sqlite3.connect(db) as con:
        con.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")


def _dropped_column(db: Path) -> None:
    with sqlite3.connect(db) as con:
        con.execute("ALTER TABLE results DROP COLUMN energy_source")


def _bad_json(db: Path) -> None:
    with sqlite3.connect(db) as con:
        con.execute("UPDATE results SET record_json = '{\"id\": \"x\", ' || 'oops'")


def _truncated(db: Path) -> None:
    os.truncate(db, db.stat().st_size // 2)


def _overwritten_page(db: Path) -> None:
    # The results table's root page, its length kept: the catalogue still opens, and a
    # read of results meets the page and SQLite says "malformed".
    with sqlite3.connect(db) as con:
        (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'results'"
                              ).fetchone()
        (size,) = con.execute("PRAGMA page_size").fetchone()
    con.close()
    with open(db, "r+b") as f:
        f.seek((root - 1) * size)
        f.write(b"\xff" * size)


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "v999": (_v999, "v999"),
    "dropped": (_dropped_column, "is damaged (column energy_source of table results missing)"),
    "json": (_bad_json, "is damaged (record "),
    "truncated": (_truncated, "is damaged (database disk image is malformed)"),
    "page": (_overwritten_page, "is damaged (database disk image is malformed)"),
}

#: Reads that open the store (its catalogue is checked at every open).
OPENING = (
    ("results",), ("results", "--json"), ("export", "--format", "csv"),
    ("export", "--format", "json"), ("report", "--out", "{tmp}/report"),
    ("compare", "precision=fp32", "precision=amp_bf16"), ("recommend", "test_mlp"),
    ("reference", "--match"), ("ops", "--list"), ("peaks", "--no-measure"),
    ("roofline", "--out", "{tmp}/roofline"), ("suite", "status", "s1"),
    ("suite", "resume", "s1", "--dry-run"), ("suite", "quick", "--workload", "lstm",
                                            "--dry-run"),
)
#: Of those, the ones that read result records (a record that does not parse is met only
#: by a read of it: checking every record at every open would make each read as slow as
#: ``store check``, which is where a store is checked whole).
RECORD_READS = OPENING[:8]


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("damage") / "sound.db"
    real = api.run("test_mlp", size="tiny", max_time=0.3, plugins=[FAULTY_PLUGIN], db=str(db),
                   tag="real")
    assert real.status == "ok"
    return db


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_reads_of_a_damaged_store_refuse_in_one_line_and_write_nothing(
        sound: Path, tmp_path: Path, kind: str) -> None:
    damage, said = DAMAGE[kind]
    db = tmp_path / "damaged.db"
    shutil.copyfile(sound, db)
    damage(db)
    before = _sha(db)
    reads = RECORD_READS if kind in ("json", "page") else OPENING
    argvs = [tuple(a.replace("{tmp}", str(tmp_path)) for a in argv) for argv in reads]
    argvs.append(("store", "check"))
    procs = run_cli_many([(("--plugin", str(FAULTY_PLUGIN), *argv), {}) for argv in argvs],
                         db=db, workers=3)
    for argv, proc in zip(argvs, procs, strict=True):
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (argv, proc.stderr)
        assert len(lines) == 1, (argv, lines)  # one problem: one line, store check too
        assert lines[0].startswith("accelbench: error: results store ") and said in lines[0], \
            (argv, lines)
        if kind == "v999":
            assert "newer than this accelbench (v" in lines[0]
        if argv != ("store", "check"):
            assert "accelbench store check" in lines[0], (argv, lines)
        # A stream to standard output may have begun before the bad record was met (its
        # exit code says it is incomplete); a store refused at open prints nothing.
        assert proc.stdout == "" or kind in ("json", "page"), (argv, proc.stdout[:300])
    assert _sha(db) == before  # not a byte written
    assert not (tmp_path / "report").exists() and not (tmp_path / "roofline").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.db"]  # no journal left


def test_store_check_lists_every_problem_and_json_says_so(sound: Path, tmp_path: Path) -> None:
    db = tmp_path / "many.db"
    shutil.copyfile(sound, db)
    _dropped_column(db)
    _bad_json(db)
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE suite_plans")
    before = _sha(db)
    text, js = run_cli_many([(("store", "check"), {}), (("store", "check", "--json"), {})],
                            db=db)
    assert text.returncode == js.returncode == 2
    lines = text.stderr.strip().splitlines()
    assert lines[0].startswith("accelbench: error: results store ") and "3 problems" in lines[0]
    assert [line.strip().split(" ")[0] for line in lines[1:]] == ["column", "table", "record"]
    assert "suite_plans missing" in lines[2] and "not valid JSON" in lines[3]
    doc = json.loads(js.stdout)
    assert doc["ok"] is False and len(doc["problems"]) == 3
    assert _sha(db) == before


def test_store_check_of_a_sound_store_reads_every_record(sound: Path) -> None:
    before = _sha(sound)
    (proc,) = run_cli_many([(("store", "check"), {})], db=sound)
    assert proc.returncode == 0, proc.stderr
    assert "ok (integrity check passed" in proc.stdout and "every record readable" in proc.stdout
    assert _sha(sound) == before
