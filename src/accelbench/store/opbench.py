"""Store access for operator benchmarks: operator results (``op_results``) and measured
peaks (``peaks``).

Both tables are created by schema migration 3. Operator records keep their
raw times, so statistics can be recomputed; peaks are looked up per host and
device, newest first, so a store shared by many machines keeps each one's.
Model-step breakdowns (:mod:`accelbench.roofline.breakdown`) are stored in
``op_results`` too, with ``op = "model"`` and ``pass = "train_step"``.
A malformed row is skipped with a warning naming its id, as in
:meth:`~accelbench.store.db.Store.query`. The queries are methods of
:class:`OpBenchStore`, part of :class:`~accelbench.store.db.Store`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from accelbench.opbench.cases import OP_NAMES, OpCase
from accelbench.opbench.result import OpResult
from accelbench.store.base import StoreBase, utc_now

__all__ = ["BANDWIDTH", "OpBenchStore", "Peak", "op_result_row", "op_results", "peaks",
           "utc_now"]

_md = sa.MetaData()

op_results = sa.Table(
    "op_results",
    _md,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("op", sa.String(32), nullable=False),
    sa.Column("label", sa.Text),
    sa.Column("shape", sa.Text, nullable=False),
    sa.Column("precision", sa.String(16), nullable=False),
    sa.Column("device", sa.String(32), nullable=False),
    sa.Column("device_name", sa.String(256)),
    sa.Column("hostname", sa.String(256)),
    sa.Column("pass", sa.String(32), nullable=False, key="pass_"),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("flops", sa.Float),
    sa.Column("min_bytes", sa.Float),
    sa.Column("times", sa.Text, nullable=False),
    sa.Column("warmup_times", sa.Text),
    sa.Column("stop_reason", sa.String(32)),
    sa.Column("median_s", sa.Float),
    sa.Column("ci_low", sa.Float),
    sa.Column("ci_high", sa.Float),
    sa.Column("achieved_flop_per_s", sa.Float),
    sa.Column("pct_measured_peak", sa.Float),
    sa.Column("pct_theoretical_peak", sa.Float),
    sa.Column("threads", sa.Integer),
    sa.Column("tag", sa.Text, nullable=False, server_default=""),
    sa.Column("machine", sa.Text),
    sa.Column("created_at", sa.String(40), nullable=False),
    # Added by migration 4.
    sa.Column("framework", sa.String(32), nullable=False, server_default="torch"),
)

peaks = sa.Table(
    "peaks",
    _md,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("hostname", sa.String(256)),
    sa.Column("device", sa.String(32), nullable=False),
    sa.Column("device_name", sa.String(256)),
    sa.Column("precision", sa.String(16), nullable=False),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("unit", sa.String(16), nullable=False),
    sa.Column("method", sa.Text, nullable=False),
    sa.Column("details", sa.Text),
    sa.Column("created_at", sa.String(40), nullable=False),
)

BANDWIDTH = "bandwidth"
"""The ``precision`` of a memory-bandwidth peak."""


@dataclass(frozen=True, kw_only=True)
class Peak:
    """A measured peak of one device: compute (FLOP/s) per precision, or bandwidth (B/s)."""

    device: str
    precision: str
    """``fp32``, ``tf32``, ``fp16``, ``bf16`` or ``bandwidth``."""
    value: float
    unit: str
    """``FLOP/s`` or ``B/s``."""
    method: str
    """How it was measured, in words."""
    device_name: str | None = None
    hostname: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    """Per-size values, threads, bytes copied ..."""
    created_at: str = ""
    id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "hostname": self.hostname,
            "device": self.device,
            "device_name": self.device_name,
            "precision": self.precision,
            "value": self.value,
            "unit": self.unit,
            "method": self.method,
            "details": self.details,
            "created_at": self.created_at,
        }


def _json(row: Any, key: str, kind: type, default: Any) -> Any:
    """Column ``key`` of ``row`` decoded from JSON, checked to be a ``kind``."""
    raw = row[key]
    if raw is None or raw == "":
        return default
    value = json.loads(raw)
    if not isinstance(value, kind):
        raise TypeError(f"{key} is a JSON {type(value).__name__}, not {kind.__name__}")
    return value


def _times(row: Any, key: str) -> tuple[float, ...]:
    values = _json(row, key, list, [])
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise TypeError(f"{key} holds a value that is not a number")
    return tuple(values)


# --------------------------------------------------------------------------- op results


def op_result_row(res: OpResult) -> dict[str, Any]:
    """The ``op_results`` row of an operator record."""
    case = res.case
    return {
        "id": res.id,
        "op": case.op,
        "label": case.label,
        "shape": json.dumps(dict(case.shape), sort_keys=True),
        "precision": case.precision,
        "device": res.device,
        "device_name": res.device_name,
        "framework": res.framework,
        "hostname": res.hostname,
        "pass_": case.pass_,
        "status": res.status,
        "error": res.error,
        "flops": float(case.flops),
        "min_bytes": float(case.min_bytes),
        "times": json.dumps(list(res.times_s)),
        "warmup_times": json.dumps(list(res.warmup_times_s)),
        "stop_reason": res.stop_reason,
        "median_s": res.median_s,
        "ci_low": res.ci_low_s,
        "ci_high": res.ci_high_s,
        "achieved_flop_per_s": res.achieved_flop_per_s,
        "pct_measured_peak": res.pct_measured_peak,
        "pct_theoretical_peak": res.pct_theoretical_peak,
        "threads": res.threads,
        "tag": res.tag,
        "machine": json.dumps(res.machine),
        "created_at": res.created_at or utc_now(),
    }


def op_result_from_row(row: Any) -> OpResult:
    case = OpCase(
        op=row["op"], shape=_json(row, "shape", dict, {}), precision=row["precision"],
        pass_=row[op_results.c.pass_],
    )
    return OpResult(
        id=row["id"],
        case=case,
        device=row["device"],
        device_name=row["device_name"],
        framework=row["framework"] or "torch",
        hostname=row["hostname"] or "",
        status=row["status"],
        error=row["error"],
        times_s=_times(row, "times"),
        warmup_times_s=_times(row, "warmup_times"),
        stop_reason=row["stop_reason"],
        median_s=row["median_s"],
        ci_low_s=row["ci_low"],
        ci_high_s=row["ci_high"],
        achieved_flop_per_s=row["achieved_flop_per_s"],
        pct_measured_peak=row["pct_measured_peak"],
        pct_theoretical_peak=row["pct_theoretical_peak"],
        threads=row["threads"],
        tag=row["tag"] or "",
        machine=_json(row, "machine", dict, {}),
        created_at=row["created_at"],
    )


def peak_from_row(row: Any) -> Peak:
    value = row["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"value is not a number: {value!r}")
    return Peak(
        id=row["id"], hostname=row["hostname"] or "", device=row["device"],
        device_name=row["device_name"], precision=row["precision"], value=value,
        unit=row["unit"], method=row["method"], details=_json(row, "details", dict, {}),
        created_at=row["created_at"],
    )


class OpBenchStore(StoreBase):
    """Queries of operator results (``op_results``) and measured peaks (``peaks``)."""

    def save_op_result(self, res: OpResult) -> None:
        """Insert one operator record in its own transaction."""
        self.insert(op_results, op_result_row(res))

    def save_raw_op_row(self, row: dict[str, Any]) -> None:
        """Insert a prepared ``op_results`` row (model breakdowns); fills ``id`` and
        ``created_at``."""
        full = {"id": uuid.uuid4().hex, "created_at": utc_now(), "tag": "", **row}
        self.insert(op_results, full)

    def query_op_results(
        self,
        *,
        device: str | None = None,
        op: str | None = None,
        precision: str | None = None,
        status: str | None = None,
        hostname: str | None = None,
        framework: str | None = None,
        limit: int | None = None,
    ) -> list[OpResult]:
        """Operator records (not model breakdowns) matching the filters, newest first."""
        t = op_results
        stmt = sa.select(t).where(t.c.op.in_(OP_NAMES))
        for col, value in (
            (t.c.device, device), (t.c.op, op), (t.c.precision, precision),
            (t.c.status, status), (t.c.hostname, hostname), (t.c.framework, framework),
        ):
            if value is not None:
                stmt = stmt.where(col == value)
        stmt = stmt.order_by(t.c.created_at.desc(), t.c.id.desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        return self.decoded(self.mappings(stmt), op_result_from_row)

    def query_raw_op_rows(
        self, *, op: str, device: str | None = None
    ) -> list[dict[str, Any]]:
        """Raw ``op_results`` rows of kind ``op`` (e.g. ``model``), newest first, JSON decoded."""
        t = op_results
        stmt = sa.select(t).where(t.c.op == op)
        if device is not None:
            stmt = stmt.where(t.c.device == device)
        stmt = stmt.order_by(t.c.created_at.desc(), t.c.id.desc())

        def decode(r: Any) -> dict[str, Any]:
            row = dict(r)
            if "pass_" in row:  # the column's key, not its name, depending on the dialect
                row["pass"] = row.pop("pass_")
            for key in ("shape", "times", "warmup_times", "machine"):
                row[key] = json.loads(row[key]) if row.get(key) else None
            return row

        return self.decoded(self.mappings(stmt), decode)

    def save_peak(self, peak: Peak) -> Peak:
        """Insert a measured peak; returns it with ``id`` and ``created_at`` filled."""
        stored = Peak(
            device=peak.device, precision=peak.precision, value=peak.value, unit=peak.unit,
            method=peak.method, device_name=peak.device_name, hostname=peak.hostname,
            details=peak.details, created_at=peak.created_at or utc_now(),
            id=peak.id or uuid.uuid4().hex,
        )
        self.insert(peaks, {**stored.to_dict(), "details": json.dumps(stored.details)})
        return stored

    def query_peaks(
        self,
        *,
        device: str | None = None,
        hostname: str | None = None,
        device_name: str | None = None,
        precisions: Sequence[str] | None = None,
        latest_only: bool = True,
    ) -> list[Peak]:
        """Measured peaks, newest first; with ``latest_only`` one per (host, device,
        precision)."""
        t = peaks
        stmt = sa.select(t)
        if device is not None:
            stmt = stmt.where(t.c.device == device)
        if hostname is not None:
            stmt = stmt.where(t.c.hostname == hostname)
        if device_name is not None:
            stmt = stmt.where(t.c.device_name == device_name)
        if precisions is not None:
            stmt = stmt.where(t.c.precision.in_(list(precisions)))
        stmt = stmt.order_by(t.c.created_at.desc(), t.c.id.desc())
        out: list[Peak] = []
        seen: set[tuple[str, str, str]] = set()
        for p in self.decoded(self.mappings(stmt), peak_from_row):
            key = (p.hostname, p.device, p.precision)
            if latest_only and key in seen:
                continue
            seen.add(key)
            out.append(p)
        return out

    def latest_peak(
        self,
        device: str,
        precision: str,
        *,
        hostname: str | None = None,
        device_name: str | None = None,
    ) -> Peak | None:
        """The newest measured peak of ``device`` for ``precision`` (or ``bandwidth``), or
        None."""
        found = self.query_peaks(
            device=device, hostname=hostname, device_name=device_name,
            precisions=[precision],
        )
        return found[0] if found else None
