"""The record's ``input`` as a typed section (:class:`InputStats`), the loader's CPU use
read beside it, and the input-bound verdict read from both (issue 41, the read side).

The round trips use the JSON the first slice of ``--data`` wrote and keys later versions
add; the CPU and the verdict checks run the real CLI on tiny cases with real loaders."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from accelbench import jsonout
from accelbench.input_stats import InputStats, LoaderCpu
from accelbench.result import Result
from accelbench.verdicts import INPUT_BOUND_STALL, input_bound
from tests.conftest import TESTS, run_cli
from tests.test_result import _full

SLEEPY = str(TESTS / "plugins" / "sleepy_data.py")

#: ``input`` exactly as the first slice of --data wrote it (keys in its order).
FIRST_SLICE = {
    "source": "generated", "path": "/c/data/images-64px-10c-tiny", "layout": "imagefolder",
    "samples": 256, "loader_workers": 2, "pin_memory": False, "prefetch_factor": 2,
    "loader": "torch DataLoader", "method": "time from asking the loader ...",
    "wait_s": [0.0012, 0.0009, 0.0031], "wait_median_s": 0.0012,
    "wait_median_ci95_s": [0.0009, 0.0031], "wait_mean_s": 0.00173,
    "stall_fraction": 0.021,
}


def _records(db: Path) -> list[dict]:
    with sqlite3.connect(db) as con:
        return [json.loads(j) for (j,) in con.execute("select record_json from results")]


def test_a_first_slice_input_reads_back_the_same() -> None:
    stats = InputStats.from_dict(FIRST_SLICE)
    assert stats.stall_fraction == 0.021 and stats.wait_s == (0.0012, 0.0009, 0.0031)
    assert stats.wait_median_ci95_s == (0.0009, 0.0031) and stats.loader_cpu is None
    assert jsonout.dumps(stats.to_dict()) == jsonout.dumps(FIRST_SLICE)
    # No batch in the window: the measured keys stay out, as the first slice left them.
    empty = {k: v for k, v in FIRST_SLICE.items() if k in list(FIRST_SLICE)[:9]}
    empty["wait_s"] = []
    assert InputStats.from_dict(empty).to_dict() == empty


def test_keys_this_version_does_not_know_are_carried_through() -> None:
    """Sections other changes add to ``input`` (the --input-analysis split, the loader's
    energy, a count of skipped files) survive a read and a write unchanged."""
    later = {**FIRST_SLICE, "skipped": 3,
             "analysis": {"synthetic_rate": 120.5, "cold": {"unavailable": "no root"}},
             "energy": {"loader_j": 1.5, "source": "counter"},
             "loader_cpu": {"cpu_s": 1.2, "wall_s": 2.0, "cores_available": 2,
                            "processes": 2, "method": "m", "unavailable": ""}}
    stats = InputStats.from_dict(later)
    assert stats.extra == {"skipped": 3, "analysis": later["analysis"],
                           "energy": later["energy"]}
    assert stats.loader_cpu is not None and stats.loader_cpu.cores_used == pytest.approx(0.6)
    assert stats.to_dict() == later
    assert InputStats.from_dict(stats.to_dict()) == stats
    # A section added in the worker rides the same way.
    added = InputStats.from_dict(FIRST_SLICE).with_sections(skipped=2)
    assert added.to_dict() == {**FIRST_SLICE, "skipped": 2}
    assert InputStats.from_dict(json.loads(jsonout.dumps(added.to_dict()))) == added


def test_records_with_and_without_input_read_back_byte_identical() -> None:
    synthetic = json.loads(jsonout.dumps(_full().to_dict()))
    del synthetic["input"]  # a synthetic case (and a record from before --data)
    text = jsonout.dumps(synthetic)
    back = Result.from_dict(json.loads(text))
    assert back.input is None and "input" not in back.to_dict()
    assert jsonout.dumps(back.to_dict()) == text
    first = {**synthetic, "input": FIRST_SLICE}
    first = {k: first[k] for k in json.loads(jsonout.dumps(_full().to_dict()))}  # field order
    text = jsonout.dumps(first)
    back = Result.from_dict(json.loads(text))
    assert isinstance(back.input, InputStats) and back.input.stall_fraction == 0.021
    assert jsonout.dumps(back.to_dict()) == text


def _stats(stall: float | None, workers: int = 2, cpu: LoaderCpu | None = None
           ) -> InputStats:
    return InputStats.from_dict({**FIRST_SLICE, "stall_fraction": stall,
                                 "loader_workers": workers,
                                 "loader_cpu": cpu.to_dict() if cpu else None})


def test_the_input_bound_verdict_starts_over_its_threshold() -> None:
    cpu = LoaderCpu(cpu_s=0.5, wall_s=1.0, cores_available=4, processes=2, method="m")
    assert INPUT_BOUND_STALL == 0.10
    assert input_bound(None) is None and input_bound(_stats(None, cpu=cpu)) is None
    assert input_bound(_stats(0.05, cpu=cpu)) is None
    assert input_bound(_stats(INPUT_BOUND_STALL, cpu=cpu)) is None  # at: not over
    over = input_bound(_stats(INPUT_BOUND_STALL + 1e-6, cpu=cpu))
    assert over is not None and "10.0% of the time (over 10%)" in over.evidence
    assert "1.2 ms per step (median)" in over.evidence
    assert over.line.startswith("input-bound: the step waited")


@pytest.mark.parametrize(("workers", "cpu", "says"), [
    # Workers idle part of the time (0.5 cores for 2): the wait is I/O or hand-over.
    (2, LoaderCpu(cpu_s=0.5, wall_s=1.0, cores_available=4, processes=2),
     "idle part of the time"),
    # Both workers busy, cores left: more workers.
    (2, LoaderCpu(cpu_s=1.9, wall_s=1.0, cores_available=8, processes=2),
     "raise --loader-workers (up to 8)"),
    # Every core busy: a cheaper sample, not more workers.
    (4, LoaderCpu(cpu_s=3.6, wall_s=1.0, cores_available=4, processes=4),
     "more workers cannot help"),
    # The training process loads: workers.
    (0, LoaderCpu(cpu_s=0.3, wall_s=1.0, cores_available=4, processes=0),
     "set --loader-workers (this process may use 4 cores)"),
    (2, LoaderCpu(cores_available=4, unavailable="psutil is not installed"),
     "loader CPU unavailable (psutil is not installed)"),
    (2, None, "loader CPU unavailable (not recorded)"),
])
def test_the_verdict_says_what_to_change_from_the_loaders_cpu(
        workers: int, cpu: LoaderCpu | None, says: str) -> None:
    verdict = input_bound(_stats(0.4, workers=workers, cpu=cpu))
    assert verdict is not None and says in verdict.advice, verdict


def test_a_sleeping_loader_is_input_bound_in_run_and_results_show(tmp_path: Path) -> None:
    """0 workers, a dataset that sleeps 50 ms a batch, a 40 ms step: most of the step is
    waiting, and the wait is sleep, not CPU; ``run`` and ``results show`` say so."""
    db = tmp_path / "r.db"
    p = run_cli("--plugin", SLEEPY, "run", "sleepy_data", "--size", "tiny", "--data",
                "generated", "--loader-workers", "0", "--iterations", "8", "--no-energy",
                db=db)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "input-bound   the step waited for its batch" in p.stdout, p.stdout
    assert "set --loader-workers" in p.stdout
    assert "loader CPU " in p.stdout and "in the training process" in p.stdout
    [record] = _records(db)
    inp = record["input"]
    cpu = inp["loader_cpu"]
    assert cpu["processes"] == 0 and cpu["cores_available"] == len(os.sched_getaffinity(0))
    # Sleeping is waiting without CPU: the loader's share is far below the stall's.
    assert 0 <= cpu["cpu_s"] / cpu["wall_s"] < 0.2 * inp["stall_fraction"], inp
    shown = run_cli("--plugin", SLEEPY, "results", "show", record["id"], db=db)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "input-bound   the step waited for its batch" in shown.stdout
    summary = json.loads(run_cli("--plugin", SLEEPY, "results", "show", record["id"],
                                 "--json", db=db).stdout)
    assert summary["input_bound"] is True


def test_the_workers_cpu_is_read_from_their_processes(tmp_path: Path) -> None:
    """Two DataLoader workers decoding and augmenting JPEGs: their CPU time is read from
    the two processes, and is more than nothing."""
    db = tmp_path / "r.db"
    # 30 steps: more batches than the workers prefetch before the window opens (2 each),
    # so they decode inside it, for far longer than the CPU clock's tick.
    p = run_cli("run", "resnet50", "--size", "tiny", "--data", "generated",
                "--loader-workers", "2", "--iterations", "30", "--no-energy", "--json",
                db=db, ACCELBENCH_DATA_DIR=str(tmp_path / "data"))
    assert p.returncode == 0, p.stderr[-2000:]
    summary = json.loads(p.stdout)
    assert summary["input_cores_available"] == len(os.sched_getaffinity(0))
    assert summary["input_loader_cores_used"] > 0
    [record] = _records(db)
    cpu = record["input"]["loader_cpu"]
    assert cpu["processes"] == 2 and cpu["cpu_s"] > 0 and cpu["unavailable"] == ""
    assert summary["input_bound"] is (record["input"]["stall_fraction"] > INPUT_BOUND_STALL)


def _validate(doc: dict) -> None:
    import jsonschema

    from accelbench.report.schema import shipped_schema

    schema = json.loads(shipped_schema())
    jsonschema.validators.validator_for(schema)(schema).validate(doc)


def test_exports_carry_the_data_source_the_wait_and_the_stall(tmp_path: Path) -> None:
    """A synthetic and a generated case of one workload, exported in each format: the
    generated one's wait and stall are its record's, the synthetic one's are empty."""
    db = tmp_path / "r.db"
    env = {"ACCELBENCH_DATA_DIR": str(tmp_path / "data")}
    quick = ("--size", "tiny", "--iterations", "3", "--no-energy")
    for extra in ((), ("--data", "generated", "--loader-workers", "0")):
        p = run_cli("run", "lstm", *quick, *extra, db=db, **env)
        assert p.returncode == 0, p.stderr[-2000:]
    records = {r["spec"].get("data", "synthetic"): r for r in _records(db)}
    gen = records["generated"]["input"]
    p = run_cli("export", "--format", "json", db=db)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    _validate(doc)
    cases = {c["data_source"]: c for c in doc["cases"]}
    assert set(cases) == {"synthetic", "generated"}
    assert cases["generated"]["input_stall_fraction"] == gen["stall_fraction"] > 0
    assert cases["generated"]["input_wait_median_s"] == gen["wait_median_s"]
    assert cases["generated"]["loader_workers"] == 0
    assert cases["synthetic"]["input_stall_fraction"] is None
    assert cases["synthetic"]["input_wait_median_s"] is None
    # The record in the export is the stored one, loader CPU included.
    [exported] = [r["input"] for r in doc["records"] if "input" in r]
    assert exported["loader_cpu"]["cores_available"] == len(os.sched_getaffinity(0))
    p = run_cli("export", "--format", "csv", db=db)
    assert p.returncode == 0, p.stderr
    import csv
    import io

    rows = {r["data_source"]: r for r in csv.DictReader(io.StringIO(p.stdout))}
    assert float(rows["generated"]["input_stall_fraction"]) == pytest.approx(
        gen["stall_fraction"])
    assert rows["synthetic"]["input_stall_fraction"] == ""
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    out = tmp_path / "cases.parquet"
    p = run_cli("export", "--format", "parquet", "--out", str(out), db=db)
    assert p.returncode == 0, p.stderr
    table = pq.read_table(out).to_pylist()
    by = {r["data_source"]: r for r in table}
    assert by["generated"]["input_stall_fraction"] == pytest.approx(gen["stall_fraction"])
    assert by["synthetic"]["input_wait_median_s"] is None


