"""Suites across a fleet: ``suite --launcher slurm`` on a real one-node Slurm cluster, and
``suite status``.

The cluster is Debian's slurm-wlm + munge, started on localhost by tests/slurm/cluster.sh
(slurm.conf written for this host; all state under a temporary folder) and stopped at
the end. It needs root and the packages; .ci/run installs them, so in CI their absence
is a failure, elsewhere a skip. The status logic is also tested without Slurm, on hand-made
rows in a real SQLite store.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelbench.errors import ConfigError, UnsupportedError
from accelbench.launchers.slurm import (
    SlurmLauncher,
    SlurmOptions,
    check_fleet_db,
    job_state,
    parse_time_min,
    refresh_states,
)
from accelbench.store import open_store
from accelbench.store.jobs import SuiteJob
from tests.conftest import run_cli
from tests.test_store import make_result

CLUSTER = Path(__file__).parent / "slurm" / "cluster.sh"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Slurm test cannot run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def slurm() -> Iterator[Path]:
    """A running one-node Slurm cluster; SLURM_CONF points at it while the module runs."""
    if shutil.which("slurmctld") is None or shutil.which("munged") is None:
        _unavailable("Slurm not installed (apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        _unavailable("starting slurmd needs root")
    pytest.importorskip("submitit")
    # Short path: the munge socket's name must stay under the 108-byte limit.
    root = Path(tempfile.mkdtemp(prefix="ab-slurm-"))
    started = subprocess.run([str(CLUSTER), "start", str(root)], capture_output=True,
                             text=True, timeout=60, check=False)
    if started.returncode != 0:
        subprocess.run([str(CLUSTER), "stop", str(root)], timeout=30, check=False)
        _unavailable(f"Slurm did not start: {started.stderr.strip()[-500:]}")
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(root / "slurm.conf")
    try:
        yield root
    finally:
        subprocess.run([str(CLUSTER), "stop", str(root)], timeout=30, check=False)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        shutil.rmtree(root, ignore_errors=True)


def _status(db: Path, sid: str) -> dict[str, Any]:
    proc = run_cli("--db", str(db), "suite", "status", sid, "--json")
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def _jobs_said(status: dict[str, Any], folder: Path) -> str:
    """Each job's stored state, what Slurm says of it now, and its logs' last lines: the
    whole story of a job that did not end in time."""
    lines = []
    for job in status["jobs"]:
        jid = job["job_id"]
        now = subprocess.run(["scontrol", "show", "job", jid], capture_output=True, text=True,
                             timeout=30, check=False)
        said = " ".join(w for w in now.stdout.split() if w.split("=")[0] in (
            "JobState", "Reason", "RunTime", "ExitCode")) or now.stderr.strip()
        lines.append(f"job {jid}: stored {job['state']!r} "
                     f"({job.get('detail', {}).get('scheduler_state')}); scontrol: {said}")
        for log in sorted(folder.rglob(f"{jid}_*")):
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            lines.append(f"  {log.name}: " + " | ".join(tail))
    return "\n".join(lines)


def _submit(db: Path, sid: str, folder: Path) -> subprocess.CompletedProcess[str]:
    # Two tiny cases in one job; energy off and exact iterations keep each case short
    # (transformer: oneDNN has no bf16 LSTM on CPUs without AVX-512 BF16).
    return run_cli("--db", str(db), "suite", "quick", "--launcher", "slurm", "--workload",
                   "transformer", "--precision", "fp32", "--precision", "amp_bf16",
                   "--suite-id", sid,
                   "--cases-per-job", "2", "--no-energy", "--iterations", "10",
                   "--slurm-folder", str(folder / "%j"), "--time", "5", "--json")


def _node_state(state: str) -> None:
    """Set the one node's state (``DRAIN``: jobs queue but none starts; ``RESUME``)."""
    node = socket.gethostname().split(".")[0]
    subprocess.run(["scontrol", "update", f"NodeName={node}", f"State={state}",
                    *(["Reason=test"] if state == "DRAIN" else [])],
                   capture_output=True, text=True, check=True, timeout=30)


