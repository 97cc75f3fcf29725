"""The throughput-energy frontier of a sweep (``accelbench sweep``, ``sweep-report``).

Each point is one setting's result: throughput (samples/s at the median step time) and
energy per sample inside the record's energy boundary, each with a 95% bootstrap CI.
A point is on the Pareto frontier when no other point is at least as fast and at most as
costly, and strictly better in one. The time-optimal setting is the fastest; the
energy-optimal one costs least per sample; the budget pick costs least among those within
``max_slowdown`` of the fastest (throughput >= (1 - max_slowdown) x the fastest's).

Energy CIs: with three or more energy trials (``--energy-trials``) a bootstrap of the
median of the trials' energy per sample; otherwise the window's average power is taken
as fixed and the CI comes from the step times (energy per sample = power x step time /
samples per step), which is stated in ``energy_ci_method``. A point without an energy
figure (no sensor, estimate withheld, diverged) is listed with why, never given one.
No framework is imported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelbench.result import Result
from accelbench.stats import MIN_CI_SAMPLES, bootstrap_median_ci, throughput_ci

DEFAULT_MAX_SLOWDOWN = 0.1


@dataclass(frozen=True, kw_only=True, slots=True)
class FrontierPoint:
    """One setting of a sweep."""

    label: str
    """The setting in words, e.g. ``power_limit_w=250``."""
    settings: dict[str, float | int] = field(default_factory=dict)
    result_id: str = ""
    samples_per_s: float
    samples_per_s_ci95: tuple[float, float] | None = None
    energy_j_per_sample: float | None = None
    energy_ci95: tuple[float, float] | None = None
    energy_ci_method: str = ""
    energy_source: str = ""
    """``counter``, ``integrated_samples``, ``estimate`` ... (an estimate is labelled)."""
    why_no_energy: str = ""
    on_frontier: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True, kw_only=True, slots=True)
class Frontier:
    """The points of a sweep and what to pick."""

    points: tuple[FrontierPoint, ...]
    """Every setting with a throughput, in sweep order (``on_frontier`` marked)."""
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN
    time_optimal: FrontierPoint | None = None
    energy_optimal: FrontierPoint | None = None
    budget_pick: FrontierPoint | None = None
    """Least energy per sample within ``max_slowdown`` of the fastest."""
    skipped: tuple[str, ...] = ()
    """Settings left out (not ``ok``), with why."""

    @property
    def frontier(self) -> tuple[FrontierPoint, ...]:
        """Frontier points, fastest first."""
        return tuple(sorted((p for p in self.points if p.on_frontier),
                            key=lambda p: -p.samples_per_s))

    @property
    def without_energy(self) -> tuple[FrontierPoint, ...]:
        return tuple(p for p in self.points if p.energy_j_per_sample is None)

    def to_dict(self) -> dict[str, Any]:
        pick = {k: (getattr(self, k).label if getattr(self, k) else None)
                for k in ("time_optimal", "energy_optimal", "budget_pick")}
        return {"points": [p.to_dict() for p in self.points], "max_slowdown": self.max_slowdown,
                **pick, "frontier": [p.label for p in self.frontier],
                "skipped": list(self.skipped)}


def setting_label(settings: dict[str, float | int]) -> str:
    """The setting in words: ``power_limit_w=250, cpu_max_freq_khz=2000000``."""
    return ", ".join(f"{k}={int(v)}" if float(v).is_integer() else f"{k}={v:g}"
                     for k, v in settings.items()) or "unchanged"


def _trial_energies(result: Result) -> list[float]:
    """Energy per sample of each trial inside the boundary (summed over its readings), or
    [] when any reading has no per-trial figures."""
    per_reading = []
    for r in result.primary_energy:
        trials = r.details.get("trials") if isinstance(r.details, dict) else None
        if not trials:
            return []
        values = [t.get("energy_j_per_sample") for t in trials]
        if any(not isinstance(v, int | float) for v in values):
            return []
        per_reading.append([float(v) for v in values])
    if not per_reading or len({len(v) for v in per_reading}) != 1:
        return []
    return [float(sum(col)) for col in zip(*per_reading, strict=True)]


def point_from_result(result: Result) -> FrontierPoint:
    """A frontier point from an ``ok`` result (raw times and energy trials from the record).

    Raises:
        ValueError: the result has no throughput.
    """
    if result.stats is None or not result.iteration_times_s:
        raise ValueError(f"result {result.id} has no throughput")
    settings = result.spec.settings.given()
    times = np.asarray(result.iteration_times_s, dtype=float)
    tput = result.stats.samples_per_s
    tput_ci = (throughput_ci(times, result.samples_per_step) if times.size >= MIN_CI_SAMPLES
               else None)
    energy = result.energy_j_per_sample
    why = ""
    e_ci: tuple[float, float] | None = None
    method = ""
    if energy is None:
        notes = [r.note for r in result.primary_energy if r.note]
        why = "; ".join(notes) or "no energy reading inside the boundary"
    else:
        trials = _trial_energies(result)
        if len(trials) >= MIN_CI_SAMPLES:
            e_ci = bootstrap_median_ci(trials)
            method = f"bootstrap over {len(trials)} energy trials"
        elif times.size >= MIN_CI_SAMPLES:
            lo_t, hi_t = bootstrap_median_ci(times)
            med = float(np.median(times))
            e_ci = (energy * lo_t / med, energy * hi_t / med)
            method = "step-time bootstrap at the window's average power"
    return FrontierPoint(
        label=setting_label(settings), settings=settings, result_id=result.id,
        samples_per_s=tput, samples_per_s_ci95=tput_ci, energy_j_per_sample=energy,
        energy_ci95=e_ci, energy_ci_method=method, energy_source=result.energy_source,
        why_no_energy=why,
    )


def _dominated(p: FrontierPoint, others: Sequence[FrontierPoint]) -> bool:
    pe = p.energy_j_per_sample
    for q in others:
        qe = q.energy_j_per_sample
        if q is p or qe is None or pe is None:
            continue
        if (q.samples_per_s >= p.samples_per_s and qe <= pe
                and (q.samples_per_s > p.samples_per_s or qe < pe)):
            return True
    return False


def compute_frontier(points: Sequence[FrontierPoint], *,
                     max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
                     skipped: Sequence[str] = ()) -> Frontier:
    """Mark the Pareto frontier and the picks among ``points``.

    Raises:
        ValueError: ``max_slowdown`` outside [0, 1).
    """
    if not 0.0 <= max_slowdown < 1.0:
        raise ValueError("max_slowdown must be in [0, 1)")
    with_e = [p for p in points if p.energy_j_per_sample is not None]
    marked = tuple(
        _replace_flag(p, p.energy_j_per_sample is not None and not _dominated(p, with_e))
        for p in points
    )
    fastest = max(marked, key=lambda p: p.samples_per_s, default=None)
    energy_pts = [p for p in marked if p.energy_j_per_sample is not None]
    cheapest = min(energy_pts, key=lambda p: (p.energy_j_per_sample, -p.samples_per_s),
                   default=None)
    pick = None
    if fastest is not None:
        floor = (1.0 - max_slowdown) * fastest.samples_per_s
        within = [p for p in energy_pts if p.samples_per_s >= floor]
        pick = min(within, key=lambda p: (p.energy_j_per_sample, -p.samples_per_s),
                   default=None)
    return Frontier(points=marked, max_slowdown=max_slowdown, time_optimal=fastest,
                    energy_optimal=cheapest, budget_pick=pick, skipped=tuple(skipped))


def _replace_flag(p: FrontierPoint, on: bool) -> FrontierPoint:
    import dataclasses

    return dataclasses.replace(p, on_frontier=on)


def frontier_from_results(results: Iterable[Result], *,
                          max_slowdown: float = DEFAULT_MAX_SLOWDOWN) -> Frontier:
    """The frontier of a sweep's stored results (the newest ``ok`` result per setting)."""
    latest: dict[str, Result] = {}
    skipped: list[str] = []
    for r in sorted(results, key=lambda r: r.started_at):
        label = setting_label(r.spec.settings.given())
        if r.status != "ok" or r.stats is None:
            skipped.append(f"{label}: {r.status}" + (f" ({r.error})" if r.error else ""))
            continue
        latest[label] = r
    points = [point_from_result(r) for r in latest.values()]
    return compute_frontier(points, max_slowdown=max_slowdown, skipped=skipped)


