"""Scheduler jobs of a suite (``suite_jobs``, schema migration 6) and a suite's status.

A suite submitted to a scheduler (``accelbench suite NAME --launcher slurm``) records
one row per job: the case keys it runs and its state as last seen (``queued`` when
submitted; the job itself writes ``running`` and ``completed``/``failed``; a refresh from
the scheduler may write ``cancelled``/``timeout``/``failed`` for a job that died without
saying so). :func:`suite_status` joins those rows with what the store knows for sure:
a stored result means done (or failed, by its status), a live claim means running.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from accelbench.errors import StoreError
from accelbench.store import schema
from accelbench.store.db import _IMMEDIATE, Store
from accelbench.store.ops import _read, _short, _write, utc_now

#: Job states (the ``state`` column), scheduler states mapped onto these.
JOB_STATES = ("queued", "running", "completed", "failed", "cancelled", "timeout", "unknown")
#: Job states after which a job runs nothing more.
JOB_ENDED = frozenset({"completed", "failed", "cancelled", "timeout"})

_SLURM_STATES = {
    "PENDING": "queued", "CONFIGURING": "queued", "REQUEUED": "queued",
    "REQUEUE_HOLD": "queued", "REQUEUE_FED": "queued", "SUSPENDED": "queued",
    "RESIZING": "queued", "RUNNING": "running", "COMPLETING": "running",
    "STAGE_OUT": "running", "SIGNALING": "running", "COMPLETED": "completed",
    "FAILED": "failed", "NODE_FAIL": "failed", "BOOT_FAIL": "failed",
    "OUT_OF_MEMORY": "failed", "DEADLINE": "failed", "PREEMPTED": "failed",
    "REVOKED": "failed", "SPECIAL_EXIT": "failed", "CANCELLED": "cancelled",
    "TIMEOUT": "timeout", "FINISHED": "completed", "INTERRUPTED": "cancelled",
    "DONE": "completed", "READY": "queued",
}


def job_state(scheduler_state: str) -> str:
    """A scheduler's state word (Slurm's, or submitit's local ones) as a job state
    (``CANCELLED by 0`` -> ``cancelled``; anything unknown -> ``unknown``)."""
    word = scheduler_state.strip().split(" ")[0].upper() if scheduler_state else ""
    return _SLURM_STATES.get(word, "unknown")


@dataclass(frozen=True, kw_only=True, slots=True)
class SuiteJob:
    """One scheduler job of a suite, as stored."""

    suite_id: str
    job_id: str
    launcher: str
    """``slurm`` (or ``local`` for submitit's local executor)."""
    case_keys: tuple[str, ...]
    state: str
    """One of :data:`JOB_STATES`."""
    hostname: str | None = None
    """Where the job ran (None until it starts)."""
    submitted_at: str = ""
    updated_at: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    """``folder`` (submitit's log folder), ``scheduler_state`` (raw), ``error``."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite_id": self.suite_id, "job_id": self.job_id, "launcher": self.launcher,
            "case_keys": list(self.case_keys), "state": self.state,
            "hostname": self.hostname, "submitted_at": self.submitted_at,
            "updated_at": self.updated_at, "detail": self.detail,
        }


def record_job(store: Store, job: SuiteJob) -> None:
    """Store a newly submitted job.

    Raises:
        StoreError: the store cannot be written.
    """
    now = utc_now()
    _write(store, schema.suite_jobs, {
        "suite_id": job.suite_id, "job_id": job.job_id, "launcher": job.launcher,
        "case_keys": json.dumps(list(job.case_keys)), "state": job.state,
        "hostname": job.hostname, "submitted_at": job.submitted_at or now,
        "updated_at": now, "detail": json.dumps(job.detail, sort_keys=True),
    })


def update_job(store: Store, suite_id: str, job_id: str, *, state: str,
               hostname: str | None = None, **detail: Any) -> None:
    """Set a job's state (and where it runs, and detail entries to merge in).

    Raises:
        StoreError: the store cannot be written.
    """
    t = schema.suite_jobs
    key = (t.c.suite_id == suite_id) & (t.c.job_id == job_id)
    try:
        with store.engine.connect() as conn:
            # SQLite: the write lock from the start (as Store.claim_case takes it). A plain
            # BEGIN that reads, then writes, gets SQLITE_BUSY at once, busy timeout or not,
            # when a job writes the store at the same moment.
            conn.execution_options(**{_IMMEDIATE: True})
            with conn.begin():
                row = conn.execute(sa.select(t.c.detail).where(key)).first()
                if row is None:
                    return
                merged = {**_detail(row.detail), **{k: v for k, v in detail.items()
                                                    if v is not None}}
                values: dict[str, Any] = {"state": state, "updated_at": utc_now(),
                                          "detail": json.dumps(merged, sort_keys=True)}
                if hostname is not None:
                    values["hostname"] = hostname
                conn.execute(t.update().where(key).values(**values))
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot write to results store {store.where}: {_short(exc)}") from exc


def list_jobs(store: Store, suite_id: str) -> list[SuiteJob]:
    """The jobs of ``suite_id``, in submission order (a malformed row is skipped with a
    warning naming it)."""
    t = schema.suite_jobs
    rows = _read(store, sa.select(t).where(t.c.suite_id == suite_id)
                 .order_by(t.c.submitted_at, t.c.job_id))
    out: list[SuiteJob] = []
    for row in rows:
        try:
            keys = json.loads(row["case_keys"])
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise TypeError("case_keys is not a JSON list of strings")
            out.append(SuiteJob(
                suite_id=row["suite_id"], job_id=row["job_id"], launcher=row["launcher"],
                case_keys=tuple(keys), state=row["state"], hostname=row["hostname"],
                submitted_at=row["submitted_at"], updated_at=row["updated_at"],
                detail=_detail(row["detail"]),
            ))
        except (TypeError, ValueError) as exc:
            store.skip_row(f"{row['suite_id']}/{row['job_id']}", str(exc))
    return out


def _detail(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {"note": raw}
    return value if isinstance(value, dict) else {"note": value}


# --------------------------------------------------------------------------- status


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseStatus:
    """Where one case of a suite stands."""

    case_key: str
    state: str
    """``queued``, ``running``, ``done`` or ``failed``."""
    label: str = ""
    """Workload, size, batch, precision, framework and ranks, where a result tells them."""
    runs: int = 0
    """Results stored for the case (more than one with repeats)."""
    result_status: str | None = None
    """Status of its newest stored result (``ok``, ``oom``, ``error``, ``timeout`` ...)."""
    job_id: str | None = None
    host: str | None = None
    """Where it ran or runs."""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"case_key": self.case_key, "state": self.state, "label": self.label,
                "runs": self.runs, "result_status": self.result_status,
                "job_id": self.job_id, "host": self.host, "detail": self.detail}


@dataclass(frozen=True, kw_only=True, slots=True)
class SuiteStatus:
    """A suite's cases and jobs, from the store."""

    suite_id: str
    cases: tuple[CaseStatus, ...]
    jobs: tuple[SuiteJob, ...]

    def counts(self) -> dict[str, int]:
        """Cases per state (``queued``, ``running``, ``done``, ``failed``)."""
        out = {"queued": 0, "running": 0, "done": 0, "failed": 0}
        for c in self.cases:
            out[c.state] = out.get(c.state, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"suite_id": self.suite_id, "counts": self.counts(),
                "cases": [c.to_dict() for c in self.cases],
                "jobs": [j.to_dict() for j in self.jobs]}


def _label(record: dict[str, Any]) -> str:
    spec = record.get("spec") or {}
    topo = spec.get("topology") or {}
    ranks = int(topo.get("nnodes", 1) or 1) * int(topo.get("nproc_per_node", 1) or 1)
    parts = [str(spec.get(k, "?")) for k in ("workload", "size")]
    parts += [f"bs{spec.get('batch_size', '?')}", str(spec.get("precision", "?")),
              str(spec.get("framework", "?"))]
    if ranks > 1:
        parts.append(f"x{ranks}")
    return " ".join(parts)


def suite_status(store: Store, suite_id: str) -> SuiteStatus:
    """Every case of ``suite_id`` the store knows of, with its state.

    A case with a stored result is ``done`` (its newest result ``ok``) or ``failed``
    (``oom``, ``error``, ``timeout``, ``diverged``, ``insufficient``); else ``running``
    while a live claim holds it; else ``queued`` while the job it belongs to has not
    ended, and ``failed`` when that job ended without storing it.

    Raises:
        StoreError: the store cannot be read.
    """
    r, c = schema.results, schema.claims
    stored = _read(store, sa.select(r.c.case_key, r.c.status, r.c.hostname, r.c.finished_at,
                                    r.c.record_json)
                   .where(r.c.suite_id == suite_id).order_by(r.c.finished_at))
    claims = _read(store, sa.select(c).where(c.c.suite_id == suite_id))
    jobs = list_jobs(store, suite_id)
    job_of: dict[str, SuiteJob] = {}
    for submitted in jobs:  # the newest submission of a case is the one that counts
        for key in submitted.case_keys:
            job_of[key] = submitted
    by_key: dict[str, list[Any]] = {}
    for row in stored:
        by_key.setdefault(row["case_key"], []).append(row)
    now_s = time.time()
    live: dict[str, Any] = {}
    for row in claims:
        if _claim_live(row, now_s):
            live[str(row["case_key"]).split("#", 1)[0]] = row
    keys = list(dict.fromkeys([*job_of, *by_key, *live]))
    out: list[CaseStatus] = []
    for key in keys:
        job = job_of.get(key)
        rows = by_key.get(key, [])
        label, repeats = "", 1
        if rows:
            try:
                record = json.loads(rows[-1]["record_json"])
                label = _label(record)
                repeats = int(((record.get("spec") or {}).get("policy") or {})
                              .get("repeats") or 1)
            except (TypeError, ValueError, AttributeError):
                pass
        common: dict[str, Any] = {"case_key": key, "label": label, "runs": len(rows),
                  "job_id": job.job_id if job else None}
        if key in live:
            # Running again (a repeat, or --force) even if a run is stored.
            out.append(CaseStatus(state="running", host=live[key]["hostname"],
                                  result_status=rows[-1]["status"] if rows else None,
                                  **common))
        elif rows and len(rows) < repeats and job is not None and job.state not in JOB_ENDED:
            # Runs of a case with repeats are interleaved: more of them are to come.
            out.append(CaseStatus(state="queued", result_status=rows[-1]["status"],
                                  host=job.hostname,
                                  detail=f"{len(rows)} of {repeats} runs stored", **common))
        elif rows:
            newest = rows[-1]
            if len(rows) < repeats:
                common["detail"] = f"{len(rows)} of {repeats} runs stored"
            out.append(CaseStatus(state="done" if newest["status"] == "ok" else "failed",
                                  result_status=newest["status"], host=newest["hostname"],
                                  **common))
        elif job is not None and job.state in JOB_ENDED:
            why = job.detail.get("error") or f"job {job.job_id} {job.state}"
            out.append(CaseStatus(state="failed", host=job.hostname,
                                  detail=f"no result: {why}", **common))
        else:
            out.append(CaseStatus(state="queued", host=job.hostname if job else None,
                                  **common))
    return SuiteStatus(suite_id=suite_id, cases=tuple(out), jobs=tuple(jobs))


def _claim_live(row: Any, now_s: float) -> bool:
    """A claim that still holds: within its ttl, and (on this host) of a live pid."""
    from accelbench.store.db import _pid_alive

    try:
        if not now_s < float(row["claimed_at_s"]) + float(row["ttl_s"]):
            return False
        if row["hostname"] == socket.gethostname():
            return _pid_alive(int(row["pid"]))
    except (TypeError, ValueError):
        return False
    return True


def refresh_states(store: Store, jobs: Sequence[SuiteJob], *,
                   query: Any = None) -> list[SuiteJob]:
    """Ask the scheduler about the jobs that have not ended and record what it says.

    Args:
        query: ``job -> scheduler state word or None`` (default: Slurm through submitit,
            then ``squeue``; None where the scheduler cannot be reached or no longer
            knows the job, and then the stored state stands).

    Returns:
        The jobs with their states as now stored.
    """
    if query is None:
        from accelbench.launchers.slurm import scheduler_state

        query = scheduler_state
    out: list[SuiteJob] = []
    for job in jobs:
        if job.state in JOB_ENDED:
            out.append(job)
            continue
        raw = query(job)
        state = job_state(raw) if raw else "unknown"
        # A job that says it runs or ended knows better than a scheduler that reports it
        # queued (the store is written before Slurm's state catches up).
        if state == "unknown" or (state == "queued" and job.state != "queued"):
            out.append(job)
            continue
        if state != job.state:
            update_job(store, job.suite_id, job.job_id, state=state, scheduler_state=raw)
            job = dataclasses.replace(job, state=state,
                                      detail={**job.detail, "scheduler_state": raw})
        out.append(job)
    return out
