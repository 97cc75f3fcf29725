"""The report's figures, drawn with matplotlib's Agg backend (no display, no pyplot state).

Every chart function returns a :class:`Chart` (PNG and SVG bytes) or None when
there is nothing to draw; the caller says why in the report. Only ``ok`` rows are
drawn (``diverged`` and ``insufficient`` never are); a noisy run is drawn faded and
cross-hatched, and each chart lists where every bar comes from (result, suite, time)
in :attr:`Chart.sources`.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.report.rows import DEFAULT_FRAMEWORK, SIZE_ORDER, CaseRow, short_time

DPI = 110
PALETTE = (
    "#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3",
    "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Chart:
    """One rendered figure."""

    name: str
    """File stem (``throughput``, ``power_<id>`` ...), safe for file names."""
    title: str
    alt: str
    """Text alternative for the HTML ``<img>``."""
    png: bytes
    svg: bytes
    caption: str = ""
    """What the marks mean and what was left out (shown under the figure)."""
    sources: tuple[dict[str, str], ...] = ()
    """Where each bar comes from: ``bar``, ``result``, ``suite``, ``time``."""


def new_figure(width_in: float, height_in: float) -> Any:
    """A matplotlib figure of the report's size and DPI, drawn off-screen (Agg), with a
    constrained layout; no pyplot state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def render_chart(fig: Any, name: str, title: str, alt: str, caption: str = "",
                 sources: Sequence[dict[str, str]] = ()) -> Chart:
    """``fig`` drawn as PNG and SVG (no timestamps in either: same data, same bytes)."""
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI, metadata={"Software": None})
    fig.savefig(svg, format="svg", metadata={"Date": None})
    return Chart(name=name, title=title, alt=alt, png=png.getvalue(), svg=svg.getvalue(),
                 caption=caption, sources=tuple(sources))


NOISY_COLOUR = "#BBBBBB"


def row_source(row: CaseRow, bar: str) -> dict[str, str]:
    """One :attr:`Chart.sources` entry for a bar drawn from ``row``."""
    return {"bar": bar, "result": row.result_id[:8], "suite": row.suite_id or "-",
            "time": short_time(row.started_at or row.finished_at),
            "noisy": "; ".join(row.noise_verdicts) or "flagged" if row.noisy else ""}


def flagged_caption(rows: Sequence[CaseRow]) -> str:
    """The bar chart's words on its faded bars: how many, and which verdict."""
    busy = sum(1 for r in rows if "contention" in r.noise_kinds)
    vary = sum(1 for r in rows if "unstable" in r.noise_kinds)
    n = sum(1 for r in rows if r.noisy)
    if not n:
        return ""
    why = [f"{busy} measured on a busy machine (other processes competed)" if busy else "",
           f"{vary} whose step times vary more than a quiet run's" if vary else ""]
    return (f"Faded, cross-hatched bars: {n} flagged run(s): "
            f"{'; '.join(w for w in why if w) or 'flagged noisy'}. Read them with care; "
            "the table's status column says why.")


def _short(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def series_colours(rows: Sequence[CaseRow]) -> dict[str, str]:
    """One colour per device x precision, shared by every chart of a report."""
    series = sorted({_series_label(r) for r in rows})
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(series)}


def _series_label(row: CaseRow) -> str:
    name = row.device if row.device_name == row.device else f"{row.device} ({row.device_name})"
    framework = "" if row.framework == DEFAULT_FRAMEWORK else f" {row.framework}"
    return f"{_short(name, 40)} {row.precision}{framework}"


def _grid(n: int, cols: int = 2) -> tuple[int, int]:
    cols = min(cols, n)
    return math.ceil(n / cols), cols


@dataclass(frozen=True, kw_only=True)
class _Bars:
    """What a grouped bar chart shows of each row, and how it is labelled."""

    name: str
    title: str
    ylabel: Callable[[str], str]
    """The y axis' label, from the rows' sample unit."""
    value: Callable[[CaseRow], Any]
    err: Callable[[CaseRow], tuple[float, float] | None] | None = None
    """The whisker's (low, high), None for none."""
    hatch: Callable[[CaseRow], str | None] | None = None
    legend_extra: str = ""