def test_suite_on_real_slurm_stores_each_case_once(slurm: Path, tmp_path: Path) -> None:
    db = tmp_path / "fleet.db"
    sid = "fleet-1"
    # Both submissions land before either job starts (on a loaded machine the first job
    # could otherwise finish before the second submission has planned).
    _node_state("DRAIN")
    try:
        first = _submit(db, sid, slurm / "jobs")
        second = _submit(db, sid, slurm / "jobs")
    finally:
        _node_state("RESUME")
    assert first.returncode == 0, first.stderr
    jobs_a = json.loads(first.stdout)["jobs"]
    assert len(jobs_a) == 1 and jobs_a[0]["state"] == "queued"
    assert len(jobs_a[0]["case_keys"]) == 2
    assert f"suite status {sid}" in json.loads(first.stdout)["status_command"]
    # A second submission before anything is stored: its job gets the same cases, and the
    # two jobs split them (claims, then the stored results): resume across machines.
    assert second.returncode == 0, second.stderr
    jobs_b = json.loads(second.stdout)["jobs"]
    assert len(jobs_b) == 1
    ids = {j["job_id"] for j in jobs_a + jobs_b}
    assert len(ids) == 2
    queued = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                            check=True).stdout.split()
    assert ids & set(queued) or _status(db, sid)["counts"]["done"] > 0  # Slurm has them

    # About 20 s on an idle 2-core machine; the limit is for a loaded one.
    deadline = time.monotonic() + 300
    while True:
        status = _status(db, sid)
        ended = [j for j in status["jobs"] if j["state"] in ("completed", "failed")]
        if len(ended) == 2 or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert len(ended) == 2, _jobs_said(status, slurm / "jobs")
    assert all(j["state"] == "completed" for j in status["jobs"]), \
        _jobs_said(status, slurm / "jobs")
    assert all(j["hostname"] == socket.gethostname() for j in status["jobs"])
    assert status["counts"] == {"queued": 0, "running": 0, "done": 2, "failed": 0}, status
    with open_store(str(db)) as st:
        counts = st.case_key_counts(sid)
    assert sorted(counts.values()) == [1, 1]  # each case ran once, by one of the jobs
    assert {c["case_key"] for c in status["cases"]} == set(counts)
    assert {c["label"] for c in status["cases"]} == {"transformer tiny bs64 fp32 torch",
                                                      "transformer tiny bs64 amp_bf16 torch"}

    # A resubmission of the finished suite submits nothing and runs nothing.
    third = _submit(db, sid, slurm / "jobs")
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout)["jobs"] == []
    with open_store(str(db)) as st:
        assert st.case_key_counts(sid) == counts
        assert len(st.list_jobs(sid)) == 2
    table = run_cli("--db", str(db), "suite", "status", sid)
    assert table.returncode == 0, table.stderr
    assert "0 queued, 0 running, 2 done, 0 failed" in table.stdout


