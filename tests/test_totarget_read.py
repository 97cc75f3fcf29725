"""Reading runs to a target back: ``results to-target``, ``compare`` of two groups, the
report's section and the export. The records are built directly and stored in a real
SQLite store (no training: that is tests/test_totarget.py's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.cli import main
from accelbench.store import open_store
from accelbench.totarget.outcome import EvalPoint, RunOutcome
from accelbench.totarget.recipes import recipe_for
from accelbench.totarget.record import Energy, ToTargetRecord

TARGET = recipe_for("transformer", "tiny").auto_target()


def make_group(group: str, times: list[float | None], *, power_w: float | None = None,
               workload: str = "transformer", target: float = TARGET,
               samples_per_s: float = 500.0) -> list[ToTargetRecord]:
    """One group of runs: a time per seed (None: hit its cap), four evaluations each."""
    recipe = recipe_for(workload, "tiny")
    energy = (Energy(source="unavailable", boundary="", reason="no sensor here")
              if power_w is None else Energy(source="estimate: --cpu-tdp-w x training time",
                                             boundary="cpu package", power_w=power_w))
    out = []
    for seed, t in enumerate(times):
        end = t if t is not None else 60.0
        points = tuple(EvalPoint(samples=int(samples_per_s * end * k / 4), time_s=end * k / 4,
                                 metric=2.0 - (2.0 - (TARGET - 0.01 if t else 1.2)) * k / 4,
                                 train_loss=2.0 - 0.2 * k) for k in range(1, 5))
        status = "reached" if t is not None else "not_reached"
        outcome = RunOutcome(seed=seed, status=status, reason="r", startup_s=0.1, time_s=end,
                             samples=points[-1].samples, eval_s=0.05 * end, points=points)
        out.append(ToTargetRecord(id=f"{group}{seed:02d}", group_id=group,
                                  created_at=f"2026-12-06T23:0{len(group) % 10}:{seed:02d}Z",
                                  framework="torch", recipe=recipe, target=target,
                                  eval_every=512, outcome=outcome, energy=energy))
    return out


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("tt") / "r.db")
    st = open_store(path)
    st.save_totarget(make_group("aaaa000011112222", [10.0, 11.0, 12.0, 10.5, 11.5],
                                power_w=20.0))
    st.save_totarget(make_group("bbbb000011112222", [5.0, 5.5, 6.0, 5.2, None],
                                power_w=20.0))
    st.save_totarget(make_group("cccc000011112222", [4.0, 4.2], power_w=None))
    st.save_totarget(make_group("dddd000011112222", [4.0, 4.2, 4.4], target=1.0,
                                power_w=20.0))
    st.close()
    return path


def test_results_to_target_lists_groups_and_shows_one(
        db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "results", "to-target"]) == 0
    listing = capsys.readouterr().out
    assert "bbbb000011112222  transformer tiny torch: 4/5 reached" in listing
    assert "4 group(s)" in listing
    assert main(["--db", db, "results", "to-target", "--workload", "lstm"]) == 0
    assert "no runs to a target" in capsys.readouterr().out
    assert main(["--db", db, "results", "to-target", "bbbb"]) == 0
    shown = capsys.readouterr().out
    assert "seed 0: reached; samples-to-target 2500, time-to-target 5 s, energy-to-target " \
           "100 J +- 50% (estimate" in shown  # a TDP estimate's stated model error
    assert "seed 4: not_reached; samples-to-target -, time-to-target -" in shown
    assert "4/5 reached the target" in shown and "time-to-target score 5.57 s" in shown
    assert main(["--db", db, "results", "to-target", "cccc"]) == 0
    assert "energy-to-target unavailable (no sensor here)" in capsys.readouterr().out
    from accelbench.report.totarget import group_lines

    big = group_lines(make_group("eeee000011112222", [10.0], samples_per_s=5000.0))
    assert "samples-to-target 50000, time-to-target 10 s" in big[1]  # never 5e+04
    assert main(["--db", db, "results", "to-target", "bbbb", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["runs"][0]["outcome"]["points"]) == 4
    assert data["seeds"][4]["time_to_target_s"] is None


@pytest.mark.parametrize(("argv", "says"), [
    (["results", "to-target", "ffff"], "no to-target group id starts with 'ffff'"),
    (["results", "to-target", "aaaa", "--csv"], "--csv applies to the list"),
    (["results", "to-target", "aaaa", "--workload", "lstm"], "not to one group"),
    (["results", "to-target", "--device", "cpu"], "--device applies to the list of results"),
    (["compare", "aaaa", "dddd"], "(target 0.9367 vs 1)"),
    (["compare", "aaaa", "device=cpu"], "'aaaa' is a to-target group and 'device=cpu' is not"),
    (["compare", "aaaa", "bbbb", "--wide"], "--wide applies to results"),
    (["compare", "device=cpu", "device=cuda:0", "--across-recipes"],
     "--across-recipes applies to two to-target groups"),
])
def test_bad_input_is_one_line_and_exit_2(db: str, argv: list[str], says: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err


def test_compare_groups_ratios_with_cis(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", db, "compare", "aaaa", "bbbb", "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    # means of the reached runs: B 5.425 s over A 11 s; energy is 20 W x time: the same ratio
    assert c["time_to_target"]["value"] == pytest.approx(5.425 / 11.0)
    assert c["energy_to_target"]["value"] == pytest.approx(5.425 / 11.0)
    assert c["samples_to_target"]["value"] == pytest.approx(5.425 / 11.0, rel=1e-3)
    lo, hi = c["time_to_target"]["ci95"]
    assert lo < 5.425 / 11.0 < hi < 1.0 and c["time_to_target"]["significant"] is True
    # Energy is 20 W x time, so its seed bootstrap is the time's, widened by both sides'
    # 50% estimate bounds as worst cases: (lo x 0.5 / 1.5, hi x 1.5 / 0.5).
    elo, ehi = c["energy_to_target"]["ci95"]
    assert elo == pytest.approx(lo * 0.5 / 1.5) and ehi == pytest.approx(hi * 1.5 / 0.5)
    assert c["energy_to_target"]["significant"] is False
    assert c["reached"] == {"a": 5, "b": 4}
    assert any("1 of 5 runs did not reach" in n for n in c["notes"])
    assert main(["--db", db, "compare", "aaaa", "cccc"]) == 0
    text = capsys.readouterr().out
    assert "5 / 2 runs reached the target: a CI needs 3 on each side" in text
    assert "energy-to-target B/A: unavailable (energy unavailable on B (seed 0" in text
    assert main(["--db", db, "compare", "aaaa", "dddd", "--across-recipes", "--csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("figure,ratio_b_over_a") and len(rows) == 4


def test_report_section_tables_and_curves(db: str, tmp_path: Path) -> None:
    from tests.test_report import inspect_page

    out = tmp_path / "rep"
    # Only runs to a target in the store: the report is written for them alone.
    assert main(["--db", db, "report", "--out", str(out)]) == 0
    figures = {p.name for p in (out / "figures").iterdir()}
    # Groups in order aaaa (000) .. dddd (003) (same time); cccc has no energy: time only.
    assert {"totarget_000_time.svg", "totarget_000_energy.svg", "totarget_002_time.svg"
            } <= figures and "totarget_002_energy.svg" not in figures and len(figures) == 14
    md = (out / "summary.md").read_text()
    section = md[md.index("## Training to a target"):]
    assert "| 4 | not\\_reached | - | - | - | 1.2 | 4 |" in section
    assert "| 0 | reached | 2500 | 5 s | 100 J +- 50% | 0.9267 | 4 |" in section
    assert "no curve against energy: energy unavailable (no sensor here)" in section
    svg = (out / "figures" / "totarget_000_energy.svg").read_text()
    assert "target 0.9367" in svg and "energy (J)" in svg
    page = inspect_page((out / "index.html").as_uri())
    assert page["errors"] == []
    curves = [i for i in page["images"] if "held-out loss against" in i["alt"]]
    assert len(curves) == 7 and all(i["ok"] for i in curves), page["images"]
    text = page["text"]
    assert "Training to a target" in text and "samples-to-target" in text
    # Each point's energy bound: the estimate's 50%, drawn as bars and said in the caption.
    assert "bars: each point's energy 95% bound, +- 50% (" in text
    # The report's filters: workload/size/framework select groups; a result-only one
    # leaves the section out, saying why.
    assert main(["--db", db, "report", "--out", str(tmp_path / "r2"), "--workload",
                 "resnet50"]) == 2  # no results and no groups: nothing to report
    import shutil

    from tests.test_store import make_result

    mixed = str(tmp_path / "mixed.db")  # the shared store stays as it is
    shutil.copy(db, mixed)
    with open_store(mixed) as st:
        st.save(make_result("ee00ffff0000"))
    assert main(["--db", mixed, "report", "--out", str(tmp_path / "r3"), "--device",
                 "cpu"]) == 0
    md3 = (tmp_path / "r3" / "summary.md").read_text()
    assert "runs to a target left out: --device filters results" in md3
    assert "## Training to a target" not in md3


def test_export_to_target_every_point_in_each_format(db: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import csv
    import io

    import jsonschema

    from accelbench.report.schema import shipped_schema

    assert main(["--db", db, "export", "--format", "json", "--to-target"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, json.loads(shipped_schema()))
    assert doc["cases"] == [] and len(doc["totarget_runs"]) == 15
    assert len(doc["totarget_points"]) == 15 * 4
    runs = {r["run_id"]: r for r in doc["totarget_runs"]}
    assert runs["bbbb00001111222200"]["energy_to_target_j"] == pytest.approx(100.0)
    assert runs["bbbb00001111222204"]["time_to_target_s"] is None  # not reached: null
    assert runs["cccc00001111222200"]["energy_to_target_j"] is None  # unavailable: null
    assert runs["cccc00001111222200"]["energy_reason"] == "no sensor here"
    pt = [p for p in doc["totarget_points"] if p["run_id"] == "aaaa00001111222200"]
    assert [p["time_s"] for p in pt] == [2.5, 5.0, 7.5, 10.0]
    assert [p["energy_j"] for p in pt] == [50.0, 100.0, 150.0, 200.0]
    assert [p["energy_rel_u95"] for p in pt] == [0.5] * 4  # the estimate's model error
    unavailable = [p for p in doc["totarget_points"] if p["run_id"] == "cccc00001111222200"]
    assert [p["energy_rel_u95"] for p in unavailable] == [None] * 4
    # Filters: workload/size/framework apply; a result-only filter is refused.
    assert main(["--db", db, "export", "--format", "csv", "--to-target",
                 "--workload", "lstm"]) == 0
    assert capsys.readouterr().out.count("\n") == 1  # the header alone
    assert main(["--db", db, "export", "--format", "csv", "--to-target",
                 "--device", "cpu"]) == 2
    assert "--device filters results, not runs to a target" in capsys.readouterr().err
    assert main(["--db", db, "export", "--format", "csv", "--to-target"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 60 and rows[0]["point_metric"] and rows[0]["workload"] == "transformer"
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    assert main(["--db", db, "export", "--format", "parquet", "--to-target", "--out",
                 str(tmp_path / "t.parquet")]) == 0
    assert pq.read_table(tmp_path / "t.parquet").num_rows == 15
    points = pq.read_table(tmp_path / "t.points.parquet").to_pylist()
    assert len(points) == 60 and points[0]["energy_j"] == pytest.approx(50.0)


def test_api_train_runs_stores_and_refuses_at_the_call(tmp_path: Path) -> None:
    from accelbench import api
    from accelbench.errors import ConfigError

    db = tmp_path / "api.db"
    with pytest.raises(TypeError, match=r"^train\(\) got an unknown option 'sedes' \(did "
                                        r"you mean 'seeds'"):
        api.train("transformer", sedes=2, db=str(db))
    with pytest.raises(ConfigError, match="--seeds"):
        api.train("transformer", seeds=0, db=str(db))
    with pytest.raises(ConfigError, match="no to-target recipe for lstm at size paper"):
        api.train("lstm", size="paper", db=str(db))
    assert not db.exists()  # bad input: nothing written
    seen: list[int] = []
    # One real run, capped at two evaluations: it ends not_reached with its best metric.
    trained = api.train("transformer", max_samples=64, eval_every=32, cpu_tdp_w=10.0,
                        db=str(db), on_run=lambda r: seen.append(r.outcome.seed))
    [rec] = trained.records
    assert seen == [0] and rec.outcome.status == "not_reached"
    assert len(rec.outcome.points) == 2 and trained.summary.reached == 0
    with open_store(str(db)) as st:
        [stored] = st.totarget_runs(group_id=trained.group_id)
    assert stored.to_dict() == rec.to_dict()


def test_compare_refuses_a_prefix_of_both_a_result_and_a_group(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_store import make_result

    db = str(tmp_path / "both.db")
    with open_store(db) as st:
        st.save(make_result("ab12ffff0000"))
        st.save_totarget(make_group("ab12000011112222", [1.0, 1.1, 1.2]))
        st.save_totarget(make_group("cd34000011112222", [1.0, 1.1, 1.2]))
    assert main(["--db", db, "compare", "ab12", "cd34"]) == 2
    assert "'ab12' starts both a result id and a to-target group id" in capsys.readouterr().err
    assert main(["--db", db, "compare", "ab120", "cd34"]) == 0  # the group alone
    assert "time-to-target B/A: 1 (95% CI" in capsys.readouterr().out


def test_export_carries_the_measured_split_per_boundary(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A run measured by sensors (device with an idle baseline, a node meter): the export
    gives the device's idle and dynamic energy, the node's, each point's measured energy,
    and the sweep setting; a figure not measured (the host) is null, never 0."""
    import dataclasses

    import jsonschema

    from accelbench.report.schema import shipped_schema
    from accelbench.totarget.record import SensorEnergy
    from accelbench.totarget.run import with_point_energy

    (rec,) = make_group("eeee000011112222", [10.0])
    pts = rec.outcome.points
    # The device's counter bounded at 2% (its idle baseline at 10%); the node meter's
    # record stored without a bound, as before bounds existed.
    sensors = (SensorEnergy(device="cpu", scope="cpu-package", boundary="device",
                            source="counter", energy_j=400.0, window_s=10.0, idle_power_w=10.0,
                            points_j=tuple(40.0 * p.time_s for p in pts), rel_95=0.02,
                            idle_rel_95=0.1, points_gap_j=(4.0, 4.0, 4.0, 0.0)),
               SensorEnergy(device="node", scope="node", boundary="node",
                            source="integrated_samples", energy_j=600.0, window_s=10.0,
                            idle_power_w=25.0))
    energy = Energy(source="counter", boundary="device cpu-package", measured_j=400.0,
                    sensors=sensors, idle_s=3.0)
    rec = dataclasses.replace(rec, outcome=with_point_energy(rec.outcome, energy),
                              energy=energy, sweep_id="sw1", settings={"cpu_power_limit_w": 20.0})
    db = str(tmp_path / "m.db")
    with open_store(db) as st:
        st.save_totarget([rec])
    assert main(["--db", db, "export", "--format", "json", "--to-target"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, json.loads(shipped_schema()))
    (run,) = doc["totarget_runs"]
    assert run["energy_to_target_j"] == pytest.approx(400.0)
    assert run["energy_idle_j"] == pytest.approx(100.0)
    assert run["energy_dynamic_j"] == pytest.approx(300.0)
    assert run["node_energy_j"] == pytest.approx(600.0)
    assert run["node_energy_dynamic_j"] == pytest.approx(350.0)
    assert run["host_energy_j"] is None
    assert run["sweep_id"] == "sw1" and json.loads(run["settings"]) == {"cpu_power_limit_w": 20.0}
    # Bounds (issue 44), read back from the store: 2% of 400 J; the dynamic 300 J's
    # half-width is 8 J plus 10% of the 100 J idle, 18 J = 6%; the node has none.
    assert run["energy_to_target_rel_u95"] == pytest.approx(0.02)
    assert run["energy_dynamic_rel_u95"] == pytest.approx(0.06)
    assert run["node_energy_rel_u95"] is None
    assert "rel_95" not in rec.to_dict()["energy"]["sensors"][1]  # absent, not null
    from accelbench.totarget.run import describe

    line = describe(rec)
    assert "energy 400 J +- 2% (" in line and "dynamic 300 J +- 6%" in line
    assert "node 600 J error bound unavailable" in line
    assert [p["energy_j"] for p in doc["totarget_points"]] == [100.0, 200.0, 300.0, 400.0]
    # Each point's bound: the window's 8 J half-width (it does not shrink with the prefix)
    # plus the 4 J between the samples around the point, over the point's energy:
    # 12/100, 12/200, 12/300, and the window's end (a sample there) 8/400.
    assert [p["energy_rel_u95"] for p in doc["totarget_points"]] == pytest.approx(
        [0.12, 0.06, 0.04, 0.02])
    # A point stored before point bounds: the key absent, the column null.
    old = rec.to_dict()
    assert old["outcome"]["points"][0]["energy_rel_95"] == pytest.approx(0.12)
    for point in old["outcome"]["points"]:
        del point["energy_rel_95"]
    del old["energy"]["sensors"][0]["points_gap_j"]
    back = ToTargetRecord.from_dict(old)
    assert back.outcome.points[0].energy_rel_95 is None
    assert back.energy.point_rel_95(0) is None and "points_gap_j" not in back.to_dict()[
        "energy"]["sensors"][0]
    # The report's energy curve states the points' bounds in its caption (its bars are
    # drawn in test_report_section_tables_and_curves).
    from accelbench.report.totarget import point_energy_rel_95
    from accelbench.report.totarget_section import bound_caption

    rels = [point_energy_rel_95(rec, k) or 0.0 for k in range(4)]
    assert "+- 2% to 12% (widest at early points" in bound_caption(rels)
    assert "error bound unavailable" in bound_caption([])
