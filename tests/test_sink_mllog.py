"""``--mllog``: MLPerf-format lines through mlperf_logging, read back by its own parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlperf_logging.compliance_checker.mlp_parser import parse_file

from accelbench.sinks import SinkOptions, open_sinks
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.sink_fakes import POWER_W, powercap_tree, shadow_package
from tests.test_compare import make_result

RULESET = "6.0.0"


def _read(path: Path) -> list:
    lines, errors = parse_file(str(path), ruleset=RULESET)
    assert errors == []
    return lines


def _energy_from_log(lines: list, sensor: str) -> float:
    """Joules of one sensor's power_reading lines, integrated the way MLCommons' result
    summarizer does (each reading held since the previous line)."""
    start = next(ln.timestamp for ln in lines if ln.key == "power_measurement_start"
                 and ln.value["metadata"]["sensor"] == sensor)
    prev, joules = start, 0.0
    for ln in lines:
        if ln.key == "power_reading" and ln.value["metadata"]["sensor"] == sensor:
            joules += ln.value["value"] * (ln.timestamp - prev) / 1000
            prev = ln.timestamp
    return joules


def test_a_run_with_a_sampled_sensor_logs_its_power(tmp_path: Path) -> None:
    db, log = tmp_path / "r.db", tmp_path / "run.mllog"
    with powercap_tree(tmp_path) as root:
        p = run_cli("run", "lstm", "--size", "tiny", "--threads", "1", "--max-time", "1",
                    "--min-iterations", "3", "--target-ci", "0.5", "--no-idle",
                    "--mllog", str(log), db=db, ACCELBENCH_POWERCAP_ROOT=str(root))
    assert p.returncode == 0, p.stderr
    with open_store(str(db)) as st:
        [r] = st.query()
    lines = _read(log)
    keys = [ln.key for ln in lines]
    for key in ("submission_benchmark", "submission_division", "submission_org",
                "submission_platform", "submission_status", "init_start", "init_stop",
                "run_start", "power_measurement_start", "power_reading",
                "power_measurement_stop", "throughput", "run_stop"):
        assert key in keys, key
    assert keys.index("init_start") < keys.index("init_stop") <= keys.index("run_start")
    assert keys.index("run_start") < keys.index("power_measurement_start") < \
        keys.index("power_measurement_stop") < keys.index("run_stop")
    [series] = r.power_timeline.values()
    readings = [ln for ln in lines if ln.key == "power_reading"]
    assert len(readings) == len(series["t_s"]) >= 5
    start = next(ln for ln in lines if ln.key == "power_measurement_start")
    meta = start.value["metadata"]
    assert meta["rate_hz"] >= 1.0 and meta["unit"] == "W"
    assert meta["boundary"] == "host (inside the device energy boundary)"  # a CPU case
    mean_w = sum(ln.value["value"] for ln in readings) / len(readings)
    assert mean_w == pytest.approx(POWER_W, rel=0.15)
    [pkg] = r.primary_energy
    assert pkg.energy_j is not None and pkg.window_s is not None
    # MLCommons' way of integrating the lines gives the window's energy back.
    assert _energy_from_log(lines, meta["sensor"]) == pytest.approx(
        POWER_W * series["t_s"][-1], rel=0.2)
    [tput] = [ln for ln in lines if ln.key == "throughput"]
    assert r.stats is not None and tput.value["value"] == pytest.approx(r.stats.samples_per_s)
    [stop] = [ln for ln in lines if ln.key == "run_stop"]
    assert stop.value["metadata"]["status"] == "success"
    assert all(ln.value["metadata"].get("case_id") == r.id for ln in lines
               if ln.key in ("run_start", "run_stop"))


def test_a_suite_of_records_appends_one_block_each(tmp_path: Path) -> None:
    log = tmp_path / "suite.mllog"
    timeline = {"cuda:0": {"t_s": [0.0, 0.5, 1.0, 1.5], "power_w": [250.0, 260.0, 240.0,
                                                                     250.0]}}
    ok = make_result("gpu1", avg_power_w=250.0, timeline=timeline,
                     started="2020-01-01T00:00:00+00:00",
                     finished="2020-01-01T00:01:00+00:00")
    oom = make_result("oom1", status="oom", finished="2020-01-01T00:02:00+00:00")
    with open_sinks(SinkOptions(mllog=str(log))) as sinks:
        sinks.emit(ok)
        sinks.emit(oom)
    lines = _read(log)
    stops = [ln.value["metadata"] for ln in lines if ln.key == "run_stop"]
    assert [(s["case_id"], s["status"]) for s in stops] == [("gpu1", "success"),
                                                            ("oom1", "aborted")]
    assert stops[1]["accelbench_status"] == "oom"
    readings = [ln for ln in lines if ln.key == "power_reading"]
    assert [ln.value["value"] for ln in readings] == [250.0, 260.0, 240.0, 250.0]
    run_start = next(ln.timestamp for ln in lines if ln.key == "run_start")
    assert [ln.timestamp - run_start for ln in readings] == [0, 500, 1000, 1500]
    meta = next(ln.value["metadata"] for ln in lines if ln.key == "power_measurement_start")
    assert meta["boundary"] == "device (inside the device energy boundary)"
    assert meta["rate_hz"] == pytest.approx(2.0)
    div = next(ln for ln in lines if ln.key == "submission_division")
    assert div.value["value"] == "open" and "not an MLPerf submission" in \
        div.value["metadata"]["note"]
    [energy] = [ln for ln in lines if ln.key == "energy_j_per_sample"]
    assert energy.value["value"] == pytest.approx(ok.energy_j_per_sample)
    # Every line is strict JSON after the token.
    for raw in log.read_text().splitlines():
        assert raw.startswith(":::MLLOG ")
        json.loads(raw[len(":::MLLOG "):])


def test_a_log_in_a_missing_directory_is_refused_before_anything_runs(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--mllog", str(tmp_path / "no" / "x.log"),
                db=db)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        f"accelbench: error: --mllog {tmp_path / 'no' / 'x.log'}: {tmp_path / 'no'} does "
        "not exist"]
    assert not db.exists()


def test_a_missing_mlperf_logging_says_the_install_command(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("suite", "quick", "--workload", "lstm", "--mllog", str(tmp_path / "x.log"),
                db=db,
                PYTHONPATH=shadow_package(tmp_path, "mlperf_logging"))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "accelbench: error: --mllog needs the mlperf_logging package, which is not "
        "installed: pip install 'accelbench[mlperf]'"]
    assert not db.exists() and not (tmp_path / "x.log").exists()


def test_sink_options_check_their_values() -> None:
    assert SinkOptions().active() == ()
    assert SinkOptions(mllog="x", wandb=True).active() == ("mllog", "wandb")
    with pytest.raises(Exception, match="--pushgateway"):
        SinkOptions(pushgateway="localhost:9091")
    with pytest.raises(Exception, match="--mllog"):
        SinkOptions(mllog=" ")


def test_a_suite_logs_each_case_it_measures_once(tmp_path: Path) -> None:
    db, log = tmp_path / "r.db", tmp_path / "suite.mllog"
    args = ("suite", "quick", "--workload", "lstm", "--precision", "fp32", "--max-time",
            "0.3", "--no-energy", "--suite-id", "s1", "--mllog", str(log))
    p = run_cli(*args, db=db)
    assert p.returncode == 0, p.stderr
    with open_store(str(db)) as st:
        stored = st.query()
    stops = [ln.value["metadata"] for ln in _read(log) if ln.key == "run_stop"]
    assert [s["case_id"] for s in stops] == [r.id for r in stored] and len(stops) == 1
    assert stops[0]["suite_id"] == "s1"
    p = run_cli(*args, db=db)  # resumed: nothing left to measure, nothing sent again
    assert p.returncode == 0, p.stderr
    assert len([ln for ln in _read(log) if ln.key == "run_stop"]) == 1


def test_the_api_takes_sinks_as_keywords(tmp_path: Path) -> None:
    import accelbench

    log = tmp_path / "api.mllog"
    r = accelbench.run("lstm", size="tiny", max_time=0.3, energy=False, store=False,
                       mllog=str(log))
    [stop] = [ln for ln in _read(log) if ln.key == "run_stop"]
    assert stop.value["metadata"]["case_id"] == r.id
    with pytest.raises(TypeError, match="mlog"):
        accelbench.run("lstm", size="tiny", store=False, mlog=str(log))
