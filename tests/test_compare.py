"""``accelbench compare``: ratios and bootstrap CIs against hand-computed values.

Also home of :func:`make_result`, the hand-built Result the other report tests use
where exact samples, energy or power timelines are needed (this machine has no
power sensor and no GPU).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelbench.errors import ConfigError
from accelbench.report.compare import (
    compare,
    compare_results,
    parse_selector,
    ratios,
    to_csv,
)
from accelbench.result import EnergyReading, Result
from accelbench.spec import RunSpec
from accelbench.stats import compute_stats
from accelbench.store import open_store
from tests.conftest import run_cli

GPU = "NVIDIA A100-SXM4-40GB"


def make_result(
    rid: str,
    *,
    workload: str = "resnet50",
    size: str = "paper",
    batch: int = 64,
    precision: str = "fp32",
    device: str = "cuda:0",
    gpu_name: str = GPU,
    times: Sequence[float] = (0.10, 0.11, 0.10, 0.12, 0.10),
    avg_power_w: float | None = None,
    energy_source: str = "integrated_samples",
    status: str = "ok",
    tag: str = "",
    suite: str | None = None,
    finished: str = "2026-01-01T00:00:00.000+00:00",
    timeline: dict[str, Any] | None = None,
    sample_unit: str = "image",
    framework: str = "torch",
    compile_s: float | None = None,
) -> Result:
    """A stored-shape Result with exact samples; energy = power x mean step time / batch."""
    spec = RunSpec(workload=workload, size=size, batch_size=batch,  # type: ignore[arg-type]
                   precision=precision, device=device, tag=tag,  # type: ignore[arg-type]
                   framework=framework)  # type: ignore[arg-type]
    ok = status == "ok"
    energy: tuple[EnergyReading, ...] = ()
    if ok and avg_power_w is not None:
        mean_t = float(np.mean(times))
        energy = (EnergyReading(
            device=device, scope="gpu" if device != "cpu" else "cpu-package",
            source=energy_source,  # type: ignore[arg-type]
            energy_j=avg_power_w * mean_t * len(times), avg_power_w=avg_power_w,
            energy_j_per_sample=avg_power_w * mean_t / batch, window_s=mean_t * len(times),
            note="estimated from TDP" if energy_source == "estimate" else "",
        ),)
    elif ok:
        energy = (EnergyReading(device=device, scope="gpu", source="unavailable",
                                note="no sensor"),)
    gpus = [] if device == "cpu" else [{"device": device, "name": gpu_name,
                                         "memory_bytes": 40 * 2**30, "runtime": "CUDA 12.4"}]
    return Result(
        id=rid, spec=spec, status=status, sample_unit=sample_unit,  # type: ignore[arg-type]
        samples_per_step=batch, param_count=25_557_032,
        stats=compute_stats(times, batch, trim_fraction=0.0, stop_reason="iterations")
        if ok else None,
        iteration_times_s=tuple(times) if ok else (),
        error=None if ok else {"oom": "CUDA out of memory (synthetic)",
                               "timeout": "worker exceeded its 900 s timeout"}.get(
                                   status, "ValueError: synthetic"),
        energy=energy, power_timeline=timeline or {}, compile_s=compile_s,
        machine={"hostname": "gpu-box", "os": "Linux 6.1", "cpu": {"model": "Test CPU"},
                 "gpus": gpus, "software": {"torch": "2.4.0", "cuda": "12.4"}},
        suite_id=suite, started_at=finished, finished_at=finished,
    )


# -- the statistics, by hand ------------------------------------------------------------

A_TIMES = (0.10, 0.10, 0.12)
B_FAST = (0.05, 0.05, 0.06)
B_OVERLAP = (0.10, 0.12, 0.12)


def _exact_ratio_distribution(ta: Sequence[float], tb: Sequence[float]) -> list[float]:
    """Every equally likely bootstrap ratio medA*/medB* (n = 3: 27 x 27 resamples)."""
    med_a = [float(np.median(s)) for s in itertools.product(ta, repeat=len(ta))]
    med_b = [float(np.median(s)) for s in itertools.product(tb, repeat=len(tb))]
    return sorted(a / b for a in med_a for b in med_b)


def test_throughput_ratio_and_ci_match_hand_computation() -> None:
    # medA = 0.10, medB = 0.05 at the same batch: B is exactly twice as fast.
    # Resampled medians: A is 0.10 w.p. 20/27, 0.12 w.p. 7/27 (two or more 0.12 draws);
    # B is 0.05 / 0.06 likewise. Ratios medA*/medB*: 5/3 w.p. 140/729 (19%), 2 w.p. 449/729,
    # 2.4 w.p. 140/729, so the 2.5% and 97.5% quantiles are 5/3 and 2.4.
    tput, energy = ratios(A_TIMES, 64, B_FAST, 64)
    assert tput.value == pytest.approx(2.0)
    assert tput.ci95 == pytest.approx((5 / 3, 2.4))
    assert tput.significant is True
    assert energy.value is None and "unavailable" in energy.note
    exact = _exact_ratio_distribution(A_TIMES, B_FAST)
    assert exact[int(0.025 * len(exact))] == pytest.approx(5 / 3)
    assert exact[int(0.975 * len(exact))] == pytest.approx(2.4)


def test_significance_flips_when_samples_overlap() -> None:
    # medA = 0.10, medB = 0.12: ratio 5/6. Resampled ratios: 5/6 w.p. 400/729, 1 w.p.
    # 280/729, 1.2 w.p. 49/729 (6.7% > 2.5%): the CI [5/6, 1.2] contains 1.
    tput, _ = ratios(A_TIMES, 64, B_OVERLAP, 64)
    assert tput.value == pytest.approx(0.10 / 0.12)
    assert tput.ci95 == pytest.approx((0.10 / 0.12, 1.2))
    assert tput.significant is False


def test_batch_size_enters_the_throughput_ratio() -> None:
    tput, _ = ratios((0.1,) * 5, 32, (0.1,) * 5, 64)
    assert tput.value == pytest.approx(2.0)
    assert tput.ci95 == pytest.approx((2.0, 2.0))
    assert tput.significant is True


def test_energy_ratio_and_ci() -> None:
    # Constant step times: no timing variability, so the energy CI collapses to the ratio.
    _, energy = ratios((0.1,) * 6, 64, (0.2,) * 6, 64,
                       energy_a_j_per_sample=1.0, energy_b_j_per_sample=0.5)
    assert energy.value == pytest.approx(0.5)
    assert energy.ci95 == pytest.approx((0.5, 0.5))
    assert energy.significant is True
    # Varying times: E* = E x mean(t*)/mean(t); the CI lies within what resampling allows
    # (extreme resamples: all-min or all-max times on each side) and brackets the ratio.
    ta, tb = (0.10, 0.10, 0.12), (0.20, 0.21, 0.22)
    _, energy = ratios(ta, 64, tb, 64, energy_a_j_per_sample=1.0, energy_b_j_per_sample=1.05)
    lo_bound = 1.05 * (0.20 / np.mean(tb)) / (0.12 / np.mean(ta))
    hi_bound = 1.05 * (0.22 / np.mean(tb)) / (0.10 / np.mean(ta))
    assert energy.ci95 is not None
    assert lo_bound <= energy.ci95[0] <= 1.05 <= energy.ci95[1] <= hi_bound
    assert energy.significant is False


def test_no_ci_is_invented() -> None:
    tput, energy = ratios((0.1,), 8, (0.05,), 8, energy_a_j_per_sample=2.0,
                          energy_b_j_per_sample=1.0)
    assert tput.value == pytest.approx(2.0) and tput.ci95 is None and tput.significant is None
    assert energy.value == pytest.approx(0.5) and energy.ci95 is None
    assert "no CI" in energy.note
    tput, energy = ratios((), 8, (0.05,), 8)
    assert tput.value is None and energy.value is None


def test_fixed_seed_gives_the_same_interval() -> None:
    rng = np.random.default_rng(1)
    ta, tb = rng.normal(0.1, 0.01, 50), rng.normal(0.09, 0.01, 50)
    assert ratios(ta, 8, tb, 8)[0].ci95 == ratios(ta, 8, tb, 8)[0].ci95


# -- selectors and matching -------------------------------------------------------------


def test_selector_syntax() -> None:
    s = parse_selector("precision=bf16,device=cuda:0")
    assert s.kind == "filter" and dict(s.pairs) == {"precision": "amp_bf16", "device": "cuda:0"}
    assert parse_selector("suite:quick-1").kind == "suite"
    assert parse_selector("id:ab12").value == "ab12"
    assert parse_selector("ab12").kind == "word"
    for bad in ("", "colour=red", "device=", "precision=fp8"):
        with pytest.raises(ConfigError):
            parse_selector(bad)


def test_devices_compared_case_by_case() -> None:
    a = [make_result("a1", device="cpu", times=A_TIMES, avg_power_w=100.0),
         make_result("a2", device="cpu", workload="vgg16", times=A_TIMES),
         make_result("a3", device="cpu", batch=128, times=A_TIMES)]
    b = [make_result("b1", device="cuda:0", times=B_FAST, avg_power_w=150.0),
         make_result("b2", device="cuda:0", workload="vgg16", status="oom")]
    cmp = compare_results(a, b)
    assert cmp.axes == ("device",)
    assert cmp.match_on == ("workload", "size", "batch_size", "precision", "framework")
    by_wl = {c.key["workload"]: c for c in cmp.cases}
    assert set(by_wl) == {"resnet50", "vgg16"}
    res = by_wl["resnet50"]
    assert res.throughput.value == pytest.approx(2.0)
    assert res.throughput.ci95 == pytest.approx((5 / 3, 2.4))
    # E = P x mean(t) / batch on each side.
    expected = (150.0 * np.mean(B_FAST)) / (100.0 * np.mean(A_TIMES))
    assert res.energy.value == pytest.approx(expected)
    assert res.energy_kind == "measured"
    assert by_wl["vgg16"].throughput.value is None
    assert "B is oom" in by_wl["vgg16"].throughput.note
    assert len(cmp.only_a) == 1 and cmp.only_a[0]["batch_size"] == 128


def test_two_precisions_and_duplicates_use_newest() -> None:
    a = [make_result("a1", precision="fp32", times=A_TIMES)]
    b = [make_result("b0", precision="amp_fp16", times=(1.0, 1.0, 1.0),
                     finished="2026-01-01T00:00:00.000+00:00"),
         make_result("b1", precision="amp_fp16", times=B_FAST,
                     finished="2026-01-02T00:00:00.000+00:00")]
    cmp = compare_results(a, b)
    assert cmp.axes == ("precision",)
    assert cmp.cases[0].b.id == "b1"
    assert any("newest used" in n for n in cmp.notes)


@pytest.fixture
def cmp_store(tmp_path: Path) -> Path:
    path = tmp_path / "cmp.db"
    with open_store(str(path)) as st:
        st.save(make_result("aaaa01", device="cpu", times=A_TIMES, avg_power_w=100.0,
                            suite="s-old"))
        st.save(make_result("bbbb01", device="cuda:0", times=B_FAST, avg_power_w=150.0,
                            energy_source="estimate", suite="s-new"))
        st.save(make_result("bbbb02", device="cuda:0", workload="lstm", times=B_OVERLAP,
                            sample_unit="sentence", suite="s-new"))
    return path


def test_store_selectors(cmp_store: Path) -> None:
    with open_store(str(cmp_store)) as st:
        by_device = compare(st, "device=cpu", "device=cuda:0")
        by_suite = compare(st, "s-old", "suite:s-new")
        by_id = compare(st, "aaaa", "id:bbbb01")
        assert [c.throughput.value for c in by_device.cases] == pytest.approx([2.0])
        assert [c.b.id for c in by_suite.cases] == ["bbbb01"]
        assert [c.b.id for c in by_id.cases] == ["bbbb01"]
        assert by_device.cases[0].energy_kind == "estimated"
        with pytest.raises(ConfigError, match="ambiguous"):
            compare(st, "aaaa", "bbbb")
        with pytest.raises(ConfigError, match="neither a suite id nor a result id"):
            compare(st, "zzzz", "bbbb01")


def test_cli_json_csv_and_table(cmp_store: Path) -> None:
    proc = run_cli("compare", "device=cpu", "device=cuda:0", "--json", db=cmp_store)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["axes"] == ["device"]
    case = doc["cases"][0]
    assert case["throughput_ratio"] == pytest.approx(2.0)
    assert case["throughput_ratio_ci95"] == pytest.approx([5 / 3, 2.4])
    assert case["throughput_significant"] is True
    assert case["energy_kind"] == "estimated"

    proc = run_cli("compare", "device=cpu", "device=cuda:0", "--csv", db=cmp_store)
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert float(rows[0]["throughput_ratio_ci95_low"]) == pytest.approx(5 / 3)
    assert rows[0]["throughput_significant"] == "True"

    proc = run_cli("compare", "device=cpu", "device=cuda:0", db=cmp_store)
    assert proc.returncode == 0
    assert "2.000 [1.667, 2.400]" in proc.stdout and "yes" in proc.stdout
    assert "matched on workload, size, batch_size, precision" in proc.stdout

    proc = run_cli("compare", "device=cpu", "device=mps", db=cmp_store)
    assert proc.returncode == 2 and "no results match" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_csv_of_a_case_without_ratio() -> None:
    cmp = compare_results([make_result("a", device="cpu")],
                          [make_result("b", status="oom")])
    row = next(csv.DictReader(io.StringIO(to_csv(cmp))))
    assert row["throughput_ratio"] == "" and row["b_status"] == "oom"


def test_framework_is_an_axis_of_comparison(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as st:
        for fw, times in (("torch", (0.2, 0.21, 0.2, 0.22, 0.2)), ("jax", (0.1, 0.1, 0.11, 0.1))):
            for prec in ("fp32", "amp_bf16"):
                st.save(make_result(f"{fw}-{prec}", precision=prec, framework=fw, times=times,
                                    avg_power_w=200.0))
        cmp = compare(st, "framework=torch", "framework=jax")
        by_prec = {c.key["precision"]: c for c in cmp.cases}
    assert cmp.axes == ("framework",) and "framework" not in cmp.match_on
    assert set(by_prec) == {"fp32", "amp_bf16"}  # matched per precision, not across
    for case in by_prec.values():
        assert case.a.spec.framework == "torch" and case.b.spec.framework == "jax"
        assert case.throughput.value == pytest.approx(2.0, rel=0.1)
        assert case.throughput.significant
        assert case.energy.value is not None and case.energy.value < 1
    with pytest.raises(ConfigError, match="unknown framework"):
        parse_selector("framework=mxnet")
