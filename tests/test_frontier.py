"""The throughput-energy frontier of a sweep, on synthetic results with known answers."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from accelbench.report.frontier import (
    FrontierPoint,
    compute_frontier,
    frontier_from_results,
    frontier_lines,
    point_from_result,
)
from accelbench.result import EnergyReading, Result
from accelbench.spec import DeviceSettings, RunSpec
from accelbench.stats import compute_stats

BATCH = 32


def sweep_result(rid: str, limit_w: float, step_s: float, power_w: float | None, *,
                 trials: Sequence[float] = (), jitter: float = 0.02,
                 status: str = "ok") -> Result:
    """One setting's record: times around ``step_s``; energy = power x step / batch."""
    rng = np.random.default_rng(int(limit_w))
    times = tuple(float(t) for t in step_s * (1 + jitter * rng.standard_normal(40)))
    spec = RunSpec(workload="resnet50", batch_size=BATCH, device="cuda:0",
                   settings=DeviceSettings(power_limit_w=limit_w))
    if power_w is None:
        energy = (EnergyReading(device="cuda:0", scope="gpu", source="unavailable",
                                note="no sensor on this GPU"),)
    else:
        per_sample = power_w * float(np.median(times)) / BATCH
        # ``trials``: each trial's energy per sample as a multiple of the window's.
        details = ({"trials": [{"energy_j_per_sample": per_sample * f} for f in trials]}
                   if trials else {})
        energy = (EnergyReading(device="cuda:0", scope="gpu", source="counter",
                                energy_j_per_sample=per_sample, avg_power_w=power_w,
                                details=details),)
    ok = status == "ok"
    return Result(
        id=rid, spec=spec, status=status,  # type: ignore[arg-type]
        sample_unit="image", samples_per_step=BATCH,
        stats=compute_stats(times, BATCH, trim_fraction=0.0, stop_reason="iterations")
        if ok else None,
        iteration_times_s=times if ok else (), energy=energy if ok else (),
        error=None if ok else "CUDA out of memory", started_at=f"2026-01-01T00:00:{rid}",
    )


def pt(label: str, tput: float, energy: float | None) -> FrontierPoint:
    return FrontierPoint(label=label, samples_per_s=tput, energy_j_per_sample=energy)


def test_dominated_points_excluded_and_picks() -> None:
    points = [
        pt("400", 1000.0, 2.0),   # fastest: on the frontier, time-optimal
        pt("350", 980.0, 1.6),    # within 10%: the budget pick
        pt("300", 900.0, 1.7),    # dominated by 350 (slower and costlier)
        pt("250", 850.0, 1.3),    # on the frontier
        pt("200", 600.0, 1.1),    # cheapest: energy-optimal
        pt("150", 500.0, 1.2),    # dominated by 200
        pt("nosensor", 700.0, None),
    ]
    fr = compute_frontier(points, max_slowdown=0.1)
    assert [p.label for p in fr.frontier] == ["400", "350", "250", "200"]
    assert {p.label for p in fr.points if not p.on_frontier} == {"300", "150", "nosensor"}
    assert fr.time_optimal is not None and fr.time_optimal.label == "400"
    assert fr.energy_optimal is not None and fr.energy_optimal.label == "200"
    assert fr.budget_pick is not None and fr.budget_pick.label == "350"
    # A wider budget reaches further down the frontier.
    assert compute_frontier(points, max_slowdown=0.2).budget_pick.label == "250"  # type: ignore[union-attr]
    assert compute_frontier(points, max_slowdown=0.0).budget_pick.label == "400"  # type: ignore[union-attr]
    assert [p.label for p in fr.without_energy] == ["nosensor"]


def test_equal_points_both_stay() -> None:
    fr = compute_frontier([pt("a", 10.0, 1.0), pt("b", 10.0, 1.0)])
    assert all(p.on_frontier for p in fr.points)


def test_bad_slowdown_refused() -> None:
    with pytest.raises(ValueError):
        compute_frontier([pt("a", 1.0, 1.0)], max_slowdown=1.0)


