"""Export results as CSV, JSON or Parquet: one row per case, raw samples in their own table.

- ``csv``: the case table only (raw samples need ``json`` or ``parquet``).
- ``json``: ``{"format", "schema_version", "schema", "cases", "samples", "records"}``
  (``records``: each case's full stored record), following the published JSON Schema
  (:mod:`accelbench.report.schema`, shipped in the package and in ``docs/``); strict JSON:
  a non-finite number (a NaN loss of a diverged case) is ``null``, never ``NaN``.
- ``parquet``: the case table in exactly the file asked for (``x.parquet``) and the
  raw samples beside it (``x.samples.parquet``), through pyarrow (the optional extra
  ``accelbench[parquet]``); an existing directory gets ``cases.parquet`` and
  ``samples.parquet``.

The sample table has one row per timed iteration: ``result_id``, ``phase`` (``warmup`` or
``measured``), ``index``, ``time_s`` and ``steps``: the training steps behind the row. A
block-timed record (``Stats.steps_per_block`` > 1) stores one time per block of steps, the
block's per-step mean; its row has the block's step count, so a reader weights rows by
``steps`` (every other row has 1).
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from accelbench import jsonout
from accelbench.csvsafe import FORMULA_STARTS as FORMULA_STARTS  # re-exported: one rule
from accelbench.csvsafe import csv_cell as csv_cell
from accelbench.csvsafe import csv_row
from accelbench.errors import ConfigError
from accelbench.phase_summary import PHASE_EXPORT_COLUMNS, export_values
from accelbench.report.outputs import atomic_paths, check_out_files
from accelbench.report.rows import case_row
from accelbench.result import Result
from accelbench.verdicts import read_verdict

FORMATS = ("csv", "json", "parquet")
EXPORT_FORMAT_VERSION = 2
"""Version of the JSON export and its schema (2: ``schema_version``, ``records``)."""
SCHEMA_ID = f"urn:accelbench:export:v{EXPORT_FORMAT_VERSION}"
"""The ``$id`` of the JSON Schema (:mod:`accelbench.report.schema`) a JSON export follows."""
PARQUET_INSTALL = "pip install 'accelbench[parquet]'"

INPUT_EXPORT_COLUMNS = ("data_source", "loader_workers", "input_wait_median_s",
                        "input_stall_fraction", "input_prep_stall", "input_fetch_stall",
                        "input_loader_j_per_sample", "input_loader_energy_source")
"""The case table's columns of ``--data`` (:func:`input_values`)."""
CASE_COLUMNS = (
    "result_id", "suite_id", "status", "workload", "size", "batch_size", "precision", "device",
    "device_name", "framework", "threads", "tag", "fast_paths", "nnodes", "nproc_per_node",
    "world_size", "dist_backend", "sample_unit", "samples_per_step",
    "samples_per_s", "ci95_low_samples_per_s", "ci95_high_samples_per_s", "step_time_s",
    "step_time_mean_s", "step_time_trimmed_mean_s", "step_time_std_s", "iterations",
    "ci_rel_halfwidth", "ci_scope", "ci_unreliable", "stop_reason", "avg_power_w",
    "energy_j_per_sample", "energy_rel_u95", "energy_window_samples_per_s", "energy_source",
    "energy_kind", "energy_boundary", "mfu", "param_count", "flop_per_sample", "final_loss",
    "build_time_s", "compile_s", "peak_memory_bytes", "noisy", "noise_reasons", "hostname",
    "error", "started_at", "finished_at", "accelbench_version",
    # --phases: each phase's direct time and differential energy per step, and the
    # energy's status (measured, indistinguishable, negative, unavailable).
    *PHASE_EXPORT_COLUMNS,
    # --data: where the batches came from, the step's median wait for one and the share
    # of the step spent waiting (empty with synthetic data: nothing was read).
    *INPUT_EXPORT_COLUMNS,
)
SAMPLE_COLUMNS = ("result_id", "phase", "index", "time_s", "steps")


class MissingDependencyError(ConfigError):
    """An optional package needed for the requested output is not installed."""


