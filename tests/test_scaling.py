"""The scaling suite's cases and the report's scaling section (figure + table).

The computation runs on synthetic results saved into a real SQLite store and read back
(their step times are chosen, so the expected efficiencies are known); the report is
rendered by the real CLI and opened in headless Chromium, as in test_report.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from accelbench import api
from accelbench.errors import ConfigError
from accelbench.planning.suites import SuiteContext, get_suite, scaling_ranks
from accelbench.report import scaling
from accelbench.result import EnergyReading, Result
from accelbench.spec import RunSpec, Topology
from accelbench.stats import compute_stats
from accelbench.store import ResultFilter, open_store
from tests.conftest import run_cli
from tests.test_report import inspect_page

BATCH = 8


def _result(rid: str, ranks: int, step_s: float, *, energy_j_per_sample: float | None = None,
            workload: str = "lstm", finished: str = "2026-01-01T00:00:00.000+00:00",
            host: str = "node1", noisy: bool = False) -> Result:
    """A stored-shape record of a case at ``ranks`` ranks whose steps take ``step_s``."""
    topo = Topology(nproc_per_node=ranks, dist_backend="gloo" if ranks > 1 else "auto")
    spec = RunSpec(workload=workload, size="tiny", batch_size=BATCH, precision="fp32",
                   topology=topo)
    times = tuple(step_s * (1 + 0.01 * (i % 3 - 1)) for i in range(9))
    samples = BATCH * ranks  # weak scaling: global batch
    energy = ()
    if energy_j_per_sample is not None:
        energy = (EnergyReading(device="cpu", scope="cpu-package", source="counter",
                                energy_j=energy_j_per_sample * samples * 9,
                                energy_j_per_sample=energy_j_per_sample,
                                avg_power_w=energy_j_per_sample * samples / step_s),)
    return Result(
        id=rid, spec=spec, status="ok", sample_unit="sentence", samples_per_step=samples,
        stats=compute_stats(times, samples, trim_fraction=0.0, stop_reason="iterations"),
        iteration_times_s=times, energy=energy,
        machine={"hostname": host, "cpu": {"model": "Test CPU"}, "gpus": []},
        noise={"flagged": noisy, "reasons": ["test"] if noisy else []},
        ranks={"world_size": ranks, "nnodes": 1, "nproc_per_node": ranks} if ranks > 1 else {},
        suite_id="scaling-test", started_at=finished, finished_at=finished,
    )


def _fsdp(rid: str, ranks: int, step_s: float, memory: tuple[int, ...], finished: str
          ) -> Result:
    """:func:`_result` trained under ``--parallel fsdp``, each rank's peak ``memory``."""
    r = _result(rid, ranks, step_s, finished=finished)
    spec = dataclasses.replace(r.spec, topology=dataclasses.replace(r.spec.topology,
                                                                    parallel="fsdp"))
    per_rank = [{"rank": i, "peak_memory_bytes": m} for i, m in enumerate(memory)]
    return dataclasses.replace(r, spec=spec, ranks={
        **r.ranks, "parallel": "fsdp", "mesh": {"dp": ranks, "tp": 1}, "per_rank": per_rank})


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """lstm at 1, 2, 4 ranks (steps 0.10, 0.125, 0.20 s: efficiencies 1, 0.8, 0.5), a
    noisy newer 2-rank run that must not win, a newer FSDP run at 2 ranks (another mode:
    not DDP's point), a transformer at one rank count only, and an lstm on another host
    without a 1-rank run."""
    db = tmp_path / "scaling.db"
    with open_store(str(db)) as st:
        st.save(_result("one", 1, 0.10, energy_j_per_sample=2.0))
        st.save(_result("two", 2, 0.125, energy_j_per_sample=2.5))
        st.save(_result("two-noisy", 2, 0.5, noisy=True,
                        finished="2026-01-02T00:00:00.000+00:00"))
        st.save(_result("four", 4, 0.20, energy_j_per_sample=4.0))
        st.save(_fsdp("fsdp-two", 2, 0.15, (3 * 2**30, 2 * 2**30),
                      finished="2026-01-03T00:00:00.000+00:00"))
        st.save(_result("tr-one", 1, 0.3, workload="transformer"))
        st.save(_result("other-2", 2, 0.1, host="node2"))
        st.save(_result("other-4", 4, 0.1, host="node2"))
    return db


