"""One flat, labelled row per stored case: the shape the report, export and recommend share.

Energy always carries its provenance: a row's :attr:`CaseRow.energy_kind` is
``measured`` (a hardware counter or integrated power samples), ``estimated``,
``partly estimated`` or ``unavailable``; an unavailable energy is None, never 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.result import Result

MEASURED_SOURCES = frozenset({"counter", "integrated_samples"})

#: Sort order of sizes, smallest first.
SIZE_ORDER = {"tiny": 0, "small": 1, "paper": 2}


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseRow:
    """The numbers and labels of one stored result, flattened."""

    result_id: str
    suite_id: str | None
    status: str
    error: str | None
    workload: str
    size: str
    batch_size: int
    precision: str
    device: str
    """Device id as run: ``cpu``, ``cuda:0``, ``mps``."""
    device_name: str
    """Model name of the device (GPU name or CPU model), or the id when unknown."""
    framework: str
    threads: int | None
    tag: str
    sample_unit: str
    samples_per_step: int
    samples_per_s: float | None
    ci95_low_samples_per_s: float | None
    ci95_high_samples_per_s: float | None
    step_time_s: float | None
    """Median step time."""
    iterations: int
    stop_reason: str | None
    avg_power_w: float | None
    energy_j_per_sample: float | None
    energy_source: str
    """The raw source labels joined with ``+`` (``counter``, ``estimate`` ...)."""
    energy_kind: str
    """``measured``, ``estimated``, ``partly estimated`` or ``unavailable``."""
    energy_note: str
    mfu: float | None
    """Model FLOP utilisation (0-1), where the record has one."""
    param_count: int | None
    hostname: str | None
    finished_at: str

    @property
    def case_label(self) -> str:
        """``workload size bs=N precision device [framework]`` for legends and headings."""
        framework = "" if self.framework == "torch" else f" {self.framework}"
        return (
            f"{self.workload} {self.size} bs={self.batch_size} {self.precision} {self.device}"
            f"{framework}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def device_name(result: Result) -> str:
    """The model name of the device ``result`` ran on, from its machine record."""
    machine = result.machine or {}
    dev = result.spec.device
    for gpu in machine.get("gpus") or []:
        if isinstance(gpu, dict) and gpu.get("device") == dev and gpu.get("name"):
            return str(gpu["name"])
    if dev == "cpu":
        model = (machine.get("cpu") or {}).get("model")
        if model:
            return str(model)
    return dev


def energy_kind(result: Result) -> str:
    """How the energy per sample of ``result`` was obtained (see module docstring)."""
    sources = {
        r.source for r in result.energy
        if r.energy_j_per_sample is not None and r.source != "unavailable"
    }
    if not sources:
        return "unavailable"
    if sources <= MEASURED_SOURCES:
        return "measured"
    if sources == {"estimate"}:
        return "estimated"
    return "partly estimated"


def case_row(result: Result) -> CaseRow:
    """The :class:`CaseRow` of one result."""
    spec = result.spec
    st = result.stats
    summary = result.summary()
    notes = [r.note for r in result.energy if r.note]
    mfu = getattr(result, "mfu", None)
    return CaseRow(
        result_id=result.id,
        suite_id=result.suite_id,
        status=result.status,
        error=result.error,
        workload=spec.workload,
        size=spec.size,
        batch_size=spec.batch_size,
        precision=spec.precision,
        device=spec.device,
        device_name=device_name(result),
        framework=spec.framework,
        threads=spec.threads,
        tag=spec.tag,
        sample_unit=result.sample_unit,
        samples_per_step=result.samples_per_step,
        samples_per_s=st.samples_per_s if st else None,
        ci95_low_samples_per_s=st.samples_per_s_ci95[0] if st else None,
        ci95_high_samples_per_s=st.samples_per_s_ci95[1] if st else None,
        step_time_s=st.median_s if st else None,
        iterations=st.n if st else 0,
        stop_reason=st.stop_reason if st else None,
        avg_power_w=summary["avg_power_w"],
        energy_j_per_sample=result.energy_j_per_sample,
        energy_source=summary["energy_source"],
        energy_kind=energy_kind(result),
        energy_note="; ".join(dict.fromkeys(notes)),
        mfu=float(mfu) if isinstance(mfu, (int, float)) else None,
        param_count=result.param_count,
        hostname=(result.machine or {}).get("hostname"),
        finished_at=result.finished_at,
    )


def sort_key(row: CaseRow) -> tuple[Any, ...]:
    """Device, workload, size, precision, batch size, then newest first."""
    return (
        row.device_name, row.device, row.workload, SIZE_ORDER.get(row.size, 9), row.size,
        row.precision, row.batch_size, row.framework, _neg_time(row.finished_at),
    )


def _neg_time(stamp: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in stamp)


def case_rows(results: Iterable[Result]) -> list[CaseRow]:
    """Rows of ``results`` sorted per device x workload x size x precision x batch size."""
    return sorted((case_row(r) for r in results), key=sort_key)


def newest_per_case(rows: Sequence[CaseRow]) -> list[CaseRow]:
    """Only the newest ``ok`` row of each (device, workload, size, precision, batch size,
    framework)."""
    best: dict[tuple[Any, ...], CaseRow] = {}
    for row in rows:
        if row.status != "ok" or row.samples_per_s is None:
            continue
        key = (row.device, row.device_name, row.workload, row.size, row.precision,
               row.batch_size, row.framework)
        if key not in best or row.finished_at > best[key].finished_at:
            best[key] = row
    return sorted(best.values(), key=sort_key)