def test_slurm_refuses_a_bad_submission(slurm: Path, tmp_path: Path) -> None:
    proc = run_cli("--db", str(tmp_path / "f.db"), "suite", "quick", "--launcher", "slurm",
                   "--workload", "lstm", "--precision", "fp32", "--partition", "nosuch",
                   "--slurm-folder", str(slurm / "bad" / "%j"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("accelbench: error: Slurm refused the job")
    assert proc.stderr.strip().count("\n") == 0


# -- without Slurm --------------------------------------------------------------------------


def test_time_limits() -> None:
    assert parse_time_min("90") == 90
    assert parse_time_min("01:30:00") == 90
    assert parse_time_min("10:30") == 11  # MM:SS, rounded up to whole minutes
    assert parse_time_min("1-00:00:00") == 1440
    for bad in ("", "soon", "0", "1:2:3:4", "-5"):
        with pytest.raises(ConfigError):
            parse_time_min(bad)


def test_the_fleet_store_must_be_reachable_from_every_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACCELBENCH_DB", raising=False)
    for bad in (None, "results.db", "sqlite://", "sqlite:///:memory:", "sqlite:///rel.db"):
        with pytest.raises(ConfigError):
            check_fleet_db(bad)
    assert check_fleet_db(str(tmp_path / "r.db")) == f"sqlite:///{tmp_path / 'r.db'}"
    url = "postgresql+psycopg://u@db.example/bench"
    assert check_fleet_db(url) == url
    monkeypatch.setenv("ACCELBENCH_DB", url)
    assert check_fleet_db(None) == url


def test_cli_refuses_a_relative_store_for_slurm(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "accelbench.cli", "--db", "rel.db", "suite", "quick",
         "--launcher", "slurm"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "ACCELBENCH_DB"}, check=False)
    assert proc.returncode == 2
    assert "relative path" in proc.stderr and proc.stderr.strip().count("\n") == 0
    assert not (tmp_path / "rel.db").exists()


def test_missing_submitit_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelbench import api

    monkeypatch.setitem(sys.modules, "submitit", None)  # import fails as if not installed
    launcher = SlurmLauncher(SlurmOptions(), f"sqlite:///{tmp_path / 'r.db'}")
    with pytest.raises(UnsupportedError, match=r"pip install 'accelbench\[slurm\]'"):
        api.suite("quick", workloads=["lstm"], precisions=["fp32"], db=str(tmp_path / "r.db"),
                  launcher=launcher)


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError):
        SlurmOptions(cases_per_job=0)
    with pytest.raises(ConfigError):
        SlurmOptions(gres="gpu 8")
    assert SlurmOptions(gres="gpu:a100:8").gres == "gpu:a100:8"


def test_slurm_states_map_to_job_states() -> None:
    assert job_state("PENDING") == "queued"
    assert job_state("RUNNING") == "running"
    assert job_state("CANCELLED by 0") == "cancelled"
    assert job_state("TIMEOUT") == "timeout"
    assert job_state("OUT_OF_MEMORY") == "failed"
    assert job_state("") == "unknown"


def test_status_joins_jobs_claims_and_results(tmp_path: Path) -> None:
    """done from a stored ok result, failed from an oom, running from a live claim,
    queued while the job waits, failed when the job ended without a result."""
    sid = "s"
    with open_store(str(tmp_path / "r.db")) as st:
        done, oom = make_result("r1", suite=sid), make_result("r2", status="oom", suite=sid,
                                                              batch=8)
        st.save(done)
        st.save(oom)
        k_done, k_oom = done.spec.case_key(), oom.spec.case_key()
        st.record_job(SuiteJob(suite_id=sid, job_id="11", launcher="slurm",
                                case_keys=(k_done, k_oom, "kwait"), state="queued"))
        st.record_job(SuiteJob(suite_id=sid, job_id="12", launcher="slurm",
                                case_keys=("krun", "klost"), state="queued"))
        assert st.claim_case(sid, "krun", ttl_s=600)
        st.update_job(sid, "12", state="timeout", hostname="n2")
        status = st.suite_status(sid)
        # The scheduler is asked only about jobs that have not ended.
        asked: list[str] = []
        refreshed = refresh_states(st, list(status.jobs),
                                   query=lambda j: asked.append(j.job_id) or "RUNNING")
        assert asked == ["11"]
        assert [j.state for j in refreshed] == ["running", "timeout"]
        assert st.list_jobs(sid)[0].detail["scheduler_state"] == "RUNNING"
    by_key = {c.case_key: c for c in status.cases}
    assert by_key[k_done].state == "done" and by_key[k_done].label.startswith("lstm tiny bs4")
    assert by_key[k_oom].state == "failed" and by_key[k_oom].result_status == "oom"
    assert by_key["kwait"].state == "queued"
    assert by_key["krun"].state == "running" and by_key["krun"].host == socket.gethostname()
    assert by_key["klost"].state == "failed" and "timeout" in by_key["klost"].detail
    assert status.counts() == {"queued": 1, "running": 1, "done": 1, "failed": 2}


