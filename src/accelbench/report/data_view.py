"""The report's data view: for each case that read data (``--data generated|PATH``), the
newest run of each data source side by side with the synthetic run of the same case where
the store has one: throughput, stall share (with the input-bound verdict) and energy per
sample.

A report goes over its rows once (:mod:`accelbench.report.tally`); each row comes with an
:class:`InputBrief` of its result (a few figures, not the record), and :class:`DataFold`
keeps the newest ``ok`` run per case and data source: nothing per result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelbench.report.rows import CaseRow
from accelbench.result import Result

SYNTHETIC = "synthetic"

EXPLAINED = (
    "Each case that read data (--data generated or a folder) beside the same case with "
    "synthetic data (tensors made once on the device): the throughput with the input "
    "pipeline in the step, and relative to synthetic data where both were measured; the "
    "stall share (the step's wait for its next batch over the step time; input-bound over "
    "10%, `accelbench results show ID` says what to change) and the energy per sample.")


@dataclass(frozen=True, slots=True)
class InputBrief:
    """What the data view reads of a result: its data source and loader, its stall."""

    source: str
    """``synthetic``, ``generated`` or ``path``."""
    loader_workers: int | None = None
    stall_fraction: float | None = None
    input_bound: bool = False


def brief_of(r: Result) -> InputBrief:
    """The :class:`InputBrief` of ``r``."""
    from accelbench.data.layouts import source_of

    inp = r.input
    if inp is None:
        return InputBrief(source=source_of(r.spec.data) if r.spec.data else SYNTHETIC)
    return InputBrief(source=inp.source or source_of(r.spec.data),
                      loader_workers=inp.loader_workers, stall_fraction=inp.stall_fraction,
                      input_bound=r.input_verdict is not None)


def _case_key(row: CaseRow) -> tuple[Any, ...]:
    return (row.workload, row.size, row.batch_size, row.precision, row.device,
            row.device_name, row.framework, row.nnodes, row.nproc_per_node, row.fast_paths)


@dataclass
class DataFold:
    """The newest ``ok`` run of each case and data source (see the module docstring)."""

    _best: dict[tuple[Any, ...], dict[tuple[str, int | None], tuple[CaseRow, InputBrief]]] = (
        field(default_factory=dict))

    def add(self, row: CaseRow, brief: InputBrief) -> None:
        """Offer one row and its result's brief."""
        if not row.rankable:
            return
        sources = self._best.setdefault(_case_key(row), {})
        label = (brief.source, brief.loader_workers)
        old = sources.get(label)
        if old is None or row.finished_at > old[0].finished_at:
            sources[label] = (row, brief)

    def rows(self) -> list[dict[str, str]]:
        """The view's rows, formatted: per case that read data, its synthetic run first
        (where there is one), then each data source; no case read data: empty."""
        out: list[dict[str, str]] = []
        for key in sorted(self._best, key=str):
            sources = self._best[key]
            if all(src == SYNTHETIC for src, _ in sources):
                continue
            base = sources.get((SYNTHETIC, None))
            for label in sorted(sources, key=lambda s: (s[0] != SYNTHETIC, s[0], s[1] or 0)):
                row, brief = sources[label]
                out.append(_cells(row, brief, base[0] if base and label[0] != SYNTHETIC
                                  else None))
        return out


def _cells(row: CaseRow, brief: InputBrief, base: CaseRow | None) -> dict[str, str]:
    from accelbench.render import fmt_rate

    data = brief.source
    if brief.source != SYNTHETIC and brief.loader_workers is not None:
        data += f", {brief.loader_workers} worker{'' if brief.loader_workers == 1 else 's'}"
    if brief.source == SYNTHETIC:
        stall = "- (no loader)"
    elif brief.stall_fraction is None:
        stall = "unavailable (no measured step)"
    else:
        stall = f"{100 * brief.stall_fraction:.1f}%" + (
            " input-bound" if brief.input_bound else "")
    rel = "baseline" if brief.source == SYNTHETIC else "no synthetic run"
    if base is not None and base.samples_per_s and row.samples_per_s is not None:
        rel = f"{row.samples_per_s / base.samples_per_s:.2f}x"
    return {"case": row.case_label, "data": data,
            "throughput": f"{fmt_rate(row.samples_per_s)} {row.sample_unit}s/s",
            "vs_synthetic": rel, "stall": stall,
            "energy": row.energy_text if row.energy_j_per_sample is not None
            else f"unavailable ({row.energy_note or 'no reading'})",
            "id": row.result_id[:8]}
