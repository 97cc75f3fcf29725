"""Store faults survived: concurrent opens and suites, read-only stores, malformed rows,
bad schema versions and paths that cannot hold a database (issue 9).

Concurrency is tested with real processes on real SQLite files, released together by a
file barrier, so the races the tests look for actually happen.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import sqlalchemy as sa

from accelbench.errors import StoreError
from accelbench.result import Result, Stats
from accelbench.spec import RunSpec
from accelbench.store import ResultFilter, open_store, schema
from accelbench.store.db import Store
from tests.test_store import make_result

# --------------------------------------------------------------------------- helpers

_BARRIER = """
import os, sys, time
ready, go = sys.argv[1], sys.argv[2]
open(ready, "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.001)
"""

_OPEN_CHILD = _BARRIER + """
from accelbench.store import open_store
try:
    with open_store(sys.argv[3]) as st:
        print("version", st.schema_version())
except Exception as exc:
    print("FAIL", type(exc).__name__, exc)
    sys.exit(1)
"""

_CLAIM_CHILD = _BARRIER + """
from accelbench.result import Result
from accelbench.spec import RunSpec
from accelbench.store import open_store
won = []
with open_store(sys.argv[3]) as st:
    for batch in range(1, 21):
        spec = RunSpec(workload="lstm", size="tiny", batch_size=batch)
        key = spec.case_key()
        if not st.claim_case("shared", key, ttl_s=60):
            continue
        won.append(batch)
        time.sleep(0.005)  # "runs" the case while holding the claim
        st.save(Result(id=f"{os.getpid()}-{batch}", spec=spec, status="error",
                       sample_unit="sentence", samples_per_step=batch, error="stand-in",
                       suite_id="shared", started_at="t", finished_at="t"))
        st.release_case("shared", key)
print(" ".join(map(str, won)))
"""


def _run_together(tmp_path: Path, code: str, args: list[list[str]]) -> list[tuple[int, str]]:
    """Start one process per ``args`` entry, release them at the same instant, return
    (exit code, stdout) of each."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    go = tmp_path / "go"
    procs = []
    for i, extra in enumerate(args):
        ready = tmp_path / f"ready{i}"
        procs.append((ready, subprocess.Popen(
            [sys.executable, str(script), str(ready), str(go), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )))
    deadline = time.monotonic() + 120
    while not all(r.exists() for r, _p in procs):
        assert time.monotonic() < deadline, "children did not start"
        assert all(p.poll() is None for _r, p in procs), "a child died before the barrier"
        time.sleep(0.01)
    go.touch()
    out = []
    for _r, p in procs:
        stdout, _ = p.communicate(timeout=120)
        out.append((p.returncode, stdout.strip()))
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- concurrency


def test_eight_processes_create_one_new_store_at_once(tmp_path: Path) -> None:
    db = tmp_path / "new" / "r.db"
    runs = _run_together(tmp_path, _OPEN_CHILD, [[str(db)]] * 8)
    failures = [out for rc, out in runs if rc != 0]
    assert failures == [], failures
    assert all(out == f"version {schema.SCHEMA_VERSION}" for _rc, out in runs)
    con = sqlite3.connect(db)
    assert con.execute("SELECT key, value FROM meta").fetchall() == [
        ("schema_version", str(schema.SCHEMA_VERSION))
    ]
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "results", "op_results", "peaks", "claims"} <= tables


def test_eight_processes_migrate_one_v4_store_at_once(tmp_path: Path) -> None:
    db = tmp_path / "v4.db"
    with open_store(str(db), _target=4) as old:
        assert old.schema_version() == 4
        old.save(make_result("keep1", suite="s"))
        old.save(make_result("keep2", "transformer"))
    runs = _run_together(tmp_path, _OPEN_CHILD, [[str(db)]] * 8)
    assert [out for rc, out in runs if rc != 0] == []
    with open_store(str(db)) as st:
        assert st.schema_version() == schema.SCHEMA_VERSION
        assert {r.id for r in st.query()} == {"keep1", "keep2"}
        assert st.claim_case("s", "k", ttl_s=10)  # the new table works


def test_two_suites_with_one_id_store_each_case_once(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    open_store(str(db)).close()
    runs = _run_together(tmp_path, _CLAIM_CHILD, [[str(db)], [str(db)]])
    assert [rc for rc, _ in runs] == [0, 0], runs
    won = [set(map(int, out.split())) for _rc, out in runs]
    assert won[0].isdisjoint(won[1]), "a case was claimed by both"
    assert won[0] | won[1] == set(range(1, 21))
    rows = sqlite3.connect(db).execute(
        "SELECT case_key, count(*) FROM results WHERE suite_id = 'shared' GROUP BY case_key"
    ).fetchall()
    assert len(rows) == 20 and all(n == 1 for _k, n in rows)
    assert sqlite3.connect(db).execute("SELECT count(*) FROM claims").fetchone() == (0,)


# --------------------------------------------------------------------------- claims


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _put_claim(st: Store, key: str, *, host: str, pid: int, age_s: float, ttl_s: float) -> None:
    with st.engine.begin() as conn:
        conn.execute(schema.claims.insert().values(
            suite_id="s", case_key=key, owner=f"{host}:{pid}:other", hostname=host, pid=pid,
            claimed_at_s=time.time() - age_s, ttl_s=ttl_s,
        ))


def test_claims_stale_live_stored_and_released(tmp_path: Path) -> None:
    import socket

    here = socket.gethostname()
    with open_store(str(tmp_path / "r.db")) as st, open_store(str(tmp_path / "r.db")) as other:
        # A claim of a process that is gone on this host is taken over at once ...
        _put_claim(st, "dead", host=here, pid=_dead_pid(), age_s=0, ttl_s=3600)
        assert st.claim_case("s", "dead", ttl_s=60)
        # ... one past its ttl anywhere, but not a fresh one of another host.
        _put_claim(st, "expired", host="elsewhere", pid=1, age_s=120, ttl_s=60)
        assert st.claim_case("s", "expired", ttl_s=60)
        _put_claim(st, "remote", host="elsewhere", pid=1, age_s=1, ttl_s=60)
        assert not st.claim_case("s", "remote", ttl_s=60)
        # A live process's claim (this one's, through another store) holds.
        assert other.claim_case("s", "live", ttl_s=60)
        assert not st.claim_case("s", "live", ttl_s=60)
        assert other.claim_case("s", "live", ttl_s=60)  # renewing one's own claim
        other.release_case("s", "live")
        assert st.claim_case("s", "live", ttl_s=60)
        # A case already stored in the suite is never claimed again.
        stored = make_result("done1", suite="s")
        st.save(stored)
        assert not other.claim_case("s", stored.spec.case_key(), ttl_s=60)
        assert not other.claim_case("s", "dead", ttl_s=60)  # st holds it
        owners = dict(sqlite3.connect(tmp_path / "r.db").execute(
            "SELECT case_key, owner FROM claims"
        ).fetchall())
        assert owners["dead"] == owners["expired"] == owners["live"] == st.claim_owner
        assert owners["remote"] == "elsewhere:1:other"
        with pytest.raises(Exception, match="claim ttl"):
            st.claim_case("s", "x", ttl_s=float("nan"))


# --------------------------------------------------------------------------- writability


def test_writable_store_passes_and_leaves_no_trace(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(make_result("w1"))
    before = _sha(db)
    with open_store(str(db)) as st:
        st.check_writable()
        st.check_writable()
        assert [r.id for r in st.query()] == ["w1"]
    assert _sha(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db"]  # no journal left


def test_read_only_store_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(make_result("ro1"))
    before = _sha(db)
    # Works as root too: SQLite itself opens the file read-only.
    with open_store(f"sqlite:///file:{db}?mode=ro&uri=true") as ro:
        assert [r.id for r in ro.query()] == ["ro1"]  # reading is fine
        with pytest.raises(StoreError, match="is read-only: .*readonly") as info:
            ro.check_writable()
    assert "\n" not in str(info.value)
    assert _sha(db) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod; the mode=ro "
                    "URL test covers the read-only path as root")
def test_chmod_read_only_file_and_folder_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    open_store(str(db)).close()
    db.chmod(0o444)
    with open_store(str(db)) as st, pytest.raises(StoreError, match="file .* is not writable"):
        st.check_writable()
    db.chmod(0o644)
    tmp_path.chmod(0o555)
    try:
        with open_store(str(db)) as st, pytest.raises(StoreError, match="journal"):
            st.check_writable()
    finally:
        tmp_path.chmod(0o755)


# --------------------------------------------------------------------------- malformed rows


def _good_record(rid: str) -> dict[str, object]:
    return make_result(rid).to_dict()


def _bad_records() -> dict[str, tuple[str, str]]:
    """id -> (record_json, what the warning must say)."""
    missing = _good_record("bad-missing")
    del missing["spec"]
    invalid = _good_record("bad-spec")
    invalid["spec"]["batch_size"] = 0  # type: ignore[index]
    wrong = _good_record("bad-types")
    wrong["samples_per_step"] = "four"
    times = _good_record("bad-times")
    times["iteration_times_s"] = ["slow", 0.1]
    stats = _good_record("bad-stats")
    stats["stats"] = "fast"
    status = _good_record("bad-status")
    status["status"] = "melted"
    return {
        "bad-json": ("{not json", "not valid JSON"),
        "bad-array": ("[1, 2]", "not an object"),
        "bad-missing": (json.dumps(missing), "missing key 'spec'"),
        "bad-spec": (json.dumps(invalid), "batch size"),
        "bad-types": (json.dumps(wrong), "samples_per_step"),
        "bad-times": (json.dumps(times), "iteration_times_s"),
        "bad-stats": (json.dumps(stats), "AttributeError"),
        "bad-status": (json.dumps(status), "unknown status 'melted'"),
    }


def _insert_raw(db: Path, rid: str, blob: str, finished: str = "2026-01-01T00:00:00") -> None:
    con = sqlite3.connect(db)
    con.execute(
        "INSERT INTO results (id, suite_id, case_key, status, workload, size, batch_size,"
        " precision, device, framework, started_at, finished_at, record_json) VALUES"
        " (?, 's', 'k', 'ok', 'lstm', 'tiny', 4, 'fp32', 'cpu', 'torch', 't', ?, ?)",
        (rid, finished, blob),
    )
    con.commit()
    con.close()


def test_each_kind_of_malformed_record_refuses_the_read_and_store_check_lists_all(
        tmp_path: Path) -> None:
    """A result record that cannot be read back makes the store damaged: a read that left
    it out would answer wrong, so every read naming it refuses with one line (issue 47),
    and ``check_store`` lists every such record."""
    from accelbench.store import UnusableStoreError, check_store

    db = tmp_path / "r.db"
    bad = _bad_records()
    with open_store(str(db)) as st:
        st.save(make_result("good1", finished="2026-01-01T00:00:01.000+00:00"))
        st.save(make_result("good2", finished="2026-01-01T00:00:02.000+00:00"))
    for rid, (blob, _why) in bad.items():
        _insert_raw(db, rid, blob)
    with open_store(str(db)) as st:
        # The newest two are sound: a read that stops before the bad ones answers.
        assert [r.id for r in st.query(ResultFilter(limit=2))] == ["good2", "good1"]
        assert st.get("good1") is not None
        for rid, (_blob, why) in bad.items():
            with pytest.raises(UnusableStoreError) as info:
                st.get(rid)
            msg = str(info.value)
            assert f"is damaged (record {rid}: " in msg and why in msg, msg
            assert "\n" not in msg and "accelbench store check" in msg
        with pytest.raises(UnusableStoreError, match="is damaged"):
            st.query()
        with pytest.raises(UnusableStoreError, match="is damaged"):
            list(st.iter_query(ResultFilter(suite_id="s")))
        assert st.skipped_rows == []
    found = check_store(str(db))
    assert found["results"] == len(bad) + 2
    assert sorted(p.split(":")[0] for p in found["problems"]) == sorted(
        f"record {rid}" for rid in bad)
    for rid, (_blob, why) in bad.items():
        (line,) = [p for p in found["problems"] if p.startswith(f"record {rid}: ")]
        assert why in line


def test_op_results_and_peaks_with_malformed_rows_are_skipped(tmp_path: Path) -> None:
    from accelbench.opbench.cases import OpCase
    from accelbench.opbench.result import OpResult
    from accelbench.store.opbench import Peak

    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        case = OpCase(op="matmul", shape={"m": 8, "n": 8, "k": 8})
        st.save_op_result(OpResult(id="op-good", case=case, device="cpu", times_s=(0.1,)))
        st.save_op_result(OpResult(id="op-bad", case=case, device="cpu", times_s=(0.1,)))
        st.save_op_result(OpResult(id="op-shape", case=case, device="cpu"))
        st.save_raw_op_row({"op": "model", "shape": "{}", "precision": "fp32",
                             "device": "cpu", "pass_": "train_step", "status": "ok",
                             "times": "[]", "id": "model-bad"})
        st.save_peak(Peak(device="cpu", precision="fp32", value=1e9, unit="FLOP/s",
                           method="m", id="peak-good", created_at="2026-01-01"))
        st.save_peak(Peak(device="cpu", precision="fp16", value=1e9, unit="FLOP/s",
                           method="m", id="peak-bad", created_at="2026-01-02"))
    con = sqlite3.connect(db)
    con.execute("UPDATE op_results SET times = 'oops' WHERE id IN ('op-bad', 'model-bad')")
    con.execute("UPDATE op_results SET shape = '{\"m\": -1}' WHERE id = 'op-shape'")
    con.execute("UPDATE peaks SET details = '[1' WHERE id = 'peak-bad'")
    con.commit()
    with open_store(str(db)) as st, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [r.id for r in st.query_op_results()] == ["op-good"]
        assert st.query_raw_op_rows(op="model") == []
        assert [p.id for p in st.query_peaks()] == ["peak-good"]
        named = sorted(str(w.message).split(":")[0] for w in caught)
        assert named == [f"skipped malformed row {rid}" for rid in
                         ("model-bad", "op-bad", "op-shape", "peak-bad")]
        assert {rid for rid, _ in st.skipped_rows} == {"op-bad", "op-shape", "model-bad",
                                                      "peak-bad"}


# --------------------------------------------------------------------------- schema version


@pytest.mark.parametrize("value", ["abc", "-3", "4.5", ""])
def test_unreadable_schema_version_is_one_clear_error(tmp_path: Path, value: str) -> None:
    db = tmp_path / "r.db"
    open_store(str(db)).close()
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    con.commit()
    con.close()
    before = _sha(db)
    with pytest.raises(StoreError, match=f"unreadable schema version '{value}'") as info:
        open_store(str(db))
    assert "\n" not in str(info.value)
    assert _sha(db) == before


def test_meta_without_a_version_is_an_error(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    open_store(str(db)).close()
    con = sqlite3.connect(db)
    con.execute("DELETE FROM meta")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="no schema version"):
        open_store(str(db))


# --------------------------------------------------------------------------- paths


def test_paths_that_cannot_hold_a_store_are_one_line_errors(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    (tmp_path / "notdb.db").write_bytes(b"plain text, no database" * 50)
    cases = {
        "": "--db must not be empty",
        "   ": "--db must not be empty",
        str(afile / "x.db"): "is a file, not a folder",
        str(afile / "sub" / "x.db"): "cannot create its folder",
        "/proc/accelbench.db": "virtual file system",
        "/proc/self/status": "virtual file system",
        "/dev/null": "virtual file system",
        str(tmp_path): "is not a file",
        str(tmp_path / "notdb.db"): "not a database",
        str(tmp_path / ("x" * 300) / "r.db"): "cannot",
        "nosuchdialect://x/y": "cannot open results store",
        "postgresql://u@h:notaport/db": "database URL",
        "a\x00b.db": "cannot be resolved",
    }
    for db, expected in cases.items():
        with pytest.raises(StoreError, match=expected) as info:
            open_store(db)
        assert "\n" not in str(info.value), db
        with pytest.raises(StoreError):
            open_store(db, create=False)
    assert afile.read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "notdb.db"]


def test_errors_never_show_a_database_password(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    for url in (f"postgresql+psycopg://u:s3cret@/db?host={tmp_path}",
                "postgresql://u:s3cret@h:notaport/db"):
        with pytest.raises(StoreError) as info:
            open_store(url)
        assert "s3cret" not in str(info.value) and "***" in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root creates files in any folder")
def test_unwritable_parent_folder_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        with pytest.raises(StoreError, match="not writable|cannot create"):
            open_store(str(locked / "sub" / "r.db"))
        with pytest.raises(StoreError, match="not writable"):
            open_store(str(locked / "r.db"))
    finally:
        locked.chmod(0o755)


def test_limit_out_of_range_is_refused() -> None:
    with pytest.raises(Exception, match="--limit"):
        ResultFilter(limit=10**23)


# --------------------------------------------------------------------------- new statuses


def test_no_ci_diverged_and_insufficient_round_trip(tmp_path: Path) -> None:
    spec = RunSpec(workload="lstm", size="tiny", batch_size=2)
    stats = Stats(n=2, median_s=0.1, mean_s=0.1, trimmed_mean_s=0.1, trim_fraction=0.0,
                  std_s=0.0, min_s=0.1, max_s=0.1, samples_per_s=20.0,
                  samples_per_s_ci95=None, ci_rel_halfwidth=None, stop_reason="max_time")
    insufficient = Result(id="ins1", spec=spec, status="insufficient", sample_unit="s",
                          samples_per_step=2, stats=stats, iteration_times_s=(0.1, 0.1),
                          started_at="t", finished_at="2026-01-01T00:00:01")
    diverged = Result(id="div1", spec=spec, status="diverged", sample_unit="s",
                      samples_per_step=2, stats=stats, final_loss=float("nan"),
                      started_at="t", finished_at="2026-01-01T00:00:02")
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(insufficient)
        st.save(diverged)
        back = {r.id: r for r in st.query()}
        assert back["ins1"].status == "insufficient"
        assert back["ins1"].stats is not None and back["ins1"].stats.samples_per_s_ci95 is None
        assert back["div1"].status == "diverged" and back["div1"].final_loss is None
        assert [r.id for r in st.query(ResultFilter(status="diverged"))] == ["div1"]
        assert st.skipped_rows == []
    rows = sqlite3.connect(db).execute(
        "SELECT ci_low, ci_high, samples_per_s, record_json FROM results ORDER BY id"
    ).fetchall()
    for ci_low, ci_high, sps, blob in rows:
        assert ci_low is None and ci_high is None and sps == 20.0
        json.loads(blob, parse_constant=lambda c: pytest.fail(f"{c} in stored JSON"))


def test_store_tables_match_the_schema_module(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as st:
        insp = sa.inspect(st.engine)
        cols = {c["name"] for c in insp.get_columns("claims")}
    assert cols == {c.name for c in schema.claims.columns}
