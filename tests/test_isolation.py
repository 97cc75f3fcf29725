"""Worker isolation: every way a case can fail becomes a stored status, and suites go on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import accelbench
from accelbench import api
from accelbench.execution.process import run_case
from accelbench.spec import MeasurementPolicy, MeterOptions, RunSpec
from accelbench.store import ResultFilter, open_store
from tests.conftest import FAULTY_PLUGIN


def _run(workload: str, **kw: object) -> accelbench.Result:
    return api.run(workload, size="tiny", plugins=[FAULTY_PLUGIN], max_time=0.3, **kw)  # type: ignore[arg-type]


def test_memory_error_is_stored_as_oom(db_path: Path) -> None:
    r = _run("test_oom")
    assert r.status == "oom"
    assert "MemoryError" in (r.error or "")
    assert r.param_count == 676  # known before the failing step
    with open_store(str(db_path)) as st:
        assert st.get(r.id) is not None and st.get(r.id).status == "oom"  # type: ignore[union-attr]


def test_exception_is_stored_as_error(db_path: Path) -> None:
    r = _run("test_error")
    assert r.status == "error"
    assert r.error == "ValueError: a bug in the user's model"


def test_segfault_is_stored_as_error_with_signal(db_path: Path) -> None:
    r = _run("test_segfault")
    assert r.status == "error"
    assert "SIGSEGV" in (r.error or "")
    assert r.param_count == 676


def test_hang_is_stored_as_timeout(db_path: Path) -> None:
    r = _run("test_hang", timeout=3)  # it sleeps for an hour
    assert r.status == "timeout"
    assert "3 s" in (r.error or "")


def test_suite_continues_past_every_failure(db_path: Path) -> None:
    order = ["test_oom", "test_segfault", "test_hang", "test_error", "test_mlp"]
    sid, results = api.suite(
        "quick", workloads=order, precisions=["fp32"], plugins=[FAULTY_PLUGIN],
        # A case's timeout starts once its worker is up and checked (process.prechecked):
        # 8 s are for a tiny MLP's build and 0.3 s of steps (under 1 s here, quiet).
        max_time=0.3, timeout=8,
    )
    by_name = {r.spec.workload: r.status for r in results}
    assert by_name == {
        "test_oom": "oom", "test_segfault": "error", "test_hang": "timeout",
        "test_error": "error", "test_mlp": "ok",
    }
    with open_store(str(db_path)) as st:
        assert len(st.query(ResultFilter(suite_id=sid))) == 5


def test_ok_run_records_measurement(db_path: Path) -> None:
    r = _run("test_mlp", tag="isolation")
    assert r.status == "ok" and r.error is None
    assert r.stats is not None and r.stats.n == len(r.iteration_times_s) >= 5
    assert r.stats.samples_per_s == pytest.approx(8 / r.stats.median_s)
    assert r.machine["software"]["torch"]
    assert r.machine["cpu"]["logical_cores"] >= 1
    assert r.started_at < r.finished_at
    assert r.energy_j_per_sample is None  # no sensor here: unavailable, not 0
    assert r.summary()["energy_source"] != "counter"


# -- OOM classification, divergence, --no-energy, worker logs (issue 9) ----------------------

PLUGINS = Path(__file__).resolve().parent / "plugins"


def run_plugin_case(
    workload: str,
    plugin: str,
    *,
    policy: MeasurementPolicy | None = None,
    threads: int | None = 1,
    batch_size: int = 4,
    meters: MeterOptions | None = None,
) -> accelbench.Result:
    """One case through the real worker process (``run_case``), no store, no FLOP count."""
    spec = RunSpec(
        workload=workload, size="tiny", batch_size=batch_size, device="cpu", framework="torch",
        threads=threads,
        policy=policy or MeasurementPolicy(iterations=5, warmup_min=2, warmup_max=2,
                                           timeout_s=120),
        meters=meters or MeterOptions(enabled=False),
    )
    return run_case(spec, samples_per_step=batch_size, sample_unit="sample",
                    plugins=[str(PLUGINS / plugin)],
                    known_flops={"flop_method": "not counted (test)"})


def test_torch_is_oom_knows_the_cpu_allocator_and_torch_types() -> None:
    import torch

    from accelbench.backends.torch.backend import is_oom

    with pytest.raises(RuntimeError) as alloc:
        torch.empty(2**62, dtype=torch.uint8)  # a real DefaultCPUAllocator failure
    assert "DefaultCPUAllocator: can't allocate memory" in str(alloc.value)
    assert is_oom(alloc.value)
    assert is_oom(RuntimeError("std::bad_alloc"))
    assert is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_oom(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))
    assert is_oom(MemoryError())
    assert not is_oom(RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x8 and 2x2)"))
    assert not is_oom(ValueError("a bug"))


def test_jax_is_oom_knows_xla_resource_exhausted() -> None:
    jnp = pytest.importorskip("jax.numpy")
    from accelbench.backends.jax.backend import is_oom

    with pytest.raises(RuntimeError) as real:
        jnp.zeros((2**42,), jnp.float32).block_until_ready()  # 16 TiB: XLA refuses it
    assert "RESOURCE_EXHAUSTED" in str(real.value)
    assert is_oom(real.value)
    assert is_oom(RuntimeError("Out of memory while trying to allocate 17179869184 bytes."))
    assert is_oom(RuntimeError("std::bad_alloc"))
    assert not is_oom(RuntimeError("INVALID_ARGUMENT: shapes must match"))


def test_worker_looks_through_a_wrapped_oom() -> None:
    from accelbench.backends import caused_by_oom

    try:
        try:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to ...")
        except RuntimeError as inner:
            raise ValueError("model failed to build") from inner
    except ValueError as outer:
        assert caused_by_oom("torch", outer)
    xla = RuntimeError("RESOURCE_EXHAUSTED: while allocating 16.00TiB")
    assert caused_by_oom("jax", xla) and not caused_by_oom("torch", xla)  # its backend's texts
    assert caused_by_oom("no-such-framework", MemoryError())
    assert not caused_by_oom("torch", ValueError("model failed to build"))


def test_real_cpu_allocation_failure_is_stored_as_oom() -> None:
    r = run_plugin_case("run_cpu_oom", "run_cpu_oom.py")
    assert r.status == "oom", r.error
    assert "can't allocate memory" in (r.error or "")
    assert r.param_count == 18


def test_nan_loss_is_stored_as_diverged(tmp_path: Path) -> None:
    r = run_plugin_case("run_nan", "run_nan.py")
    assert r.status == "diverged"
    assert (r.error or "").startswith("loss became nan at the end of warm-up (iteration 2)")
    assert "\n" not in (r.error or "")
    assert len(r.iteration_times_s) == 5 and len(r.warmup_times_s) == 2  # the times are kept
    assert r.stats is not None and r.stats.n == 5
    assert r.final_loss is None  # not NaN: the record's JSON stays strict
    with open_store(str(tmp_path / "r.db")) as st:
        st.save(r)
        back = st.get(r.id)
    assert back is not None and back.status == "diverged" and back.error == r.error


def test_loss_going_infinite_late_is_caught_at_the_end() -> None:
    r = run_plugin_case("run_inf_late", "run_nan.py",
                        policy=MeasurementPolicy(iterations=8, warmup_min=3, warmup_max=3))
    assert r.status == "diverged"
    # An infinite loss makes NaN gradients, so the loss read at the end may be either.
    assert re.match(r"loss became (inf|nan) at the end of measurement \(iteration 11\)",
                    r.error or "")
    assert r.stats is not None and r.stats.n == 8


def test_finite_loss_is_ok_and_no_energy_says_why() -> None:
    r = run_plugin_case("test_mlp", FAULTY_PLUGIN)
    assert r.status == "ok", r.error
    assert r.final_loss is not None
    [reading] = r.energy
    assert reading.device == "cpu" and reading.scope == "cpu-package"
    assert reading.source == "unavailable"
    assert reading.note == "energy not measured: --no-energy"
    assert r.energy_source == "unavailable"
    assert r.summary()["energy_notes"] == ["energy not measured: --no-energy"]


def test_worker_log_files_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ok = run_plugin_case("test_mlp", FAULTY_PLUGIN)
    failed = run_plugin_case("test_error", FAULTY_PLUGIN)
    crashed = run_plugin_case("test_segfault", FAULTY_PLUGIN)
    assert (ok.status, failed.status, crashed.status) == ("ok", "error", "error")
    assert "SIGSEGV" in (crashed.error or "")
    assert list(tmp_path.glob("accelbench-worker-*")) == []