def _stored_pair(db: Path) -> tuple[Result, Result]:
    """A synthetic case and the same case reading generated data, stored."""
    import dataclasses

    from accelbench.store import open_store
    from tests.test_compare import make_result

    syn = make_result("syn00001", times=(0.10, 0.11, 0.10, 0.12, 0.10),
                      finished="2026-01-01T00:00:00.000+00:00")
    gen = make_result("gen00001", times=(0.15, 0.16, 0.15, 0.17, 0.15),
                      finished="2026-01-01T00:01:00.000+00:00")
    gen = dataclasses.replace(
        gen, spec=dataclasses.replace(gen.spec, data="generated", loader_workers=2),
        input=InputStats.from_dict({
            **FIRST_SLICE, "stall_fraction": 0.3,
            "loader_cpu": LoaderCpu(cpu_s=1.9, wall_s=1.0, cores_available=8,
                                    processes=2).to_dict()}))
    with open_store(str(db)) as st:
        st.save(syn)
        st.save(gen)
    return syn, gen


def test_compare_shows_each_sides_stall_beside_the_ratio(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _stored_pair(db)
    p = run_cli("compare", "id:syn00001", "id:gen00001", db=db)
    assert p.returncode == 0, p.stderr
    assert "synthetic" in p.stdout and "stall 30% IB" in p.stdout, p.stdout
    assert "stall: the share of the step spent waiting" in p.stdout
    wide = run_cli("compare", "id:syn00001", "id:gen00001", "--wide", db=db)
    assert wide.returncode == 0 and "stall 30% IB" in wide.stdout, wide.stdout
    doc = json.loads(run_cli("compare", "id:syn00001", "id:gen00001", "--json",
                             db=db).stdout)
    [case] = doc["cases"]
    assert case["a_data_source"] == "synthetic" and case["b_data_source"] == "generated"
    assert case["a_input_stall_fraction"] is None and case["b_input_stall_fraction"] == 0.3
    assert case["a_input_bound"] is False and case["b_input_bound"] is True
    assert case["throughput_ratio"] < 1


def test_a_compare_of_synthetic_cases_reads_as_before(tmp_path: Path) -> None:
    from accelbench.store import open_store
    from tests.test_compare import make_result

    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(make_result("syn00001"))
        st.save(make_result("syn00002", finished="2026-01-01T00:01:00.000+00:00"))
    p = run_cli("compare", "id:syn00001", "id:syn00002", "--json", db=db)
    assert p.returncode == 0, p.stderr
    [case] = json.loads(p.stdout)["cases"]
    assert not [k for k in case if "input" in k or "data_source" in k]
    text = run_cli("compare", "id:syn00001", "id:syn00002", db=db).stdout
    assert "stall" not in text and "synthetic" not in text


def test_the_report_shows_synthetic_and_generated_runs_side_by_side(tmp_path: Path) -> None:
    """Real runs of one workload with synthetic and with generated data: the report's data
    view (HTML and summary.md) holds both, the generated one's stall and its throughput
    relative to synthetic; a store of synthetic runs only has no data view."""
    db = tmp_path / "r.db"
    env = {"ACCELBENCH_DATA_DIR": str(tmp_path / "data")}
    quick = ("--size", "tiny", "--iterations", "3", "--no-energy")
    for extra in ((), ("--data", "generated", "--loader-workers", "0")):
        p = run_cli("run", "lstm", *quick, *extra, db=db, **env)
        assert p.returncode == 0, p.stderr[-2000:]
    records = {r["spec"].get("data", "synthetic"): r for r in _records(db)}
    stall = records["generated"]["input"]["stall_fraction"]
    rel = (records["generated"]["stats"]["samples_per_s"]
           / records["synthetic"]["stats"]["samples_per_s"])
    out = tmp_path / "rep"
    p = run_cli("report", "--out", str(out), "--no-reference", db=db)
    assert p.returncode == 0, p.stderr[-2000:]
    md = (out / "summary.md").read_text()
    assert "## Data: synthetic and real input pipelines" in md
    [syn] = [line for line in md.splitlines() if "| synthetic |" in line]
    [gen] = [line for line in md.splitlines() if "| generated, 0 workers |" in line]
    assert records["synthetic"]["id"][:8] in syn and "- (no loader)" in syn
    assert "| baseline |" in syn
    assert f"{100 * stall:.1f}%" in gen and f"{rel:.2f}x" in gen
    assert ("input-bound" in gen) is (stall > INPUT_BOUND_STALL)
    assert "unavailable (energy not measured: --no-energy)" in gen
    html = (out / "index.html").read_text()
    assert 'id="data-table"' in html and f"{100 * stall:.1f}%" in html
    only_synthetic = tmp_path / "syn.db"
    p = run_cli("run", "lstm", *quick, db=only_synthetic)
    assert p.returncode == 0, p.stderr[-2000:]
    out2 = tmp_path / "rep2"
    p = run_cli("report", "--out", str(out2), "--no-reference", db=only_synthetic)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "## Data" not in (out2 / "summary.md").read_text()
    assert 'id="data-table"' not in (out2 / "index.html").read_text()


def test_phases_with_data_take_the_measured_wait_as_the_input_phase(tmp_path: Path) -> None:
    """--phases with --data: the input phase is the window's measured wait (in the step,
    counted in the sum against the step time), and the loops train on the batch held."""
    import statistics

    db = tmp_path / "r.db"
    p = run_cli("--plugin", SLEEPY, "run", "sleepy_data", "--size", "tiny", "--data",
                "generated", "--loader-workers", "0", "--iterations", "8", "--no-energy",
                "--phases", db=db)
    assert p.returncode == 0, p.stderr[-2000:]
    [record] = _records(db)
    phases = {ph["name"]: ph for ph in record["phases"]["phases"]}
    assert set(phases) == {"input", "forward", "backward", "optimizer"}
    inp = phases["input"]
    waits = record["input"]["wait_s"]
    assert inp["in_step"] is True and "measured wait for its next batch" in inp["note"]
    assert inp["time_s"] == pytest.approx(statistics.median(waits))
    assert inp["time_ci95_s"][0] <= inp["time_s"] <= inp["time_ci95_s"][1]
    assert inp["time_s"] >= 0.99 * 0.025 * 2  # the dataset sleeps 25 ms a sample, 2 a batch
    assert inp["energy"]["status"] == "unavailable" and "not split out" in inp["energy"]["note"]
    # The sum of the in-step phases is checked against the step, the wait included.
    assert record["phases"]["sum_rel_diff"] is not None
    assert all(n.split(":")[0] != "input" for n in record["phases"]["notes"])
    assert "input " in p.stdout and "the wait's energy is not split out" in p.stdout


def test_the_workers_cpu_is_their_processes_time_over_the_window() -> None:
    """A real child process burning CPU stands for a loader worker: its CPU time over the
    window is read; one that sleeps adds next to none."""
    import subprocess
    import sys
    import time

    from accelbench.data.stall import InputTimer

    burn = "import time\nt = time.time()\nwhile time.time() - t < 30: pass\n"
    child = subprocess.Popen([sys.executable, "-c", burn])
    try:
        timer = InputTimer({"source": "generated", "loader_workers": 1})
        time.sleep(0.3)  # the child is running when the window opens
        timer.open()
        for _ in range(3):
            timer.take(lambda: time.sleep(0.3))
        stats = timer.window(3, [0.3, 0.3, 0.3])
    finally:
        child.kill()
        child.wait()
    cpu = stats.loader_cpu
    assert cpu is not None and cpu.unavailable == "" and cpu.processes >= 1
    assert cpu.wall_s is not None and cpu.wall_s >= 0.9
    # A busy loop on a shared machine gets at least some of a core; never more than one.
    assert cpu.cores_used is not None and 0.05 < cpu.cores_used <= 1.05 * cpu.processes
    assert stats.stall_fraction == pytest.approx(1.0, rel=0.1)


def test_the_loaders_cpu_without_psutil_is_unavailable_with_the_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from accelbench.data.stall import InputTimer

    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil fails
    timer = InputTimer({"source": "generated", "loader_workers": 2})
    timer.open()
    timer.take(lambda: None)
    cpu = timer.window(1, [0.01]).loader_cpu
    assert cpu is not None and cpu.cpu_s is None and cpu.cores_used is None
    assert cpu.unavailable == "psutil is not installed (pip install psutil)"
    verdict = input_bound(InputStats.from_dict({**FIRST_SLICE, "stall_fraction": 0.5,
                                                "loader_cpu": cpu.to_dict()}))
    assert verdict is not None and "loader CPU unavailable (psutil is not installed" in \
        verdict.advice
