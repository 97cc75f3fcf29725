"""Suites across a fleet: a suite's cases as Slurm jobs, submitted through submitit.

The submitting process plans and validates the cases, leaves out those the store already
holds, splits the rest into jobs of ``cases_per_job`` and submits each through
``submitit`` (no sbatch scripting of our own). Each job runs its share with the very
code of a local suite (:func:`accelbench.api.run_cases`: skip what is stored, claim
before running, one worker per case) into the one store every job is given, so a case
stored by any machine counts as done and a resubmission with the same suite id runs
nothing twice. Jobs write their own state (``running``, then ``completed``/``failed``)
into ``suite_jobs``; ``accelbench suite status`` reads it, after :func:`refresh_states`
asked Slurm about jobs that have not said they ended and wrote its answer to the store.

submitit is optional (``pip install 'accelbench[slurm]'``) and imported where it is used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from accelbench.errors import ConfigError, UnsupportedError

if TYPE_CHECKING:
    from accelbench.planning.cases import Case
    from accelbench.store.db import Store
    from accelbench.store.jobs import SuiteJob

INSTALL = "pip install 'accelbench[slurm]'"


def _submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise UnsupportedError(
            f"--launcher slurm needs submitit, which is not installed: {INSTALL}"
        ) from None
    return submitit


#: Slurm's time formats (sbatch --time): minutes, minutes:seconds, hours:minutes:seconds,
#: days-hours, days-hours:minutes, days-hours:minutes:seconds.
_TIME = re.compile(r"(?:(?P<days>[0-9]+)-(?P<dh>[0-9]+)(?::(?P<dm>[0-9]+)(?::(?P<ds>[0-9]+))?)?"
                   r"|(?P<a>[0-9]+)(?::(?P<b>[0-9]+)(?::(?P<c>[0-9]+))?)?)")
#: Longest time limit accepted (a year; Slurm's own maximum is a partition's).
MAX_TIME_DAYS = 365


def parse_time_min(value: str) -> int:
    """A Slurm time limit as whole minutes (seconds round up: Slurm's limit is in
    minutes): ``MIN``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` or ``D-HH:MM:SS``.
    A field after the first is bounded as on a clock (hours below 24 after days,
    minutes and seconds below 60): ``99:99:99`` is a typo, not a limit.

    Raises:
        ConfigError: anything else, or not between one minute and a year.
    """
    text = value.strip()
    m = _TIME.fullmatch(text)
    if m is None:
        raise ConfigError(f"--time {value!r}: give minutes (90), MM:SS, HH:MM:SS (01:30:00), "
                          "D-HH, D-HH:MM or D-HH:MM:SS (Slurm's formats)")
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    limits: tuple[tuple[str, int, str], ...]
    if "days" in g:
        limits = (("dh", 24, "hours"), ("dm", 60, "minutes"), ("ds", 60, "seconds"))
        total_s = g["days"] * 86400 + g["dh"] * 3600 + g.get("dm", 0) * 60 + g.get("ds", 0)
    elif "c" in g:  # HH:MM:SS
        limits = (("b", 60, "minutes"), ("c", 60, "seconds"))
        total_s = g["a"] * 3600 + g["b"] * 60 + g["c"]
    else:  # MIN or MM:SS
        limits = (("b", 60, "seconds"),)
        total_s = g["a"] * 60 + g.get("b", 0)
    for key, top, what in limits:
        if g.get(key, 0) >= top:
            raise ConfigError(f"--time {value!r}: {what} must be below {top} "
                              f"(got {g[key]})")
    if total_s <= 0 or total_s > MAX_TIME_DAYS * 86400:
        raise ConfigError(f"--time {value!r} must be between 1 minute and "
                          f"{MAX_TIME_DAYS} days")
    return math.ceil(total_s / 60)


def check_fleet_db(db: str | None) -> str:
    """The store URL every job writes to: a server URL (PostgreSQL), or an absolute SQLite
    path that every node sees (a shared file system).

    Raises:
        ConfigError: no store given, an in-memory SQLite or a relative SQLite path (each
            node would write its own).
    """
    from accelbench.store.base import display_url
    from accelbench.store.db import ENV_DB, resolve_db_url

    given = db or os.environ.get(ENV_DB)
    if not given:
        raise ConfigError(
            "--launcher slurm needs the store every job writes to: --db "
            "postgresql+psycopg://USER@HOST/DB (or an absolute path on a shared file system)"
        )
    if "://" in given:
        if given.startswith("sqlite"):
            path = given.split(":///", 1)[1] if ":///" in given else ""
            if not path or path.startswith(":memory:") or not path.startswith("/"):
                raise ConfigError(
                    f"--db {display_url(given)!r}: Slurm jobs need a store all nodes reach; "
                    "give a PostgreSQL URL or sqlite:////absolute/path on a shared file system"
                )
        return given
    if not Path(given).expanduser().is_absolute():
        raise ConfigError(
            f"--db {display_url(given)!r} is a relative path; Slurm jobs run elsewhere: give "
            "an absolute path on a file system every node mounts, or a PostgreSQL URL"
        )
    return resolve_db_url(given)


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmOptions:
    """How a suite is submitted to Slurm."""

    partition: str | None = None
    gres: str | None = None
    """Generic resources per job, e.g. ``gpu:8``."""
    time_min: int = 60
    """Time limit of each job, minutes."""
    folder: str = "accelbench-slurm/%j"
    """submitit's folder for scripts and logs (``%j``: the job id); on a shared file
    system, since the job reads its pickled task from it."""
    cases_per_job: int = 1
    cpus_per_task: int | None = None
    """CPUs per job (Slurm's default is often 1: too few for a CPU case)."""
    exclusive: bool = False
    """A whole node per job, so no other job competes with a measurement."""
    cluster: Literal["slurm", "local"] = "slurm"
    """``local``: submitit's local executor (processes on this machine), for tests and
    machines without Slurm."""

    def __post_init__(self) -> None:
        if (isinstance(self.cases_per_job, bool) or not isinstance(self.cases_per_job, int)
                or self.cases_per_job < 1):
            raise ConfigError(f"--cases-per-job must be a positive integer, got "
                              f"{self.cases_per_job!r}")
        if isinstance(self.time_min, bool) or not isinstance(self.time_min, int) \
                or self.time_min < 1:
            raise ConfigError(f"--time must be at least one minute, got {self.time_min!r}")
        if self.gres is not None and not re.fullmatch(r"[\w.-]+(:[\w.-]+)*(,[\w.-]+(:[\w.-]+)*)*",
                                                      self.gres):
            raise ConfigError(f"--gres {self.gres!r}: give NAME[:TYPE]:COUNT, e.g. gpu:8")
        if self.cpus_per_task is not None and (isinstance(self.cpus_per_task, bool)
                                               or not isinstance(self.cpus_per_task, int)
                                               or self.cpus_per_task < 1):
            raise ConfigError(f"--cpus-per-task must be a positive integer, got "
                              f"{self.cpus_per_task!r}")
        if self.cluster not in ("slurm", "local"):
            raise ConfigError(f"unknown submitit cluster {self.cluster!r}; slurm or local")


@dataclass(frozen=True, slots=True)
class SlurmLauncher:
    """``api.suite(..., launcher=SlurmLauncher(...))``: submit instead of running here."""

    options: SlurmOptions
    db_url: str
    """The store the jobs write to (:func:`check_fleet_db`)."""
    submitted: list[SuiteJob] = dataclasses.field(default_factory=list, compare=False,
                                                  repr=False)
    """The jobs :meth:`submit` submitted, in order (its caller may not see its return)."""

    def check_available(self) -> None:
        """Refuse, before any store is opened, where nothing could be submitted: submitit
        not installed, or (a real Slurm) its ``sbatch`` and ``srun`` not on PATH.

        Raises:
            UnsupportedError: one line saying what is missing.
        """
        _submitit()
        if self.options.cluster == "slurm":
            missing = [tool for tool in ("sbatch", "srun") if shutil.which(tool) is None]
            if missing:
                raise UnsupportedError(
                    f"--launcher slurm needs Slurm, but {' and '.join(missing)} "
                    f"{'is' if len(missing) == 1 else 'are'} not on PATH: run on a Slurm "
                    "login node, or run the suite here without --launcher slurm")

    @property
    def name(self) -> str:
        return "slurm" if self.options.cluster == "slurm" else "local"

    def submit(self, st: Store, sid: str, cases: Sequence[Case], force: bool
               ) -> list[SuiteJob]:
        """Submit the cases of suite ``sid`` that the store lacks, ``cases_per_job`` to a
        job, and record each job in ``suite_jobs``.

        Returns:
            The submitted jobs (none when every case is stored already).

        Raises:
            UnsupportedError: submitit is missing, or Slurm refuses the submission.
        """
        from accelbench.store.jobs import SuiteJob

        self.check_available()
        submitit = _submitit()
        multi = next((c for c in cases if c.spec.topology.nnodes > 1), None)
        if multi is not None:
            # One job is one node here; a case across nodes needs one launch per node.
            raise UnsupportedError(
                f"--launcher slurm runs each case on one node; {multi.spec.workload} asks for "
                f"--nnodes {multi.spec.topology.nnodes}: run it with --nnodes/--node-rank "
                "on each node instead"
            )
        stored = {} if force else st.case_key_counts(sid)
        todo = [c for c in cases if stored.get(c.spec.case_key(), 0) < c.spec.policy.repeats]
        if not todo:
            return []
        opts = self.options
        folder = str(Path(opts.folder).expanduser().absolute())
        try:
            executor = submitit.AutoExecutor(folder=folder, cluster=opts.cluster)
        except Exception as exc:  # noqa: BLE001 - submitit raises plain RuntimeErrors
            first = str(exc).strip().splitlines()
            raise UnsupportedError(
                f"cannot submit to Slurm: {first[-1] if first else type(exc).__name__}"
            ) from exc
        params: dict[str, Any] = {
            "name": f"accelbench-{sid}"[:120],
            "timeout_min": opts.time_min,
            "nodes": 1,
            "tasks_per_node": 1,
        }
        if opts.cpus_per_task is not None:
            params["cpus_per_task"] = opts.cpus_per_task
        if opts.cluster == "slurm":
            if opts.partition:
                params["slurm_partition"] = opts.partition
            if opts.gres:
                params["slurm_gres"] = opts.gres
            if opts.exclusive:
                params["slurm_exclusive"] = True
        executor.update_parameters(**params)
        # submitit pickles each job's arguments into its folder, readable by others
        # (0644): a URL with a password goes to the jobs in a file only this user reads.
        ref = StoreRef.of(self.db_url, folder_root(opts.folder), sid)
        shares = [todo[i:i + opts.cases_per_job] for i in range(0, len(todo), opts.cases_per_job)]
        out: list[SuiteJob] = []
        for share in shares:
            keys = tuple(c.spec.case_key() for c in share)
            try:
                with _quiet_stderr():
                    job = executor.submit(run_share, ref, sid, list(share), force)
            except Exception as exc:  # noqa: BLE001 - submitit raises plain Exceptions
                first = str(exc).strip().splitlines()
                raise UnsupportedError(
                    f"Slurm refused the job: {first[-1] if first else type(exc).__name__}"
                ) from exc
            row = SuiteJob(suite_id=sid, job_id=str(job.job_id), launcher=self.name,
                           case_keys=keys, state="queued",
                           detail={"folder": str(job.paths.folder)})
            st.record_job(row)
            out.append(row)
            self.submitted.append(row)
        return out


def folder_root(folder: str) -> Path:
    """The part of a submitit folder pattern before its first placeholder (``%j``): the
    folder every job of a submission shares."""
    parts = Path(folder).expanduser().absolute().parts
    keep = list(itertools.takewhile(lambda p: "%" not in p, parts))
    return Path(*keep)


@dataclass(frozen=True, slots=True)
class StoreRef:
    """How a job finds its store: the URL itself where it holds no secret, else the path
    of a file (mode 0600, only this user reads it) that holds it, so that no pickled
    argument of a job carries a password."""

    url: str | None = None
    file: str | None = None

    @classmethod
    def of(cls, url: str, folder: Path, sid: str) -> StoreRef:
        """``url`` as a job gets it: in a new 0600 file in ``folder`` if it has a secret.

        Raises:
            ConfigError: the file cannot be written.
        """
        from accelbench.store.base import url_secrets

        if not url_secrets(url):
            return cls(url=url)
        path = folder / f".accelbench-store-{sid[:60]}-{secrets.token_hex(8)}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(url)
        except OSError as exc:
            raise ConfigError(f"--slurm-folder {folder}: cannot write the store's file for "
                              f"the jobs: {exc.strerror or exc}") from None
        return cls(file=str(path))

    def resolve(self) -> str:
        """The store URL (read from its file where there is one)."""
        if self.file is None:
            return self.url or ""
        return Path(self.file).read_text(encoding="utf-8").strip()


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """sbatch's own stderr out of the user's terminal while submitting: submitit lets it
    through and then raises with the same text, which becomes our one-line error."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def run_share(store: StoreRef | str, sid: str, cases: list[Case], force: bool
              ) -> dict[str, int]:
    """In a job: run these cases of suite ``sid`` into the store ``store`` names (a
    :class:`StoreRef`, or its URL; stored ones skipped, each claimed first) and record the
    job's state.

    Returns:
        How many runs were measured and how many ended ``ok``.
    """
    from accelbench import api
    from accelbench.store import open_store
    from accelbench.store.base import hide_secrets

    db_url = store.resolve() if isinstance(store, StoreRef) else store
    job_id = _own_job_id()
    with open_store(db_url) as st:
        if job_id:
            st.update_job(sid, job_id, state="running", hostname=socket.gethostname())
        try:
            st.check_writable()
            results = api.run_cases(st, sid, list(cases), force, None)
        except BaseException as exc:
            if job_id:
                why = hide_secrets(f"{type(exc).__name__}: {exc}", db_url)
                st.update_job(sid, job_id, state="failed", error=why.splitlines()[0][:500])
            raise
        if job_id:
            st.update_job(sid, job_id, state="completed")
    return {"measured": len(results), "ok": sum(r.status == "ok" for r in results)}


def _own_job_id() -> str | None:
    """This job's id as submitit reports it (None outside a submitit job)."""
    try:
        import submitit

        return str(submitit.JobEnvironment().job_id)
    except Exception:  # noqa: BLE001 - outside a job, submitit raises RuntimeError or worse
        return None


def scheduler_state(job: SuiteJob) -> str | None:
    """What the scheduler says about ``job`` now (a Slurm state word), or None where it
    cannot be asked or no longer knows the job.

    submitit first (``sacct``, where accounting runs), then ``squeue`` (the controller's
    jobs, accounting or not, ended ones too while it keeps them: ``-t all``).
    """
    if job.launcher != "slurm" or shutil.which("squeue") is None:
        return None
    folder = job.detail.get("folder")
    try:
        import submitit

        if folder and _sacct_works(job.job_id):
            state = submitit.SlurmJob(folder=folder, job_id=job.job_id).get_info(
                mode="force").get("State")
            if state and state != "UNKNOWN":
                return str(state)
    except Exception:  # noqa: BLE001 - sacct down or disabled: try squeue
        pass
    try:
        done = subprocess.run(["squeue", "-h", "-t", "all", "-j", job.job_id, "-o", "%T"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    word = done.stdout.strip().splitlines()
    return word[0] if done.returncode == 0 and word else None


def _sacct_works(job_id: str) -> bool:
    """Whether ``sacct`` answers here (it fails, noisily, where accounting is disabled;
    submitit would print that failure on every call)."""
    if shutil.which("sacct") is None:
        return False
    try:
        done = subprocess.run(["sacct", "-n", "-X", "-j", job_id, "-o", "State"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


_SLURM_STATES = {  # Slurm state words (and submitit local ones) as job states
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


def refresh_states(store: Store, jobs: Sequence[SuiteJob], *,
                   query: Callable[[SuiteJob], str | None] | None = None) -> list[SuiteJob]:
    """Ask the scheduler about the jobs that have not ended and record what it says.

    Args:
        query: ``job -> scheduler state word or None`` (default: :func:`scheduler_state`,
            Slurm through submitit, then ``squeue``; None where the scheduler cannot be
            reached or no longer knows the job, and then the stored state stands).

    Returns:
        The jobs with their states as now stored.
    """
    from accelbench.store.jobs import JOB_ENDED

    ask = scheduler_state if query is None else query
    out: list[SuiteJob] = []
    for job in jobs:
        if job.state in JOB_ENDED:
            out.append(job)
            continue
        raw = ask(job)
        state = job_state(raw) if raw else "unknown"
        # A job that says it runs or ended knows better than a scheduler that reports it
        # queued (the store is written before Slurm's state catches up).
        if state == "unknown" or (state == "queued" and job.state != "queued"):
            out.append(job)
            continue
        if state != job.state:
            # Only over the state read above: a job that ended while the scheduler was asked
            # has written its own end, which a scheduler slower to see it must not undo.
            if store.update_job(job.suite_id, job.job_id, state=state, scheduler_state=raw,
                                only_from=job.state):
                job = dataclasses.replace(job, state=state,
                                          detail={**job.detail, "scheduler_state": raw})
            else:
                job = next((j for j in store.list_jobs(job.suite_id)
                            if j.job_id == job.job_id), job)
        out.append(job)
    return out