def test_cis_from_records() -> None:
    # 300 W: fast and costly; 200 W: 20% slower, 30% less power per step -> cheaper.
    fast = sweep_result("01", 300, 0.100, 300.0)
    slow = sweep_result("02", 200, 0.120, 175.0, trials=(0.97, 1.02, 1.0, 0.99, 1.03))
    none = sweep_result("03", 150, 0.200, None)
    failed = sweep_result("04", 100, 0.300, 100.0, status="oom")
    fr = frontier_from_results([fast, slow, none, failed], max_slowdown=0.1)
    by = {p.label: p for p in fr.points}
    assert set(by) == {"power_limit_w=300", "power_limit_w=200", "power_limit_w=150"}
    for p in (by["power_limit_w=300"], by["power_limit_w=200"]):
        lo, hi = p.samples_per_s_ci95  # type: ignore[misc]
        assert lo < p.samples_per_s < hi
        elo, ehi = p.energy_ci95  # type: ignore[misc]
        assert elo <= p.energy_j_per_sample <= ehi  # type: ignore[operator]
        assert elo < ehi
    # Energy CI from the trials where there are 3+, else from the step times.
    assert "5 energy trials" in by["power_limit_w=200"].energy_ci_method
    e200 = by["power_limit_w=200"]
    assert e200.energy_ci95[0] >= 0.97 * e200.energy_j_per_sample  # type: ignore[index,operator]
    assert e200.energy_ci95[1] <= 1.03 * e200.energy_j_per_sample  # type: ignore[index,operator]
    assert "step-time" in by["power_limit_w=300"].energy_ci_method
    # No energy is invented for the point without a sensor; it says why.
    nosensor = by["power_limit_w=150"]
    assert nosensor.energy_j_per_sample is None and nosensor.energy_ci95 is None
    assert "no sensor" in nosensor.why_no_energy and not nosensor.on_frontier
    assert fr.time_optimal.label == "power_limit_w=300"  # type: ignore[union-attr]
    assert fr.energy_optimal.label == "power_limit_w=200"  # type: ignore[union-attr]
    # 200 W is 17% slower: outside a 10% budget, so the pick is the fastest.
    assert fr.budget_pick.label == "power_limit_w=300"  # type: ignore[union-attr]
    assert compute_frontier(fr.points, max_slowdown=0.25).budget_pick.label == \
        "power_limit_w=200"  # type: ignore[union-attr]
    text = "\n".join(frontier_lines(fr))
    assert "no energy for power_limit_w=150: no sensor" in text
    assert "left out: power_limit_w=100: oom" in text
    assert fr.to_dict()["energy_optimal"] == "power_limit_w=200"


def test_point_needs_throughput() -> None:
    with pytest.raises(ValueError):
        point_from_result(sweep_result("05", 100, 0.3, 100.0, status="oom"))


def test_report_section(tmp_path: Path) -> None:
    from accelbench.report.html import build_report, write_report

    results = [sweep_result("11", 300, 0.100, 300.0), sweep_result("12", 200, 0.120, 175.0),
               sweep_result("13", 150, 0.200, None)]
    results = [dataclasses.replace(r, suite_id="sweep-a") for r in results]
    data = build_report(results, include_reference=False)
    assert data.charts["frontier"] is not None
    assert "Without an energy figure (not drawn): sweep-a" in data.charts["frontier"].caption
    rows = {r["setting"]: r for r in data.sweeps}
    assert rows["power_limit_w=300"]["pick"].startswith("time-optimal")
    assert "energy-optimal" in rows["power_limit_w=200"]["pick"]
    assert rows["power_limit_w=150"]["energy"] == "unavailable"
    write_report(data, tmp_path)
    html = (tmp_path / "index.html").read_text()
    assert 'id="frontier-table"' in html and "no sensor on this GPU" in html
    assert (tmp_path / "figures" / "frontier.png").is_file()


def test_recommend_names_the_settings() -> None:
    from accelbench.report.recommend import recommend

    results = [dataclasses.replace(r, suite_id="sweep-b") for r in (
        sweep_result("21", 300, 0.100, 300.0), sweep_result("22", 250, 0.105, 240.0),
        sweep_result("23", 200, 0.120, 175.0))]
    rec = recommend(results, "resnet50")
    line = next(n for n in rec.notes if n.startswith("device settings (sweep-b"))
    assert "fastest power_limit_w=300" in line and "energy-optimal power_limit_w=200" in line
    assert "least energy within 10% of the fastest: power_limit_w=250" in line
    # 240 W x 0.105 s vs 300 W x 0.100 s: 16% less energy, about 5% slower.
    assert re.search(r"\(16% less energy per sample, [45]% slower\)", line)
