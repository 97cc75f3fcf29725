"""Table definitions and the ordered list of schema migrations.

The schema version lives in the ``meta`` table. A new store runs every
migration in order; an old one runs those it lacks, in one transaction
each, holding the store's write lock (SQLite ``BEGIN IMMEDIATE``,
PostgreSQL an advisory lock) and re-reading the version under it, so any
number of processes may open a new store at the same moment. A store
written by a newer accelbench is refused, not guessed at.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import sqlalchemy as sa

from accelbench.phases import Phases

metadata = sa.MetaData()

meta = sa.Table(
    "meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

results = sa.Table(
    "results",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("suite_id", sa.String(128)),
    sa.Column("case_key", sa.String(32)),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("workload", sa.String(128), nullable=False),
    sa.Column("size", sa.String(16), nullable=False),
    sa.Column("batch_size", sa.Integer, nullable=False),
    sa.Column("precision", sa.String(16), nullable=False),
    sa.Column("device", sa.String(32), nullable=False),
    sa.Column("device_name", sa.String(256)),
    sa.Column("framework", sa.String(32), nullable=False),
    sa.Column("tag", sa.Text, nullable=False, server_default=""),
    sa.Column("hostname", sa.String(256)),
    sa.Column("sample_unit", sa.String(32)),
    sa.Column("samples_per_s", sa.Float),
    sa.Column("ci_low", sa.Float),
    sa.Column("ci_high", sa.Float),
    sa.Column("step_time_s", sa.Float),
    sa.Column("iterations", sa.Integer),
    sa.Column("param_count", sa.BigInteger),
    sa.Column("error", sa.Text),
    sa.Column("started_at", sa.String(40), nullable=False),
    sa.Column("finished_at", sa.String(40), nullable=False),
    sa.Column("accelbench_version", sa.String(32)),
    sa.Column("record_json", sa.Text, nullable=False),
    # Added by migration 2.
    sa.Column("energy_j_per_sample", sa.Float),
    sa.Column("avg_power_w", sa.Float),
    sa.Column("energy_source", sa.String(64)),
    # Added by migration 8: each phase's direct time per step (``--phases``), else NULL.
    sa.Column("phase_forward_s", sa.Float),
    sa.Column("phase_backward_s", sa.Float),
    sa.Column("phase_optimizer_s", sa.Float),
    sa.Column("phase_communication_s", sa.Float),
    sa.Column("phase_input_s", sa.Float),
)

#: The ``results`` column of each phase's direct time per step (migration 8).
PHASE_TIME_COLUMNS: dict[str, str] = {
    name: f"phase_{name}_s" for name in ("forward", "backward", "optimizer", "communication",
                                         "input")
}


def phase_time_values(phases: Phases | None) -> dict[str, float | None]:
    """The :data:`PHASE_TIME_COLUMNS` of a record: each phase's direct time per step
    (seconds), NULL where the case has no such phase, no direct time, or no phases at all;
    a non-finite time is NULL too."""
    out: dict[str, float | None] = dict.fromkeys(PHASE_TIME_COLUMNS.values())
    for phase in phases.phases if phases is not None else ():
        column = PHASE_TIME_COLUMNS.get(phase.name)
        value = phase.time_s
        if column is not None and isinstance(value, (int, float)) and not isinstance(
                value, bool) and math.isfinite(value):
            out[column] = float(value)
    return out

claims = sa.Table(
    "claims",
    metadata,
    sa.Column("suite_id", sa.String(128), primary_key=True),
    sa.Column("case_key", sa.String(32), primary_key=True),
    sa.Column("owner", sa.String(320), nullable=False),
    sa.Column("hostname", sa.String(256), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("claimed_at_s", sa.Float, nullable=False),
    sa.Column("ttl_s", sa.Float, nullable=False),
)
"""Cases of a suite being run right now (added by migration 5): one row per case, so two
processes running one suite id split its cases instead of both running each."""

suite_jobs = sa.Table(
    "suite_jobs",
    metadata,
    sa.Column("suite_id", sa.String(128), primary_key=True),
    sa.Column("job_id", sa.String(128), primary_key=True),
    sa.Column("launcher", sa.String(32), nullable=False),
    sa.Column("case_keys", sa.Text, nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("hostname", sa.String(256)),
    sa.Column("submitted_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
    sa.Column("detail", sa.Text, nullable=False, server_default=""),
)
"""Jobs a suite was submitted as to a scheduler (added by migration 6): one row per job,
``case_keys`` a JSON list of the case keys it runs; ``state`` as the launcher last saw it."""

pending_restores = sa.Table(
    "pending_restores",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("hostname", sa.String(256), nullable=False),
    sa.Column("device", sa.String(64), nullable=False),
    sa.Column("knob", sa.String(64), nullable=False),
    sa.Column("original", sa.Text, nullable=False),
    sa.Column("owner_pid", sa.Integer, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)
"""Device settings changed by a sweep and not yet put back (added by migration 6): the
original value of each knob, written before it is changed and deleted once restored, so a
sweep killed with SIGKILL is undone by the next accelbench on that host."""

suite_plans = sa.Table(
    "suite_plans",
    metadata,
    sa.Column("suite_id", sa.String(128), primary_key=True),
    sa.Column("suite", sa.String(64), nullable=False),
    sa.Column("plan_json", sa.Text, nullable=False),
    sa.Column("case_keys", sa.Text, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
    sa.Column("accelbench_version", sa.String(32)),
)
"""A suite's plan (added by migration 7): the suite's name and every option that shapes
its cases, as JSON (:class:`accelbench.planning.plan.SuitePlan`), and the keys of its
cases, stored when it starts, so that ``accelbench suite resume ID`` runs the remaining
cases exactly as planned."""

totarget_runs = sa.Table(
    "totarget_runs",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("group_id", sa.String(32), nullable=False),
    sa.Column("workload", sa.String(64), nullable=False),
    sa.Column("size", sa.String(32), nullable=False),
    sa.Column("framework", sa.String(16), nullable=False),
    sa.Column("seed", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("record_json", sa.Text, nullable=False),
)
"""Runs to a target (``accelbench train``; added by migration 9): one row per seed, the
seeds of one command sharing ``group_id``; the record holds the recipe, the target, the
outcome and every evaluation point (:mod:`accelbench.totarget.record`)."""

Migration = Callable[[sa.Connection], None]


def _v1(conn: sa.Connection) -> None:
    """Results with their full record as JSON and the columns users filter on."""
    conn.execute(
        sa.text(
            """
            CREATE TABLE results (
                id VARCHAR(32) PRIMARY KEY,
                suite_id VARCHAR(128),
                case_key VARCHAR(32),
                status VARCHAR(16) NOT NULL,
                workload VARCHAR(128) NOT NULL,
                size VARCHAR(16) NOT NULL,
                batch_size INTEGER NOT NULL,
                precision VARCHAR(16) NOT NULL,
                device VARCHAR(32) NOT NULL,
                device_name VARCHAR(256),
                framework VARCHAR(32) NOT NULL,
                tag TEXT NOT NULL DEFAULT '',
                hostname VARCHAR(256),
                sample_unit VARCHAR(32),
                samples_per_s FLOAT,
                ci_low FLOAT,
                ci_high FLOAT,
                step_time_s FLOAT,
                iterations INTEGER,
                param_count BIGINT,
                error TEXT,
                started_at VARCHAR(40) NOT NULL,
                finished_at VARCHAR(40) NOT NULL,
                accelbench_version VARCHAR(32),
                record_json TEXT NOT NULL
            )
            """
        )
    )
    conn.execute(sa.text("CREATE INDEX ix_results_workload ON results (workload)"))
    conn.execute(sa.text("CREATE INDEX ix_results_finished_at ON results (finished_at)"))


def _v2(conn: sa.Connection) -> None:
    """Energy columns (filled by the meters) and the index suite resume looks up."""
    for column, kind in (
        ("energy_j_per_sample", "FLOAT"),
        ("avg_power_w", "FLOAT"),
        ("energy_source", "VARCHAR(64)"),
    ):
        conn.execute(sa.text(f"ALTER TABLE results ADD COLUMN {column} {kind}"))
    conn.execute(sa.text("CREATE INDEX ix_results_suite_id ON results (suite_id)"))
    conn.execute(sa.text("CREATE INDEX ix_results_case_key ON results (case_key)"))


def _v3(conn: sa.Connection) -> None:
    """Operator results and measured device peaks (see :mod:`accelbench.store.opbench`)."""
    conn.execute(
        sa.text(
            """
            CREATE TABLE op_results (
                id VARCHAR(32) PRIMARY KEY,
                op VARCHAR(32) NOT NULL,
                label TEXT,
                shape TEXT NOT NULL,
                precision VARCHAR(16) NOT NULL,
                device VARCHAR(32) NOT NULL,
                device_name VARCHAR(256),
                hostname VARCHAR(256),
                "pass" VARCHAR(32) NOT NULL,
                status VARCHAR(16) NOT NULL,
                error TEXT,
                flops FLOAT,
                min_bytes FLOAT,
                times TEXT NOT NULL,
                warmup_times TEXT,
                stop_reason VARCHAR(32),
                median_s FLOAT,
                ci_low FLOAT,
                ci_high FLOAT,
                achieved_flop_per_s FLOAT,
                pct_measured_peak FLOAT,
                pct_theoretical_peak FLOAT,
                threads INTEGER,
                tag TEXT NOT NULL DEFAULT '',
                machine TEXT,
                created_at VARCHAR(40) NOT NULL
            )
            """
        )
    )
    conn.execute(sa.text("CREATE INDEX ix_op_results_device ON op_results (device)"))
    conn.execute(sa.text("CREATE INDEX ix_op_results_created_at ON op_results (created_at)"))
    conn.execute(
        sa.text(
            """
            CREATE TABLE peaks (
                id VARCHAR(32) PRIMARY KEY,
                hostname VARCHAR(256),
                device VARCHAR(32) NOT NULL,
                device_name VARCHAR(256),
                precision VARCHAR(16) NOT NULL,
                value FLOAT NOT NULL,
                unit VARCHAR(16) NOT NULL,
                method TEXT NOT NULL,
                details TEXT,
                created_at VARCHAR(40) NOT NULL
            )
            """
        )
    )
    conn.execute(sa.text("CREATE INDEX ix_peaks_device ON peaks (device, precision)"))


def _v4(conn: sa.Connection) -> None:
    """Frameworks by their backend names: records of 0.1 said ``pytorch``, now ``torch``.

    The framework is part of a case's resume key, so the key of each renamed
    row is recomputed from its stored spec; operator results gain a framework
    column (every earlier one was measured with torch).
    """
    import json

    from accelbench.spec import RunSpec

    rows = conn.execute(
        sa.text("SELECT id, record_json FROM results WHERE framework = 'pytorch'")
    ).all()
    for rid, blob in rows:
        try:
            record = json.loads(blob)
            record["spec"]["framework"] = "torch"
            key = RunSpec.from_dict(record["spec"]).case_key()
        except (ValueError, KeyError, TypeError):
            continue  # a damaged record keeps its row as it is; reads tolerate it
        conn.execute(
            sa.text("UPDATE results SET framework = 'torch', case_key = :key, "
                    "record_json = :blob WHERE id = :id"),
            {"key": key, "blob": json.dumps(record), "id": rid},
        )
    conn.execute(sa.text("CREATE INDEX ix_results_framework ON results (framework)"))
    conn.execute(sa.text(
        "ALTER TABLE op_results ADD COLUMN framework VARCHAR(32) NOT NULL DEFAULT 'torch'"
    ))


def _v5(conn: sa.Connection) -> None:
    """Suite case claims: who is running which case of a suite, until when.

    The primary key makes a claim atomic on every database (an insert either
    wins or conflicts); ``owner`` is ``host:pid:token``, ``hostname`` and ``pid``
    let a claim of a process that died be taken over at once on its own host,
    ``claimed_at_s`` (UNIX time) plus ``ttl_s`` anywhere else.
    """
    conn.execute(
        sa.text(
            """
            CREATE TABLE claims (
                suite_id VARCHAR(128) NOT NULL,
                case_key VARCHAR(32) NOT NULL,
                owner VARCHAR(320) NOT NULL,
                hostname VARCHAR(256) NOT NULL,
                pid INTEGER NOT NULL,
                claimed_at_s FLOAT NOT NULL,
                ttl_s FLOAT NOT NULL,
                PRIMARY KEY (suite_id, case_key)
            )
            """
        )
    )


def _v6(conn: sa.Connection) -> None:
    """Scheduler jobs of suites (``suite status``) and pending restores of sweeps."""
    conn.execute(
        sa.text(
            """
            CREATE TABLE suite_jobs (
                suite_id VARCHAR(128) NOT NULL,
                job_id VARCHAR(128) NOT NULL,
                launcher VARCHAR(32) NOT NULL,
                case_keys TEXT NOT NULL,
                state VARCHAR(32) NOT NULL,
                hostname VARCHAR(256),
                submitted_at VARCHAR(40) NOT NULL,
                updated_at VARCHAR(40) NOT NULL,
                detail TEXT NOT NULL DEFAULT '',
                PRIMARY KEY (suite_id, job_id)
            )
            """
        )
    )
    conn.execute(
        sa.text(
            """
            CREATE TABLE pending_restores (
                id VARCHAR(32) PRIMARY KEY,
                hostname VARCHAR(256) NOT NULL,
                device VARCHAR(64) NOT NULL,
                knob VARCHAR(64) NOT NULL,
                original TEXT NOT NULL,
                owner_pid INTEGER NOT NULL,
                created_at VARCHAR(40) NOT NULL
            )
            """
        )
    )
    conn.execute(sa.text("CREATE INDEX ix_pending_restores_host ON pending_restores (hostname)"))


def _v7(conn: sa.Connection) -> None:
    """Suite plans: what ``suite resume`` runs (older suites have none)."""
    conn.execute(
        sa.text(
            """
            CREATE TABLE suite_plans (
                suite_id VARCHAR(128) NOT NULL PRIMARY KEY,
                suite VARCHAR(64) NOT NULL,
                plan_json TEXT NOT NULL,
                case_keys TEXT NOT NULL,
                created_at VARCHAR(40) NOT NULL,
                updated_at VARCHAR(40) NOT NULL,
                accelbench_version VARCHAR(32)
            )
            """
        )
    )


def _v8(conn: sa.Connection) -> None:
    """Per-phase time columns (``--phases``), filled from the records that have phases.

    Records written before ``--phases`` existed have no ``phases`` key, later ones
    ``"phases": null`` unless asked: only the others are read. A record that cannot be
    read keeps NULLs (reads tolerate it, as they do now)."""
    import json

    for column in PHASE_TIME_COLUMNS.values():
        conn.execute(sa.text(f"ALTER TABLE results ADD COLUMN {column} FLOAT"))
    rows = conn.execute(
        sa.text("SELECT id, record_json FROM results WHERE record_json LIKE :has "
                "AND record_json NOT LIKE :null"),
        {"has": '%"phases"%', "null": '%"phases": null%'},
    ).all()
    for rid, blob in rows:
        try:
            data = json.loads(blob).get("phases")
            values = phase_time_values(Phases.from_dict(data) if data else None)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if any(v is not None for v in values.values()):
            sets = ", ".join(f"{c} = :{c}" for c in values)
            conn.execute(sa.text(f"UPDATE results SET {sets} WHERE id = :id"),
                         {**values, "id": rid})


def _v9(conn: sa.Connection) -> None:
    """Runs to a target (``accelbench train``); older stores have none."""
    conn.execute(
        sa.text(
            """
            CREATE TABLE totarget_runs (
                id VARCHAR(32) NOT NULL PRIMARY KEY,
                group_id VARCHAR(32) NOT NULL,
                workload VARCHAR(64) NOT NULL,
                size VARCHAR(32) NOT NULL,
                framework VARCHAR(16) NOT NULL,
                seed INTEGER NOT NULL,
                status VARCHAR(16) NOT NULL,
                created_at VARCHAR(40) NOT NULL,
                record_json TEXT NOT NULL
            )
            """
        )
    )


#: Migration ``i`` (1-based) brings a store from version ``i - 1`` to ``i``.
MIGRATIONS: tuple[Migration, ...] = (_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9)
SCHEMA_VERSION = len(MIGRATIONS)
