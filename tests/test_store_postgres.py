"""The results store on a real PostgreSQL server (a team's shared store, by URL).

A throwaway cluster is created in a temporary folder and reached over a Unix socket
only (no TCP). Needs PostgreSQL's server binaries (Debian: postgresql) and psycopg;
.ci/run installs both, so in CI their absence is a failure, elsewhere a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from accelbench.errors import StoreError
from accelbench.store import ResultFilter, open_store, schema
from tests.test_store import make_result
from tests.test_store_hardening import _CLAIM_CHILD, _OPEN_CHILD, _run_together

PG_BIN = Path("/usr/lib/postgresql")


def _find(tool: str) -> str | None:
    found = shutil.which(tool)
    if found:
        return found
    candidates = sorted(PG_BIN.glob(f"*/bin/{tool}"))
    return str(candidates[-1]) if candidates else None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL test cannot run in CI: {reason}")
    pytest.skip(reason)


@contextmanager
def pg_cluster(admin_password: str | None = None) -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a Unix socket (no TCP); yields the URL of its
    ``postgres`` superuser (``trust`` authentication, or ``scram-sha-256`` with
    ``admin_password``). Skips, or fails in CI, when the server binaries are missing."""
    if not os.environ.get("CI"):
        pytest.importorskip("psycopg")
    initdb, pg_ctl = _find("initdb"), _find("pg_ctl")
    if initdb is None or pg_ctl is None:
        _unavailable("PostgreSQL server binaries not installed (apt-get install postgresql)")
    # Not pytest's tmp_path: its parents are private to root, and the server runs as
    # postgres; a short path also keeps the socket name under the 107-byte limit.
    root = Path(tempfile.mkdtemp(prefix="accelbench-pg-"))
    data, sock, pwfile = root / "data", root / "sock", root / "pw"
    sock.mkdir()
    auth = ["-A", "trust"]
    if admin_password is not None:
        pwfile.write_text(admin_password + "\n")
        auth = ["--auth=scram-sha-256", f"--pwfile={pwfile}"]
    # The server refuses to run as root: run it as the postgres user when we are root.
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            _unavailable("running as root without runuser")
        for path in (root, sock, *([pwfile] if admin_password is not None else [])):
            shutil.chown(path, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*prefix, initdb, "-D", str(data), "-U", "postgres", *auth],
                   check=True, capture_output=True, timeout=120)
    opts = f"-k {sock} -c listen_addresses='' -c fsync=off"
    subprocess.run([*prefix, pg_ctl, "-D", str(data), "-o", opts, "-w", "-l",
                    str(root / "log"), "start"], check=True, capture_output=True, timeout=120)
    secret = f":{admin_password}" if admin_password is not None else ""
    try:
        yield f"postgresql+psycopg://postgres{secret}@/postgres?host={sock}"
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60, check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with pg_cluster() as url:
        yield url


def test_round_trip_query_and_resume_keys_on_postgres(pg_url: str) -> None:
    with open_store(pg_url) as st:
        assert st.schema_version() >= 3
        st.save(make_result("pg1", "lstm", finished="2026-01-01T00:00:01.000+00:00", suite="s"))
        st.save(make_result("pg2", "transformer", status="oom",
                            finished="2026-01-01T00:00:02.000+00:00", suite="s"))
        assert [r.id for r in st.query()] == ["pg2", "pg1"]
        back = st.get("pg1")
        assert back is not None and back.iteration_times_s == make_result("x").iteration_times_s
        assert st.case_keys("s") == {make_result("a", "lstm").spec.case_key(),
                                     make_result("b", "transformer").spec.case_key()}
        assert [r.id for r in st.query(ResultFilter(status="oom"))] == ["pg2"]
    # Opening again (another machine of the team) migrates nothing and sees the same rows.
    with open_store(pg_url) as st:
        assert {r.id for r in st.query()} == {"pg1", "pg2"}


def test_peaks_and_ops_tables_exist_on_postgres(pg_url: str) -> None:
    with open_store(pg_url) as st:
        tables = set(sa.inspect(st.engine).get_table_names())
    assert {"meta", "results", "op_results", "peaks", "claims"} <= tables


def _admin(pg_url: str, *statements: str) -> None:
    engine = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for stmt in statements:
                conn.exec_driver_sql(stmt)
    finally:
        engine.dispose()


