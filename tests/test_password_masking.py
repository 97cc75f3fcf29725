"""Issue 23, item 3: a store URL's password is never shown, written or stored.

A throwaway PostgreSQL cluster WITH password authentication (scram-sha-256), reached over
a Unix socket only, holds a few results; every subcommand (and its error paths) runs
against it through a URL with a planted password, and the password is looked for in
every stdout, stderr, written file and in the database's own rows. Skipped cleanly where
PostgreSQL's server binaries or psycopg are missing (a failure in CI, like
tests/test_store_postgres.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from accelbench.store import open_store
from accelbench.store.base import display_url, hide_secrets
from tests.conftest import run_cli, run_cli_many
from tests.test_store import make_result
from tests.test_store_postgres import pg_cluster

SECRET = "Pl4ntedS3cret-xyz"
ADMIN_SECRET = "Adm1nS3cret-qrs"


@pytest.fixture(scope="module")
def pg_secret_url() -> Iterator[str]:
    with pg_cluster(ADMIN_SECRET) as admin_url:
        admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE USER planted PASSWORD '{SECRET}'")
            conn.exec_driver_sql("CREATE DATABASE accel OWNER planted")
        admin.dispose()
        host = admin_url.split("?host=", 1)[1]
        yield f"postgresql+psycopg://planted:{SECRET}@/accel?host={host}"


def test_password_authentication_is_really_on(pg_secret_url: str) -> None:
    wrong = pg_secret_url.replace(SECRET, "wrong-password")
    proc = run_cli("results", db=None, ACCELBENCH_DB=wrong)
    assert proc.returncode == 2
    assert "password authentication failed" in proc.stderr
    assert "wrong-password" not in proc.stderr


def _files_text(folder: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace")
                     for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow
def test_no_command_shows_writes_or_stores_the_password(pg_secret_url: str,
                                                        tmp_path: Path) -> None:
    url = pg_secret_url
    with open_store(url) as st:
        for i, (workload, precision) in enumerate([("lstm", "fp32"), ("lstm", "amp_bf16"),
                                                    ("transformer", "fp32")]):
            st.save(make_result(f"pw{i}", workload, precision=precision, suite="pwsuite",
                                finished=f"2026-01-01T00:00:0{i}.000+00:00"))
    out = tmp_path / "out"
    out.mkdir()
    unreachable = f"postgresql+psycopg://planted:{SECRET}@127.0.0.1:1/accel"
    no_socket = f"postgresql+psycopg://planted:{SECRET}@/accel?host={tmp_path}/nosock"
    query_pw = url.replace(f":{SECRET}@", "@") + f"&password={SECRET}"
    calls: list[tuple[tuple[str, ...], str]] = [
        (("list",), url),
        (("devices",), url),
        (("run", "lstm", "--size", "tiny", "--iterations", "3", "--max-time", "1",
          "--no-energy"), url),
        (("suite", "quick", "--dry-run"), url),
        (("suite", "quick", "--dry-run", "--json"), url),
        (("suite", "status", "nosuch-suite"), url),
        (("results",), url),
        (("results", "--json"), url),
        (("results", "--workload", "nosuch"), url),
        (("report", "--out", str(out / "report"), "--no-reference"), url),
        (("report", "--out", str(out / "r2"), "--workload", "nosuch"), url),
        (("compare", "precision=fp32", "precision=amp_bf16", "--workload", "lstm"), url),
        (("compare", "precision=fp32", "precision=amp_bf16", "--json"), url),
        (("compare", "nosuch1", "nosuch2"), url),
        (("compare", "suite:nosuch", "suite:pwsuite"), url),
        (("compare", "workload=lstm,precision=amp_bf16", "workload=transformer"), url),
        (("recommend", "lstm"), url),
        (("recommend", "lstm", "--json"), url),
        (("recommend", "nosuchworkload"), url),
        (("export", "--format", "csv", "--out", str(out / "x.csv")), url),
        (("export", "--format", "json", "--out", str(out / "x.json")), url),
        (("export", "--format", "json"), url),
        (("reference",), url),
        (("ops", "--list"), url),
        (("peaks", "--no-measure"), url),
        (("roofline", "--out", str(out / "roof"), "--json"), url),
        (("doctor", "--probe-s", "0"), url),
        (("sweep-report", "nosuch-sweep"), url),
        (("sweep", "lstm", "--size", "tiny", "--power-limits", "auto"), url),
        (("store", "check"), url),
        (("store", "check", "--json"), url),
        (("results",), unreachable),
        (("run", "lstm", "--size", "tiny", "--iterations", "3"), unreachable),
        (("--debug", "results"), unreachable),
        (("results",), no_socket),
        (("report", "--out", str(out / "r3")), no_socket),
        (("results",), query_pw),
        (("results",), url.replace("postgresql+psycopg", "postgresql+nosuchdriver")),
        (("results",), url.replace("@/accel", "@:notaport/accel")),
    ]
    both = {"suite", "sweep"}  # they print command lines built from --db
    planned = []
    for argv, db in calls:
        # --db URL; and ACCELBENCH_DB=URL where a command prints a command line or the
        # store's name (the measurement once: it costs seconds)
        hows = ("env",) if argv[0] == "run" and db == url else (
            ("flag", "env") if argv[0] in both and db == url else ("flag",))
        planned += [(argv, db, how) for how in hows]
    # Independent invocations, several at a time (most wait on the store or a probe).
    procs = run_cli_many([(("--db", db, *argv) if how == "flag" else argv,
                           {} if how == "flag" else {"ACCELBENCH_DB": db})
                          for argv, db, how in planned])
    codes = {}
    for (argv, db, how), proc in zip(planned, procs, strict=True):
        shown = proc.stdout + proc.stderr
        assert SECRET not in shown, (argv, how, shown[-2000:])
        assert "Traceback" not in shown or argv[0] == "--debug", (argv, shown[-2000:])
        codes[(argv, db, how)] = proc.returncode
    # The calls did run (not all refused before reaching the store).
    assert codes[(("results",), url, "flag")] == 0
    assert codes[(("results", "--json"), url, "flag")] == 0
    assert codes[(("report", "--out", str(out / "report"), "--no-reference"), url,
                  "flag")] == 0
    assert codes[(("run", "lstm", "--size", "tiny", "--iterations", "3", "--max-time", "1",
                   "--no-energy"), url, "env")] == 0
    assert codes[(("compare", "nosuch1", "nosuch2"), url, "flag")] == 2
    assert codes[(("recommend", "lstm"), url, "flag")] in (0, 1)
    for (argv, db, _how), code in codes.items():
        if db in (unreachable, no_socket) and argv[0] != "--debug":
            assert code == 2, argv
    # Written files: the report (HTML, Markdown), exports, roofline data.
    written = _files_text(out)
    assert "accel" in written and SECRET not in written
    # Nothing stored: no row of any table holds it.
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            tables = sa.inspect(conn).get_table_names()
            dump = "\n".join(str(row) for t in tables
                             for row in conn.exec_driver_sql(f'SELECT * FROM "{t}"'))
    finally:
        engine.dispose()
    assert "pw0" in dump and SECRET not in dump


@pytest.mark.parametrize("url", [
    f"postgresql+psycopg://u:{SECRET}@host/db",
    f"postgresql://u:{SECRET}@host:notaport/db",
    f"postgresql://u:{SECRET}@/db?host=/run/sock",
    f"postgresql://u@host/db?password={SECRET}&sslmode=require",
    f"postgresql://u:{SECRET[:6]}@{SECRET[6:]}@host/db",
    f"postgresql://u:{SECRET[:6]}/{SECRET[6:]}@host/db",
    f"mysql://u:{SECRET}@[::1/db",
])
def test_display_url_masks_every_form(url: str) -> None:
    shown = display_url(url)
    assert SECRET not in shown and SECRET[:6] not in shown and SECRET[6:] not in shown
    assert "***" in shown
    said = hide_secrets(f"driver said: bad value in {url!r}", url)
    assert SECRET not in said and SECRET[:6] not in said and SECRET[6:] not in said
    if f":{SECRET}@" in url:  # a driver quoting the bare password
        assert hide_secrets(f"password {SECRET} refused", url) == "password *** refused"


def test_display_url_keeps_what_has_no_secret() -> None:
    assert display_url("sqlite:////data/r.db") == "/data/r.db"
    assert display_url("postgresql://u@host:5432/db") == "postgresql://u@host:5432/db"
    assert display_url("results.db") == "results.db"
