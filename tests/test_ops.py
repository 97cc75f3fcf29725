"""Operator benchmarks: cases, running (in-process), OOM handling, storage and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from accelbench.errors import ConfigError, UnsupportedError
from accelbench.execution.opbench import (
    OpRun,
    check_op_precision,
    op_precisions,
    run_case,
    run_cases,
)
from accelbench.opbench.cases import (
    MATMUL_SIDES,
    OpCase,
    attention_shape,
    default_cases,
    lstm_shape,
)
from accelbench.opbench.precision import op_precision
from accelbench.spec import MeasurementPolicy
from accelbench.store import open_store
from tests.conftest import run_cli

FAST = MeasurementPolicy(iterations=3, warmup_min=1, warmup_max=1)

SMALL_CASES = [
    OpCase(op="matmul", shape={"m": 32, "n": 16, "k": 8}),
    OpCase(op="conv2d", shape={"n": 1, "h": 12, "w": 12, "c_in": 3, "kh": 3, "kw": 3,
                               "c_out": 4, "stride": 2}, pass_="forward_backward"),
    OpCase(op="lstm", shape={"batch": 2, "seq_len": 3, "input_size": 4, "hidden_size": 5},
           pass_="forward_backward"),
    OpCase(op="attention", shape={"batch": 1, "heads": 2, "q_len": 4, "kv_len": 4,
                                  "head_dim": 8}, pass_="forward_backward"),
    OpCase(op="attention", shape={"batch": 1, "heads": 2, "q_len": 4, "kv_len": 4,
                                  "head_dim": 8}, precision="bf16"),
]


def test_case_validation() -> None:
    with pytest.raises(ConfigError):
        OpCase(op="gemv", shape={"m": 1})
    with pytest.raises(ConfigError):
        OpCase(op="matmul", shape={"m": 1, "n": 1, "k": 1}, precision="int8")
    with pytest.raises(ConfigError):
        OpCase(op="matmul", shape={"m": 1, "n": 1, "k": 1}, pass_="forward_backward")
    with pytest.raises(ConfigError):
        OpCase(op="matmul", shape={"m": 0, "n": 1, "k": 1})
    with pytest.raises(ConfigError):
        OpCase(op="matmul", shape={"m": 1, "n": 1})  # missing k
    with pytest.raises(ConfigError):  # kernel larger than the input
        OpCase(op="conv2d", shape={"n": 1, "h": 2, "w": 2, "c_in": 1, "kh": 3, "kw": 3,
                                   "c_out": 1, "stride": 1})


def test_precision_mapping() -> None:
    assert op_precision("amp_fp16") == "fp16"
    assert op_precision("amp_bf16") == "bf16"
    assert op_precision("fp32") == "fp32" and op_precision("tf32") == "tf32"
    with pytest.raises(ConfigError):
        op_precision("int8")
    assert op_precisions("cpu") == ("fp32", "bf16")
    with pytest.raises(UnsupportedError):
        check_op_precision("cpu", "fp16")


def test_default_cases_follow_the_paper_and_the_workloads() -> None:
    paper = default_cases("paper", ["fp32"], ops=["matmul", "conv2d"], passes=["forward"])
    sides = [c.shape["n"] for c in paper if c.op == "matmul"]
    assert sides == [2048, 4096, 8192] == list(MATMUL_SIDES["paper"])
    convs = [c for c in paper if c.op == "conv2d"]
    assert [c.shape["n"] for c in convs] == [256, 128, 256]
    tiny = default_cases("tiny", ["fp32", "bf16"], extra_mnk=[(3, 5, 7)])
    assert {c.op for c in tiny} == {"matmul", "conv2d", "lstm", "attention"}
    assert all(c.pass_ == "forward" for c in tiny if c.op == "matmul")
    assert any(c.shape == {"m": 3, "n": 5, "k": 7} for c in tiny)
    assert {c.shape["n"] for c in tiny if c.op == "conv2d"} == {1}
    assert len(tiny) == 2 * (3 + 3 * 2 + 2 + 2)
    assert lstm_shape("paper") == {"batch": 64, "seq_len": 20, "input_size": 1500,
                                   "hidden_size": 1500}
    assert attention_shape("paper") == {"batch": 32, "heads": 8, "q_len": 32, "kv_len": 32,
                                        "head_dim": 64}
    with pytest.raises(ConfigError):
        default_cases("huge", ["fp32"])


@pytest.mark.parametrize("case", SMALL_CASES, ids=lambda c: c.label)
def test_run_case_measures(case: OpCase) -> None:
    res = run_case(case, OpRun(device="cpu", policy=FAST, device_name="Test CPU",
                               measured_peaks={case.precision: 1e12},
                               theoretical_peaks={case.precision: 2e12}))
    assert res.status == "ok", res.error
    assert len(res.times_s) == 3 and res.stop_reason == "iterations"
    assert res.median_s is not None and res.ci_low_s is not None and res.ci_high_s is not None
    assert res.ci_low_s <= res.median_s <= res.ci_high_s
    assert res.achieved_flop_per_s == pytest.approx(case.flops / res.median_s)
    assert res.pct_measured_peak == pytest.approx(100 * res.achieved_flop_per_s / 1e12)
    assert res.pct_theoretical_peak == pytest.approx(res.pct_measured_peak / 2)
    assert res.summary()["intensity_flop_per_byte"] == case.flops / case.min_bytes


def test_oom_and_errors_become_statuses(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_build(case: OpCase, device: str, seed: int = 0):  # type: ignore[no-untyped-def]
        calls.append(case.op)
        if case.op == "matmul":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
        raise RuntimeError("kernel exploded")

    from accelbench.backends.torch.opbench import TorchOps

    monkeypatch.setattr(TorchOps, "build_step", lambda self, *a, **k: fake_build(*a, **k))
    results = run_cases(SMALL_CASES[:2], OpRun(device="cpu", policy=FAST))
    assert [r.status for r in results] == ["oom", "error"]
    assert "out of memory" in (results[0].error or "")
    assert results[1].error == "RuntimeError: kernel exploded"
    assert results[0].median_s is None and results[0].achieved_flop_per_s is None
    assert calls == ["matmul", "conv2d"]  # the failure did not stop the next case


def test_store_round_trip(tmp_path: Path) -> None:
    results = run_cases(SMALL_CASES[:2], OpRun(device="cpu", policy=FAST, device_name="Test CPU",
                                              tag="t1"))
    with open_store(str(tmp_path / "r.db")) as st:
        for r in results:
            st.save_op_result(r)
        back = st.query_op_results()
        assert {b.id for b in back} == {r.id for r in results}
        by_id = {b.id: b for b in back}
        for r in results:
            b = by_id[r.id]
            assert b.case == r.case
            assert b.times_s == r.times_s
            assert b.achieved_flop_per_s == pytest.approx(r.achieved_flop_per_s)
            assert b.device_name == "Test CPU" and b.tag == "t1"
        assert [b.case.op for b in st.query_op_results(op="conv2d")] == ["conv2d"]
        assert st.query_op_results(device="cuda:0") == []


def test_cli_ops_stores_and_lists(db_path: Path) -> None:
    p = run_cli("ops", "--size", "tiny", "--op", "matmul", "--matmul-sizes", "64",
                "--mnk", "8,16,32", "--iterations", "2", "--json", db=db_path)
    assert p.returncode == 0, p.stderr
    ran = json.loads(p.stdout)
    assert {r["label"] for r in ran} == {
        "matmul 64x64 @ 64x64 fp32 fwd", "matmul 64x64 @ 64x64 bf16 fwd",
        "matmul 8x32 @ 32x16 fp32 fwd", "matmul 8x32 @ 32x16 bf16 fwd",
    }
    assert all(r["status"] == "ok" and r["achieved_flop_per_s"] > 0 for r in ran)
    assert ran[0]["flops"] == 2 * 64**3
    listed = run_cli("ops", "--list", "--json", db=db_path)
    assert listed.returncode == 0, listed.stderr
    assert {r["id"] for r in json.loads(listed.stdout)} == {r["id"] for r in ran}
    table = run_cli("ops", "--list", "--precision", "bf16", db=db_path)
    assert table.returncode == 0 and "matmul" in table.stdout and "fp32" not in table.stdout


def test_cli_ops_user_errors(db_path: Path) -> None:
    p = run_cli("ops", "--size", "tiny", "--precision", "fp16", db=db_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "accelbench: error: precision fp16 is not supported on cpu; supported: fp32, bf16"
    ]
    p = run_cli("ops", "--device", "cuda:3", db=db_path)
    assert p.returncode == 2 and "unavailable" in p.stderr


def test_jax_runs_the_same_operator_cases(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    results = run_cases(SMALL_CASES, OpRun(device="cpu", policy=FAST, framework="jax"))
    assert [r.status for r in results] == ["ok"] * len(SMALL_CASES), [r.error for r in results]
    assert all(r.framework == "jax" and len(r.times_s) == 3 for r in results)
    with open_store(str(tmp_path / "r.db")) as st:
        for r in results:
            st.save_op_result(r)
        st.save_op_result(run_case(SMALL_CASES[0], OpRun(device="cpu", policy=FAST)))
        assert len(st.query_op_results(framework="jax")) == len(SMALL_CASES)
        (torch_row,) = st.query_op_results(framework="torch")
    assert torch_row.framework == "torch"


def test_cli_ops_and_peaks_with_jax(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    db = tmp_path / "r.db"
    p = run_cli("ops", "--framework", "jax", "--size", "tiny", "--op", "matmul",
                "--matmul-sizes", "64", "--iterations", "3", "--json", db=db)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert rows and all(r["framework"] == "jax" and r["status"] == "ok" for r in rows)
    p = run_cli("peaks", "--framework", "jax", "--precision", "fp32", "--gemm-sizes", "128",
                "--copy-mib", "4", "--iterations", "3", "--json", db=db)
    assert p.returncode == 0, p.stderr
    peaks = {r["precision"]: r for r in json.loads(p.stdout)}
    assert peaks["fp32"]["measured"] > 0 and "jax square GEMM" in peaks["fp32"]["method"]
    assert peaks["bandwidth"]["measured"] > 0