def test_efficiency_from_stored_results(stored: Path) -> None:
    with open_store(str(stored)) as st:
        results = st.query(ResultFilter())
    series = {s.label: s for s in scaling.scaling_series(results)}
    assert len(series) == 2  # transformer has one rank count: no series
    main = next(s for label, s in series.items() if "@node1" in label)
    assert [p.ranks for p in main.points] == [1, 2, 4]
    assert [p.result_id for p in main.points] == ["one", "two", "four"]  # quiet beats newer
    t1 = BATCH / 0.10
    for p, step_s, eff in zip(main.points, (0.10, 0.125, 0.20), (1.0, 0.8, 0.5), strict=True):
        assert p.samples_per_s == pytest.approx(BATCH * p.ranks / step_s, rel=1e-6)
        assert p.ideal_samples_per_s == pytest.approx(p.ranks * t1, rel=1e-6)
        assert p.efficiency == pytest.approx(eff, rel=1e-6)
    assert [p.energy_j_per_sample for p in main.points] == pytest.approx([2.0, 2.5, 4.0])
    other = next(s for label, s in series.items() if "@node2" in label)
    # No 1-rank run on that host: throughput shown, no efficiency made up.
    assert other.baseline is None
    assert all(p.efficiency is None and p.ideal_samples_per_s is None for p in other.points)
    rows = scaling.table_rows([main])
    assert [r["efficiency"] for r in rows] == ["100%", "80%", "50%"]
    assert rows[0]["energy"] == "2 J"


def test_the_by_mode_table_groups_a_case_by_parallel_mode_and_ranks(stored: Path) -> None:
    """Only the case with a sharded record; one row per mode x ranks; memory per rank,
    energy and collectives said, or said missing."""
    from accelbench.phases import Phases
    from accelbench.report import sharding_view

    with open_store(str(stored)) as st:
        results = st.query(ResultFilter())
    fold = sharding_view.ShardingFold()
    for r in results:
        fold.add(r)
    rows = sharding_view.mode_rows(fold.results())
    assert [(r["mode"], r["ranks"], r["id"]) for r in rows] == [
        ("one device", 1, "one"), ("ddp", 2, "two"), ("fsdp", 2, "fsdp-two"),
        ("ddp", 4, "four")]
    fsdp = rows[2]
    assert fsdp["mesh"] == "dp 2 x tp 1" and fsdp["memory"] == "max 3 GiB, min 2 GiB (2 ranks)"
    assert fsdp["energy"] == "unavailable" and fsdp["collectives"].startswith("not timed")
    assert rows[1]["memory"].startswith("unavailable") and rows[1]["energy"] == "2.5 J"
    assert float(fsdp["throughput"].split()[0]) == pytest.approx(2 * BATCH / 0.15, rel=1e-2)
    timed = dataclasses.replace(results[0], phases=Phases(
        phases=(), method="", attribution_steps=1, step_time_s=None, sum_rel_diff=None,
        collectives=({"rank": 0, "all_gather_s": 0.002, "reduce_scatter_s": 0.001,
                      "all_reduce_s": 0.0}, {"rank": 1, "all_gather_s": 0.004,
                                             "reduce_scatter_s": 0.001, "all_reduce_s": 0.0})))
    assert sharding_view.collective_s(timed) == pytest.approx(0.005)


def test_an_fsdp_tp_record_is_a_series_of_its_own() -> None:
    """A record with ``--tp`` (fsdp+tp): the series key keeps its mode without building a
    Topology that --tp's check would refuse alone (the report stopped on such a store)."""
    two = _result("ftp", 2, 0.1)
    ftp = dataclasses.replace(two, spec=dataclasses.replace(two.spec, topology=Topology(
        nproc_per_node=2, dist_backend="gloo", parallel="fsdp+tp", tp=2)))
    fold = scaling.ScalingFold()
    for r in (_result("one", 1, 0.1), two, ftp):
        fold.add(r)
    assert len(fold.results()) == 3
    assert [len(s.points) for s in scaling.scaling_series(fold.results())] == [2]


