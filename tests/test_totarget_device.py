"""Training to a target on a chosen device, and the step's wait for its batches: a device
not present refused in one line before anything is written, the record stating the device
and the input figures (``run --data``'s timer over every step), old records read as
before, the figures in ``results to-target`` and the export. The real end-to-end run
through a loader is tests/test_totarget_data.py's (its assertions cover the figures); the
CUDA path runs in benchmarks/gpu_check.sh on a lent GPU."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from accelbench.cli import main
from accelbench.data.stall import InputTimer
from accelbench.input_stats import InputStats
from accelbench.options import field_options
from accelbench.spec import MeterOptions
from accelbench.store import open_store
from accelbench.totarget.loop import train_loop
from accelbench.totarget.options import TrainOptions
from accelbench.totarget.outcome import EvalPoint, Limits, RunOutcome
from accelbench.totarget.recipes import recipe_for
from accelbench.totarget.record import Energy, ToTargetRecord
from accelbench.totarget.run import describe, input_line

RECIPE = recipe_for("transformer", "tiny")


@pytest.mark.parametrize(("device", "says"), [
    ("cuda", "device cuda:0 is unavailable: torch sees no cuda device"),
    ("cuda:3", "device cuda:3 is unavailable"),
    ("warp9", "unknown device 'warp9'"),
])
def test_a_device_not_here_is_one_line_exit_2_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        device: str, says: str) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    monkeypatch.setenv("ACCELBENCH_DATA_DIR", str(tmp_path / "data"))
    db = tmp_path / "s.db"
    assert main(["--db", str(db), "train", "transformer", "--device", device]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not db.exists() and not (tmp_path / "data").exists()


def _record(**changes: object) -> ToTargetRecord:
    point = EvalPoint(samples=64, time_s=1.0, metric=0.9, train_loss=1.0)
    outcome = RunOutcome(seed=0, status="reached", reason="r", startup_s=0.1, time_s=1.0,
                         samples=64, eval_s=0.1, points=(point,))
    rec = ToTargetRecord(id="r0", group_id="g0", created_at="2026-12-07T02:00:00Z",
                         framework="torch", recipe=RECIPE, target=0.95, eval_every=64,
                         outcome=outcome, energy=Energy(source="unavailable", boundary="",
                                                        reason="no sensor here"))
    return dataclasses.replace(rec, **changes)  # type: ignore[arg-type]


WAITED = InputStats(source="generated", path="/d/train", layout="token_shards", samples=900,
                    loader_workers=2, pin_memory=True, prefetch_factor=2,
                    loader="torch DataLoader", method="m", wait_median_s=0.002,
                    wait_median_ci95_s=(0.001, 0.003), wait_mean_s=0.0025,
                    stall_fraction=0.125)


def test_the_record_states_the_device_and_the_wait_and_old_records_read_as_before() -> None:
    rec = _record(device="cuda:0",
                  outcome=dataclasses.replace(_record().outcome, input=WAITED))
    data = rec.to_dict()
    assert data["device"] == "cuda:0" and data["version"] == 3  # no version bump
    assert data["outcome"]["input"]["stall_fraction"] == 0.125
    assert data["outcome"]["input"]["wait_s"] == []  # per-step waits are not kept
    back = ToTargetRecord.from_dict(json.loads(json.dumps(data)))
    assert back == rec
    line = describe(back)
    assert ("input generated, 2 loader workers: waited 2 ms/step (median; CI 1 ms-3 ms), "
            "stall 12.5% of the step time") in line
    # A record stored before: no device key (every run trained on the CPU), no input.
    old = _record().to_dict()
    del old["device"], old["outcome"]
    old["outcome"] = {k: v for k, v in _record().to_dict()["outcome"].items()}
    assert "input" not in old["outcome"]  # not measured: the key is absent, never null
    read = ToTargetRecord.from_dict(old)
    assert read.device == "cpu" and read.outcome.input is None
    assert input_line(read) == "input wait unavailable (stored before train timed the wait)"
    memory = dataclasses.replace(read, recipe=dataclasses.replace(RECIPE, feed="memory"))
    assert "batches drawn in memory" in input_line(memory)


def test_the_loop_times_each_steps_wait_with_runs_timer() -> None:
    """A batch that takes at least 5 ms to come: the median wait is at least that, and
    the share is the waits over the steps' time (never above 1: the wait is inside)."""
    timer = InputTimer({"source": "generated", "loader_workers": 0})
    losses = iter([2.0] * 6 + [1.0] * 100)

    def step() -> float:
        timer.take(lambda: time.sleep(0.005))
        return next(losses)

    limits = Limits(target=1.5, eval_every=RECIPE.batch_size, max_time_s=60.0,
                    max_samples=10_000)
    metric = iter([2.0, 2.0, 2.0, 1.2])
    out = train_loop(RECIPE, limits, seed=0, t0=time.perf_counter(), step=step,
                     evaluate=lambda: next(metric), timer=timer)
    assert out.status == "reached" and out.input is not None
    got = out.input
    assert got.wait_median_s is not None and got.wait_median_s >= 0.005
    assert got.stall_fraction is not None and 0 < got.stall_fraction <= 1
    assert got.wait_s == () and got.loader_cpu is not None
    assert train_loop(RECIPE, limits, seed=0, t0=time.perf_counter(), step=lambda: 1.0,
                      evaluate=lambda: 1.0).input is None  # no timer: no figures


def test_results_and_the_export_carry_the_device_and_the_wait(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import jsonschema

    from accelbench.report.schema import shipped_schema

    db = str(tmp_path / "r.db")
    with open_store(db) as st:
        st.save_totarget([_record(device="cuda:0", outcome=dataclasses.replace(
            _record().outcome, input=WAITED))])
        st.save_totarget([_record(id="r1", group_id="g1")])
    assert main(["--db", db, "results", "to-target", "g0"]) == 0
    shown = capsys.readouterr().out
    assert "(torch on cuda:0)" in shown and "stall 12.5% of the step time" in shown
    assert main(["--db", db, "export", "--format", "json", "--to-target"]) == 0
    doc = json.loads(capsys.readouterr().out)
    schema = json.loads(shipped_schema())
    jsonschema.validate(doc, schema)
    rows = {r["run_id"]: r for r in doc["totarget_runs"]}
    assert rows["r0"]["device"] == "cuda:0" and rows["r0"]["input_stall_fraction"] == 0.125
    assert rows["r0"]["input_wait_median_s"] == 0.002
    assert rows["r1"]["input_wait_median_s"] is None  # unavailable: null, never 0
    for row in doc["totarget_runs"]:  # an export made before the new columns validates
        for key in ("device", "input_wait_median_s", "input_stall_fraction"):
            del row[key]
    jsonschema.validate(doc, schema)


def test_train_composes_runs_energy_options() -> None:
    """idle_s and the node meter are run's declarations (bounds, flags, defaults), not
    copies; train keeps its own help for the baseline and has no --no-idle."""
    train = {fo.name: fo for fo in field_options(TrainOptions)}
    run = {fo.name: fo for fo in field_options(MeterOptions)}
    for name in ("idle_s", "node_meter", "node_meter_cmd"):
        a, b = train[name].opt, run[name].opt
        assert (a.flag, a.lo, a.hi, train[name].default()) == (b.flag, b.lo, b.hi,
                                                              run[name].default())
    assert train["node_meter"].opt == run["node_meter"].opt
    assert train["idle_s"].opt.off_flag is None and run["idle_s"].opt.off_flag == "--no-idle"
    assert "first seed" in train["idle_s"].opt.help
