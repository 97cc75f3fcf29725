"""One flat, labelled row per stored case: the shape the report, export and recommend share.

Energy always carries its provenance: a row's :attr:`CaseRow.energy_kind` is
``measured`` (a hardware counter or integrated power samples), ``estimated``,
``partly estimated`` or ``unavailable``; an unavailable energy is None, never 0.

Only ``ok`` rows enter an aggregate, ranking, ratio or chart: ``diverged`` (NaN/Inf
loss) and ``insufficient`` (too few iterations, no CI) rows are shown with their
status and nothing else. A row without a CI (fewer than 3 iterations) has None
bounds and is shown as "no CI", never as an interval from one sample.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from accelbench.backends import registry
from accelbench.result import Result
from accelbench.result_text import (
    ENERGY_KIND_SHORT as ENERGY_KIND_SHORT,
)
from accelbench.result_text import (
    MEASURED_SOURCES as MEASURED_SOURCES,
)
from accelbench.result_text import (
    ci_scope as ci_scope,
)
from accelbench.result_text import (
    ci_text as ci_text,
)
from accelbench.result_text import (
    ci_unreliable as ci_unreliable,
)
from accelbench.result_text import (
    energy_kind as energy_kind,
)
from accelbench.result_text import (
    energy_missing_line as energy_missing_line,
)
from accelbench.result_text import (
    energy_missing_reason as energy_missing_reason,
)
from accelbench.result_text import (
    energy_text as energy_text,
)
from accelbench.result_text import (
    fmt_energy_j as fmt_energy_j,
)
from accelbench.result_text import (
    peak_source as peak_source,
)
from accelbench.result_text import (
    repeat_groups as repeat_groups,
)
from accelbench.result_text import (
    repeat_key as repeat_key,
)
from accelbench.result_text import (
    repeat_positions as repeat_positions,
)
from accelbench.result_text import (
    settings_text as settings_text,
)
from accelbench.result_text import (
    topology_text as topology_text,
)
from accelbench.store.briefs import ResultBrief, device_name_of
from accelbench.verdicts import verdict_lines

DEFAULT_FRAMEWORK: str = registry.DEFAULT_FRAMEWORK
"""The framework a run uses unless told otherwise (labels leave it out; the framework
comparison is relative to it)."""


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
    """None when the case has no CI (fewer than 3 iterations, or ``insufficient``)."""
    ci95_high_samples_per_s: float | None
    ci_rel_halfwidth: float | None
    """CI half-width relative to the throughput, or None without a CI."""
    ci_scope: str | None = None
    """What the CI covers (``iterations of 1 run``); None without a CI."""
    ci_unreliable: bool = False
    """The CI is wider than the estimate itself (shown as ``unreliable``)."""
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
    started_at: str
    finished_at: str
    noisy: bool = False
    """A noise verdict flagged the case: a busy machine and/or step times that vary."""
    noise_reasons: tuple[str, ...] = ()
    noise_kinds: tuple[str, ...] = ()
    """The verdicts: ``contention`` (a busy machine), ``unstable`` (step times vary)."""
    noise_verdicts: tuple[str, ...] = ()
    """One line per verdict in words (``busy machine: ...``), for tables and reports."""
    energy_boundary: str = "device"
    """What the energy covers: ``device``, ``device+host`` or ``node``."""
    energy_rel_u95: float | None = None
    """95% relative error bound of :attr:`energy_j_per_sample` (0.021: +-2.1%); None where
    the record has none (stored before bounds, or a sensor too little is known of)."""
    peak_memory_bytes: int | None = None
    """Peak memory of the case (device memory, or the worker's host RSS on a CPU)."""
    peak_memory_source: str = ""
    fast_paths: tuple[str, ...] = ()
    """Fast paths the case ran with (``compile``, ``channels_last``, ``fused_optimizer``)."""
    nnodes: int = 1
    nproc_per_node: int = 1
    world_size: int = 1
    """Ranks of a data-parallel case (nodes x ranks per node); 1 for one device."""
    dist_backend: str | None = None
    """torch.distributed backend of a data-parallel case (``gloo``, ``nccl``), else None."""
    parallel: str | None = None
    """A sharded case's mode (``fsdp``, ``fsdp+tp tp2``, ``ddp act-ckpt``, a JAX mesh's
    ``fsdp devices4``; docs/sharding.md), None for plain DDP or one device: rows pair and
    label only within one mode."""

    @property
    def case_label(self) -> str:
        """``workload size bs=N precision device [framework] [+fast paths]`` for legends
        and headings."""
        framework = "" if self.framework == DEFAULT_FRAMEWORK else f" {self.framework}"
        return (
            f"{self.workload} {self.size} bs={self.batch_size} {self.precision} {self.device}"
            f"{topology_text(self.nnodes, self.nproc_per_node, lead=' ')}"
            f"{' ' + self.parallel if self.parallel else ''}"
            f"{framework}{fast_paths_text(self.fast_paths, lead=' ')}"
        )

    @property
    def rankable(self) -> bool:
        """Whether the row may enter an aggregate, ranking, ratio or chart: ``ok`` with a
        throughput (``diverged`` and ``insufficient`` rows never do)."""
        return self.status == "ok" and self.samples_per_s is not None

    @property
    def ci_text(self) -> str:
        """``±3.1%`` or ``no CI (n=2)`` / ``-`` where there is none."""
        return ci_text(self.ci_rel_halfwidth, self.iterations if self.samples_per_s else None)

    @property
    def energy_text(self) -> str:
        """Energy per sample with its provenance: ``1.23 J``, ``1.23 J (est.)``,
        ``1.23 J (node)``."""
        return energy_text(self.energy_j_per_sample, self.energy_kind, self.energy_boundary)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["noise_reasons"] = list(self.noise_reasons)
        out["noise_kinds"] = list(self.noise_kinds)
        out["noise_verdicts"] = list(self.noise_verdicts)
        out["fast_paths"] = list(self.fast_paths)
        if self.parallel is None:  # rows of unsharded cases keep their keys
            del out["parallel"]
        return out


def fast_paths_text(names: Sequence[str], *, lead: str = "") -> str:
    """``+compile+channels_last`` for a case's fast paths (``lead`` before it); empty for a
    plain case, so the paper's cases read as they always did."""
    return lead + "".join(f"+{n}" for n in names) if names else ""


def parse_time(stamp: str) -> datetime | None:
    """A stored ISO-8601 timestamp as an aware datetime, or None when it is not one."""
    if not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def short_time(stamp: str) -> str:
    """``2026-01-02 10:04`` (UTC) for captions and tables, or the text as stored."""
    when = parse_time(stamp)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M") if when else (stamp or "?")


def device_name(result: Result) -> str:
    """The model name of the device ``result`` ran on, from its machine record (the one
    rule, :func:`~accelbench.store.briefs.device_name_of`, that briefs use too)."""
    return device_name_of(result.machine, result.spec.device)


def case_row(result: Result) -> CaseRow:
    """The :class:`CaseRow` of one result."""
    spec = result.spec
    st = result.stats
    ci = st.samples_per_s_ci95 if st else None
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
        ci95_low_samples_per_s=ci[0] if ci else None,
        ci95_high_samples_per_s=ci[1] if ci else None,
        ci_rel_halfwidth=st.ci_rel_halfwidth if st and ci else None,
        ci_scope=summary["ci_scope"],
        ci_unreliable=summary["ci_unreliable"],
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
        started_at=result.started_at,
        finished_at=result.finished_at,
        noisy=result.noisy,
        noise_reasons=result.noise_reasons,
        noise_kinds=result.noise_kinds,
        noise_verdicts=tuple(verdict_lines(result.noise)),
        energy_boundary=result.energy_boundary,
        energy_rel_u95=result.energy_rel_u95,
        peak_memory_bytes=result.peak_memory_bytes,
        peak_memory_source=result.peak_memory_source,
        fast_paths=result.spec.fast_paths.enabled(),
        nnodes=spec.topology.nnodes,
        nproc_per_node=spec.topology.nproc_per_node,
        world_size=result.world_size,
        dist_backend=summary["dist_backend"],
        parallel=parallel_label(spec.topology),
    )