def case_record(result: Result) -> dict[str, Any]:
    """The flat export row of one result (keys: :data:`CASE_COLUMNS`); a non-finite
    number (NaN loss, Inf) is None: unknown, never a number no reader accepts."""
    row = case_row(result).to_dict()
    st = result.stats
    row.update(
        step_time_mean_s=st.mean_s if st else None,
        step_time_trimmed_mean_s=st.trimmed_mean_s if st else None,
        step_time_std_s=st.std_s if st else None,
        final_loss=result.final_loss,
        build_time_s=result.build_time_s,
        compile_s=result.compile_s,
        peak_memory_bytes=result.peak_memory_bytes,
        flop_per_sample=result.flop_per_sample,
        energy_rel_u95=result.energy_rel_u95,
        energy_window_samples_per_s=result.energy_window_samples_per_s,
        started_at=result.started_at,
        accelbench_version=result.accelbench_version,
        noise_reasons="; ".join(result.noise_reasons),
        # One cell in every format: "compile+channels_last", empty for a plain case.
        fast_paths="+".join(result.spec.fast_paths.enabled()),
        **export_values(result.phases),
        **input_values(result),
    )
    return {k: _finite(row.get(k)) for k in CASE_COLUMNS}


def input_values(result: Result) -> dict[str, Any]:
    """The case row's :data:`INPUT_EXPORT_COLUMNS`: the data source always (``synthetic``
    by default), the wait and the stall only where the case read data."""
    from accelbench.data.layouts import source_of

    inp = result.input
    def section(within: dict[str, Any], key: str) -> dict[str, Any]:
        value = within.get(key)
        return value if isinstance(value, dict) else {}

    extra = inp.extra if inp else {}
    analysis = section(extra, "analysis")
    loader = section(section(extra, "energy"), "loader_host")
    return {"data_source": source_of(result.spec.data),
            "loader_workers": inp.loader_workers if inp else None,
            "input_wait_median_s": inp.wait_median_s if inp else None,
            "input_stall_fraction": inp.stall_fraction if inp else None,
            # --input-analysis: DS-Analyzer's split and the loader's host energy
            "input_prep_stall": analysis.get("prep_stall"),
            "input_fetch_stall": analysis.get("fetch_stall"),
            "input_loader_j_per_sample": loader.get("j_per_sample"),
            "input_loader_energy_source": loader.get("source")}


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def block_steps(result: Result) -> list[int] | None:
    """The steps behind each measured time of ``result``: all 1 when each step was timed on
    its own; for blocks of k, k each but the block that landed on the exact
    ``--iterations`` count or the ``--max-iterations`` cap, which is shorter (the
    measurement loop's rule). None when the blocks do not add up to the record's step
    count (a record this rule does not describe). A record that stores its blocks' steps
    (``Stats.block_steps``: every block-timed record since a timer that kept a step in
    flight across blocks) gives those,
    when they add up."""
    stats, n_rows = result.stats, len(result.iteration_times_s)
    if stats is not None and stats.block_steps:
        stored = list(stats.block_steps)
        ok = len(stored) == n_rows and sum(stored) == stats.n and min(stored) >= 1
        return stored if ok else None
    k = stats.steps_per_block if stats is not None else 1
    if k <= 1:
        return [1] * n_rows
    policy = result.spec.policy
    cap = policy.iterations if policy.iterations is not None else policy.max_iterations
    steps, done = [], 0
    for _ in range(n_rows):
        left = cap - done
        steps.append(min(k, left) if left > 0 else k)
        done += steps[-1]
    return steps if stats is not None and done == stats.n else None


def sample_records(result: Result) -> list[dict[str, Any]]:
    """Warm-up and measured iteration times of one result, one row each, with the steps
    behind each (warm-up steps are timed one by one)."""
    rows = [
        {"result_id": result.id, "phase": "warmup", "index": i, "time_s": _finite(t),
         "steps": 1}
        for i, t in enumerate(result.warmup_times_s)
    ]
    known = block_steps(result)
    steps: list[int | None] = list(known) if known is not None else \
        [None] * len(result.iteration_times_s)
    rows += [
        {"result_id": result.id, "phase": "measured", "index": i, "time_s": _finite(t),
         "steps": s}
        for i, (t, s) in enumerate(zip(result.iteration_times_s, steps, strict=True))
    ]
    return rows


