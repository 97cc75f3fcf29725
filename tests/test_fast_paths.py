"""Fast paths as case options (issue 13): --compile, --channels-last, --fused-optimizer act on
the torch step, are part of the case key and the record, are shown where cases are read, and
are refused before anything runs where they cannot act (JAX, non-CNN models); the optimizer
comes from the workload; the ``modern`` suite turns compile on."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from torch import nn

from accelbench.backends.jax.backend import JAX_FAST_PATHS
from accelbench.backends.torch.step import ADAMW_BETAS, TorchTrainStep
from accelbench.errors import ConfigError
from accelbench.execution.process import run_case
from accelbench.planning.cases import prepare_case
from accelbench.result import Result
from accelbench.spec import FastPaths, MeasurementPolicy, MeterOptions, RunChoices, RunSpec
from accelbench.store import ResultFilter, open_store
from accelbench.workloads.registry import Batch, Workload, list_workloads
from tests.conftest import run_cli


class AdamWProbe(Workload):
    """A two-layer MLP whose description asks for AdamW (as the transformers of today do).
    Not registered: a registered test workload would join every registry-wide test and
    suite that runs after this module is imported."""

    name: ClassVar[str] = "test_fast_adamw_mlp"
    family: ClassVar[str] = "test"
    sample_unit: ClassVar[str] = "sample"
    default_batch_sizes = {"tiny": (8,), "small": (8,), "paper": (8,)}
    learning_rate: ClassVar[float] = 1e-2
    optimizer: ClassVar[str] = "adamw"
    weight_decay: ClassVar[float] = 0.05

    def build_model(self, size):
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def make_batch(self, size, batch_size, device, generator) -> Batch:
        x = torch.randn(batch_size, 16, generator=generator).to(device)
        y = torch.randint(0, 4, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)


def _probe_spec(fast: FastPaths) -> RunSpec:
    return RunSpec(workload=AdamWProbe.name, size="tiny", batch_size=8, fast_paths=fast)


def _spec(workload: str, fast: FastPaths) -> RunSpec:
    return prepare_case(workload, RunChoices(size="tiny"), fast_paths=fast,
                        check_hardware=False).spec


# -- the optimizer and the fused implementation, built in this process ---------------------

def test_workload_optimizer_adamw_is_built_with_its_betas_and_weight_decay() -> None:
    wl = AdamWProbe()
    step = TorchTrainStep(wl, _probe_spec(FastPaths()))  # type: ignore[arg-type]
    assert isinstance(step.optimizer, torch.optim.AdamW)
    group = step.optimizer.param_groups[0]
    assert tuple(group["betas"]) == ADAMW_BETAS == (0.9, 0.95)
    assert group["weight_decay"] == pytest.approx(0.05)
    assert group["lr"] == pytest.approx(1e-2)
    assert not group["fused"]
    losses: list[float] = []
    for _ in range(20):
        step.step()
        losses.append(step.loss_value() or float("nan"))
    assert losses[-1] < losses[0]  # it trains
    assert step.extra()["optimizer"] == "AdamW"

    fused = TorchTrainStep(wl, _probe_spec(FastPaths(fused_optimizer=True)))  # type: ignore[arg-type]
    assert fused.optimizer.param_groups[0]["fused"] is True
    fused.step()
    assert fused.extra()["optimizer_impl"] == "fused"


# -- end to end in real workers, stored, shown ---------------------------------------------

def _run_short(workload: str, fast: FastPaths) -> Result:
    """One tiny case in a real worker, timed briefly (a fixed few iterations: these tests
    check what the fast path did, not how fast it is)."""
    policy = MeasurementPolicy(warmup_min=1, warmup_max=2, warmup_max_time_s=1.0,
                               iterations=3)
    case = prepare_case(workload, RunChoices(size="tiny"), fast_paths=fast, policy=policy,
                        meters=MeterOptions(enabled=False))
    return run_case(case.spec, samples_per_step=case.samples_per_step,
                    sample_unit=case.sample_unit)


def test_channels_last_and_fused_run_end_to_end_and_show_in_results_and_export(
    db_path: Path,
) -> None:
    cl = _run_short("resnet50", FastPaths(channels_last=True))
    fused = _run_short("lstm", FastPaths(fused_optimizer=True))
    assert cl.status == "ok" and fused.status == "ok", (cl.error, fused.error)
    with open_store(str(db_path)) as st:
        st.save(cl)
        st.save(fused)
    assert cl.backend_extra["memory_format"] == "channels_last"
    assert fused.backend_extra["optimizer"] == "SGD"
    assert fused.backend_extra["optimizer_impl"] == "fused"
    assert cl.compile_s is None  # nothing compiled without --compile
    # The spec round-trips and the case is not the plain case.
    for r in (cl, fused):
        assert RunSpec.from_dict(r.spec.to_dict()) == r.spec
        plain = _spec(r.spec.workload, FastPaths())
        assert r.spec.case_key() != plain.case_key()
    assert cl.summary()["fast_paths"] == ["channels_last"]
    assert fused.summary()["fast_paths"] == ["fused_optimizer"]

    wide = run_cli("results", "--wide", db=db_path)
    assert wide.returncode == 0, wide.stderr
    # Under the workload name, one a line (full names wide, short ones in the 80-column table).
    assert "+channels_last" in wide.stdout and "+fused_optimizer" in wide.stdout
    narrow = run_cli("results", db=db_path)
    assert "+ch-last" in narrow.stdout and "+fused-opt" in narrow.stdout
    listed = json.loads(run_cli("results", "--json", db=db_path).stdout)
    assert sorted(r["fast_paths"] for r in listed) == [["channels_last"], ["fused_optimizer"]]
    exported = run_cli("export", "--format", "csv", db=db_path)
    assert exported.returncode == 0, exported.stderr
    rows = {r["workload"]: r for r in csv.DictReader(io.StringIO(exported.stdout))}
    assert rows["resnet50"]["fast_paths"] == "channels_last"
    assert rows["lstm"]["fast_paths"] == "fused_optimizer"


# -- refusals, before anything runs --------------------------------------------------------

def test_channels_last_on_a_non_cnn_and_compile_on_jax_exit_2_with_one_line(
    db_path: Path,
) -> None:
    for args, expected in (
        (("run", "lstm", "--size", "tiny", "--channels-last"), "family rnn"),
        (("run", "lstm", "--size", "tiny", "--framework", "jax", "--compile"),
         "JAX always compiles"),
    ):
        proc = run_cli(*args, db=db_path)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], proc.stderr
    if db_path.exists():  # nothing ran, nothing was stored
        with open_store(str(db_path)) as st:
            assert st.query(ResultFilter()) == []


@pytest.mark.parametrize("flag", ["compile", "channels_last", "fused_optimizer"])
def test_every_fast_path_is_refused_for_jax(flag: str) -> None:
    with pytest.raises(ConfigError) as err:
        prepare_case("resnet50", RunChoices(size="tiny", framework="jax"),
                     fast_paths=FastPaths(**{flag: True}), check_hardware=False)
    assert str(err.value) == JAX_FAST_PATHS[flag]
    assert "\n" not in str(err.value)


# -- the modern suite ----------------------------------------------------------------------

def test_suite_modern_dry_run_lists_its_cases_with_compile_on(tmp_path: Path) -> None:
    proc = run_cli("suite", "modern", "--dry-run", "--json", db=tmp_path / "r.db")
    assert proc.returncode == 0, proc.stderr
    cases = json.loads(proc.stdout)["cases"]
    registered = {wl.name for wl in list_workloads()}
    present = [w for w in ("llm", "bert", "vit") if w in registered]
    assert sorted({c["workload"] for c in cases}) == sorted(present)
    for c in cases:
        assert c["fast_paths"] == ["compile"] and c["size"] == "paper"
        assert c["precision"] == "amp_bf16"  # the CPU has bf16
    for name in present:
        batches = [c["batch_size"] for c in cases if c["workload"] == name]
        assert len(batches) >= 3 and batches == sorted(batches)  # largest last


# -- --compile, end to end (one cold compile: slow on a CPU) --------------------------------

@pytest.mark.slow
def test_compile_runs_end_to_end_and_its_time_is_in_no_measured_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A cache of our own: a real compile, not a load of an earlier test's kernels.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    name = "llm" if "llm" in {wl.name for wl in list_workloads()} else "transformer"
    r = _run_short(name, FastPaths(compile=True))
    assert r.status == "ok", r.error
    assert r.compile_s is not None and r.compile_s > 0
    assert r.stats is not None
    # The first (tracing, compiling) step ran while the step was built: it is in neither
    # the warm-up nor the measured times, and it dwarfs every step that followed.
    assert r.build_time_s is not None and r.build_time_s >= r.compile_s
    assert max((*r.warmup_times_s, *r.iteration_times_s)) < r.compile_s
    assert r.compile_s > 5 * r.stats.median_s
    compiled = r.backend_extra["compile"]
    assert (compiled["mode"], compiled["backend"]) == ("default", "inductor")
    assert compiled["graphs_at_build"] >= 1 and compiled["fx_graph_cache_misses"] >= 1
    assert compiled["graphs_after_build"] == 0  # nothing recompiled while measuring
    assert "note" not in compiled


def test_compile_that_compiles_no_graph_says_so(db_path: Path) -> None:
    """TorchDynamo skips nn.LSTM and runs it eagerly: lstm with --compile compiles nothing,
    and the record and the terminal say the flag changed nothing (not a compile time)."""
    p = run_cli("run", "lstm", "--size", "tiny", "--iterations", "3", "--compile",
                "--no-energy", db=db_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "no graph compiled, it ran eagerly" in p.stdout
    notes = [ln for ln in p.stderr.splitlines() if "compiled no graph" in ln]
    assert len(notes) == 1 and notes[0].startswith("accelbench: note: lstm fp32"), p.stderr
    with open_store(str(db_path)) as st:
        (r,) = st.query(ResultFilter())
    compiled = r.backend_extra["compile"]
    assert compiled["graphs_at_build"] == 0
    assert "--compile changed nothing" in compiled["note"]
