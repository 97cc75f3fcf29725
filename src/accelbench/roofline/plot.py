"""Roofline charts: log-log, labelled roofs and points, PNG and SVG (matplotlib Agg).

Uses :class:`matplotlib.figure.Figure` directly (no pyplot), so nothing
global is touched and no display is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelbench.roofline import ABOVE_ROOF_REASON

PRECISION_COLOURS = {"fp32": "tab:blue", "tf32": "tab:orange", "fp16": "tab:green",
                     "bf16": "tab:red"}
_DEVICE_STYLES = ("-", "--", "-.", ":")


def _colour(precision: str | None) -> str:
    from accelbench.opbench.precision import TRAINING_TO_OP_PRECISION

    key = TRAINING_TO_OP_PRECISION.get(precision or "", precision or "")
    return PRECISION_COLOURS.get(key, "tab:gray")


def fmt_si(value: float | None, unit: str) -> str:
    """``1.64e11, "FLOP/s"`` -> ``164 GFLOP/s``."""
    if value is None or value <= 0 or not math.isfinite(value):
        return "-"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            v = value / factor
            return f"{v:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _limits(values: Sequence[float], default: tuple[float, float]) -> tuple[float, float]:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not vals:
        return default
    lo, hi = min(vals), max(vals)
    return 10 ** math.floor(math.log10(lo) - 0.3), 10 ** math.ceil(math.log10(hi) + 0.3)


def _new_figure() -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 6.5), dpi=120)
    FigureCanvasAgg(fig)
    return fig


def _device_key(d: dict[str, Any]) -> tuple[str, str]:
    return (d.get("hostname") or "", d.get("device") or "")


def _draw_roofs(ax: Any, roofs: Sequence[dict[str, Any]], x_lo: float, x_hi: float,
                scale: dict[tuple[str, str], float] | None = None, unit: str = "FLOP/s"
                ) -> None:
    import numpy as np

    devices = list(dict.fromkeys(_device_key(r) for r in roofs))
    xs = np.logspace(math.log10(x_lo), math.log10(x_hi), 400)
    bw_drawn: set[tuple[str, str]] = set()
    for r in roofs:
        key = _device_key(r)
        style = _DEVICE_STYLES[devices.index(key) % len(_DEVICE_STYLES)]
        div = (scale or {}).get(key, 1.0)
        where = f"{r['device']}" + (f" @{r['hostname']}" if len(devices) > 1 else "")
        peak, bw = r.get("peak_flop_per_s"), r.get("peak_bytes_per_s")
        if peak and bw:
            ys = np.minimum(peak, xs * bw) / div
            ax.plot(xs, ys, style, color=_colour(r["precision"]), lw=1.6,
                    label=f"{where} {r['precision']} roof {fmt_si(peak, 'FLOP/s')}")
        elif peak:
            ax.plot(xs, np.full_like(xs, peak / div), style, color=_colour(r["precision"]),
                    lw=1.6, label=f"{where} {r['precision']} peak {fmt_si(peak, 'FLOP/s')}")
        if bw and key not in bw_drawn:
            bw_drawn.add(key)
            # The bandwidth slope, labelled where it enters the plot.
            x_text = x_lo * 3
            ax.annotate(f"{where} memory {fmt_si(bw, 'B/s')}", (x_text, x_text * bw / div),
                        rotation=0, fontsize=7, color="dimgray",
                        xytext=(4, 4), textcoords="offset points")
            if not peak:
                ax.plot(xs, xs * bw / div, style, color="dimgray", lw=1.2)
    del unit


Box = tuple[float, float, float, float]
"""(x0, y0, x1, y1) in display pixels."""

#: Offsets tried for a label, as (dx, dy) multiples of the label's own size from the
#: point (right, above, left, below and the diagonals), at growing distances.
_PLACEMENTS: tuple[tuple[float, float], ...] = (
    (0.15, 0.15), (0.15, -1.15), (-1.15, 0.15), (-1.15, -1.15),
    (0.15, -0.5), (-1.15, -0.5), (-0.5, 0.3), (-0.5, -1.3),
)
_DISTANCES_PX = (3.0, 10.0, 20.0, 34.0)


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _inside(a: Box, bounds: Box) -> bool:
    return a[0] >= bounds[0] and a[1] >= bounds[1] and a[2] <= bounds[2] and a[3] <= bounds[3]


def place_labels(
    anchors: Sequence[tuple[float, float]],
    sizes: Sequence[tuple[float, float]],
    bounds: Box,
    obstacles: Sequence[Box] = (),
) -> list[tuple[float, float] | None]:
    """Greedy label placement: a position for each label that overlaps no other.

    Each label (``sizes[i]``: width, height in pixels) is tried around its point
    (``anchors[i]``) at the offsets of :data:`_PLACEMENTS`, nearest first, and takes
    the first spot inside ``bounds`` that overlaps no label already placed and no
    obstacle (the markers). Returns each label's lower-left corner, or None where no
    spot is free (the caller labels that point another way).
    """
    placed: list[Box] = list(obstacles)
    out: list[tuple[float, float] | None] = []
    for (ax_, ay), (w, h) in zip(anchors, sizes, strict=True):
        spot = None
        for dist in _DISTANCES_PX:
            for fx, fy in _PLACEMENTS:
                x0 = ax_ + fx * w + (dist if fx >= 0 else -dist)
                y0 = ay + fy * h + (dist if fy >= 0 else -dist if fy <= -1 else 0.0)
                box = (x0, y0, x0 + w, y0 + h)
                if _inside(box, bounds) and not any(_overlaps(box, b) for b in placed):
                    spot = (x0, y0)
                    break
            if spot is not None:
                break
        if spot is not None:
            placed.append((spot[0], spot[1], spot[0] + sizes[len(out)][0],
                           spot[1] + sizes[len(out)][1]))
        out.append(spot)
    return out


def _draw_points(ax: Any, points: Sequence[dict[str, Any]], y_key: str) -> list[Any]:
    """Markers, above-roof rings and placed labels; returns the label artists.

    Labels are placed by :func:`place_labels` once the axes are laid out; a point
    whose name does not fit gets a number instead, and the numbers are spelled out
    in a box beside the chart, so no two labels overlap.
    """
    fig = ax.figure
    drawn: list[tuple[float, float, str]] = []
    for p in points:
        x, y = p.get("intensity_flop_per_byte"), p.get(y_key)
        if not x or not y or x <= 0 or y <= 0:
            continue
        marker = "o" if p["kind"] == "op" else ("*" if p.get("group") == "total" else "s")
        ax.scatter([x], [y], marker=marker, s=60 if marker == "*" else 28,
                   color=_colour(p.get("precision")), edgecolors="black", linewidths=0.4,
                   zorder=3)
        if p.get("above_roof"):
            ax.scatter([x], [y], marker="o", s=160, facecolors="none", edgecolors="red",
                       linewidths=1.4, zorder=4)
        drawn.append((float(x), float(y), str(p.get("short_label") or p["label"])))
    if not drawn:
        return []
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    anchors = [tuple(to_px((x, y))) for x, y, _ in drawn]
    bbox = ax.get_window_extent(renderer)
    bounds = (bbox.x0, bbox.y0, bbox.x1, bbox.y1)
    marks = [(a[0] - 4, a[1] - 4, a[0] + 4, a[1] + 4) for a in anchors]

    def measure(texts: Sequence[str]) -> list[tuple[float, float]]:
        sizes = []
        for text in texts:
            t = ax.text(0, 0, text, fontsize=6)
            ext = t.get_window_extent(renderer)
            sizes.append((ext.width + 1.0, ext.height + 1.0))
            t.remove()
        return sizes

    sizes = measure([t for _, _, t in drawn])
    spots = place_labels(anchors, sizes, bounds, marks)
    artists: list[Any] = []
    placed_boxes: list[Box] = list(marks) + [
        (s_[0], s_[1], s_[0] + w, s_[1] + h)
        for s_, (w, h) in zip(spots, sizes, strict=True) if s_ is not None
    ]
    numbered = [i for i, s_ in enumerate(spots) if s_ is None]
    num_spots = place_labels([anchors[i] for i in numbered],
                             measure([str(n + 1) for n in range(len(numbered))]), bounds,
                             placed_boxes)
    inverse = ax.transData.inverted().transform
    for (_x, _y, text), spot in zip(drawn, spots, strict=True):
        if spot is not None:
            artists.append(ax.text(*inverse(spot), text, fontsize=6, zorder=5,
                                   ha="left", va="bottom"))
    legend_lines = []
    for n, (i, spot) in enumerate(zip(numbered, num_spots, strict=True), start=1):
        text = drawn[i][2]
        legend_lines.append(f"{n}: {text}")
        if spot is not None:
            artists.append(ax.text(*inverse(spot), str(n), fontsize=6, zorder=5,
                                   ha="left", va="bottom", color="darkred"))
    if legend_lines:
        fig.text(0.995, 0.01, "\n".join(legend_lines[:40]), fontsize=5, ha="right",
                 va="bottom", family="monospace")
    return artists


def plot_roofline(
    points: Sequence[dict[str, Any]],
    roofs: Sequence[dict[str, Any]],
    paths: Sequence[str | Path],
    *,
    title: str = "Roofline",
) -> list[Any]:
    """Achieved FLOP/s vs arithmetic intensity under the measured roofs; saved to ``paths``.

    Circles are operators, squares op kinds of a model step, stars whole steps;
    colours are precisions, line styles devices. Points above their roof get a red
    ring and a note with the likely reason. Labels are placed so none overlaps
    another (see :func:`place_labels`). Returns the label text artists.
    """
    fig = _new_figure()
    ax = fig.add_subplot(1, 1, 1)
    xs = [p.get("intensity_flop_per_byte") for p in points]
    xs += [r.get("ridge_flop_per_byte") for r in roofs]
    x_lo, x_hi = _limits([x for x in xs if x], (1e-2, 1e4))
    ys = [p.get("achieved_flop_per_s") for p in points]
    ys += [r.get("peak_flop_per_s") for r in roofs]
    y_lo, y_hi = _limits([y for y in ys if y], (1e8, 1e15))
    _draw_roofs(ax, roofs, x_lo, x_hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte, minimum bytes)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    if not points and not roofs:
        ax.text(0.5, 0.5, "no roofline data yet:\naccelbench peaks --measure; accelbench ops",
                transform=ax.transAxes, ha="center", va="center", fontsize=11)
    if roofs:
        ax.legend(fontsize=7, loc="lower right")
    above = sum(1 for p in points if p.get("above_roof"))
    if above:
        fig.text(0.01, 0.01, f"red rings: {above} point(s) above their measured roof: "
                 f"{ABOVE_ROOF_REASON}", fontsize=7, color="red", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03 if above else 0, 1, 1))
    labels = _draw_points(ax, points, "achieved_flop_per_s")  # after the layout is final
    for path in paths:
        fig.savefig(str(path))
    return labels


def plot_energy_roofline(
    points: Sequence[dict[str, Any]],
    roofs: Sequence[dict[str, Any]],
    paths: Sequence[str | Path],
    *,
    title: str = "Energy roofline",
) -> None:
    """FLOP per joule vs intensity; roofs are the FLOP roofs divided by the mean measured power.

    A roof here is what the device would reach per joule if it ran on its
    roofline at the average power its training runs drew.
    """
    fig = _new_figure()
    ax = fig.add_subplot(1, 1, 1)
    x_lo, x_hi = _limits([p["intensity_flop_per_byte"] for p in points], (1e-1, 1e3))
    powers: dict[tuple[str, str], list[float]] = {}
    for p in points:
        if p.get("avg_power_w"):
            powers.setdefault(("", p["device"]), []).append(float(p["avg_power_w"]))
    scale = {k: sum(v) / len(v) for k, v in powers.items()}
    # Energy roofs are per device (power is not per host in the results), so hosts merge.
    dev_roofs = [dict(r, hostname="") for r in roofs if ("", r["device"]) in scale]
    y_vals = [p["flop_per_j"] for p in points]
    y_vals += [(r.get("peak_flop_per_s") or 0) / scale[("", r["device"])] for r in dev_roofs]
    y_lo, y_hi = _limits(y_vals, (1e6, 1e12))
    _draw_roofs(ax, dev_roofs, x_lo, x_hi, scale=scale, unit="FLOP/J")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("FLOP per joule")
    ax.set_title(title + (" (roofs at mean measured power)" if dev_roofs else ""))
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    fig.tight_layout()
    _draw_points(ax, points, "flop_per_j")  # after the layout is final
    for path in paths:
        fig.savefig(str(path))
