"""One result shape: the record is the Result's fields, from the worker to the parent."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

from accelbench import jsonout
from accelbench.execution.request import CaseRequest
from accelbench.input_stats import InputStats, LoaderCpu
from accelbench.phases import Difference, Loop, Phase, Phases
from accelbench.result import EnergyReading, Result, Stats
from accelbench.spec import MeasurementPolicy, MeterOptions, RunSpec
from tests.conftest import FAULTY_PLUGIN, cli_env

FIELDS = [f.name for f in dataclasses.fields(Result)]


def _spec(**kw: object) -> RunSpec:
    return RunSpec(workload="test_mlp", size="tiny", batch_size=4, device="cpu",
                   framework="torch", threads=1,
                   policy=MeasurementPolicy(iterations=5, warmup_min=2, warmup_max=2,
                                            timeout_s=120),
                   meters=MeterOptions(enabled=False), **kw)  # type: ignore[arg-type]


def _phases() -> Phases:
    """Phases with every field set (a difference in each state)."""
    fwd = Phase(name="forward", time_s=0.1, time_ci95_s=(0.09, 0.11),
                diff_time=Difference(value=0.1, ci95=(0.09, 0.12), status="measured"),
                energy=Difference(value=2.0, ci95=(1.9, 2.1), status="measured"), agrees=True)
    opt = Phase(name="optimizer", time_s=0.01, energy=Difference(
        value=-0.1, ci95=(-0.3, 0.1), status="indistinguishable", note="CI includes 0"),
                in_step=True, agrees=None, note="n")
    inp = Phase(name="input", time_s=0.002, in_step=False)
    return Phases(phases=(inp, fwd, opt), method="host timers", attribution_steps=20,
                  step_time_s=0.12, sum_rel_diff=-0.07,
                  loops=(Loop(name="forward", iterations=(10, 11), time_s=(0.1, 0.1),
                              energy_j=(2.0, None)),),
                  energy_source="counter", energy_note="rapl", notes=("a",))


def _full() -> Result:
    """A Result with every field set to something other than its default."""
    stats = Stats(n=2, median_s=0.5, mean_s=0.5, trimmed_mean_s=0.5, trim_fraction=0.1,
                  std_s=0.01, min_s=0.49, max_s=0.51, samples_per_s=8.0,
                  samples_per_s_ci95=(7.5, 8.5), ci_rel_halfwidth=0.06,
                  stop_reason="iterations")
    reading = EnergyReading(device="cpu", scope="cpu-package", source="counter",
                            energy_j=3.0, details={"settle": {"s": 1.0}})
    return Result(
        id="abc", suite_id="s1", status="ok", error="e", spec=_spec(), sample_unit="sample",
        samples_per_step=4, param_count=10, stats=stats, iteration_times_s=(0.5, 0.51),
        warmup_times_s=(0.9,), build_time_s=1.0, compile_s=2.0, peak_memory_bytes=1024,
        peak_memory_source="rss", final_loss=0.25, energy=(reading,),
        power_timeline={"cpu": {"t_s": [0.0], "power_w": [5.0]}}, phases=_phases(),
        input=InputStats(source="generated", wait_s=(0.001,), wait_median_s=0.001,
                         wait_median_ci95_s=(0.001, 0.001), wait_mean_s=0.001,
                         stall_fraction=0.1,
                         loader_cpu=LoaderCpu(cpu_s=0.5, wall_s=1.0, cores_available=2,
                                              processes=2, method="m")),
        forward_flop_per_sample=1.0, flop_per_sample=3.0, flop_method="analytic",
        peak_flop_per_s=1e9, backend_extra={"x": 1}, noise={"flagged": True},
        machine={"host": "h"}, ranks={"world_size": 1}, started_at="t0", finished_at="t1",
        accelbench_version="9.9", schema_version=3,
    )


def test_the_record_is_the_fields_in_order_and_reads_back_equal() -> None:
    r = _full()
    assert all(getattr(r, f.name) != f.default for f in dataclasses.fields(Result)
               if f.default is not dataclasses.MISSING)  # every field really set
    data = json.loads(jsonout.dumps(r.to_dict()))
    assert list(data) == FIELDS
    assert data["stats"]["samples_per_s_ci95"] == [7.5, 8.5]
    assert data["energy"][0]["details"] == {"settle": {"s": 1.0}}
    assert Result.from_dict(data) == r


def test_a_record_without_input_leaves_the_key_out_as_before_it_existed() -> None:
    r = dataclasses.replace(_full(), input=None)
    data = r.to_dict()
    assert "input" not in data and list(data) == [f for f in FIELDS if f != "input"]
    assert Result.from_dict(data) == r
    assert "input_source" not in r.summary()


def test_an_old_record_reads_with_defaults_and_a_missing_id_is_refused() -> None:
    full = _full().to_dict()
    old = {k: full[k] for k in ("id", "status", "spec", "sample_unit", "samples_per_step")}
    old.update(energy=None, power_timeline=None, iteration_times_s=None, stats=None,
               retired_field=1)
    r = Result.from_dict(old)
    assert r.energy == () and r.power_timeline == {} and r.iteration_times_s == ()
    assert r.stats is None and r.flop_method == "" and r.schema_version == 0
    del old["id"]
    try:
        Result.from_dict(old)
    except KeyError as exc:
        assert exc.args == ("id",)
    else:
        raise AssertionError("a record without an id was read")


def test_request_carries_the_draft_and_the_spec_once() -> None:
    draft = Result(id="r1", suite_id="s", status="ok", spec=_spec(), sample_unit="sample",
                   samples_per_step=4, started_at="t0", accelbench_version="9.9")
    req = CaseRequest(draft=draft, plugins=("p.py",), flops={"flop_method": "m"},
                      parent_pid=123)
    data = json.loads(json.dumps(req.to_dict()))
    assert "spec" in data and "spec" not in data["draft"]
    # The distributed launcher adds its own pid for the ranks.
    back = CaseRequest.from_dict({**data, "agent_pid": 7})
    assert back == dataclasses.replace(req, agent_pid=7)


def test_the_worker_sends_the_draft_completed_as_result_to_dict() -> None:
    """The real worker process: its last message is ``Result.to_dict()`` of the draft it
    was given, every field present and in order, nothing else."""
    draft = Result(id="w1", suite_id="suite-w", status="ok", spec=_spec(),
                   sample_unit="sample", samples_per_step=4, started_at="t0",
                   accelbench_version="9.9")
    req = CaseRequest(draft=draft, plugins=(FAULTY_PLUGIN,),
                      flops={"flop_method": "not counted (test)"})
    p = subprocess.run([sys.executable, "-m", "accelbench.execution.worker"],
                       input=json.dumps(req.to_dict()), capture_output=True, text=True,
                       timeout=300, env=cli_env(), check=False)
    assert p.returncode == 0, p.stderr
    messages = [json.loads(line) for line in p.stdout.splitlines()]
    assert messages[-1]["type"] == "result"
    assert [m["type"] for m in messages].count("result") == 1
    record = messages[-1]["record"]
    assert list(record) == [f for f in FIELDS if f != "input"]  # synthetic data: no input
    r = Result.from_dict(record)
    assert json.loads(jsonout.dumps(r.to_dict())) == record
    assert r.status == "ok", r.error
    for name in ("id", "suite_id", "sample_unit", "samples_per_step", "started_at",
                 "accelbench_version", "spec"):
        assert getattr(r, name) == getattr(draft, name), name
    assert r.flop_method == "not counted (test)"
    assert r.stats is not None and r.stats.n == len(r.iteration_times_s) == 5
    assert len(r.warmup_times_s) == 2 and r.param_count and r.build_time_s
    assert r.finished_at and r.machine and r.energy[0].source == "unavailable"