def _grouped_bars(rows: Sequence[CaseRow], bars: _Bars,
                  colours: dict[str, str] | None = None) -> Chart | None:
    """One panel per workload; x = size/batch size; one bar per device x precision."""
    value, err, hatch, title = bars.value, bars.err, bars.hatch, bars.title
    workloads = sorted({r.workload for r in rows})
    if not workloads:
        return None
    series = sorted({_series_label(r) for r in rows})
    colour = dict(series_colours(rows))
    if colours:
        colour.update({s: colours[s] for s in series if s in colours})
    sources: list[dict[str, str]] = []
    nrows, ncols = _grid(len(workloads))
    fig = new_figure(6.2 * ncols, 3.4 * nrows + 0.6)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.flat[len(workloads):]:
        ax.set_visible(False)
    for ax, wl in zip(axes.flat, workloads, strict=False):
        mine = [r for r in rows if r.workload == wl]
        groups = sorted(
            {(r.size, r.batch_size) for r in mine}, key=lambda g: (SIZE_ORDER.get(g[0], 9), g)
        )
        here = [s for s in series if any(_series_label(r) == s for r in mine)]
        width = min(0.8 / max(1, len(here)), 0.3)
        for j, s in enumerate(here):
            xs, ys, lo, hi, hatches, faded = [], [], [], [], [], []
            for gi, (size, bs) in enumerate(groups):
                match = [r for r in mine if _series_label(r) == s and (r.size, r.batch_size)
                         == (size, bs)]
                if not match:
                    continue
                r = match[0]
                v = value(r)
                xs.append(gi - width * len(here) / 2 + width * (j + 0.5))
                ys.append(v)
                e = err(r) if err else None
                lo.append(v - e[0] if e else 0.0)
                hi.append(e[1] - v if e else 0.0)
                hatches.append(hatch(r) if hatch else None)
                faded.append(r.noisy)
                sources.append(row_source(r, f"{wl} {size} bs={bs}: {s}"))
            drawn = ax.bar(xs, ys, width * 0.92, color=colour[s], label=s,
                           yerr=[lo, hi] if err else None, capsize=3,
                           error_kw={"elinewidth": 1, "ecolor": "#333333"})
            _style_bars(drawn, hatches, faded)
        _style_panel(ax, groups, wl, bars.ylabel(mine[0].sample_unit))
    handles = [
        _patch(colour[s], s) for s in series
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(series)),
               fontsize=8, frameon=False, title=bars.legend_extra or None, title_fontsize=8)
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    caption = flagged_caption(rows)
    return render_chart(fig, bars.name, title, f"{title}: bar chart, one panel per workload",
                        caption, sources)


def _style_bars(bars: Any, hatches: Sequence[Any], faded: Sequence[bool]) -> None:
    """Noisy bars faded and cross-hatched; others with their own hatch, if any."""
    for bar, h, noisy in zip(bars, hatches, faded, strict=True):
        if noisy:
            bar.set_alpha(0.35)
            bar.set_hatch("xx")
            bar.set_edgecolor("#555555")
        elif h:
            bar.set_hatch(h)
            bar.set_edgecolor("white")


def _style_panel(ax: Any, groups: Sequence[tuple[str, int]], workload: str, ylabel: str) -> None:
    """Axes of one workload's panel: size/batch ticks, y label, title, light grid."""
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{size}\nbs={bs}" for size, bs in groups], fontsize=8)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_title(_short(workload, 40), fontsize=10, loc="left", fontweight="bold")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.tick_params(axis="y", labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _patch(colour: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=colour, label=label)


