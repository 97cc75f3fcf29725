"""``--mllog PATH``: every stored case as MLPerf-format lines (``:::MLLOG {json}``), written
with MLCommons' own ``mlperf_logging.mllog`` and readable by its parser
(``mlperf_logging.compliance_checker.mlp_parser.parse_file``).

Per case: the submission keys, ``init_start``/``init_stop``, ``global_batch_size`` and
``seed``, ``run_start``, the throughput (``tracked_stats`` and ``throughput`` with its CI),
the energy per sample inside the record's energy boundary, and for every sensor with a
sampled power timeline ``power_measurement_start``, one ``power_reading`` (watts) per
timeline point (the sensor's own rate, up to the stored 500 points a window) and
``power_measurement_stop``, each stating the sensor and its boundary; then ``run_stop``
(``success`` for an ok case, else ``aborted`` with the status).

What such a log is not: an MLPerf submission. The data is synthetic, the run measures
steady-state throughput over a timed window, not time-to-train to a quality target, and
the division is reported as ``open`` with status ``research``. Times are the record's:
the window ends at its ``finished_at`` and lasts its measured iterations (or its power
timeline, if longer); init starts at its ``started_at``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelbench import jsonout
from accelbench.errors import ConfigError
from accelbench.result import HOST_SCOPES, Result
from accelbench.sinks.base import epoch_ms

NOT_A_SUBMISSION = ("accelbench log, not an MLPerf submission: synthetic data, steady-state "
                    "throughput over a timed window, no time-to-train")


def _rate_hz(t_s: list[float]) -> float | None:
    if len(t_s) < 2 or t_s[-1] <= t_s[0]:
        return None
    return (len(t_s) - 1) / (t_s[-1] - t_s[0])


def sensor_boundary(result: Result, sensor: str) -> str:
    """Where a timeline's sensor sits: ``device`` (the accelerator), ``host`` (CPU
    packages, DRAM) or ``node``; ``+in`` / ``+outside`` the record's energy boundary."""
    reading = next((e for e in result.energy if e.device == sensor), None)
    scope = reading.scope if reading is not None else ""
    where = "node" if scope == "node" else "host" if scope in HOST_SCOPES else "device"
    inside = reading is not None and reading in result.primary_energy
    return f"{where} ({'inside' if inside else 'outside'} the {result.energy_boundary} "\
        "energy boundary)"


class _LogFile(logging.FileHandler):
    """A log file whose write errors are kept (:attr:`failed`), not printed: logging's
    own handler prints a traceback for each line it could not write."""

    failed: OSError | None = None

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        exc = sys.exc_info()[1]
        if self.failed is None:
            self.failed = exc if isinstance(exc, OSError) else OSError(str(exc))