def parallel_label(topo: Any) -> str | None:
    """:attr:`CaseRow.parallel` of a topology."""
    if not topo.sharded:
        return None
    return (topo.parallel + (f" tp{topo.tp}" if topo.tp else "")
            + (" act-ckpt" if topo.act_ckpt else "")
            + (f" devices{topo.devices}" if topo.devices else ""))  # a JAX mesh's size


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


def newest_per_case(
    rows: Iterable[CaseRow], *, exclude_noisy: bool = False, prefer_quiet: bool = False
) -> list[CaseRow]:
    """Only the newest ``ok`` row of each (device, workload, size, precision, batch size,
    framework); ``diverged`` and ``insufficient`` rows never count. ``exclude_noisy``
    drops noisy rows; ``prefer_quiet`` takes the newest quiet row of a case where it has
    one, a noisy row only where it has nothing else."""
    fold = NewestFold(exclude_noisy=exclude_noisy, prefer_quiet=prefer_quiet)
    for row in rows:
        fold.add(row)
    return fold.rows()


class NewestFold:
    """:func:`newest_per_case` of rows as they stream past (a row per case held): of
    equally new rows the first offered is kept, as :func:`newest_per_case` keeps the first
    in its input's order."""

    def __init__(self, *, exclude_noisy: bool = False, prefer_quiet: bool = False) -> None:
        self._exclude_noisy, self._prefer_quiet = exclude_noisy, prefer_quiet
        self._best: dict[tuple[Any, ...], CaseRow] = {}

    def add(self, row: CaseRow) -> None:
        """Offer one row."""
        if not row.rankable or (self._exclude_noisy and row.noisy):
            return
        key = (row.device, row.device_name, row.workload, row.size, row.precision,
               row.batch_size, row.framework)
        old = self._best.get(key)
        if old is None:
            self._best[key] = row
            return
        if self._prefer_quiet and old.noisy != row.noisy:
            if old.noisy:
                self._best[key] = row
        elif row.finished_at > old.finished_at:
            self._best[key] = row

    def rows(self) -> list[CaseRow]:
        """The kept rows, in :func:`sort_key` order."""
        return sorted(self._best.values(), key=sort_key)


