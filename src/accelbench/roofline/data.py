"""Roofline data from the store: operator and model points, roofs, energy points.

Reads only the store (reports never rerun anything):

* operator points from ``op_results`` (latest record per host, device and case);
* model points from stored step breakdowns (one per op kind plus the whole
  step), see :mod:`accelbench.roofline.breakdown`;
* roofs from the measured peaks (compute per precision, memory bandwidth);
* energy points (FLOP per joule vs intensity) for training results that
  measured energy and have a breakdown of the same case for the intensity.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accelbench.opbench.precision import op_precision
from accelbench.roofline import ABOVE_ROOF_REASON
from accelbench.store.opbench import BANDWIDTH, Peak

if TYPE_CHECKING:
    from accelbench.store.db import Store

#: Columns of roofline.csv (every point has at least the first nine).
CSV_FIELDS = (
    "label", "kind", "group", "intensity_flop_per_byte", "achieved_flop_per_s",
    "peak_flop_per_s", "peak_bytes_per_s", "device", "precision", "bound", "hostname",
    "device_name", "flops", "bytes", "time_s", "pct_of_roof", "above_roof", "note",
    "source_id",
)
#: A point is above its roof when it beats it by more than this fraction (not rounding).
ABOVE_ROOF_TOLERANCE = 0.01


def _peak_index(peaks: Sequence[Peak]) -> dict[tuple[str, str, str], float]:
    return {(p.hostname, p.device, p.precision): p.value for p in peaks}


def _attach_roof(
    point: dict[str, Any], index: dict[tuple[str, str, str], float], hostname: str
) -> dict[str, Any]:
    try:
        prec = op_precision(point["precision"])
    except Exception:  # an unknown precision has no roof
        prec = point["precision"]
    peak = index.get((hostname, point["device"], prec))
    bw = index.get((hostname, point["device"], BANDWIDTH))
    point["peak_flop_per_s"] = peak
    point["peak_bytes_per_s"] = bw
    intensity = point["intensity_flop_per_byte"]
    bound = None
    pct = None
    roof = None
    if peak and bw and intensity:
        ridge = peak / bw
        bound = "memory" if intensity < ridge else "compute"
        roof = min(peak, intensity * bw)
    elif peak:
        roof = peak
    elif bw and intensity:
        roof = intensity * bw
    achieved = point.get("achieved_flop_per_s")
    if roof and achieved:
        pct = 100.0 * achieved / roof
    above = bool(roof and achieved and achieved > roof * (1.0 + ABOVE_ROOF_TOLERANCE))
    point["bound"] = bound
    point["pct_of_roof"] = pct
    point["roof_flop_per_s"] = roof
    point["above_roof"] = above
    point["note"] = ABOVE_ROOF_REASON if above else None
    return point


def op_points(store: Store, device: str | None = None) -> list[dict[str, Any]]:
    """Operator points: the latest ``ok`` record per host, device and case label."""
    index = _peak_index(store.query_peaks(device=device))
    seen: set[tuple[str, str, str]] = set()
    out = []
    for r in store.query_op_results(device=device, status="ok"):
        key = (r.hostname, r.device, r.case.label)
        if key in seen or not r.achieved_flop_per_s:
            continue
        seen.add(key)
        point = {
            "label": r.case.label,
            "short_label": r.case.short_label,
            "kind": "op",
            "group": r.case.op,
            "intensity_flop_per_byte": r.intensity_flop_per_byte,
            "achieved_flop_per_s": r.achieved_flop_per_s,
            "device": r.device,
            "precision": r.case.precision,
            "hostname": r.hostname,
            "device_name": r.device_name,
            "flops": r.flops,
            "bytes": r.min_bytes,
            "time_s": r.median_s,
            "source_id": r.id,
        }
        out.append(_attach_roof(point, index, r.hostname))
    return out


def latest_breakdowns(store: Store, device: str | None = None) -> list[list[dict[str, Any]]]:
    """Stored breakdowns (lists of rows), the latest per host, device and case."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in store.query_raw_op_rows(op="model", device=device):
        groups.setdefault(row["shape"]["group"], []).append(row)
    seen: set[tuple[Any, ...]] = set()
    out = []
    for rows in groups.values():  # rows come newest first, so groups do too
        s = rows[0]["shape"]
        key = (rows[0]["hostname"], rows[0]["device"], s["workload"], s["size"],
               s["batch_size"], rows[0]["precision"])
        if key in seen:
            continue
        seen.add(key)
        # Most time first, the whole step last (rows of a group share created_at).
        out.append(sorted(rows, key=lambda r: (r["shape"]["kind"] == "total",
                                               -(r["median_s"] or 0.0))))
    return out


