"""``accelbench export``: CSV, JSON and Parquet, one row per case, raw samples apart."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sys
from pathlib import Path

import pytest

from accelbench import api
from accelbench.backends.blocks import BlockTime
from accelbench.execution.measure import Loop, measure
from accelbench.report.export import (
    CASE_COLUMNS,
    PARQUET_INSTALL,
    MissingDependencyError,
    block_steps,
    export,
    sample_records,
)
from accelbench.result import Result
from accelbench.spec import MeasurementPolicy, RunSpec
from accelbench.stats import compute_stats
from accelbench.store import open_store
from tests.conftest import FAULTY_PLUGIN, run_cli
from tests.phase_records import with_phases
from tests.test_compare import make_result


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Result]]:
    db = tmp_path_factory.mktemp("export") / "export.db"
    real = api.run("test_mlp", size="tiny", max_time=0.3, plugins=[FAULTY_PLUGIN], db=str(db),
                   tag="real, \"quoted\"")
    assert real.status == "ok"
    with open_store(str(db)) as st:
        st.save(make_result("gpu1", avg_power_w=250.0, finished="2020-01-01T00:00:00+00:00"))
        st.save(make_result("oom1", status="oom", finished="2020-01-01T00:00:01+00:00"))
        st.save(with_phases(make_result("ph1", avg_power_w=250.0,
                                        finished="2020-01-01T00:00:02+00:00")))
        results = st.query()
    return db, results


def test_csv_one_row_per_case(store: tuple[Path, list[Result]]) -> None:
    db, results = store
    proc = run_cli("export", "--format", "csv", db=db)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["result_id"] for r in rows] == [r.id for r in results]
    assert list(rows[0]) == list(CASE_COLUMNS)
    by_id = {r["result_id"]: r for r in rows}
    real = next(r for r in results if r.spec.workload == "test_mlp")
    row = by_id[real.id]
    assert row["tag"] == 'real, "quoted"'
    assert float(row["samples_per_s"]) == pytest.approx(real.samples_per_s)
    assert int(row["iterations"]) == len(real.iteration_times_s)
    # Unavailable energy is an empty cell with its label, never 0.
    assert row["energy_j_per_sample"] == "" and row["energy_kind"] == "unavailable"
    assert float(by_id["gpu1"]["energy_j_per_sample"]) > 0
    assert by_id["gpu1"]["energy_kind"] == "measured"
    assert by_id["oom1"]["status"] == "oom" and by_id["oom1"]["samples_per_s"] == ""


def test_json_cases_and_samples(store: tuple[Path, list[Result]], tmp_path: Path) -> None:
    db, results = store
    out = tmp_path / "sub" / "export.json"
    proc = run_cli("export", "--format", "json", "--out", str(out), "--workload", "test_mlp",
                   db=db)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["format"] == "accelbench-export-v2" and doc["schema_version"] == 2
    real = next(r for r in results if r.spec.workload == "test_mlp")
    assert [c["result_id"] for c in doc["cases"]] == [real.id]
    assert doc["cases"][0]["energy_j_per_sample"] is None
    measured = [s["time_s"] for s in doc["samples"] if s["phase"] == "measured"]
    warmup = [s for s in doc["samples"] if s["phase"] == "warmup"]
    assert measured == list(real.iteration_times_s)
    assert len(warmup) == len(real.warmup_times_s)
    # Timed one step at a time (torch on a CPU): every row is one step.
    assert {s["steps"] for s in doc["samples"]} == {1}


def test_parquet_round_trip(store: tuple[Path, list[Result]], tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    db, results = store
    out = tmp_path / "pq" / "x.parquet"
    proc = run_cli("export", "--format", "parquet", "--out", str(out), db=db)
    assert proc.returncode == 0, proc.stderr
    # Exactly the file asked for, and the samples beside it, named so.
    assert sorted(p.name for p in out.parent.iterdir()) == ["x.parquet", "x.samples.parquet"]
    assert "x.parquet" in proc.stderr and "x.samples.parquet" in proc.stderr
    cases = pq.read_table(out).to_pylist()
    samples = pq.read_table(tmp_path / "pq" / "x.samples.parquet").to_pylist()
    assert [c["result_id"] for c in cases] == [r.id for r in results]
    assert len(samples) == sum(len(r.iteration_times_s) + len(r.warmup_times_s)
                               for r in results)
    assert {s["steps"] for s in samples} == {1}
    gpu = next(c for c in cases if c["result_id"] == "gpu1")
    assert gpu["batch_size"] == 64 and gpu["energy_j_per_sample"] > 0
    assert gpu["noisy"] is False
    # --phases columns: typed (a status is a string, a time a float), null without phases.
    ph = next(c for c in cases if c["result_id"] == "ph1")
    assert ph["phase_forward_s"] == pytest.approx(0.03)
    assert ph["phase_optimizer_energy_status"] == "indistinguishable"
    assert ph["phase_optimizer_energy_j"] == pytest.approx(0.3)
    assert gpu["phase_forward_s"] is None and gpu["phase_forward_energy_status"] is None
    # An existing directory as --out keeps the two fixed names inside it.
    proc = run_cli("export", "--format", "parquet", "--out", str(tmp_path / "pq"), db=db)
    assert proc.returncode == 0, proc.stderr
    assert {"cases.parquet", "samples.parquet"} <= {p.name for p in out.parent.iterdir()}
    assert pq.read_table(tmp_path / "pq" / "cases.parquet").num_rows == len(results)


@pytest.mark.parametrize(("policy", "k"), [
    (MeasurementPolicy(iterations=10), 4),  # blocks 4, 4, 2: the last lands on the count
    (MeasurementPolicy(iterations=10), 3),  # 3, 3, 3, 1
    (MeasurementPolicy(max_iterations=11, min_iterations=5, target_ci=0.001), 4),  # the cap
])
def test_block_timed_samples_carry_their_steps(
        tmp_path: Path, policy: MeasurementPolicy, k: int) -> None:
    """A block-timed record (JAX; torch on CUDA) stores one per-step mean per block: each
    sample row says how many steps it stands for, as the measurement loop ran them, so the
    rows weighted by ``steps`` give the mean step time of all steps."""
    clock = iter([0.008, 0.012, 0.02] * 20)  # per-step seconds of successive blocks

    class FakeBlocks:  # the framework's side of a block: a synthetic clock, no device
        clock = "synthetic"

        def run_block(self, n: int) -> BlockTime:
            return BlockTime(total_s=n * next(clock))

    got = measure(Loop(lambda: None, lambda: None, policy, 8, blocks=FakeBlocks()), k=k)
    assert max(got.block_steps) == k and len(set(got.block_steps)) == 2  # one short block
    spec = RunSpec(workload="lstm", size="tiny", batch_size=8, framework="jax", policy=policy)
    stats = compute_stats(got.times_s, 8, trim_fraction=0.0, stop_reason=got.stop_reason)
    record = dataclasses.replace(
        make_result("blk1"), spec=spec, iteration_times_s=tuple(got.times_s),
        warmup_times_s=(0.02, 0.01),
        stats=dataclasses.replace(stats, n=got.steps, steps_per_block=k))
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(record)
    proc = run_cli("export", "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["samples"]
    measured = [r for r in rows if r["phase"] == "measured"]
    assert [r["steps"] for r in measured] == got.block_steps
    assert [r["steps"] for r in rows if r["phase"] == "warmup"] == [1, 1]
    total_s = sum(r["time_s"] * r["steps"] for r in measured)
    assert sum(r["steps"] for r in measured) == got.steps
    assert total_s / got.steps == pytest.approx(
        sum(t * n for t, n in zip(got.times_s, got.block_steps, strict=True)) / got.steps)
    # Unweighted, the short block would count as much as a full one: a different mean.
    assert sum(r["time_s"] for r in measured) / len(measured) != pytest.approx(
        total_s / got.steps, rel=1e-6)
    # A record whose blocks cannot add up to its step count gets no invented counts.
    odd = dataclasses.replace(record, stats=dataclasses.replace(record.stats, n=got.steps + 1))
    assert block_steps(odd) is None
    assert {r["steps"] for r in sample_records(odd) if r["phase"] == "measured"} == {None}


def test_stored_block_steps_are_the_samples_steps_and_old_records_keep_the_rule(
        tmp_path: Path) -> None:
    """A record whose timer kept a step in flight stores the steps each time covers
    (Stats.block_steps: k - 1 first, the drained step in the last): those are the samples'
    ``steps``, not the k-rule's. An older record, whose JSON has no block_steps, reads back
    with none and keeps the rule."""
    policy = MeasurementPolicy(iterations=23)
    spec = RunSpec(workload="lstm", size="tiny", batch_size=8, framework="jax", policy=policy)
    times = (0.004, 0.003, 0.003, 0.003, 0.0035)
    stats = compute_stats(times, 8, trim_fraction=0.0, stop_reason="iterations")
    new = dataclasses.replace(
        make_result("inflight1"), spec=spec, iteration_times_s=times, warmup_times_s=(0.02,),
        stats=dataclasses.replace(stats, n=23, steps_per_block=5, block_steps=(4, 5, 5, 5, 4)))
    old_json = new.to_dict()
    del old_json["stats"]["block_steps"]  # as a store written before the field reads
    old = dataclasses.replace(Result.from_dict(old_json), id="old1")
    assert old.stats is not None and old.stats.block_steps == ()
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(new)
        st.save(old)
        back = st.get("inflight1")
    assert back is not None and back.stats is not None
    assert back.stats.block_steps == (4, 5, 5, 5, 4)
    proc = run_cli("export", "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    steps: dict[str, list[int]] = {}
    for row in json.loads(proc.stdout)["samples"]:
        if row["phase"] == "measured":
            steps.setdefault(row["result_id"], []).append(row["steps"])
    assert steps == {"inflight1": [4, 5, 5, 5, 4], "old1": [5, 5, 5, 5, 3]}
    # Stored counts that cannot be the record's (not adding up to n) give none.
    odd = dataclasses.replace(new, stats=dataclasses.replace(
        new.stats, block_steps=(5, 5, 5, 5, 4)))  # type: ignore[arg-type]
    assert block_steps(odd) is None


def test_parquet_without_pyarrow_names_the_install_command(
    store: tuple[Path, list[Result]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, results = store
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` fail
    with pytest.raises(MissingDependencyError) as info:
        export(results, "parquet", tmp_path / "pq")
    assert PARQUET_INSTALL in str(info.value)
    assert PARQUET_INSTALL == "pip install 'accelbench[parquet]'"
    assert not (tmp_path / "pq").exists()


def test_bad_requests(store: tuple[Path, list[Result]], tmp_path: Path) -> None:
    db, _ = store
    proc = run_cli("export", "--format", "parquet", db=db)
    assert proc.returncode == 2 and "needs --out FILE.parquet" in proc.stderr
    for args in (("--format", "xml"), ("--format", "csv", "--out", ""),
                 ("--format", "csv", "--limit", "0"),
                 ("--format", "csv", "--limit", "100000000000000000000000")):
        proc = run_cli("export", *args, db=db)
        assert proc.returncode == 2, args
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = run_cli("export", "--format", "json", "--out", str(blocker / "x.json"), db=db)
    assert proc.returncode == 2 and "cannot write" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def _refuse(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def test_non_finite_numbers_export_as_strict_json(tmp_path: Path) -> None:
    diverged = dataclasses.replace(
        make_result("nan1", status="diverged", final_loss=float("nan"), times=(0.1,) * 3),
        iteration_times_s=(0.1, float("inf"), 0.1))
    inf_loss = make_result("inf1", final_loss=float("inf"))
    text = export([diverged, inf_loss], "json", None)[0]
    assert text is not None and "NaN" not in text and "Infinity" not in text
    doc = json.loads(text, parse_constant=_refuse)  # raises on NaN/Infinity
    by_id = {c["result_id"]: c for c in doc["cases"]}
    assert by_id["nan1"]["final_loss"] is None and by_id["nan1"]["status"] == "diverged"
    assert by_id["inf1"]["final_loss"] is None
    assert [s["time_s"] for s in doc["samples"] if s["result_id"] == "nan1"] == [0.1, None, 0.1]
    # The same through the CLI and the store, and CSV leaves the cell empty.
    db = tmp_path / "nan.db"
    with open_store(str(db)) as st:
        st.save(make_result("nan1", status="diverged", final_loss=float("nan")))
    proc = run_cli("export", "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout, parse_constant=_refuse)["cases"][0]["final_loss"] is None
    proc = run_cli("export", "--format", "csv", db=db)
    row = next(csv.DictReader(io.StringIO(proc.stdout)))
    assert row["final_loss"] == "" and row["status"] == "diverged"
    proc = run_cli("results", "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout, parse_constant=_refuse)


def test_export_never_writes_over_the_store_or_an_existing_file(
    store: tuple[Path, list[Result]], tmp_path: Path
) -> None:
    import hashlib

    db, results = store
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    # The store itself, as --out: refused in one line, with or without --force.
    for extra in ((), ("--force",)):
        for fmt, out in (("csv", db), ("parquet", db)):
            proc = run_cli("export", "--format", fmt, "--out", str(out), *extra, db=db)
            assert proc.returncode == 2, proc.stderr
            assert "is the results store" in proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    with open_store(str(db)) as st:
        assert len(st.query()) == len(results)
    # Another existing file: kept unless --force, then replaced whole.
    keep = tmp_path / "keep.csv"
    keep.write_text("mine\n")
    proc = run_cli("export", "--format", "csv", "--out", str(keep), db=db)
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert keep.read_text() == "mine\n"
    proc = run_cli("export", "--format", "csv", "--out", str(keep), "--force", db=db)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(keep.read_text())))
    assert [r["result_id"] for r in rows] == [r.id for r in results]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.csv"]  # no temporary left
