"""store.base.damage when SQLite's quick_check answers with problem rows rather than an
error (issue 46: the mutant ``len(rows) > 1`` -> ``>=`` survived, and one problem would
have read "(+0 more problem(s))").

A real SQLite file is made to break a NOT NULL constraint the way a damaged file can:
the rows hold NULLs, then the schema text is edited to declare the column NOT NULL.
quick_check checks NOT NULL constraints and answers one row per NULL found.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa

from accelbench.store.base import damage


def _nulls_under_not_null(db: Path, nulls: int) -> None:
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE a (x INTEGER, y INTEGER)")
        con.executemany("INSERT INTO a VALUES (?, ?)",
                        [(i, None) for i in range(nulls)] + [(99, 1)])
        con.execute("PRAGMA writable_schema = ON")
        con.execute("UPDATE sqlite_master SET sql = "
                    "'CREATE TABLE a (x INTEGER, y INTEGER NOT NULL)' WHERE name = 'a'")
    con.close()


def _damage_of(db: Path) -> str | None:
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return damage(conn, ["a"])
    finally:
        engine.dispose()


def test_one_quick_check_problem_is_named_alone(tmp_path: Path) -> None:
    db = tmp_path / "one.db"
    _nulls_under_not_null(db, 1)
    assert _damage_of(db) == "integrity check failed: NULL value in a.y"


def test_several_quick_check_problems_name_the_first_and_count_the_rest(
        tmp_path: Path) -> None:
    db = tmp_path / "three.db"
    _nulls_under_not_null(db, 3)
    assert _damage_of(db) == "integrity check failed: NULL value in a.y (+2 more problem(s))"
