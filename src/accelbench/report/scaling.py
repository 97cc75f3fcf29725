"""Scaling with device count: the same case at 1, 2, 4, ... ranks.

Results that differ only in their topology (same workload, size, per-rank batch,
precision, device kind, framework, fast paths, host and device model) form one series.
Per rank count the newest successful run is taken (a quiet one where there is one), and
the series shows its global throughput, energy per sample and scaling efficiency::

    efficiency(N) = throughput(N) / (N x throughput(1))

against the ideal line (N x the 1-rank throughput; efficiency 1). Batches are per rank
(weak scaling), so ideal scaling keeps the step time and multiplies the throughput.
Efficiency is left out where the series has no 1-rank run. Reads stored results only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.report.rows import DEFAULT_FRAMEWORK
from accelbench.result import Result
from accelbench.spec import Topology


@dataclass(frozen=True, kw_only=True, slots=True)
class ScalingPoint:
    """One rank count of a series."""

    ranks: int
    nnodes: int
    samples_per_s: float
    """Global throughput (every rank's samples per second)."""
    energy_j_per_sample: float | None
    efficiency: float | None
    """throughput / (ranks x the 1-rank throughput); None without a 1-rank run."""
    ideal_samples_per_s: float | None
    """ranks x the 1-rank throughput."""
    result_id: str
    suite_id: str | None
    noisy: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class ScalingSeries:
    """A case measured at two or more rank counts."""

    label: str
    sample_unit: str
    points: tuple[ScalingPoint, ...]
    """In rank order."""

    @property
    def baseline(self) -> ScalingPoint | None:
        """The 1-rank point, if the series has one."""
        return next((p for p in self.points if p.ranks == 1), None)


def _group_key(r: Result) -> tuple[str, ...]:
    """What must match for two results to be one case at different rank counts: the case
    key without its topology, the host and the device's model name."""
    from accelbench.report.rows import device_name

    topo = r.spec.topology  # one mode per series: an FSDP run is not DDP's next point
    # (the mode as plain values: a Topology of it alone would be checked, and --tp 2
    # without its ranks is refused)
    mode = f"{topo.parallel} tp={topo.tp} act_ckpt={topo.act_ckpt}"
    base = dataclasses.replace(r.spec, topology=Topology()).case_key()
    host = str((r.machine or {}).get("hostname") or "")
    return (base, mode, host, device_name(r))


def _label(r: Result) -> str:
    s = r.spec
    framework = "" if s.framework == DEFAULT_FRAMEWORK else f" {s.framework}"
    host = (r.machine or {}).get("hostname")
    return (f"{s.workload} {s.size} bs={s.batch_size}/rank {s.precision} "
            f"{s.device.split(':')[0]}{framework}" + (f" @{host}" if host else ""))


class ScalingFold:
    """The results :func:`scaling_series` chooses among, kept as they stream past: per case
    and rank count the one it would take (quiet beats noisy, then newer beats older;
    the first seen of equals), in the order the cases first appear, so that
    ``scaling_series(fold.results())`` is ``scaling_series`` of them all."""

    def __init__(self) -> None:
        self._best: dict[tuple[tuple[str, ...], int], Result] = {}

    def add(self, r: Result) -> None:
        """Offer one result."""
        if r.status != "ok" or r.samples_per_s is None or not r.stored_here:
            return
        key = (_group_key(r), r.world_size)
        old = self._best.get(key)
        if old is None or (not r.noisy, r.finished_at) > (not old.noisy, old.finished_at):
            self._best[key] = r

    def results(self) -> list[Result]:
        """The kept results."""
        return list(self._best.values())


def scaling_series(results: Sequence[Result]) -> list[ScalingSeries]:
    """Every case of ``results`` measured at two or more rank counts, as a series.

    Only ``ok`` results with a throughput count; of several runs at one rank count the
    newest (a quiet one where there is one) is taken.
    """
    groups: dict[tuple[str, ...], dict[int, Result]] = {}
    for r in results:
        if r.status != "ok" or r.samples_per_s is None or not r.stored_here:
            continue
        per_n = groups.setdefault(_group_key(r), {})
        n = r.world_size
        old = per_n.get(n)
        # Quiet beats noisy; then newer beats older.
        if old is None or (not r.noisy, r.finished_at) > (not old.noisy, old.finished_at):
            per_n[n] = r
    out: list[ScalingSeries] = []
    for per_n in groups.values():
        if len(per_n) < 2:
            continue
        one = per_n.get(1)
        one_tput = one.samples_per_s if one is not None else None
        points = []
        for n in sorted(per_n):
            r = per_n[n]
            tput = float(r.samples_per_s or 0.0)
            ideal = n * one_tput if one_tput else None
            points.append(ScalingPoint(
                ranks=n, nnodes=r.spec.topology.nnodes, samples_per_s=tput,
                energy_j_per_sample=r.energy_j_per_sample,
                efficiency=tput / ideal if ideal else None,
                ideal_samples_per_s=ideal, result_id=r.id, suite_id=r.suite_id,
                noisy=r.noisy,
            ))
        first = per_n[min(per_n)]
        out.append(ScalingSeries(label=_label(first), sample_unit=first.sample_unit,
                                 points=tuple(points)))
    out.sort(key=lambda s: s.label)
    return out


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def table_rows(series: Sequence[ScalingSeries]) -> list[dict[str, Any]]:
    """One formatted row per point, for the report's table."""
    rows = []
    for s in series:
        for p in s.points:
            rows.append({
                "case": s.label, "ranks": p.ranks, "nnodes": p.nnodes,
                "throughput": f"{_fmt(p.samples_per_s)} {s.sample_unit}s/s",
                "ideal": "-" if p.ideal_samples_per_s is None
                else f"{_fmt(p.ideal_samples_per_s)} {s.sample_unit}s/s",
                "efficiency": "-" if p.efficiency is None else f"{100 * p.efficiency:.0f}%",
                "energy": "unavailable" if p.energy_j_per_sample is None
                else f"{_fmt(p.energy_j_per_sample)} J",
                "id": p.result_id[:8], "noisy": p.noisy,
            })
    return rows


def scaling_chart(series: Sequence[ScalingSeries]) -> Any:
    """Throughput, scaling efficiency and energy per sample against the rank count, with
    the ideal lines dashed; None when no case was measured at two rank counts."""
    from accelbench.report import plots

    if not series:
        return None
    fig = plots.new_figure(11.0, 3.6)
    ax_t, ax_e, ax_j = fig.subplots(1, 3)
    ranks_seen: set[int] = set()
    for i, s in enumerate(series):
        colour = plots.PALETTE[i % len(plots.PALETTE)]
        xs = [p.ranks for p in s.points]
        ranks_seen.update(xs)
        ax_t.plot(xs, [p.samples_per_s for p in s.points], "o-", color=colour, label=s.label)
        base = s.baseline
        if base is not None:
            ax_t.plot(xs, [n * base.samples_per_s for n in xs], "--", color=colour, alpha=0.6)
            eff = [(p.ranks, p.efficiency) for p in s.points if p.efficiency is not None]
            ax_e.plot([x for x, _ in eff], [e for _, e in eff], "o-", color=colour)
        energy = [(p.ranks, p.energy_j_per_sample) for p in s.points
                  if p.energy_j_per_sample is not None]
        if energy:
            ax_j.plot([x for x, _ in energy], [e for _, e in energy], "o-", color=colour)
    ax_e.axhline(1.0, linestyle="--", color="#555555", linewidth=1, label="ideal")
    ticks = sorted(ranks_seen)
    for ax, ylabel in ((ax_t, "samples / s (dashed: ideal)"), (ax_e, "scaling efficiency"),
                       (ax_j, "energy per sample (J)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("ranks (devices)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    ax_e.set_ylim(bottom=0)
    ax_t.set_title("throughput", fontsize=9)
    ax_e.set_title("efficiency = T(N) / (N x T(1))", fontsize=9)
    ax_j.set_title("energy per sample", fontsize=9)
    if not ax_j.lines:
        ax_j.text(0.5, 0.5, "energy unavailable", transform=ax_j.transAxes, ha="center")
    ax_t.legend(fontsize=7, loc="upper left")
    sources = [{"bar": f"{s.label} x{p.ranks}", "result": p.result_id,
                "suite": p.suite_id or "-", "time": "",
                "noisy": "noisy" if p.noisy else ""}
               for s in series for p in s.points]
    return plots.render_chart(
        fig, "scaling", "Scaling with device count",
        "Throughput, scaling efficiency and energy per sample against the number of ranks",
        caption="Weak scaling: the batch is per rank. Dashed: ideal (N x the 1-rank "
        "throughput; efficiency 1).",
        sources=sources,
    )