def write_csv(results: Iterable[Result], fh: TextIO) -> int:
    """Write the case table as CSV to ``fh``, one result at a time; the count written."""
    writer = csv.DictWriter(fh, fieldnames=list(CASE_COLUMNS))
    writer.writeheader()
    n = 0
    for r in results:
        writer.writerow(csv_row(case_record(r)))
        n += 1
    return n


def to_csv(results: Iterable[Result]) -> str:
    """The case table as CSV (empty cells for unknown values)."""
    buf = io.StringIO()
    write_csv(results, buf)
    return buf.getvalue()


_LINE = json.JSONEncoder(allow_nan=False, separators=(", ", ": "))


def _json_line(item: Any, *, strict: bool = False) -> str:
    # One item on one line, by the C encoder (json's indenting encoder is pure Python:
    # 50x slower on the ~400 samples a result has). ``strict``: non-finite numbers
    # inside are made null first (a record); cases are finite already.
    return _LINE.encode(jsonout.jsonable(item) if strict else item)


def _num(value: float | int | None) -> str:
    return "null" if value is None else value.__repr__()


def _sample_lines(result: Result) -> Iterator[str]:
    # The sample rows of one result as JSON lines, formatted directly: ~400 a result,
    # each the same five keys (finite numbers, an id encoded once).
    rid = _LINE.encode(result.id)
    for s in sample_records(result):
        yield (f'{{"result_id": {rid}, "phase": "{s["phase"]}", "index": {s["index"]}, '
               f'"time_s": {_num(s["time_s"])}, "steps": {_num(s["steps"])}}}')


def _json_item(fh: TextIO, first: bool, line: str) -> None:
    fh.write(("\n    " if first else ",\n    ") + line)


def exported_record(result: Result) -> dict[str, Any]:
    """The stored record as exported: a record whose noise holds figures only gets the
    verdict read from them in the keys older records stored it under (``flagged``,
    ``kinds``, ``by_kind``, ``reasons``), so every export's records read alike."""
    record = result.to_dict()
    noise = record.get("noise")
    if isinstance(noise, dict) and noise and "flagged" not in noise:
        record["noise"] = {**noise, **read_verdict(noise)}
    return record


def write_json(results: Iterable[Result], fh: TextIO) -> int:
    """Write cases and samples as one JSON document to ``fh`` in one pass over
    ``results``, holding one result at a time: the cases go straight to ``fh``, the
    samples and records to temporary files appended after them. Each case, sample and
    record is one line (an export of many results stays fast and line-oriented)."""
    head = {"format": f"accelbench-export-v{EXPORT_FORMAT_VERSION}",
            "schema_version": EXPORT_FORMAT_VERSION, "schema": SCHEMA_ID}
    fh.write(jsonout.dumps(head, indent=2)[:-2] + ',\n  "cases": [')
    n = n_samples = 0
    with tempfile.TemporaryFile("w+", encoding="utf-8") as samples, \
            tempfile.TemporaryFile("w+", encoding="utf-8") as records:
        for r in results:
            _json_item(fh, n == 0, _json_line(case_record(r)))
            lines = list(_sample_lines(r))
            if lines:  # one write for the ~400 samples of a result
                _json_item(samples, n_samples == 0, ",\n    ".join(lines))
                n_samples += len(lines)
            _json_item(records, n == 0, _json_line(exported_record(r), strict=True))
            n += 1
        before = n  # the array just written: its closing bracket follows its last item
        for name, spool, count in (("samples", samples, n_samples), ("records", records, n)):
            fh.write(("\n  ]" if before else "]") + f',\n  "{name}": [')
            spool.seek(0)
            shutil.copyfileobj(spool, fh)
            before = count
    fh.write(("\n  ]" if n else "]") + "\n}\n")
    return n


