"""Experiment trackers: ``--mlflow`` against a local SQLite MLflow store and ``--wandb`` in
W&B's offline mode, each read back through the library's own client or record format."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelbench.sinks import SinkOptions, open_sinks
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.sink_fakes import powercap_tree, shadow_package
from tests.test_compare import make_result

mlflow_tracking = pytest.importorskip("mlflow.tracking")
pytest.importorskip("wandb")


def _mlflow_runs(uri: str) -> list[Any]:
    client = mlflow_tracking.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("accelbench")
    assert exp is not None
    return list(client.search_runs([exp.experiment_id], order_by=["attributes.start_time"]))


def _artifact(uri: str, run_id: str, name: str) -> Any:
    import mlflow.artifacts

    return json.loads(mlflow.artifacts.load_text(
        mlflow_tracking.MlflowClient(tracking_uri=uri).get_run(run_id).info.artifact_uri
        + "/" + name))


def _wandb_records(wandb_dir: Path) -> Iterator[tuple[str, Any]]:
    """(kind, record) of every offline run's transaction log, in W&B's own protobuf (the
    log is leveldb's record format: 32 KiB blocks, 7-byte record headers)."""
    from wandb.proto import wandb_internal_pb2 as pb

    for path in sorted(wandb_dir.glob("wandb/offline-run-*/run-*.wandb")):
        data = path.read_bytes()
        assert data[:4] == b":W&B"
        i, pending = 7, b""
        while i + 7 <= len(data):
            if 32768 - i % 32768 < 7:
                i += 32768 - i % 32768
                continue
            _crc, length, kind = struct.unpack("<IHB", data[i:i + 7])
            if length == 0 and kind == 0:
                break
            chunk, i = data[i + 7:i + 7 + length], i + 7 + length
            pending = chunk if kind in (1, 2) else pending + chunk
            if kind in (1, 4):
                record = pb.Record()
                record.ParseFromString(pending)
                which = record.WhichOneof("record_type")
                yield which, getattr(record, which)


def test_one_run_is_logged_to_mlflow_and_wandb(tmp_path: Path) -> None:
    db, uri = tmp_path / "r.db", f"sqlite:///{tmp_path / 'mlflow.db'}"
    with powercap_tree(tmp_path) as root:
        p = run_cli("run", "lstm", "--size", "tiny", "--threads", "1", "--max-time", "1",
                    "--min-iterations", "3", "--target-ci", "0.5", "--no-idle", "--tag", "t1",
                    "--mlflow", uri, "--wandb", "--wandb-project", "bench", db=db,
                    ACCELBENCH_POWERCAP_ROOT=str(root), WANDB_MODE="offline",
                    WANDB_DIR=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "INFO" not in p.stderr  # MLflow's and alembic's chatter stays out
    with open_store(str(db)) as st:
        [r] = st.query()
    assert r.stats is not None and r.stats.samples_per_s_ci95 is not None
    assert r.power_timeline

    [run] = _mlflow_runs(uri)
    assert run.info.status == "FINISHED"
    assert run.data.params["workload"] == "lstm" and run.data.params["tag"] == "t1"
    assert run.data.params["policy.max_time_s"] == "1.0"
    m = run.data.metrics
    assert m["samples_per_s"] == pytest.approx(r.stats.samples_per_s)
    assert (m["samples_per_s_ci95_low"], m["samples_per_s_ci95_high"]) == pytest.approx(
        r.stats.samples_per_s_ci95)
    assert m["energy_j_per_sample"] == pytest.approx(r.energy_j_per_sample)
    tags = run.data.tags
    assert tags["accelbench.result_id"] == r.id and tags["accelbench.suite_id"] == ""
    assert tags["accelbench.noisy"] == str(r.noisy).lower()
    assert tags["accelbench.store"] == str(db)
    times = _artifact(uri, run.info.run_id, "step_times.json")
    assert times["iteration_times_s"] == list(r.iteration_times_s)
    assert _artifact(uri, run.info.run_id, "power_timeline.json") == r.power_timeline
    assert _artifact(uri, run.info.run_id, "record.json")["id"] == r.id

    records = list(_wandb_records(tmp_path))
    [start] = [rec for kind, rec in records if kind == "run"]
    assert start.project == "bench" and "status:ok" in start.tags
    config = {u.key: json.loads(u.value_json) for u in start.config.update}
    assert config["workload"] == "lstm" and config["accelbench"]["result_id"] == r.id
    summary = {u.key: json.loads(u.value_json) for kind, rec in records if kind == "summary"
               for u in rec.update if u.key}
    assert summary["samples_per_s"] == pytest.approx(r.stats.samples_per_s)
    assert summary["samples_per_s_ci95_high"] == pytest.approx(r.stats.samples_per_s_ci95[1])
    [art] = [rec for kind, rec in records if kind == "artifact"]
    assert art.name == f"case-{r.id}" and art.type == "accelbench-case"
    assert {c.path for c in art.manifest.contents} == {
        "step_times.json", "power_timeline.json", "record.json"}
    [done] = [rec for kind, rec in records if kind == "exit"]
    assert done.exit_code == 0


def test_mlflow_alone_takes_the_tracking_uri_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)  # nothing may land in the directory the command ran in
    ok = make_result("gpu1", avg_power_w=250.0, suite="paper-1", noise_reasons=["busy"],
                     finished="2020-01-01T00:00:00+00:00")
    oom = make_result("oom1", status="oom", finished="2020-01-01T00:00:01+00:00")
    with open_sinks(SinkOptions(mlflow="default"), store_label="results.db") as sinks:
        sinks.emit(ok)
        sinks.emit(oom)
    runs = {r.data.tags["accelbench.result_id"]: r for r in _mlflow_runs(uri)}
    assert not (tmp_path / "mlruns").exists() and (tmp_path / "mlartifacts").is_dir()
    assert runs["gpu1"].data.tags["accelbench.suite_id"] == "paper-1"
    assert runs["gpu1"].data.tags["accelbench.noisy"] == "true"
    assert runs["gpu1"].data.tags["accelbench.noise_reasons"] == "busy"
    assert runs["oom1"].info.status == "FAILED" and "samples_per_s" not in \
        runs["oom1"].data.metrics


def test_the_flag_alone_parses_and_a_bad_store_is_one_line_without_its_password(
        tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--mlflow", "http://bob:s3cret@127.0.0.1:9",
                db=db, MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="5")
    assert p.returncode == 2
    [line] = p.stderr.strip().splitlines()
    assert line.startswith("accelbench: error: --mlflow http://bob:***@127.0.0.1:9: cannot "
                           "use the tracking store: ")
    assert "s3cret" not in p.stderr and not db.exists()
    p = run_cli("run", "lstm", "--size", "tiny", "--mlflow", "--iterations", "0", db=db)
    assert p.returncode == 2 and "--iterations" in p.stderr  # --mlflow took no value


@pytest.mark.parametrize(("flag", "module", "extra"), [
    ("--mlflow", "mlflow", "mlflow"), ("--wandb", "wandb", "wandb"),
    ("--pushgateway", "prometheus_client", "prometheus")])
def test_a_missing_tracker_says_the_install_command(tmp_path: Path, flag: str, module: str,
                                                    extra: str) -> None:
    db = tmp_path / "r.db"
    args = [flag, "http://127.0.0.1:9091"] if flag == "--pushgateway" else [flag]
    p = run_cli("run", "lstm", "--size", "tiny", *args, db=db,
                PYTHONPATH=shadow_package(tmp_path, module))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        f"accelbench: error: {flag} needs the {module} package, which is not installed: "
        f"pip install 'accelbench[{extra}]'"]
    assert not db.exists()