def breakdown_summaries(store: Store, device: str | None = None) -> list[dict[str, Any]]:
    """Each latest stored breakdown as shares of its step time (kinds sum to the step).

    Breakdowns stored before the ``unattributed`` kind existed get it derived here
    (step time minus the kinds) and say that their step time was measured apart.
    """
    from accelbench.roofline.breakdown import STEP_TIME_METHOD, UNATTRIBUTED

    out = []
    for rows in latest_breakdowns(store, device):
        total = next((r for r in rows if r["shape"]["kind"] == "total"), None)
        if total is None or not total["median_s"]:
            continue
        s = total["shape"]
        step_s = float(total["median_s"])
        kinds = [(r["shape"]["kind"], float(r["median_s"] or 0.0)) for r in rows
                 if r["shape"]["kind"] != "total"]
        method = s.get("step_time_method")
        if not any(k == UNATTRIBUTED for k, _ in kinds):
            kinds.append((UNATTRIBUTED, max(0.0, step_s - sum(t for _, t in kinds))))
            method = method or ("older breakdown: step time measured apart from the profiled "
                                "operator times")
        out.append({
            "case": f"{s['workload']} {s['size']} b{s['batch_size']} {total['precision']}",
            "device": total["device"], "hostname": total["hostname"],
            "step_time_s": step_s, "step_time_method": method or STEP_TIME_METHOD,
            "unattributed_s": sum(t for k, t in kinds if k == UNATTRIBUTED),
            "kinds": [{"kind": k, "time_s": t, "share_of_step": t / step_s}
                      for k, t in kinds],
        })
    return out


def model_points(store: Store, device: str | None = None) -> list[dict[str, Any]]:
    """Model points: each stored breakdown's op kinds and its whole step (``total``)."""
    index = _peak_index(store.query_peaks(device=device))
    out = []
    for rows in latest_breakdowns(store, device):
        for row in rows:
            s = row["shape"]
            flops, nbytes, t = row["flops"], row["min_bytes"], row["median_s"]
            if not flops or not nbytes or not t:
                continue
            case = f"{s['workload']} {s['size']} b{s['batch_size']} {row['precision']}"
            point = {
                "label": f"{s['workload']} {s['kind']}" if s["kind"] != "total"
                else f"{s['workload']} (whole step)",
                "kind": "model",
                "group": s["kind"],
                "case": case,
                "intensity_flop_per_byte": flops / nbytes,
                "achieved_flop_per_s": flops / t,
                "device": row["device"],
                "precision": row["precision"],
                "hostname": row["hostname"],
                "device_name": row["device_name"],
                "flops": flops,
                "bytes": nbytes,
                "time_s": t,
                "flops_estimated": bool(s.get("flops_estimated")),
                "source_id": row["id"],
            }
            out.append(_attach_roof(point, index, row["hostname"] or ""))
    return out


def roofline_points(store: Store, device: str | None = None) -> list[dict[str, Any]]:
    """Every roofline point in the store: operators first, then model breakdowns.

    Each point has ``label``, ``kind`` (``op`` or ``model``),
    ``intensity_flop_per_byte`` (FLOPs / minimum bytes), ``achieved_flop_per_s``,
    ``peak_flop_per_s`` and ``peak_bytes_per_s`` (measured roofs of that host,
    device and precision; None when not measured), ``device`` and ``precision``;
    plus ``group`` (operator or op kind), ``bound`` (``memory``/``compute``),
    ``pct_of_roof``, ``hostname``, ``flops``, ``bytes``, ``time_s``, ``source_id``;
    and ``above_roof`` (achieved beats the roof by more than 1%) with ``note`` (the
    likely reason, :data:`ABOVE_ROOF_REASON`) where it does.
    """
    return op_points(store, device) + model_points(store, device)


