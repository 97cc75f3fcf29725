"""Worker isolation: every way a case can fail becomes a stored status, and suites go on."""

from __future__ import annotations

from pathlib import Path

import pytest

import accelbench
from accelbench import api
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
    r = _run("test_hang", timeout=6)
    assert r.status == "timeout"
    assert "6 s" in (r.error or "")


def test_suite_continues_past_every_failure(db_path: Path) -> None:
    order = ["test_oom", "test_segfault", "test_hang", "test_error", "test_mlp"]
    sid, results = api.suite(
        "quick", workloads=order, precisions=["fp32"], plugins=[FAULTY_PLUGIN],
        max_time=0.3, timeout=6,
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
