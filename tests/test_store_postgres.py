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
from pathlib import Path

import pytest

from accelbench.store import ResultFilter, open_store
from tests.test_store import make_result

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


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    if not os.environ.get("CI"):
        pytest.importorskip("psycopg")
    initdb, pg_ctl = _find("initdb"), _find("pg_ctl")
    if initdb is None or pg_ctl is None:
        _unavailable("PostgreSQL server binaries not installed (apt-get install postgresql)")
    # Not pytest's tmp_path: its parents are private to root, and the server runs as
    # postgres; a short path also keeps the socket name under the 107-byte limit.
    root = Path(tempfile.mkdtemp(prefix="accelbench-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    # The server refuses to run as root: run it as the postgres user when we are root.
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            _unavailable("running as root without runuser")
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*prefix, initdb, "-D", str(data), "-U", "postgres", "-A", "trust"],
                   check=True, capture_output=True, timeout=120)
    opts = f"-k {sock} -c listen_addresses='' -c fsync=off"
    subprocess.run([*prefix, pg_ctl, "-D", str(data), "-o", opts, "-w", "-l",
                    str(root / "log"), "start"], check=True, capture_output=True, timeout=120)
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={sock}"
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60, check=False)
        shutil.rmtree(root, ignore_errors=True)


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
    import sqlalchemy as sa

    with open_store(pg_url) as st:
        tables = set(sa.inspect(st.engine).get_table_names())
    assert {"meta", "results", "op_results", "peaks"} <= tables