def roofs(store: Store, device: str | None = None) -> list[dict[str, Any]]:
    """Measured roofs per host and device: compute peak per precision and bandwidth."""
    from accelbench.roofline.theoretical import theoretical_bytes_per_s, theoretical_flop_per_s

    by_dev: dict[tuple[str, str], dict[str, Any]] = {}
    for p in store.query_peaks(device=device):
        entry = by_dev.setdefault(
            (p.hostname, p.device),
            {"hostname": p.hostname, "device": p.device, "device_name": p.device_name,
             "peak_bytes_per_s": None, "compute": {}},
        )
        if p.precision == BANDWIDTH:
            entry["peak_bytes_per_s"] = p.value
        else:
            entry["compute"][p.precision] = p.value
    out = []
    for entry in by_dev.values():
        name = entry["device_name"]
        for prec, value in sorted(entry["compute"].items()):
            bw = entry["peak_bytes_per_s"]
            out.append({
                "hostname": entry["hostname"],
                "device": entry["device"],
                "device_name": name,
                "precision": prec,
                "peak_flop_per_s": value,
                "peak_bytes_per_s": bw,
                "ridge_flop_per_byte": value / bw if bw else None,
                "theoretical_flop_per_s": theoretical_flop_per_s(entry["device"], name, prec),
                "theoretical_bytes_per_s": theoretical_bytes_per_s(entry["device"], name),
            })
        if not entry["compute"] and entry["peak_bytes_per_s"]:
            out.append({
                "hostname": entry["hostname"], "device": entry["device"], "device_name": name,
                "precision": None, "peak_flop_per_s": None,
                "peak_bytes_per_s": entry["peak_bytes_per_s"], "ridge_flop_per_byte": None,
                "theoretical_flop_per_s": None,
                "theoretical_bytes_per_s": theoretical_bytes_per_s(entry["device"], name),
            })
    return out


def energy_points(store: Store, device: str | None = None) -> list[dict[str, Any]]:
    """FLOP per joule vs intensity for training results with measured energy.

    FLOPs per sample are the result's stored ``flop_per_sample`` (nothing is
    recounted, no model code runs); the intensity comes from a stored breakdown
    of the same workload, size, batch size, precision and device (results
    without one are left out).
    """
    from accelbench.store.db import ResultFilter

    totals: dict[tuple[Any, ...], dict[str, Any]] = {}
    for rows in latest_breakdowns(store, device):
        for row in rows:
            s = row["shape"]
            if s["kind"] == "total" and row["flops"] and row["min_bytes"]:
                key = (row["device"], s["workload"], s["size"], s["batch_size"],
                       row["precision"])
                totals.setdefault(key, row)
    if not totals:
        return []
    out = []
    for r in store.query(ResultFilter(status="ok", device=device)):
        e = r.energy_j_per_sample
        if not e:
            continue
        s = r.spec
        total = totals.get((s.device, s.workload, s.size, s.batch_size, s.precision))
        if total is None:
            continue
        flop = r.flop_per_sample
        if not flop:
            continue  # FLOPs were not counted for this result
        avg_power = r.summary()["avg_power_w"]
        out.append({
            "label": f"{s.workload} {s.size} b{s.batch_size} {s.precision}",
            "kind": "model",
            "intensity_flop_per_byte": total["flops"] / total["min_bytes"],
            "flop_per_j": flop / e,
            "energy_j_per_sample": e,
            "avg_power_w": avg_power,
            "achieved_flop_per_s": flop * r.samples_per_s if r.samples_per_s else None,
            "device": s.device,
            "precision": s.precision,
            "energy_source": r.summary()["energy_source"],
            "source_id": r.id,
        })
    return out


def to_csv(points: Sequence[dict[str, Any]]) -> str:
    """Points as CSV (columns :data:`CSV_FIELDS`)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_FIELDS), extrasaction="ignore")
    writer.writeheader()
    for p in points:
        writer.writerow({k: p.get(k) for k in CSV_FIELDS})
    return buf.getvalue()


def roofline_data(store: Store, device: str | None = None) -> dict[str, Any]:
    """Everything the roofline chart shows, as one JSON-ready object."""
    points = roofline_points(store, device)
    return {
        "points": points,
        "roofs": roofs(store, device),
        "energy_points": energy_points(store, device),
        "breakdowns": breakdown_summaries(store, device),
        "above_roof": {
            "count": sum(1 for p in points if p.get("above_roof")),
            "reason": ABOVE_ROOF_REASON,
        },
    }
