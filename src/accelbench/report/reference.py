"""The paper's published results (Wang et al., CCGrid 2020, Table 10), shipped with accelbench.

These are figures measured by the paper's authors on their hardware with
PyTorch 1.1 / TensorFlow 1.14 in 2019, at the paper's model sizes; they are
reference points, never the user's measurements. See
``accelbench/reference/README.md`` for the columns and the paper's setup.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from accelbench.errors import ConfigError
from accelbench.report.rows import CaseRow
from accelbench.spec import normalize_precision

CSV_NAME = "wang2020_table10.csv"
CITATION = (
    "Wang et al., \"Benchmarking the Performance and Energy Efficiency of AI Accelerators "
    "for AI Training\", CCGrid 2020 (arXiv:1909.06842), Table 10"
)
SHORT_CITATION = "Wang et al. 2020, Table 10"
LABEL = (
    f"Published figures from {SHORT_CITATION}: measured by the paper's authors on other "
    "hardware (2019 software: PyTorch 1.1, TensorFlow 1.14), at the paper's model sizes. "
    "Not measured on your machine."
)
BOUNDARY = "device"
"""What the paper's energy figures cover: the GPU only (NVML / ROCm SMI, every 2 ms)."""
BOUNDARY_TEXT = "energy boundary: device (the GPU only, sampled through NVML / ROCm SMI)"
#: The user's runs are comparable in absolute terms only at this size.
PAPER_SIZE = "paper"


@dataclass(frozen=True, kw_only=True, slots=True)
class ReferenceRow:
    """One published result."""

    device: str
    """Device as the paper names it, e.g. ``Tesla V100``."""
    precision: str
    """Canonical accelbench precision (the paper's ``bf16`` is ``amp_bf16``)."""
    paper_precision: str
    """Precision as written in the CSV."""
    workload: str
    batch_size: int
    sample_unit: str
    status: str
    """``ok``, or ``oom`` where the paper reports out-of-memory."""
    samples_per_s: float | None
    avg_power_w: float | None
    energy_j_per_sample: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return dataclasses.asdict(self)


def _num(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None


@functools.cache
def _load() -> tuple[ReferenceRow, ...]:
    blob = resources.files("accelbench").joinpath("reference").joinpath(CSV_NAME).read_text("utf-8")
    rows = []
    for rec in csv.DictReader(io.StringIO(blob)):
        rows.append(
            ReferenceRow(
                device=rec["device"],
                precision=normalize_precision(rec["precision"]),
                paper_precision=rec["precision"],
                workload=rec["workload"],
                batch_size=int(rec["batch_size"]),
                sample_unit=rec["sample_unit"],
                status=rec["status"],
                samples_per_s=_num(rec["throughput_samples_per_s"]),
                avg_power_w=_num(rec["avg_power_w"]),
                energy_j_per_sample=_num(rec["energy_j_per_sample"]),
            )
        )
    return tuple(rows)


def load_reference(
    *,
    workload: str | None = None,
    precision: str | None = None,
    batch_size: int | None = None,
    device: str | None = None,
) -> list[ReferenceRow]:
    """Published rows, optionally filtered (``device`` matches a case-insensitive substring).

    Raises:
        ConfigError: ``precision`` is not a known precision.
    """
    prec = normalize_precision(precision) if precision else None
    dev = device.lower() if device else None
    return [
        r for r in _load()
        if (workload is None or r.workload == workload)
        and (prec is None or r.precision == prec)
        and (batch_size is None or r.batch_size == batch_size)
        and (dev is None or dev in r.device.lower())
    ]


def reference_workloads() -> list[str]:
    """Workloads that have published rows."""
    return sorted({r.workload for r in _load()})


@dataclass(frozen=True, kw_only=True, slots=True)
class ReferenceMatch:
    """A user's case next to the published rows for the same workload, batch size, precision."""

    row: CaseRow
    reference: tuple[ReferenceRow, ...]
    comparable: bool
    """Whether the user's model size is the paper's (otherwise only the shape compares)."""
    note: str


def match_reference(rows: Sequence[CaseRow]) -> list[ReferenceMatch]:
    """For each ``ok`` row, the published rows with its workload, batch size and precision.

    Rows without any published counterpart are left out.
    """
    out = []
    for row in rows:
        if row.status != "ok":
            continue
        try:
            refs = load_reference(
                workload=row.workload, precision=row.precision, batch_size=row.batch_size
            )
        except ConfigError:
            continue
        if not refs:
            continue
        comparable = row.size == PAPER_SIZE
        notes = [] if comparable else [
            f"your run used the {row.size!r} model size; the paper's figures are for the "
            f"full-size model, so only the batch size and precision match"
        ]
        if row.energy_boundary != BOUNDARY and row.energy_j_per_sample is not None:
            notes.append(f"your energy covers {row.energy_boundary}; the paper's covers the "
                         "GPU only: the energy figures do not compare")
        note = "; ".join(notes)
        out.append(ReferenceMatch(row=row, reference=tuple(refs), comparable=comparable,
                                  note=note))
    return out