def to_json(results: Iterable[Result]) -> str:
    """Cases and samples as one JSON document (null for unknown values)."""
    buf = io.StringIO()
    write_json(results, buf)
    return buf.getvalue()


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise MissingDependencyError(
            f"parquet export needs pyarrow, which is not installed: {PARQUET_INSTALL}"
        ) from None
    return pyarrow


def parquet_paths(out: Path) -> tuple[Path, Path]:
    """The (cases, samples) files of a parquet export to ``out``: ``out`` itself and
    ``<out without .parquet>.samples.parquet`` beside it, or ``cases.parquet`` and
    ``samples.parquet`` inside ``out`` when it is an existing directory."""
    if out.is_dir():
        return out / "cases.parquet", out / "samples.parquet"
    stem = out.name[: -len(".parquet")] if out.name.endswith(".parquet") else out.name
    return out, out.with_name(f"{stem}.samples.parquet")


def write_parquet(results: Iterable[Result], out: Path, *, batch: int = 100,
                  case_group: int = 10_000, sample_group: int = 500) -> list[Path]:
    """Write the case table to ``out`` and the samples beside it (:func:`parquet_paths`).

    ``batch`` results at a time become Arrow tables (columns, not dicts); those wait until
    ``case_group`` results' cases (``sample_group`` results' samples: about 400 rows each)
    are held, then go out as one row group. Memory holds one group whatever the count,
    and the writer's footer (its metadata, kept in memory until the file closes, about
    1 KB per column of each row group) grows by a row group per ``case_group`` results,
    not per ``batch``.

    Raises:
        MissingDependencyError: pyarrow is not installed (the message has the install command).
        ConfigError: the files cannot be written.
    """
    pa = _pyarrow()
    cases_path, samples_path = parquet_paths(out)
    case_schema = pa.schema([(c, _arrow_type(pa, c)) for c in CASE_COLUMNS])
    sample_schema = pa.schema([
        ("result_id", pa.string()), ("phase", pa.string()), ("index", pa.int64()),
        ("time_s", pa.float64()), ("steps", pa.int64()),
    ])

    def table(rows: list[dict[str, Any]], schema: Any, cols: Sequence[str]) -> Any:
        return pa.Table.from_pydict({c: [row[c] for row in rows] for c in cols},
                                    schema=schema)

    class Group:
        """Tables waiting for one row group of ``size`` results."""

        def __init__(self, writer: Any, size: int) -> None:
            self.writer, self.size = writer, size
            self.tables: list[Any] = []
            self.results = 0

        def add(self, t: Any, results: int, *, last: bool = False) -> None:
            self.tables.append(t)
            self.results += results
            if self.results >= self.size or last:
                whole = pa.concat_tables(self.tables)
                self.writer.write_table(whole, row_group_size=max(whole.num_rows, 1))
                self.tables, self.results = [], 0

    try:
        cases_path.parent.mkdir(parents=True, exist_ok=True)
        # A failed write (or a store fault mid-way) leaves the old files as they were.
        with atomic_paths([cases_path, samples_path]) as (cases_tmp, samples_tmp), \
                pa.parquet.ParquetWriter(cases_tmp, case_schema) as cw, \
                pa.parquet.ParquetWriter(samples_tmp, sample_schema) as sw:
            case_rows, sample_rows = Group(cw, case_group), Group(sw, sample_group)
            cases: list[dict[str, Any]] = []
            samples: list[dict[str, Any]] = []
            for r in results:
                cases.append(case_record(r))
                samples += sample_records(r)
                if len(cases) >= batch:
                    case_rows.add(table(cases, case_schema, CASE_COLUMNS), len(cases))
                    sample_rows.add(table(samples, sample_schema, SAMPLE_COLUMNS), len(cases))
                    cases, samples = [], []
            # The last group (a file with none still has its schema).
            if cases or case_rows.tables:
                case_rows.add(table(cases, case_schema, CASE_COLUMNS), len(cases), last=True)
            if cases or sample_rows.tables:
                sample_rows.add(table(samples, sample_schema, SAMPLE_COLUMNS), len(cases),
                                last=True)
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc}") from None
    return [cases_path, samples_path]


