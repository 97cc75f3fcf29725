"""Scheduler jobs of a suite (``suite_jobs``, schema migration 6) and a suite's status.

A suite submitted to a scheduler (``accelbench suite NAME --launcher slurm``) records
one row per job: the case keys it runs and its state as last seen (``queued`` when
submitted; the job itself writes ``running`` and ``completed``/``failed``; a refresh from
the scheduler may write ``cancelled``/``timeout``/``failed`` for a job that died without
saying so). :meth:`JobStore.suite_status` joins those rows with what the store knows for
sure: a stored result means done (or failed, by its status), a live claim means running.
What the scheduler says comes in from the launcher (:meth:`JobStore.update_job`); the
store never asks it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

import accelbench.store.schema as schema
from accelbench.store.base import utc_now
from accelbench.store.claims import ClaimStore

JOB_ENDED = frozenset({"completed", "failed", "cancelled", "timeout"})
"""Job states after which a job runs nothing more."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SuiteJob:
    """One scheduler job of a suite, as stored."""

    suite_id: str
    job_id: str
    launcher: str
    """``slurm`` (or ``local`` for submitit's local executor)."""
    case_keys: tuple[str, ...]
    state: str
    """``queued``, ``running``, ``completed``, ``failed``, ``cancelled``, ``timeout`` or
    ``unknown`` (the launcher maps its scheduler's states onto these)."""
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


class JobStore(ClaimStore):
    """Queries of ``suite_jobs``, and a suite's status (results, claims and jobs)."""

    def record_job(self, job: SuiteJob) -> None:
        """Store a newly submitted job.

        Raises:
            StoreError: the store cannot be written.
        """
        now = utc_now()
        self.insert(schema.suite_jobs, {
            "suite_id": job.suite_id, "job_id": job.job_id, "launcher": job.launcher,
            "case_keys": json.dumps(list(job.case_keys)), "state": job.state,
            "hostname": job.hostname, "submitted_at": job.submitted_at or now,
            "updated_at": now, "detail": json.dumps(job.detail, sort_keys=True),
        })

    def update_job(self, suite_id: str, job_id: str, *, state: str,
                   hostname: str | None = None, only_from: str | None = None,
                   **detail: Any) -> bool:
        """Set a job's state (and where it runs, and detail entries to merge in).

        Args:
            only_from: Set it only if the stored state is still this one (what the caller
                read before asking the scheduler): a job that recorded its own end in the
                meantime keeps it.

        Returns:
            Whether the job was updated.

        Raises:
            StoreError: the store cannot be written.
        """
        t = schema.suite_jobs
        key = (t.c.suite_id == suite_id) & (t.c.job_id == job_id)
        # SQLite: the write lock from the start (as claim_case takes it). A plain BEGIN
        # that reads, then writes, gets SQLITE_BUSY at once, busy timeout or not, when a
        # job writes the store at the same moment.
        with self.writing(immediate=True) as conn:
            row = conn.execute(sa.select(t.c.detail, t.c.state).where(key)).first()
            if row is None or (only_from is not None and row.state != only_from):
                return False
            merged = {**_detail(row.detail), **{k: v for k, v in detail.items()
                                                if v is not None}}
            values: dict[str, Any] = {"state": state, "updated_at": utc_now(),
                                      "detail": json.dumps(merged, sort_keys=True)}
            if hostname is not None:
                values["hostname"] = hostname
            conn.execute(t.update().where(key).values(**values))
        return True

    def list_jobs(self, suite_id: str) -> list[SuiteJob]:
        """The jobs of ``suite_id``, in submission order (a malformed row is skipped with a
        warning naming it)."""
        t = schema.suite_jobs
        rows = self.mappings(sa.select(t).where(t.c.suite_id == suite_id)
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
                self.skip_row(f"{row['suite_id']}/{row['job_id']}", str(exc))
        return out

    def suite_status(self, suite_id: str) -> SuiteStatus:
        """Every case of ``suite_id`` the store knows of, with its state.

        A case with a stored result is ``done`` (its newest result ``ok``) or ``failed``
        (``oom``, ``error``, ``timeout``, ``diverged``, ``insufficient``); else ``running``
        while a live claim holds it; else ``queued`` while the job it belongs to has not
        ended, and ``failed`` when that job ended without storing it. Jobs are as last
        stored: a launcher refreshes them from its scheduler first
        (:func:`accelbench.launchers.slurm.refresh_states`).

        Raises:
            StoreError: the store cannot be read.
        """
        r = schema.results
        stored = self.mappings(
            sa.select(r.c.case_key, r.c.status, r.c.hostname, r.c.finished_at, r.c.record_json)
            .where(r.c.suite_id == suite_id).order_by(r.c.finished_at)
        )
        live = self.live_claims(suite_id)
        jobs = self.list_jobs(suite_id)
        job_of: dict[str, SuiteJob] = {}
        for submitted in jobs:  # the newest submission of a case is the one that counts
            for key in submitted.case_keys:
                job_of[key] = submitted
        by_key: dict[str, list[Any]] = {}
        for row in stored:
            by_key.setdefault(row["case_key"], []).append(row)
        keys = list(dict.fromkeys([*job_of, *by_key, *live]))
        cases = [_case_status(key, by_key.get(key, []), job_of.get(key), live.get(key))
                 for key in keys]
        return SuiteStatus(suite_id=suite_id, cases=tuple(cases), jobs=tuple(jobs))


def _case_status(key: str, rows: list[Any], job: SuiteJob | None,
                 live_host: str | None) -> CaseStatus:
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
    if live_host is not None:
        # Running again (a repeat, or --force) even if a run is stored.
        return CaseStatus(state="running", host=live_host,
                          result_status=rows[-1]["status"] if rows else None, **common)
    if rows and len(rows) < repeats and job is not None and job.state not in JOB_ENDED:
        # Runs of a case with repeats are interleaved: more of them are to come.
        return CaseStatus(state="queued", result_status=rows[-1]["status"],
                          host=job.hostname,
                          detail=f"{len(rows)} of {repeats} runs stored", **common)
    if rows:
        newest = rows[-1]
        if len(rows) < repeats:
            common["detail"] = f"{len(rows)} of {repeats} runs stored"
        return CaseStatus(state="done" if newest["status"] == "ok" else "failed",
                          result_status=newest["status"], host=newest["hostname"], **common)
    if job is not None and job.state in JOB_ENDED:
        why = job.detail.get("error") or f"job {job.job_id} {job.state}"
        return CaseStatus(state="failed", host=job.hostname, detail=f"no result: {why}",
                          **common)
    return CaseStatus(state="queued", host=job.hostname if job else None, **common)
