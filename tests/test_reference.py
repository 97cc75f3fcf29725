"""The paper's reference results (Wang et al. 2020, Table 10) shipped with the package."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from accelbench.report.reference import LABEL, load_reference, match_reference
from accelbench.report.rows import case_rows
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.test_compare import make_result


def test_loads_every_row_from_package_data() -> None:
    rows = load_reference()
    assert len(rows) == 99
    assert {r.workload for r in rows} == {
        "resnet50", "inception_v3", "vgg16", "lstm", "deepspeech2", "transformer"
    }
    assert {r.precision for r in rows} == {"fp32", "amp_fp16", "amp_bf16"}
    v100 = load_reference(workload="resnet50", precision="amp_fp16", batch_size=64,
                          device="v100")
    assert len(v100) == 1
    assert v100[0].samples_per_s == pytest.approx(589.39)
    assert v100[0].avg_power_w == pytest.approx(171.56)
    assert v100[0].energy_j_per_sample == pytest.approx(0.29)
    tpu = load_reference(device="TPU v3")
    assert tpu and all(r.paper_precision == "bf16" and r.precision == "amp_bf16" for r in tpu)
    oom = [r for r in rows if r.status == "oom"]
    assert oom and all(r.samples_per_s is None for r in oom)


def test_energy_is_power_over_throughput_within_10_percent() -> None:
    checked = 0
    for r in load_reference():
        if r.energy_j_per_sample is None:
            # The paper reports no power for TPUs and the CPU: then no energy either.
            assert r.avg_power_w is None
            continue
        assert r.samples_per_s and r.avg_power_w
        derived = r.avg_power_w / r.samples_per_s
        assert derived == pytest.approx(r.energy_j_per_sample, rel=0.10), r
        checked += 1
    assert checked >= 70


def test_matches_user_results_by_workload_batch_and_precision() -> None:
    results = [
        make_result("r1", workload="lstm", batch=64, precision="fp32", sample_unit="sentence"),
        make_result("r2", workload="lstm", batch=64, precision="amp_fp16",
                    sample_unit="sentence"),
        make_result("r3", workload="lstm", size="tiny", batch=64, device="cpu",
                    sample_unit="sentence"),
        make_result("r4", workload="lstm", batch=4, precision="fp32"),  # no published bs=4
        make_result("r5", workload="resnet50", batch=64, precision="amp_bf16"),
        make_result("r6", workload="resnet50", batch=64, status="oom"),
    ]
    matches = {m.row.result_id: m for m in match_reference(case_rows(results))}
    assert set(matches) == {"r1", "r2", "r3", "r5"}
    fp32 = matches["r1"]
    assert {r.device for r in fp32.reference} == {
        "Titan X (Pascal)", "Radeon VII", "Tesla P100", "Tesla V100",
        "Xeon Platinum 8163 (12 cores)",
    }
    assert all((r.workload, r.batch_size, r.precision) == ("lstm", 64, "fp32")
               for r in fp32.reference)
    assert fp32.comparable and not fp32.note
    assert [r.device for r in matches["r2"].reference] == ["Tesla V100"]
    assert {r.device for r in matches["r5"].reference} == {"TPU v2-8", "TPU v3-8"}
    tiny = matches["r3"]
    assert not tiny.comparable and "tiny" in tiny.note


def test_reference_command(tmp_path: Path) -> None:
    db = tmp_path / "ref.db"
    with open_store(str(db)) as st:
        st.save(make_result("lstm64", workload="lstm", batch=64, sample_unit="sentence"))
    proc = run_cli("reference", "--workload", "lstm", "--batch-size", "64", "--match", "--json",
                   db=db)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["label"] == LABEL and "other hardware" in LABEL
    assert {r["device"] for r in doc["rows"]} >= {"Tesla V100", "Radeon VII"}
    assert doc["matches"][0]["result"]["result_id"] == "lstm64"
    proc = run_cli("reference", "--precision", "bf16", "--csv", db=db)
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert rows and {r["device"] for r in rows} == {"TPU v2-8", "TPU v3-8"}
    proc = run_cli("reference", "--workload", "lstm", "--match", db=db)
    assert proc.returncode == 0
    assert "Published figures" in proc.stdout and "vs published" in proc.stdout
    proc = run_cli("reference", "--precision", "fp8", db=db)
    assert proc.returncode == 2 and "unknown precision" in proc.stderr


def test_reference_refuses_unknown_workloads_and_bad_numbers(tmp_path: Path) -> None:
    db = tmp_path / "ref.db"
    for args, expect in (
        (("--workload", "nosuch"), "no published results for workload 'nosuch' (published: "),
        (("--workload", "resnt50"), "did you mean resnet50?"),
        (("--workload", "test_mlp"), "no published results for workload 'test_mlp'"),
        (("--workload", ""), "--workload"),
        (("--batch-size", "0"), "--batch-size"),
        (("--batch-size", "100000000000000000000000"), "--batch-size"),
        (("--batch-size", "nan"), "--batch-size"),
        (("--device", ""), "--device"),
    ):
        proc = run_cli("reference", *args, db=db)
        assert proc.returncode == 2, (args, proc.stdout)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and expect in lines[0], (args, proc.stderr)
    assert not db.exists()  # nothing was written


def test_reference_json_is_strict(tmp_path: Path) -> None:
    db = tmp_path / "ref.db"
    with open_store(str(db)) as st:
        st.save(make_result("lstm64", workload="lstm", batch=64, sample_unit="sentence",
                            final_loss=float("nan")))
    proc = run_cli("reference", "--workload", "lstm", "--match", "--json", db=db)
    assert proc.returncode == 0, proc.stderr

    def refuse(name: str) -> None:
        raise ValueError(name)

    doc = json.loads(proc.stdout, parse_constant=refuse)
    assert doc["matches"][0]["result"]["ci95_low_samples_per_s"] is not None
    assert doc["matches"][0]["result"]["noisy"] is False
    # Published rows without a figure (out of memory) are null, never NaN.
    proc = run_cli("reference", "--workload", "inception_v3", "--json", db=db)
    rows = json.loads(proc.stdout, parse_constant=refuse)["rows"]
    assert any(r["status"] == "oom" and r["samples_per_s"] is None for r in rows)