class MllogSink:
    """Appends each case to an MLPerf-format log file."""

    name = "--mllog"

    def __init__(self, path: str, *, protected: Sequence[Path] = ()) -> None:
        from mlperf_logging.mllog.mllog import MLLogger

        from accelbench.report.outputs import check_target

        target = Path(path).expanduser()
        # Never the store (a link to it too), never a device or a FIFO (a write there
        # fails, or blocks the command after its case is stored).
        check_target(target, protected=protected, flag="--mllog")
        if target.is_dir():
            raise ConfigError(f"--mllog {path}: is a directory; name a log file")
        if not target.parent.is_dir():
            why = "is not a directory" if target.parent.exists() else "does not exist"
            raise ConfigError(f"--mllog {path}: {target.parent} {why}")
        if not os.access(target if target.exists() else target.parent, os.W_OK):
            raise ConfigError(f"--mllog {path}: not writable")
        # Opened at the first line: a command refused later (its store) leaves no file.
        self.handler = _LogFile(target, mode="a", encoding="utf-8", delay=True)
        self.handler.setFormatter(logging.Formatter("%(message)s"))
        logger = logging.getLogger(f"accelbench.mllog.{uuid.uuid4().hex}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        logger.addHandler(self.handler)
        self.logger = logger
        self.log = MLLogger(logger=logger)
        self.path = target
        self.protected = tuple(protected)

    def close(self) -> None:
        self.logger.removeHandler(self.handler)
        try:
            self.handler.close()
        except OSError as exc:  # the last buffered lines could not be written
            raise OSError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def write(self, result: Result) -> None:
        from accelbench.report.outputs import check_target

        # Checked again at each case: the path may have been replaced while it ran.
        check_target(self.path, protected=self.protected, flag="--mllog")
        self.handler.failed = None
        self._write(result)
        try:
            self.handler.flush()
        except OSError as exc:
            self.handler.failed = self.handler.failed or exc
        failed = self.handler.failed
        if failed is not None:
            # Let go of what could not be written (the next case opens the file again),
            # so that closing does not fail a second time over the same lines.
            stream, self.handler.stream = self.handler.stream, None
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
            raise OSError(f"cannot write {self.path}: {failed.strerror or failed}")

    def _write(self, result: Result) -> None:
        from mlperf_logging.mllog import constants as c

        spec, st = result.spec, result.stats
        case = {"case_id": result.id, "suite_id": result.suite_id,
                "workload": spec.workload, "size": spec.size, "device": spec.device,
                "framework": spec.framework}
        end_ms = epoch_ms(result.finished_at) or 0
        timeline = {k: v for k, v in (result.power_timeline or {}).items()
                    if isinstance(v, dict) and len(v.get("t_s") or ()) >= 1}
        span_s = max([sum(result.iteration_times_s)]
                     + [float(v["t_s"][-1]) for v in timeline.values()])
        run_ms = end_ms - int(math.ceil(span_s * 1000))
        init_ms = min(epoch_ms(result.started_at) or run_ms, run_ms)

        def event(key: str, value: Any, t: int, **meta: Any) -> None:
            self.log.event(key, jsonout.jsonable(value), metadata=jsonout.jsonable(
                {**case, **meta}), time_ms=t)

        platform = str((result.machine or {}).get("hostname") or "unknown")
        for key, value in ((c.SUBMISSION_BENCHMARK, spec.workload),
                           (c.SUBMISSION_DIVISION, "open"),
                           (c.SUBMISSION_STATUS, "research"),
                           (c.SUBMISSION_ORG, "accelbench"),
                           (c.SUBMISSION_PLATFORM, platform)):
            event(key, value, init_ms, note=NOT_A_SUBMISSION)
        self.log.start(c.INIT_START, metadata=case, time_ms=init_ms)
        event(c.GLOBAL_BATCH_SIZE, spec.batch_size * result.world_size, init_ms)
        event(c.SEED, spec.seed, init_ms)
        event("precision", spec.precision, init_ms)
        self.log.end(c.INIT_STOP, metadata=case, time_ms=run_ms)
        self.log.start(c.RUN_START, metadata=case, time_ms=run_ms)
        for sensor, series in timeline.items():
            self._power(result, sensor, series, run_ms, case)
        if st is not None:
            unit = f"{result.sample_unit}/s"
            event("tracked_stats", {"throughput": st.samples_per_s}, end_ms,
                  step=st.n, unit=unit)
            event("throughput", st.samples_per_s, end_ms, unit=unit,
                  ci95=list(st.samples_per_s_ci95) if st.samples_per_s_ci95 else None,
                  iterations=st.n, median_step_time_s=st.median_s)
        if result.energy_j_per_sample is not None:
            event("energy_j_per_sample", result.energy_j_per_sample, end_ms,
                  boundary=result.energy_boundary, source=result.energy_source,
                  unit=f"J/{result.sample_unit}")
        self.log.end(c.RUN_STOP, metadata={**case, "status": "success" if result.status ==
                                           "ok" else "aborted",
                                           "accelbench_status": result.status},
                     time_ms=end_ms)

    def _power(self, result: Result, sensor: str, series: dict[str, Any], run_ms: int,
               case: dict[str, Any]) -> None:
        from mlperf_logging.mllog import constants as c

        t_s = [float(t) for t in series.get("t_s") or ()]
        watts = series.get("power_w") or ()
        rate = _rate_hz(t_s)
        meta: dict[str, Any] = {**case, "sensor": sensor,
                                "boundary": sensor_boundary(result, sensor),
                                "rate_hz": rate, "unit": "W"}
        if rate is not None and rate < 1.0:
            meta["note"] = "timeline below MLPerf Power's 1 Hz (downsampled long window)"
        self.log.start(c.POWER_MEASUREMENT_START, metadata=meta, time_ms=run_ms)
        for t, w in zip(t_s, watts, strict=False):
            if w is None or not math.isfinite(float(w)):
                continue
            self.log.event(c.POWER_READING, float(w), time_ms=run_ms + int(round(t * 1000)),
                           metadata={"sensor": sensor, "case_id": result.id, "unit": "W"})
        stop = run_ms + int(round((t_s[-1] if t_s else 0.0) * 1000))
        self.log.end(c.POWER_MEASUREMENT_STOP, metadata=meta, time_ms=stop)
