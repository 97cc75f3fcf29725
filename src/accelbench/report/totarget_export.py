"""Export of runs to a target (``accelbench export --to-target``): one row per run (its
recipe, target, outcome and the figures to the target) and one row per evaluation point.

- ``json``: the export document of :mod:`accelbench.report.export` with empty ``cases``,
  ``samples`` and ``records`` and two more arrays, ``totarget_runs`` and ``totarget_points``
  (the published schema's optional tables).
- ``csv``: one flat table, a row per evaluation point with its run's columns repeated (a run
  with no evaluation, one that diverged before its first, is one row with empty point
  columns).
- ``parquet``: the runs in exactly the file asked for (``x.parquet``), the points beside it
  (``x.points.parquet``); an existing directory gets ``runs.parquet`` and ``points.parquet``.

A figure that is not known (energy unavailable, a time-to-target of a run that did not reach
the target, a point's energy that was not measured) is null, never 0; the run's
``energy_source`` and ``energy_reason`` say why.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from accelbench import jsonout
from accelbench.csvsafe import csv_cell
from accelbench.report.export import (
    EXPORT_FORMAT_VERSION,
    SCHEMA_ID,
    MissingDependencyError,
)
from accelbench.report.totarget import (
    energy_to_target_j,
    energy_to_target_rel_95,
    point_energy_j,
    point_energy_rel_95,
)
from accelbench.totarget.record import ToTargetRecord

#: Column -> JSON type of the run table (null is allowed where the figure can be unknown).
RUN_COLUMNS: dict[str, str] = {
    "run_id": "string", "group_id": "string", "created_at": "string", "framework": "string",
    "workload": "string", "size": "string", "data": "string", "optimizer": "string",
    "lr": "number", "warmup_steps": "integer", "batch_size": "integer", "metric": "string",
    "target": "number", "eval_every": "integer", "seed": "integer", "status": "string",
    "reason": "string", "startup_s": "number", "time_s": "number", "eval_s": "number",
    "samples": "integer", "evaluations": "integer", "best_metric": "number",
    "samples_to_target": "integer", "time_to_target_s": "number",
    "energy_to_target_j": "number", "energy_source": "string", "energy_boundary": "string",
    "energy_reason": "string", "energy_idle_j": "number", "energy_dynamic_j": "number",
    "host_energy_j": "number", "node_energy_j": "number", "node_energy_dynamic_j": "number",
    "sweep_id": "string", "settings": "string", "device": "string",
    "input_wait_median_s": "number", "input_stall_fraction": "number",
    # 95% relative error bounds (issue 44; null where a record has none).
    "energy_to_target_rel_u95": "number", "energy_dynamic_rel_u95": "number",
    "node_energy_rel_u95": "number",
}
#: Columns added after the table was first published: written in every new export, not
#: required, so that exports made before them still validate.
RUN_ADDED = frozenset({"device", "input_wait_median_s", "input_stall_fraction",
                       "energy_to_target_rel_u95", "energy_dynamic_rel_u95",
                       "node_energy_rel_u95"})
#: Columns of the run table that may be null.
RUN_NULLABLE = frozenset({"best_metric", "samples_to_target", "time_to_target_s",
                          "energy_to_target_j", "energy_idle_j", "energy_dynamic_j",
                          "host_energy_j", "node_energy_j", "node_energy_dynamic_j",
                          "energy_to_target_rel_u95", "energy_dynamic_rel_u95",
                          "node_energy_rel_u95",
                          "input_wait_median_s", "input_stall_fraction"})
POINT_COLUMNS: dict[str, str] = {
    "run_id": "string", "group_id": "string", "seed": "integer", "index": "integer",
    "samples": "integer", "time_s": "number", "metric": "number", "train_loss": "number",
    "energy_j": "number", "energy_rel_u95": "number",
}
POINT_NULLABLE = frozenset({"metric", "train_loss", "energy_j", "energy_rel_u95"})
#: Point columns added after the table was first published (not required).
POINT_ADDED = frozenset({"energy_rel_u95"})


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def run_row(rec: ToTargetRecord) -> dict[str, Any]:
    """One run's row (:data:`RUN_COLUMNS`)."""
    o, r = rec.outcome, rec.recipe
    row = {"run_id": rec.id, "group_id": rec.group_id, "created_at": rec.created_at,
           "framework": rec.framework, "workload": r.workload, "size": r.size, "data": r.data,
           "optimizer": r.optimizer, "lr": r.lr, "warmup_steps": r.warmup_steps,
           "batch_size": r.batch_size, "metric": r.metric, "target": rec.target,
           "eval_every": rec.eval_every, "seed": o.seed, "status": o.status,
           "reason": o.reason, "startup_s": o.startup_s, "time_s": o.time_s,
           "eval_s": o.eval_s, "samples": o.samples, "evaluations": len(o.points),
           "best_metric": o.best(lower_is_better=r.lower_is_better),
           "samples_to_target": rec.samples_to_target,
           "time_to_target_s": rec.time_to_target_s,
           "energy_to_target_j": energy_to_target_j(rec),
           "energy_source": rec.energy.source, "energy_boundary": rec.energy.boundary,
           "energy_reason": rec.energy.reason,
           # Over the whole training clock (to the target where reached), per boundary: the
           # device's idle/dynamic split, the host beside an accelerator, the node meter.
           "energy_idle_j": rec.energy.idle_j("device"),
           "energy_dynamic_j": rec.energy.dynamic_j("device"),
           "host_energy_j": rec.energy.total_j("host"),
           "node_energy_j": rec.energy.total_j("node"),
           "node_energy_dynamic_j": rec.energy.dynamic_j("node"),
           "sweep_id": rec.sweep_id,
           "settings": json.dumps(rec.settings, sort_keys=True) if rec.settings else "",
           "energy_to_target_rel_u95": energy_to_target_rel_95(rec),
           "energy_dynamic_rel_u95": rec.energy.rel_95("device", dynamic=True),
           "node_energy_rel_u95": rec.energy.rel_95("node"),
           "device": rec.device,
           # the step's wait for its batches read from disk (null: drawn in memory, or
           # stored before it was timed)
           "input_wait_median_s": o.input.wait_median_s if o.input is not None else None,
           "input_stall_fraction": o.input.stall_fraction if o.input is not None else None}
    return {k: _finite(v) for k, v in row.items()}