def throughput_chart(
    rows: Sequence[CaseRow], colours: dict[str, str] | None = None
) -> Chart | None:
    """Throughput per workload, grouped by device and precision, with 95% CI bars."""
    ok = [r for r in rows if r.rankable]
    if not ok:
        return None
    return _grouped_bars(ok, _Bars(
        name="throughput",
        title="Training throughput (median step; whiskers: 95% CI)",
        ylabel=lambda unit: f"{unit}s / s",
        value=lambda r: r.samples_per_s,
        err=lambda r: (r.ci95_low_samples_per_s, r.ci95_high_samples_per_s)
        if r.ci95_low_samples_per_s is not None and r.ci95_high_samples_per_s is not None
        else None,
    ), colours)


def energy_chart(
    rows: Sequence[CaseRow], colours: dict[str, str] | None = None
) -> Chart | None:
    """Energy per sample where known; estimated values hatched. Figures of one energy
    boundary only (the device's where there are several): bars of different boundaries
    side by side would compare what does not compare."""
    known = [r for r in rows if r.rankable and r.energy_j_per_sample is not None]
    if not known:
        return None
    boundaries = {r.energy_boundary for r in known}
    title = "Energy per sample (hatched: estimated, not measured)"
    if len(boundaries) > 1:
        keep = "device" if "device" in boundaries else sorted(boundaries)[0]
        left = sum(1 for r in known if r.energy_boundary != keep)
        known = [r for r in known if r.energy_boundary == keep]
        title += f"; {keep} boundary ({left} other-boundary figure(s) in the table only)"
    elif boundaries != {"device"}:
        title += f"; boundary: {next(iter(boundaries))}"
    return _grouped_bars(known, _Bars(
        name="energy",
        title=title,
        ylabel=lambda unit: f"J / {unit}",
        value=lambda r: r.energy_j_per_sample,
        hatch=lambda r: "//" if r.energy_kind != "measured" else None,
    ), colours)