_INT_COLUMNS = {"batch_size", "threads", "samples_per_step", "iterations", "param_count",
                "peak_memory_bytes", "nnodes", "nproc_per_node", "world_size",
                "loader_workers"}
_BOOL_COLUMNS = {"noisy", "ci_unreliable"}
_STR_COLUMNS = {
    "result_id", "suite_id", "status", "workload", "size", "precision", "device", "device_name",
    "framework", "tag", "sample_unit", "stop_reason", "energy_source", "energy_kind",
    "energy_boundary", "hostname", "error", "started_at", "finished_at", "accelbench_version",
    "noise_reasons", "fast_paths", "dist_backend", "ci_scope", "data_source",
    "input_loader_energy_source",
    *(c for c in PHASE_EXPORT_COLUMNS if c.endswith("_status")),
}


def column_kind(column: str) -> str:
    """A case column's type: ``int``, ``bool``, ``str`` or ``float`` (Parquet's and the
    JSON Schema's one source)."""
    if column in _INT_COLUMNS:
        return "int"
    if column in _BOOL_COLUMNS:
        return "bool"
    return "str" if column in _STR_COLUMNS else "float"


def _arrow_type(pa: Any, column: str) -> Any:
    return {"int": pa.int64(), "bool": pa.bool_(), "str": pa.string(),
            "float": pa.float64()}[column_kind(column)]


def write_export(results: Iterable[Result], fmt: str, out: Path | None, *,
                 stream: TextIO | None = None, protected: Sequence[Path] = (),
                 force: bool = False) -> tuple[int, list[Path]]:
    """Export ``results`` as ``fmt``, streamed: one result in memory at a time (a Parquet
    row group at a time), so any number of results exports in bounded memory.

    Args:
        results: What to export (an iterator, e.g. ``Store.iter_query``).
        fmt: ``csv``, ``json`` or ``parquet``.
        out: File for csv/json (None: written to ``stream``); for parquet (required) the
            case file, with the samples beside it (see :func:`parquet_paths`).
        stream: Where csv/json go without ``out`` (default standard output).

    Returns:
        ``(count, paths)``: the results exported and the files written.

    Raises:
        ConfigError: unknown format, parquet without ``out``, or a file that cannot be
            written (checked before the first result is read).
        MissingDependencyError: parquet without pyarrow.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if out is None:
            raise ConfigError("parquet export needs --out FILE.parquet (the raw samples go "
                              "beside it in FILE.samples.parquet)")
        check_out_files(parquet_paths(out), protected=protected, force=force)
        counted = _Counted(results)
        paths = write_parquet(counted, out)
        return counted.n, paths
    writer = write_csv if fmt == "csv" else write_json
    if out is None:
        return writer(results, stream if stream is not None else sys.stdout), []
    check_out_files([out], protected=protected, force=force)
    try:
        with atomic_paths([out]) as (tmp,), \
                open(tmp, "w", encoding="utf-8", newline="") as fh:
            n = writer(results, fh)
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc}") from None
    return n, [out]


class _Counted:
    """An iterable of results that counts what it gave."""

    def __init__(self, results: Iterable[Result]) -> None:
        self.results = results
        self.n = 0

    def __iter__(self) -> Iterator[Result]:
        for r in self.results:
            self.n += 1
            yield r


def export(results: Iterable[Result], fmt: str, out: Path | None, *,
           protected: Sequence[Path] = (), force: bool = False,
           ) -> tuple[str | None, list[Path]]:
    """:func:`write_export`, with the csv/json text returned when ``out`` is None.

    Returns:
        ``(text, paths)``: the text when ``out`` is None, and the files written.
    """
    if out is None and fmt in ("csv", "json"):
        buf = io.StringIO()
        write_export(results, fmt, None, stream=buf)
        return buf.getvalue(), []
    return None, write_export(results, fmt, out, protected=protected, force=force)[1]