def test_a_job_that_ended_while_the_scheduler_was_asked_keeps_its_end(tmp_path: Path
                                                                      ) -> None:
    """The race a loaded machine met (a job stuck ``running`` after it completed): the
    status read the job queued, the job started, ran and stored ``completed``, and only then
    did the scheduler answer ``RUNNING``, which overwrote the end; squeue (which shows ended
    jobs only with ``-t all``) never said otherwise. A refresh now writes only over the
    state it read."""
    sid = "s"
    with open_store(str(tmp_path / "r.db")) as st:
        st.record_job(SuiteJob(suite_id=sid, job_id="7", launcher="slurm", case_keys=("k",),
                                state="queued"))
        read = st.suite_status(sid).jobs

        def slow_scheduler(job: SuiteJob) -> str:
            st.update_job(sid, job.job_id, state="running", hostname="n1")  # the job itself
            st.update_job(sid, job.job_id, state="completed")
            return "RUNNING"  # what the scheduler saw a moment before

        (job,) = refresh_states(st, list(read), query=slow_scheduler)
        assert job.state == "completed" and st.list_jobs(sid)[0].state == "completed"
        # Where nothing moved meanwhile, the scheduler's word is stored as before.
        st.record_job(SuiteJob(suite_id=sid, job_id="8", launcher="slurm", case_keys=("m",),
                                state="queued"))
        (_, eight) = refresh_states(st, list(st.suite_status(sid).jobs),
                                    query=lambda j: "COMPLETED")
        assert eight.state == "completed" and st.list_jobs(sid)[1].state == "completed"


def test_status_cli_needs_an_id_and_knows_unknown_ones(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(make_result("r1", suite="local-1"))
    proc = run_cli("--db", str(db), "suite", "status")
    assert proc.returncode == 2 and "suite status SUITE_ID" in proc.stderr
    proc = run_cli("--db", str(db), "suite", "status", "nope")
    assert proc.returncode == 2 and "no cases" in proc.stderr
    # A suite run locally (no jobs) shows its stored cases too.
    proc = run_cli("--db", str(db), "suite", "status", "local-1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["counts"]["done"] == 1


def test_status_counts_the_runs_of_a_case_with_repeats(tmp_path: Path) -> None:
    import dataclasses

    from accelbench.spec import MeasurementPolicy

    sid = "rep"
    r1 = make_result("x1", suite=sid)
    r1 = dataclasses.replace(r1, spec=dataclasses.replace(
        r1.spec, policy=MeasurementPolicy(repeats=3)))
    with open_store(str(tmp_path / "r.db")) as st:
        st.save(r1)
        key = r1.spec.case_key()
        st.record_job(SuiteJob(suite_id=sid, job_id="7", launcher="slurm", case_keys=(key,),
                                state="running"))
        waiting = st.suite_status(sid).cases[0]
        st.update_job(sid, "7", state="completed")
        ended = st.suite_status(sid).cases[0]
    assert waiting.state == "queued" and waiting.detail == "1 of 3 runs stored"
    assert ended.state == "done" and ended.runs == 1 and "1 of 3" in ended.detail


def test_slurm_flags_need_the_slurm_launcher(tmp_path: Path) -> None:
    proc = run_cli("suite", "quick", "--workload", "lstm", "--partition", "gpu", "--dry-run",
                   db=tmp_path / "r.db")
    assert proc.returncode == 2
    assert "--partition applies to --launcher slurm" in proc.stderr