def power_timeline_chart(row: CaseRow, timeline: dict[str, Any], index: int) -> Chart | None:
    """Power over time of one case, one line per sensor; None when no sensor has samples.

    The title says so when the case's energy is estimated rather than measured.
    """
    series = []
    for sensor, data in sorted(timeline.items()):
        if not isinstance(data, dict):
            continue
        t = list(data.get("t_s") or [])
        p = list(data.get("power_w") or [])
        n = min(len(t), len(p))
        if n:
            series.append((str(sensor), t[:n], p[:n]))
    if not series:
        return None
    fig = new_figure(7.0, 2.6)
    ax = fig.subplots()
    for i, (sensor, t, p) in enumerate(series):
        ax.plot(t, p, color=PALETTE[i % len(PALETTE)], linewidth=1.2, label=_short(sensor, 40),
                marker="o" if len(t) < 30 else None, markersize=3)
    ax.set_xlabel("time since start of measurement (s)", fontsize=9)
    ax.set_ylabel("power (W)", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(fontsize=8, frameon=False, loc="center right")
    title = f"Power: {_short(row.case_label, 70)} ({row.result_id[:8]})"
    if row.energy_kind in ("estimated", "partly estimated"):
        title += f" \u2013 {row.energy_kind}, not measured"
    ax.set_title(title, fontsize=10, loc="left")
    return render_chart(fig, f"power_{index:03d}", title,
                        f"power timeline of {row.case_label}, {len(series)} sensor(s)")


@dataclass(frozen=True, kw_only=True, slots=True)
class Speedup:
    """Mixed precision over fp32 for one case."""

    label: str
    precision: str
    value: float
    ci95: tuple[float, float] | None
    significant: bool | None
    noisy: bool = False
    """Either side is noisy: the bar is greyed out."""
    source: str = ""
    """Which runs the ratio pairs: one suite, or two runs and their times."""
    sources: tuple[dict[str, str], ...] = ()


def speedup_chart(speedups: Sequence[Speedup], left_out: int = 0) -> Chart | None:
    """Horizontal bars of mixed-precision speedup over fp32, with 95% CI whiskers."""
    return ratio_chart(
        speedups, name="speedup",
        title="Speedup of mixed precision over fp32 (whiskers: 95% bootstrap CI)",
        xlabel="throughput relative to fp32 (1 = no change)", legend="{} / fp32",
        alt="horizontal bar chart of speedups", caption=ratio_caption(speedups, left_out),
    )


def framework_chart(ratios: Sequence[Speedup], left_out: int = 0, *,
                    base: str = DEFAULT_FRAMEWORK, others: Sequence[str] = ()) -> Chart | None:
    """Horizontal bars of each other framework over ``base`` throughput per case, with 95%
    CI whiskers (the frameworks as the results name them)."""
    other = " / ".join(others) or "other"
    return ratio_chart(
        ratios, name="frameworks",
        title=f"Throughput of {other} relative to {base}, same case "
              "(whiskers: 95% bootstrap CI)",
        xlabel=f"{other} / {base} throughput (1 = equal; >1 = {other} faster)",
        legend=f"{other} / {base}, {{}}",
        alt=f"horizontal bar chart of {other} over {base} throughput ratios",
        caption=ratio_caption(ratios, left_out),
    )


def ratio_caption(speedups: Sequence[Speedup], left_out: int = 0) -> str:
    """What a ratio chart's marks mean and what it left out, in words."""
    parts = ["Whiskers: 95% percentile bootstrap CI of the ratio from the raw step times "
             "(2000 resamples). Each bar pairs two runs of one suite where the store has "
             "such a pair, else the two runs closest in time: the line under each label "
             "says which."]
    n_noisy = sum(1 for s in speedups if s.noisy)
    if n_noisy:
        parts.append(f"Greyed out: {n_noisy} ratio(s) with a flagged input (a busy machine "
                     "or step times that vary), not to be trusted.")
    n_no_ci = sum(1 for s in speedups if s.ci95 is None)
    if n_no_ci:
        parts.append(f"{n_no_ci} ratio(s) have no CI (fewer than 3 iterations on a side).")
    if left_out:
        parts.append(f"Left out: {left_out} insufficient or diverged run(s) (no valid "
                     "measurement).")
    return " ".join(parts)


def ratio_chart(
    speedups: Sequence[Speedup], *, name: str, title: str, xlabel: str, legend: str, alt: str,
    caption: str = "",
) -> Chart | None:
    """Horizontal bars of B/A ratios grouped (coloured) by precision, with CI whiskers;
    noisy ones greyed out, each labelled with the runs it pairs."""
    if not speedups:
        return None
    per_bar = 0.38 if not any(s.source for s in speedups) else 0.52
    fig = new_figure(8.0, 0.9 + per_bar * len(speedups))
    ax = fig.subplots()
    precisions = sorted({s.precision for s in speedups})
    colour = {p: PALETTE[(i + 2) % len(PALETTE)] for i, p in enumerate(precisions)}
    ys = list(range(len(speedups)))[::-1]
    for y, s in zip(ys, speedups, strict=True):
        err = None
        if s.ci95:
            err = [[s.value - s.ci95[0]], [s.ci95[1] - s.value]]
        bar = ax.barh(y, s.value, color=NOISY_COLOUR if s.noisy else colour[s.precision],
                      xerr=err, capsize=3, height=0.7)
        if s.noisy:
            for patch in bar:
                patch.set_hatch("//")
                patch.set_edgecolor("#777777")
    ax.axvline(1.0, color="#333333", linewidth=1, linestyle="--")
    lows = [s.ci95[0] if s.ci95 else s.value for s in speedups]
    highs = [s.ci95[1] if s.ci95 else s.value for s in speedups]
    log = max(highs) / max(min(lows), 1e-12) > 8
    if log:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xscale("log")
        # Plain numbers at 1-2-5 steps: matplotlib's minor labels in 10^x form overlap.
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(ys)
    ax.set_yticklabels(
        [_short(s.label, 60) + (f"\n{_short(s.source, 70)}" if s.source else "")
         for s in speedups], fontsize=8 if not any(s.source for s in speedups) else 7)
    ax.set_xlabel(xlabel + (", log scale" if log else ""), fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for y, s in zip(ys, speedups, strict=True):
        right = s.ci95[1] if s.ci95 else s.value
        mark = (" (no CI)" if s.ci95 is None else " (1 run: ?)" if s.significant is None
                else "" if s.significant else " (n.s.)")
        if s.noisy:
            mark += " noisy"
        text = f"{s.value:.2f}" if s.value < 10 else f"{s.value:.3g}"
        ax.annotate(f"{text}\u00d7{mark}", (right, y), textcoords="offset points",
                    xytext=(6, 0), va="center", fontsize=8)
    if log:
        ax.set_xlim(min(min(lows), 1.0) / 1.5, max(highs) * 2.5)
    else:
        ax.set_xlim(0, max(max(highs), 1.0) * 1.18)
    handles = [_patch(colour[p], legend.format(p)) for p in precisions]
    if any(s.noisy for s in speedups):
        handles.append(_patch(NOISY_COLOUR, "noisy input (greyed out)"))
    fig.legend(handles=handles, fontsize=8,
               frameon=False, loc="outside lower center", ncols=len(handles))
    # A figure title, not the axes' one: long tick labels push the axes to the right.
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    sources = [src for s in speedups for src in s.sources]
    return render_chart(fig, name, title, alt, caption, sources)


def roofline_chart(points: Sequence[dict[str, Any]]) -> Chart | None:
    """Log-log roofline: one roof per device x precision, ops and models as points."""
    pts = [
        p for p in points
        if (p.get("intensity_flop_per_byte") or 0) > 0 and (p.get("achieved_flop_per_s") or 0) > 0
    ]
    if not pts:
        return None
    fig = new_figure(8.0, 5.0)
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    hosts = {str(p.get("hostname") or "") for p in pts}

    def key(p: dict[str, Any]) -> tuple[str, str]:
        dev = str(p.get("device", ""))
        if len(hosts) > 1:
            dev = f"{p.get('hostname')}:{dev}"
        return dev, str(p.get("precision", ""))

    roofs: dict[tuple[str, str], tuple[float, float]] = {}
    for p in pts:
        peak_f, peak_b = p.get("peak_flop_per_s"), p.get("peak_bytes_per_s")
        if peak_f and peak_b:
            roofs[key(p)] = (float(peak_f), float(peak_b))
    colour = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(sorted({key(p) for p in pts}))}
    xs = [float(p["intensity_flop_per_byte"]) for p in pts]
    lo_x, hi_x = min(xs) / 4, max(xs) * 4
    for peak_f, peak_b in roofs.values():
        ridge = peak_f / peak_b
        lo_x, hi_x = min(lo_x, ridge / 8), max(hi_x, ridge * 8)
    import numpy as np

    grid = np.logspace(math.log10(lo_x), math.log10(hi_x), 200)
    for (dev, prec), (peak_f, peak_b) in sorted(roofs.items()):
        ax.plot(grid, np.minimum(peak_f, grid * peak_b), color=colour[(dev, prec)],
                linewidth=1.5, label=f"roof {_short(dev, 30)} {prec}")
    for p in pts:
        marker = "o" if p.get("kind") == "op" else "s"
        ax.scatter([float(p["intensity_flop_per_byte"])], [float(p["achieved_flop_per_s"])],
                   marker=marker, s=30, color=colour[key(p)], edgecolors="#222222",
                   linewidths=0.6, zorder=3)
        ax.annotate(_short(str(p.get("label", "")), 24),
                    (float(p["intensity_flop_per_byte"]), float(p["achieved_flop_per_s"])),
                    textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)", fontsize=9)
    ax.set_ylabel("achieved FLOP / s", fontsize=9)
    ax.grid(which="both", alpha=0.2)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    title = "Roofline (circles: operators, squares: models)"
    ax.set_title(title, fontsize=10, loc="left")
    return render_chart(fig, "roofline", title, "roofline chart, log-log")
