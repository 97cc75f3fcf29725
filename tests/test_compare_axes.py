"""``accelbench compare`` pairs like with like on every axis the selectors do not name,
lists what it left unpaired and why, and says which axes it compared (issue 47)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from accelbench.report.compare import compare_results
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.test_compare import make_result

# Step times at batch 64: torch fp32 0.20 s, torch amp_bf16 0.02 s, JAX fp32 0.10 s. JAX
# fp32 over torch fp32 is 2.0; over torch amp_bf16 (the old, wrong pair) it is 0.2.
TORCH_FP32 = (0.20, 0.20, 0.21, 0.20, 0.20)
TORCH_BF16 = (0.02, 0.02, 0.021, 0.02, 0.02)
JAX_FP32 = (0.10, 0.10, 0.105, 0.10, 0.10)


@pytest.fixture
def mixed_store(tmp_path: Path) -> Path:
    """torch fp32 + amp_bf16 and JAX fp32 of one workload on one CPU (the newcomer's store)."""
    db = tmp_path / "mixed.db"
    with open_store(str(db)) as st:
        st.save(make_result("torchfp32", device="cpu", framework="torch", times=TORCH_FP32,
                            avg_power_w=100.0, suite="s-torch"))
        st.save(make_result("torchbf16", device="cpu", framework="torch", precision="amp_bf16",
                            times=TORCH_BF16, avg_power_w=100.0, suite="s-torch"))
        st.save(make_result("jaxfp32", device="cpu", framework="jax", times=JAX_FP32,
                            avg_power_w=100.0, suite="s-jax"))
    return db


def test_framework_compare_pairs_fp32_with_fp32_and_reports_bf16_unpaired(
        mixed_store: Path) -> None:
    before = mixed_store.read_bytes()
    proc = run_cli("compare", "framework=torch", "framework=jax", "--json", db=mixed_store)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["axes"] == ["framework"]
    assert "precision" in doc["match_on"]
    [case] = doc["cases"]
    assert (case["a_id"], case["b_id"]) == ("torchfp32", "jaxfp32")
    assert (case["a_precision"], case["b_precision"]) == ("fp32", "fp32")
    assert case["throughput_ratio"] == pytest.approx(2.0, rel=0.01)  # not 0.2 (vs bf16)
    [un] = doc["unpaired"]
    assert un["side"] == "A" and un["result_ids"] == ["torchbf16"]
    assert un["case"]["precision"] == "amp_bf16"
    assert un["reason"] == "B has no result with precision=amp_bf16"
    assert {d["axis"]: d["how"] for d in doc["axis_detail"]} == {
        "framework": "named", "precision": "matched"}

    proc = run_cli("compare", "framework=torch", "framework=jax", db=mixed_store,
                   COLUMNS="100", TERM="dumb")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "2.00" in out and "0.200" not in out
    assert "compared: framework: torch (A) vs jax (B), named by the selectors" in out
    assert "A only: resnet50 paper bs=64 cpu amp_bf16: " \
        "B has no result with precision=amp_bf16" in out
    assert "precision matched on, not compared: A holds amp_bf16, fp32, B holds fp32" in out

    proc = run_cli("compare", "framework=torch", "framework=jax", "--csv", db=mixed_store)
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert len(rows) == 2
    assert float(rows[0]["throughput_ratio"]) == pytest.approx(2.0, rel=0.01)
    assert rows[0]["compared_axes"] == "framework" and rows[0]["unpaired_side"] == ""
    assert (rows[1]["unpaired_side"], rows[1]["a_id"], rows[1]["precision"]) == \
        ("A", "torchbf16", "amp_bf16")
    assert rows[1]["unpaired_reason"] == "B has no result with precision=amp_bf16"
    assert rows[1]["throughput_ratio"] == ""
    assert mixed_store.read_bytes() == before  # a read


def test_naming_precision_compares_across_it(mixed_store: Path) -> None:
    proc = run_cli("compare", "precision=fp32,framework=torch", "precision=amp_bf16",
                   "--json", db=mixed_store)
    doc = json.loads(proc.stdout)
    assert doc["axes"] == ["precision"]
    [case] = doc["cases"]
    assert (case["a_id"], case["b_id"]) == ("torchfp32", "torchbf16")
    assert case["throughput_ratio"] == pytest.approx(10.0, rel=0.02)


def test_suites_compare_across_one_value_each_but_never_across_a_mixed_side(
        mixed_store: Path) -> None:
    # Two suites: framework holds one value a side (torch / jax), so it is compared;
    # precision holds two on A and one on B, so it is matched on.
    proc = run_cli("compare", "s-torch", "s-jax", "--json", db=mixed_store)
    doc = json.loads(proc.stdout)
    assert doc["axes"] == ["framework"]
    assert {d["axis"]: d["how"] for d in doc["axis_detail"]} == {
        "framework": "one each", "precision": "matched"}
    assert [(c["a_id"], c["b_id"]) for c in doc["cases"]] == [("torchfp32", "jaxfp32")]
    assert [u["reason"] for u in doc["unpaired"]] == ["B has no result with precision=amp_bf16"]
    # A single bf16 result against JAX fp32: each side one value of two axes, both
    # compared, and said so.
    proc = run_cli("compare", "torchbf16", "jaxfp32", db=mixed_store, COLUMNS="120")
    assert proc.returncode == 0
    assert "precision: amp_bf16 (A) vs fp32 (B), each side holds one value; not named by " \
        "the selectors" in proc.stdout
    assert "framework: torch (A) vs jax (B)" in proc.stdout


def test_nothing_paired_exits_1_with_every_reason() -> None:
    a = [make_result("a1", device="cpu"), make_result("a2", device="cuda:0")]
    b = [make_result("b1", device="cuda:1", workload="vgg16")]
    cmp = compare_results(a, b)
    assert cmp.axes == () and cmp.cases == ()  # device: two values on A: matched, not crossed
    reasons = sorted((u.side, u.reason) for u in cmp.unpaired)
    assert reasons == [("A", "B has no result with workload=resnet50, device=cpu"),
                       ("A", "B has no result with workload=resnet50, device=cuda:0"),
                       ("B", "A has no result with workload=vgg16, device=cuda:1")]
    # One value a side that differ is compared across: device, unnamed.
    cmp = compare_results(a[:1], [make_result("b2", device="cuda:0", times=(0.05,) * 5)])
    assert cmp.axes == ("device",) and len(cmp.cases) == 1 and cmp.unpaired == ()


def test_wide_comparison_keeps_within_120_columns() -> None:
    from rich.console import Console

    from accelbench.report.compare import table

    a = [make_result(f"a{i}", workload=wl, device="cpu", times=TORCH_FP32, avg_power_w=90.0,
                     suite="s-a") for i, wl in enumerate(("inception_v3", "transformer"))]
    b = [make_result(f"b{i}", workload=wl, device="cpu", framework="jax", times=JAX_FP32,
                     avg_power_w=90.0, energy_source="estimate", suite="s-b")
         for i, wl in enumerate(("inception_v3", "transformer"))]
    cmp = compare_results(a, b, named={"framework": ("torch", "jax")})
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(table(cmp, wide=True))
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 120 and "\u2026" not in text
    header = next(line for line in lines if "workload" in line)
    for name in ("workload", "framework A/B", "throughput B/A [95% CI]"):
        assert name in header, header
    assert text.count("torch / jax") == 2 and "2.000 [" in text
    # The match fields every row shares are named once under the table.
    flat = " ".join(text.split())
    assert "every row:" in flat and "size paper" in flat and "device cpu" in flat


def test_fast_pairing_chooses_as_listing_every_pair_does() -> None:
    """Above BRUTE_FORCE_PAIRS candidate pairs a case is paired through the suites and a
    time-sorted side; the choice is the one listing every pair gives (ties, shared
    suites, a result on both sides, unparseable times)."""
    import random

    from accelbench.report.compare.pairing import choose_by_listing, choose_fast

    rng = random.Random(7)
    for trial in range(60):
        def side(prefix: str, n: int, suites: bool = trial % 2 == 1) -> list:
            out = []
            for i in range(n):
                minute = rng.randrange(0, 40)
                stamp = "garbage" if rng.random() < 0.05 else \
                    f"2026-01-0{1 + minute % 3}T00:{minute:02d}:00.000+00:00"
                suite = rng.choice([None, None, "s1", "s2", f"{prefix}only"]) \
                    if suites else None
                shared = rng.random() < 0.1  # the same result selected by both sides
                out.append(make_result(f"shared{i}" if shared else f"{prefix}{i}",
                                       suite=suite, finished=stamp, started=stamp))
            return out
        a, b = side("a", rng.randrange(1, 30)), side("b", rng.randrange(1, 30))
        slow = choose_by_listing(a, b)
        fast = choose_fast(a, b)
        assert (slow[0].id, slow[1].id, slow[2]) == (fast[0].id, fast[1].id, fast[2]), trial