def test_report_shows_the_scaling_section_in_a_browser(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = run_cli("report", "--out", str(out), "--no-reference", db=stored)
    assert proc.returncode == 0, proc.stderr
    html = (out / "index.html").read_text()
    assert 'id="scaling-table"' in html
    assert (out / "figures" / "scaling.png").stat().st_size > 10_000
    md = (out / "summary.md").read_text()
    assert "## Scaling with device count" in md and "80%" in md
    assert 'id="sharding-table"' in html
    assert "## Parallel modes: throughput, memory per rank, energy" in md
    assert "max 3 GiB, min 2 GiB (2 ranks)" in md
    page = inspect_page((out / "index.html").as_uri())
    assert page["errors"] == []
    assert all(img["ok"] for img in page["images"]), page["images"]
    assert any("Scaling with device count" in img["alt"] or "ranks" in img["alt"]
               for img in page["images"])
    text = page["text"]
    assert "Scaling with device count" in text
    assert "80%" in text and "50%" in text
    assert "Parallel modes" in text and "max 3 GiB" in text


def test_report_says_how_to_get_a_scaling_section(tmp_path: Path) -> None:
    db = tmp_path / "one.db"
    with open_store(str(db)) as st:
        st.save(_result("one", 1, 0.1))
    proc = run_cli("report", "--out", str(tmp_path / "r"), "--no-reference", db=db)
    assert proc.returncode == 0, proc.stderr
    assert "accelbench suite scaling" in (tmp_path / "r" / "index.html").read_text()


def _ctx(**kw: object) -> SuiteContext:
    base = {"device": "cpu", "frameworks": ("torch",), "supported": {"torch": ("fp32",)},
            "size": "tiny", "workloads": ("lstm",)}
    return SuiteContext(**{**base, **kw})  # type: ignore[arg-type]


def test_scaling_rank_counts() -> None:
    assert scaling_ranks(_ctx()) == [1, 2]  # a CPU: two ranks
    assert scaling_ranks(_ctx(device="cuda:0", device_count=8)) == [1, 2, 4, 8]
    assert scaling_ranks(_ctx(device="cuda:0", device_count=6)) == [1, 2, 4, 6]
    assert scaling_ranks(_ctx(device="cuda:0", device_count=1)) == [1]
    assert scaling_ranks(_ctx(max_ranks=3)) == [1, 2, 3]
    cases = get_suite("scaling").cases(_ctx(device="cuda:0", device_count=4))
    assert [c.topology.nproc_per_node for c in cases if c.topology] == [1, 2, 4]
    assert {(c.workload, c.batch_size) for c in cases} == {("lstm", cases[0].batch_size)}


def test_scaling_plans_one_case_per_rank_count() -> None:
    cases = api.plan_suite("scaling", workloads=["lstm"], max_ranks=4)
    assert [c.spec.topology.world_size for c in cases] == [1, 2, 4]
    assert len({c.spec.case_key() for c in cases}) == 3
    # Same per-rank batch; the global batch grows with the ranks.
    assert len({c.spec.batch_size for c in cases}) == 1
    assert [c.samples_per_step for c in cases] == [cases[0].spec.batch_size * n
                                                   for n in (1, 2, 4)]
    base = dataclasses.replace(cases[2].spec, topology=Topology())
    assert base.case_key() == cases[0].spec.case_key()


@pytest.mark.parametrize("workloads", [[], ["lstm", "transformer"]])
def test_scaling_needs_exactly_one_workload(workloads: list[str]) -> None:
    with pytest.raises(ConfigError, match="exactly one --workload"):
        api.plan_suite("scaling", workloads=workloads)


def test_scaling_cli_errors_are_one_line(tmp_path: Path) -> None:
    proc = run_cli("suite", "scaling", "--dry-run", db=tmp_path / "x.db")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--workload" in proc.stderr
    proc = run_cli("suite", "scaling", "--workload", "lstm", "--max-ranks", "0", "--dry-run",
                   db=tmp_path / "x.db")
    assert proc.returncode == 2
    proc = run_cli("suite", "scaling", "--workload", "lstm", "--max-ranks", "3", "--dry-run",
                   db=tmp_path / "x.db")
    assert proc.returncode == 0, proc.stderr
    assert "cpu x3" in proc.stdout and "cpu x2" in proc.stdout