def _fresh_db(pg_url: str, name: str) -> str:
    _admin(pg_url, f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}")
    return sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False)


def test_eight_processes_create_one_new_postgres_store_at_once(
    pg_url: str, tmp_path: Path
) -> None:
    url = _fresh_db(pg_url, "concurrent_new")
    runs = _run_together(tmp_path, _OPEN_CHILD, [[url]] * 8)
    assert [out for rc, out in runs if rc != 0] == []
    with open_store(url) as st:
        assert st.schema_version() == schema.SCHEMA_VERSION


def test_two_suites_with_one_id_on_postgres_store_each_case_once(
    pg_url: str, tmp_path: Path
) -> None:
    url = _fresh_db(pg_url, "concurrent_claims")
    open_store(url).close()
    runs = _run_together(tmp_path, _CLAIM_CHILD, [[url], [url]])
    assert [rc for rc, _ in runs] == [0, 0], runs
    won = [set(map(int, out.split())) for _rc, out in runs]
    assert won[0].isdisjoint(won[1]) and won[0] | won[1] == set(range(1, 21))
    with open_store(url) as st:
        assert len(st.case_keys("shared")) == 20
        assert len(st.query(ResultFilter(suite_id="shared"))) == 20


def test_read_only_user_is_refused_and_writer_passes(pg_url: str) -> None:
    url = _fresh_db(pg_url, "readonly_check")
    with open_store(url) as st:
        st.save(make_result("ro1"))
        st.check_writable()
        assert [r.id for r in st.query()] == ["ro1"]  # the probe left no row
    _admin(url, "DROP ROLE IF EXISTS reader", "CREATE ROLE reader LOGIN",
           "GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader")
    reader = sa.make_url(url).set(username="reader").render_as_string(hide_password=False)
    with open_store(reader) as st:
        assert [r.id for r in st.query()] == ["ro1"]
        with pytest.raises(StoreError, match="is read-only: .*permission denied"):
            st.check_writable()


def test_malformed_row_and_bad_version_on_postgres(pg_url: str) -> None:
    url = _fresh_db(pg_url, "malformed")
    with open_store(url) as st:
        st.save(make_result("good"))
        st.save(make_result("bad"))
        with st.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE results SET record_json = '{' WHERE id = 'bad'")
        with pytest.raises(StoreError, match=r"is damaged \(record bad: not valid JSON"):
            st.query()
        with st.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE meta SET value = 'abc'")
    with pytest.raises(StoreError, match="unreadable schema version 'abc'"):
        open_store(url)


def test_migration_v8_backfills_phase_columns_on_postgres(pg_url: str) -> None:
    """The same migration on PostgreSQL: a v7 store's record with phases gets its phase
    columns, a record without keeps NULLs; a new save fills them."""
    import json

    from tests.phase_records import make_phases, with_phases

    url = _fresh_db(pg_url, "phases_v7")
    with open_store(url, _target=7) as old, old.engine.begin() as conn:
        for rid, rec in (("withph", with_phases(make_result("withph")).to_dict()),
                         ("nullph", make_result("nullph").to_dict())):
            conn.execute(sa.text(
                "INSERT INTO results (id, status, workload, size, batch_size, precision, "
                "device, framework, started_at, finished_at, record_json) VALUES (:id, 'ok', "
                "'lstm', 'tiny', 4, 'fp32', 'cpu', 'torch', 't', 't', :rec)"),
                {"id": rid, "rec": json.dumps(rec)})
    with open_store(url) as st:
        assert st.schema_version() == schema.SCHEMA_VERSION >= 8
        st.save(with_phases(make_result("new"), make_phases(communication_s=0.01)))
        back = st.get("withph")
        assert back is not None and back.phases is not None
        with st.engine.connect() as conn:
            rows = {r[0]: r[1:] for r in conn.execute(sa.text(
                "SELECT id, phase_forward_s, phase_communication_s FROM results"))}
    step = make_result("x").stats.median_s  # type: ignore[union-attr]
    assert rows["withph"][0] == pytest.approx(0.3 * step) and rows["withph"][1] is None
    assert rows["nullph"] == (None, None)
    assert rows["new"] == pytest.approx((0.030, 0.01))