def _ci(ci: tuple[float, float] | None, fmt: str) -> str:
    return f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]" if ci else "(no CI)"


def frontier_lines(fr: Frontier) -> list[str]:
    """The frontier as plain text lines (table, picks, what lacks energy)."""
    lines = ["setting\tsamples/s\tCI95\tJ/sample\tCI95\tsource\tfrontier"]
    for p in fr.points:
        e = f"{p.energy_j_per_sample:.4g}" if p.energy_j_per_sample is not None else "-"
        lines.append(
            f"{p.label}\t{p.samples_per_s:.4g}\t{_ci(p.samples_per_s_ci95, '.4g')}\t{e}\t"
            f"{_ci(p.energy_ci95, '.4g') if p.energy_j_per_sample is not None else '-'}\t"
            f"{p.energy_source}\t{'*' if p.on_frontier else ''}")
    if fr.time_optimal:
        lines.append(f"time-optimal: {fr.time_optimal.label} "
                     f"({fr.time_optimal.samples_per_s:.4g} samples/s)")
    if fr.energy_optimal:
        lines.append(f"energy-optimal: {fr.energy_optimal.label} "
                     f"({fr.energy_optimal.energy_j_per_sample:.4g} J/sample)")
    else:
        lines.append("energy-optimal: none (no setting has an energy figure)")
    if fr.budget_pick:
        lines.append(f"least energy within {fr.max_slowdown:.0%} of the fastest: "
                     f"{fr.budget_pick.label}")
    for p in fr.without_energy:
        lines.append(f"no energy for {p.label}: {p.why_no_energy}")
    if any("estimate" in p.energy_source for p in fr.points):
        lines.append("note: energy figures marked 'estimate' are estimates, not measurements")
    lines.extend(f"left out: {s}" for s in fr.skipped)
    return lines