def point_rows(rec: ToTargetRecord) -> list[dict[str, Any]]:
    """One row per evaluation point (:data:`POINT_COLUMNS`)."""
    return [{k: _finite(v) for k, v in {
        "run_id": rec.id, "group_id": rec.group_id, "seed": rec.outcome.seed, "index": i,
        "samples": p.samples, "time_s": p.time_s, "metric": p.metric,
        "train_loss": p.train_loss, "energy_j": point_energy_j(rec, i),
        "energy_rel_u95": point_energy_rel_95(rec, i)}.items()}
        for i, p in enumerate(rec.outcome.points)]


def write_csv(records: Sequence[ToTargetRecord], fh: TextIO) -> int:
    """The flat table: a row per point, the run's columns first."""
    point_cols = [c for c in POINT_COLUMNS if c not in ("run_id", "group_id", "seed")]
    header = list(RUN_COLUMNS) + [f"point_{c}" for c in point_cols]
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(header)
    for rec in records:
        run = run_row(rec)
        points = point_rows(rec) or [dict.fromkeys(point_cols)]
        for p in points:
            w.writerow([csv_cell(run[c]) for c in RUN_COLUMNS]
                       + [csv_cell(p[c]) for c in point_cols])
    return len(records)


def _line(item: Any) -> str:
    return json.dumps(item, allow_nan=False, separators=(", ", ": "), sort_keys=False)


def write_json(records: Sequence[ToTargetRecord], fh: TextIO) -> int:
    """The export document with the two to-target tables (``cases`` etc. empty)."""
    head = {"format": f"accelbench-export-v{EXPORT_FORMAT_VERSION}",
            "schema_version": EXPORT_FORMAT_VERSION, "schema": SCHEMA_ID,
            "cases": [], "samples": [], "records": []}
    fh.write(jsonout.dumps(head, indent=2)[:-2])
    runs = [_line(run_row(r)) for r in records]
    points = [_line(p) for r in records for p in point_rows(r)]
    for name, lines in (("totarget_runs", runs), ("totarget_points", points)):
        body = ",\n    ".join(lines)
        fh.write(f',\n  "{name}": [' + (f"\n    {body}\n  ]" if lines else "]"))
    fh.write("\n}\n")
    return len(records)


def parquet_paths(out: Path) -> tuple[Path, Path]:
    """The (runs, points) files of a parquet export to ``out``."""
    if out.is_dir():
        return out / "runs.parquet", out / "points.parquet"
    stem = out.name[: -len(".parquet")] if out.name.endswith(".parquet") else out.name
    return out, out.with_name(f"{stem}.points.parquet")


_ARROW = {"string": "string", "integer": "int64", "number": "float64"}


def write_parquet(records: Sequence[ToTargetRecord], out: Path) -> list[Path]:
    """The runs and the points as two Parquet files (typed columns, nulls kept)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError("parquet export needs pyarrow, which is not installed: "
                                     "pip install 'accelbench[parquet]'") from None
    runs_path, points_path = parquet_paths(out)
    for path, columns, rows in ((runs_path, RUN_COLUMNS, [run_row(r) for r in records]),
                                (points_path, POINT_COLUMNS,
                                 [p for r in records for p in point_rows(r)])):
        schema = pa.schema([(c, getattr(pa, _ARROW[t])()) for c, t in columns.items()])
        table = pa.Table.from_pylist(rows, schema=schema)
        pq.write_table(table, path)
    return [runs_path, points_path]


def schema_defs() -> dict[str, Any]:
    """The published schema's definitions of the two tables."""
    def table(columns: dict[str, str], nullable: frozenset[str],
              added: frozenset[str] = frozenset()) -> dict[str, Any]:
        props = {}
        for name, kind in columns.items():
            prop: dict[str, Any] = {"type": [kind, "null"] if name in nullable else kind}
            for suffix, unit in (("_s", "s"), ("_j", "J"), ("_rel_u95", "ratio")):
                if name.endswith(suffix):
                    prop["x-unit"] = unit
            props[name] = prop
        return {"type": "object", "properties": props,
                "required": [c for c in columns if c not in added],
                "additionalProperties": False}

    return {"totarget_run": table(RUN_COLUMNS, RUN_NULLABLE, RUN_ADDED),
            "totarget_point": table(POINT_COLUMNS, POINT_NULLABLE, POINT_ADDED)}


def to_text(records: Sequence[ToTargetRecord], fmt: str) -> str:
    """csv or json as text (tests, the API)."""
    buf = io.StringIO()
    (write_csv if fmt == "csv" else write_json)(records, buf)
    return buf.getvalue()