def newest_briefs(briefs: Iterable[ResultBrief], *, exclude_noisy: bool = False,
                  prefer_quiet: bool = False) -> list[ResultBrief]:
    """:func:`newest_per_case`'s choice made on briefs (newest first, as a store lists
    them), so only the chosen results need decoding: the rows of the returned briefs'
    results are what :func:`newest_per_case` keeps of all of them."""
    best: dict[tuple[Any, ...], ResultBrief] = {}
    for b in briefs:
        if b.status != "ok" or not b.has_stats or (exclude_noisy and b.noisy):
            continue
        s = b.spec
        key = (s.device, b.device_name, s.workload, s.size, s.precision, s.batch_size,
               s.framework)
        old = best.get(key)
        if old is None:
            best[key] = b
        elif prefer_quiet and old.noisy != b.noisy:
            if old.noisy:
                best[key] = b
        elif b.finished_at > old.finished_at:
            best[key] = b
    return list(best.values())


def known_workloads(store: Any = None, extra: Iterable[str] = ()) -> set[str]:
    """Workload names a user may mean: registered ones (plugins included), those the
    store holds results for, and ``extra``."""
    from accelbench.workloads.registry import list_workloads

    names = {w.name for w in list_workloads()} | set(extra)
    if store is not None:
        names |= store.workloads()
    return names


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``; did you mean X or Y?`` for the close matches of ``name``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(name, sorted(set(candidates)), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(close) + "?"


# -- repeated runs ------------------------------------------------------------------------

