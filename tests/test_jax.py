"""The JAX backend: every model trains, matches its torch twin, and runs end to end.

Models run for real on the CPU through the backend's own jitted step
(``JaxTrainStep``; that every workload trains at tiny size is checked in
tests/test_phases_jax.py, on the one step per workload that file builds); the end-to-end
tests go through real worker processes and a real SQLite store. JAX is a test dependency
(``.[test]`` pins it).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelbench import api
from accelbench.backends import get_backend
from accelbench.errors import ConfigError
from accelbench.spec import SIZES, RunSpec
from accelbench.store import ResultFilter, open_store
from accelbench.workloads import get_implementation, implementation_frameworks, list_workloads
from tests.conftest import TESTS, cli_env, hide_jax, run_cli

pytest.importorskip("jax")
pytest.importorskip("flax")

JAX_OOM_PLUGIN = str(TESTS / "plugins" / "jax_oom.py")
BUILTIN = [w for w in list_workloads() if "jax" in implementation_frameworks(w.name)]
by_name = pytest.mark.parametrize("workload", [w.name for w in BUILTIN])


def test_every_builtin_workload_has_a_jax_implementation() -> None:
    assert {w.name for w in BUILTIN} == {
        "resnet50", "vgg16", "inception_v3", "lstm", "deepspeech2", "transformer",
        "llm", "bert", "vit"}


@by_name
def test_parameter_parity_with_torch(workload: str) -> None:
    """The twins have the same parameter count at every size, in the shipped facts table,
    which tests/test_shipped_counts.py checks is current and equal to a real count of every
    workload x size x framework. The live count of each built step is checked against the
    torch twin's in tests/test_phases_jax.py (counting tiny Inception and ResNet-50 again
    here cost 24 s)."""
    from accelbench.planning import shipped

    for size in SIZES:
        table = {fw: shipped.lookup(workload, size, fw) for fw in ("torch", "jax")}
        assert table["torch"] is not None and table["jax"] is not None, (workload, size)
        assert table["jax"]["param_count"] == table["torch"]["param_count"] > 0, size


@by_name
@pytest.mark.parametrize("size", SIZES)
def test_flops_match_the_torch_twin(workload: str, size: str) -> None:
    """Both counters count matmuls and convolutions only, so twins agree closely. Read from
    the shipped facts table, which tests/test_shipped_counts.py checks is current and equal
    to a real count of every workload x size x framework (counting tiny Inception again
    here cost about a minute on a busy 2-core machine; the table covers every size)."""
    from accelbench.planning import shipped

    torch_count = shipped.lookup(workload, size, "torch")
    jax_count = shipped.lookup(workload, size, "jax")
    assert torch_count is not None and jax_count is not None
    assert jax_count["flop_method"] in (
        "jaxpr", torch_count["flop_method"].replace("flop_counter", "jaxpr"))
    for key in ("forward_flop_per_sample", "flop_per_sample"):  # flop_per_sample: training
        assert jax_count[key] == pytest.approx(torch_count[key], rel=0.02), key


def test_amp_bf16_step_runs_with_float32_master_weights() -> None:
    import jax.numpy as jnp

    spec = RunSpec(workload="lstm", size="tiny", framework="jax", precision="amp_bf16",
                   batch_size=4)
    step = get_backend("jax").build_step(spec, get_implementation("lstm", "jax"))
    step.step()
    step.synchronize()
    assert math.isfinite(step.loss_value() or math.nan)
    params = step._state[0]  # the donated parameter tree stays float32
    import jax

    assert {x.dtype for x in jax.tree.leaves(params)} == {jnp.dtype("float32")}


@pytest.mark.parametrize(("precision", "scaled"), [("fp32", False), ("amp_fp16", True)])
def test_only_amp_fp16_steps_carry_a_loss_scale(precision: str, scaled: bool) -> None:
    """The loss scale is two scalar buffers in and out of every step where it is a
    variable: only amp_fp16 changes it (a tiny lstm step was 8% slower with them)."""
    import jax

    spec = RunSpec(workload="lstm", size="tiny", framework="jax", precision=precision,
                   batch_size=4)
    step = get_backend("jax").build_step(spec, get_implementation("lstm", "jax"))
    params, rest, opt_state, scale = step.state
    leaves = len(jax.tree.leaves((params, rest, opt_state, step.batch)))
    n_scale = len(jax.tree.leaves(scale))
    assert n_scale == 2
    args = step._compiled.args_info
    assert len(jax.tree.leaves(args)) == leaves + (n_scale if scaled else 0)
    for _ in range(3):
        step.step()
    step.synchronize()
    assert math.isfinite(step.loss_value() or math.nan)
    assert float(step.state[3]["scale"]) == (2.0**16 if scaled else 1.0)


def test_run_framework_jax_is_stored_with_compile_time(db_path: Path) -> None:
    r = api.run("transformer", size="tiny", framework="jax", iterations=12, idle_s=0)
    assert r.status == "ok", r.error
    assert r.spec.framework == "jax"
    assert r.compile_s is not None and r.compile_s > 0
    # Compilation is never in the measured steps: every measured step is far shorter.
    assert max(r.iteration_times_s) < r.compile_s
    assert r.flop_per_sample and r.flop_method == "jaxpr"
    assert r.machine["software"]["jax"] and r.machine["software"]["framework"] == "jax"
    with open_store(str(db_path)) as st:
        back = st.query(ResultFilter(framework="jax"))
    assert [b.id for b in back] == [r.id]
    assert back[0].compile_s == r.compile_s and back[0].spec.framework == "jax"


def test_cli_run_jax_json_and_results_filter(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--framework", "jax", "--iterations", "10",
                "--no-idle", "--json", db=db)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["framework"] == "jax" and out["status"] == "ok" and out["compile_s"] > 0
    assert out["peak_memory_bytes"] > 2**20  # XLA keeps no CPU statistics: the worker's RSS
    p = run_cli("results", "--framework", "jax", "--json", db=db)
    assert [r["framework"] for r in json.loads(p.stdout)] == ["jax"]
    p = run_cli("results", "--framework", "torch", "--json", db=db)
    assert json.loads(p.stdout) == []


def test_xla_resource_exhausted_is_stored_as_oom(db_path: Path) -> None:
    r = api.run("test_jax_huge", size="tiny", framework="jax", plugins=[JAX_OOM_PLUGIN],
                iterations=3, idle_s=0)
    assert r.status == "oom", r.error
    assert "RESOURCE_EXHAUSTED" in (r.error or "")


def test_suite_frameworks_runs_both_frameworks_and_compare_pairs_them(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("suite", "frameworks", "--dry-run", db=db)
    assert p.returncode == 0, p.stderr
    lines = [ln.split("\t") for ln in p.stdout.splitlines()[1:-1]]  # no header, no total
    # Every workload, fp32 and bf16 (the CPU supports both in both frameworks), both frameworks.
    assert len(lines) == 9 * 2 * 2
    assert {ln[5] for ln in lines} == {"torch", "jax"} and {ln[1] for ln in lines} == {"tiny"}
    p = run_cli("suite", "frameworks", "--size", "tiny", "--workload", "lstm",
                "--precision", "fp32", "--max-time", "1", "--no-idle", "--repeats", "1",
                "--json", db=db, timeout=600)
    assert p.returncode == 0, p.stderr
    results = json.loads(p.stdout)["results"]
    assert sorted((r["framework"], r["status"]) for r in results) == [
        ("jax", "ok"), ("torch", "ok")]
    p = run_cli("compare", "framework=torch", "framework=jax", "--json", db=db)
    assert p.returncode == 0, p.stderr
    cmp = json.loads(p.stdout)
    assert cmp["axes"] == ["framework"]
    (case,) = cmp["cases"]
    assert case["workload"] == "lstm" and case["a_framework"] == "torch"
    assert case["b_framework"] == "jax" and case["throughput_ratio"] > 0
    low, high = case["throughput_ratio_ci95"]
    assert low <= case["throughput_ratio"] <= high


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "lstm", "--framework", "mxnet"), "unknown framework 'mxnet'"),
        (("run", "lstm", "--framework", "jax", "--device", "tpu:0", "--size", "tiny"),
         "device tpu:0 is unavailable"),
        (("run", "lstm", "--framework", "torch", "--device", "tpu:0"), "unknown device"),
        (("suite", "quick", "--size", "small"), "fixes its sizes"),
    ],
)
def test_bad_framework_input_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    p = run_cli(*args, db=tmp_path / "r.db")
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.db").exists()


def test_missing_jax_is_one_line_with_the_install_command(tmp_path: Path) -> None:
    hide = hide_jax(tmp_path / "hide")
    env = cli_env(tmp_path / "r.db", PYTHONPATH=str(hide))
    p = subprocess.run(
        [sys.executable, "-m", "accelbench.cli", "run", "lstm", "--framework", "jax",
         "--size", "tiny"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == " ".join(  # the CLI prints errors on one line, spaces collapsed
        ("accelbench: error: jax is not installed: " + get_backend("jax").install_hint).split())
    assert not (tmp_path / "r.db").exists()


def test_importing_the_front_layers_imports_no_framework() -> None:
    code = (
        "import sys, accelbench.cli, accelbench.store, accelbench.report, accelbench.api, "
        "accelbench.planning.facts, accelbench.workloads, accelbench.backends; "
        "import accelbench.report.html, accelbench.report.compare, accelbench.roofline.data; "
        "bad = [m for m in ('torch', 'jax', 'flax') if m in sys.modules]; "
        "assert not bad, bad"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=False)
    assert p.returncode == 0, p.stderr


def test_unimplemented_pair_is_refused_before_anything_runs(db_path: Path) -> None:
    from tests.conftest import FAULTY_PLUGIN

    with pytest.raises(ConfigError, match="no jax implementation"):
        api.run("test_mlp", size="tiny", framework="jax", plugins=[FAULTY_PLUGIN])
    assert not db_path.exists()


def test_two_frameworks_example_runs_as_a_script(tmp_path: Path) -> None:
    example = TESTS.parent / "examples" / "two_frameworks.py"
    p = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                       env=cli_env(tmp_path / "r.db"), timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("torch ok ") and lines[1].startswith("jax ok ")
    assert "compile" in lines[1] and lines[2].startswith("jax/torch throughput ratio ")


def test_jax_times_blocks_of_steps_and_keeps_the_step_count(db_path: Path) -> None:
    """A real tiny JAX run: measured in blocks timed off the loop, N steps exactly, the
    record saying how (issue 25)."""
    r = api.run("lstm", size="tiny", framework="jax", iterations=125, idle_s=0)
    assert r.status == "ok", r.error
    st = r.stats
    assert st is not None and st.n == 125 and st.stop_reason == "iterations"
    k = st.steps_per_block
    assert 1 < k <= 4  # a tiny step is far under BLOCK_TARGET_S; 125 steps hold 30 blocks
    assert len(r.iteration_times_s) == math.ceil(125 / k)  # one per-step mean a block
    assert f"per-step means of blocks of {k} steps" in st.timing
    assert "stamped by a thread of its own" in st.timing
    assert "the loop never waits for the device" in st.timing
    # Every block holds k steps but the last, which lands on the count.
    assert sum(st.block_steps) == 125 and set(st.block_steps[:-1]) == {k}
    with open_store(str(db_path)) as store:
        back = store.get(r.id)
    assert back is not None and back.stats is not None
    assert (back.stats.n, back.stats.steps_per_block, back.stats.timing) == (125, k, st.timing)
    assert back.stats.block_steps == st.block_steps
    p = run_cli("results", "--json", db=db_path)
    assert [row["iterations"] for row in json.loads(p.stdout)] == [125]


def test_jax_blocks_are_waited_for_off_the_loop() -> None:
    """Real tiny JAX steps through measure(): --iterations 23 in blocks of 5 runs 23 steps,
    no more, each block timed once; every wait for a block's end happens on the timer's own
    thread, and the loop's only wait is the one before measuring (issue 25)."""
    import threading

    from accelbench.backends.blocks import StampedBlocks, block_timer_of
    from accelbench.backends.jax import backend as jax_backend
    from accelbench.execution.measure import Loop, measure
    from accelbench.spec import MeasurementPolicy

    spec = RunSpec(workload="lstm", size="tiny", batch_size=4, framework="jax")
    step = get_backend("jax").build_step(spec, get_implementation("lstm", "jax"))
    ran = {"n": 0, "syncs": 0}
    waiters: list[str] = []
    one, sync = step.step, step.synchronize

    def counted() -> None:
        ran["n"] += 1
        one()

    def counted_sync() -> None:
        ran["syncs"] += 1
        sync()

    def noted_wait(loss: Any) -> None:
        waiters.append(threading.current_thread().name)
        loss.block_until_ready()

    step.step = counted  # type: ignore[method-assign]
    step.synchronize = counted_sync  # type: ignore[method-assign]
    before = step.loss_value()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jax_backend, "_wait_ready", noted_wait)
        timer = block_timer_of(step)
        assert isinstance(timer, StampedBlocks)
        got = measure(Loop(step.step, step.synchronize, MeasurementPolicy(iterations=23), 4,
                           blocks=timer), k=5)
    assert got.stop_reason == "iterations" and ran["n"] == got.steps == 23
    assert got.block_steps == [5, 5, 5, 5, 3] and all(t > 0 for t in got.times_s)
    assert waiters == ["accelbench-blocks"] * 5  # one wait a block, none on the loop
    assert ran["syncs"] == 1  # measure()'s own, before its first block
    assert step.last_loss.is_ready()  # measurement ends with every step done
    assert step.loss_value() != before  # the 23 steps trained


def test_a_traced_sharding_probe_does_not_walk_the_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """flax NNX probes ``getattr(value, "sharding", None)`` at every Variable assignment;
    under a trace jax built that AttributeError's message from every equation traced so
    far (quadratic tracing). The backend's jax raises the same error without the walk."""
    from jax._src import core
    from jax._src.interpreters import partial_eval

    from accelbench.backends.jax.runtime import import_jax, linear_time_tracing

    jax = import_jax()
    assert linear_time_tracing()  # this jax needed it, and has it
    walked: list[str] = []
    for cls in (core.Tracer, partial_eval.DynamicJaxprTracer):  # the walk, where it is
        monkeypatch.setattr(cls, "_origin_msg", lambda self: walked.append("x") or "")
    seen: list[object] = []

    def f(x):  # type: ignore[no-untyped-def]
        y = x * 2
        seen.append(getattr(y, "sharding", None))
        assert not hasattr(y, "sharding")
        return y

    assert float(jax.jit(f)(jax.numpy.float32(1.5))) == 3.0
    assert seen == [None] and walked == []
    with pytest.raises(AttributeError, match="'sharding' attribute is not available"):
        jax.make_jaxpr(lambda x: x.sharding)(1.0)