# -- the report's section ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Sweep:
    """One sweep (a suite of settings of one case shape) and its frontier."""

    label: str
    """``suite id: workload size bs precision device``."""
    frontier: Frontier


def sweeps(results: Iterable[Result], *,
           max_slowdown: float = DEFAULT_MAX_SLOWDOWN) -> list[Sweep]:
    """The sweeps among ``results``: results with device settings, grouped by suite id
    and case shape (what differs is the setting only); those with a throughput."""
    groups: dict[tuple[str, ...], list[Result]] = {}
    for r in results:
        if not r.spec.settings.given():
            continue
        s = r.spec
        key: tuple[str, ...] = (r.suite_id or "-", s.workload, s.size, str(s.batch_size),
                                s.precision, s.device, s.framework)
        groups.setdefault(key, []).append(r)
    out = []
    for key, members in sorted(groups.items()):
        fr = frontier_from_results(members, max_slowdown=max_slowdown)
        if fr.points:
            out.append(Sweep(label=f"{key[0]}: {' '.join(key[1:6])}", frontier=fr))
    return out


def _fmt_ci(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "unavailable"
    return f"{value:.4g}" + (f" [{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "")


def table_rows(found: Sequence[Sweep]) -> list[dict[str, str]]:
    """Rows of the report's frontier table, formatted."""
    rows = []
    for sw in found:
        fr = sw.frontier
        for p in fr.points:
            picks = [name for name, q in (("time-optimal", fr.time_optimal),
                                          ("energy-optimal", fr.energy_optimal),
                                          (f"least energy within {fr.max_slowdown:.0%}",
                                           fr.budget_pick)) if q is p]
            rows.append({
                "sweep": sw.label, "setting": p.label,
                "throughput": _fmt_ci(p.samples_per_s, p.samples_per_s_ci95),
                "energy": _fmt_ci(p.energy_j_per_sample, p.energy_ci95)
                + (f" ({p.energy_source})" if p.energy_j_per_sample is not None
                   and p.energy_source not in ("", "counter") else ""),
                "frontier": "yes" if p.on_frontier else "",
                "pick": ", ".join(picks),
                "why": p.why_no_energy,
                "id": p.result_id[:8],
            })
    return rows


def frontier_chart(found: Sequence[Sweep]) -> Any:
    """Energy per sample against throughput, 95% CIs on both axes, each sweep's frontier
    joined; None without a sweep that has an energy figure."""
    from accelbench.report import plots

    drawn = [sw for sw in found if any(p.energy_j_per_sample is not None
                                       for p in sw.frontier.points)]
    if not drawn:
        return None
    fig = plots.new_figure(7.5, 4.6)
    ax = fig.subplots()
    sources = []
    for i, sw in enumerate(drawn):
        colour = plots.PALETTE[i % len(plots.PALETTE)]
        pts = [p for p in sw.frontier.points if p.energy_j_per_sample is not None]
        for p in pts:
            e = float(p.energy_j_per_sample)  # type: ignore[arg-type]
            xerr = ([[p.samples_per_s - p.samples_per_s_ci95[0]],
                     [p.samples_per_s_ci95[1] - p.samples_per_s]]
                    if p.samples_per_s_ci95 else None)
            yerr = ([[e - p.energy_ci95[0]], [p.energy_ci95[1] - e]] if p.energy_ci95 else None)
            ax.errorbar([p.samples_per_s], [e], xerr=xerr, yerr=yerr, fmt="o",
                        color=colour, alpha=1.0 if p.on_frontier else 0.4, capsize=3)
            ax.annotate(p.label.replace("power_limit_w=", "").replace("_", " "),
                        (p.samples_per_s, e), fontsize=6, xytext=(3, 3),
                        textcoords="offset points")
            sources.append({"bar": f"{sw.label} {p.label}", "result": p.result_id,
                            "suite": sw.label.split(":")[0], "time": "", "noisy": ""})
        front = sorted((p for p in pts if p.on_frontier), key=lambda p: p.samples_per_s)
        ax.plot([p.samples_per_s for p in front],
                [p.energy_j_per_sample for p in front], "-", color=colour, label=sw.label)
    ax.set_xlabel("throughput (samples / s)")
    ax.set_ylabel("energy per sample (J)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    missing = [f"{sw.label} {p.label}" for sw in found for p in sw.frontier.without_energy]
    caption = ("Each point is one device setting, with 95% bootstrap CIs on both axes; the "
               "line joins the Pareto frontier (faded: dominated). Lower right is better.")
    if missing:
        caption += f" Without an energy figure (not drawn): {', '.join(missing)}."
    return plots.render_chart(fig, "frontier", "Throughput-energy frontier of device settings",
                              "Energy per sample against throughput for each swept setting",
                              caption=caption, sources=sources)


def recommend_lines(results: Iterable[Result], *,
                    max_slowdown: float = DEFAULT_MAX_SLOWDOWN) -> list[str]:
    """One line per sweep for ``recommend``: the time- and energy-optimal settings and the
    least energy within ``max_slowdown`` of the fastest, with what it costs and saves."""
    lines = []
    for sw in sweeps(results, max_slowdown=max_slowdown):
        fr = sw.frontier
        fast, pick = fr.time_optimal, fr.budget_pick
        if fast is None:
            continue
        text = f"device settings ({sw.label}): fastest {fast.label}"
        if fr.energy_optimal is None:
            lines.append(text + "; no setting has an energy figure, so no energy-optimal one")
            continue
        text += f"; energy-optimal {fr.energy_optimal.label}"
        if pick is not None and pick.energy_j_per_sample is not None:
            text += f"; least energy within {fr.max_slowdown:.0%} of the fastest: {pick.label}"
            if fast.energy_j_per_sample:
                saving = 1 - pick.energy_j_per_sample / fast.energy_j_per_sample
                slower = 1 - pick.samples_per_s / fast.samples_per_s
                text += f" ({saving:.0%} less energy per sample, {slower:.0%} slower)"
        lines.append(text)
    return lines
